"""The replay property for sorted sets, hashes and sets: for random command sequences
(tests.support.type_strategies: every command of the three types and the generic ones over them,
hash field expiry with times that pass on a fake clock, key TTLs, MULTI/EXEC, SELECT), a replica
fed the primary's effects (`add_sink(replica.replay.apply)`) holds the same state digest after every
command, and a data directory reopened after the sequence (its AOF replayed) holds the same
digest as the engine that wrote it.

Both engines share the fake clock: a replica never expires a key or a field itself (it waits for
the primary's DEL / HDEL), so only the primary's view of time matters, and the same clock keeps
the replica's reads from expiring anything either.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from tests.support.command_strategies import Clock
from tests.support.type_strategies import ALL_KEYS, SETUP, replay_steps

LIMITS = {"zset-max-listpack-entries": 4, "hash-max-listpack-entries": 4,
          "set-max-intset-entries": 4, "set-max-listpack-entries": 4}
START_MS = 1_000  # (HEXPIREAT / PEXPIREAT times in the strategies are around it)


def run(engine: Engine, clock: Clock, script: list[tuple[list[bytes], int]],
        after: Callable[[list[bytes]], None] | None = None) -> None:
    for argv, delta in script:
        clock.now += delta
        with contextlib.suppress(ReplyError):
            engine.execute(*argv)
        if after is not None:
            after(argv)


def setup(engine: Engine) -> None:
    for argv in SETUP:
        engine.execute(*argv)


def finish(engine: Engine) -> None:
    """EXEC a transaction the sequence left open, back to database 0."""
    if engine.execute("ECHO", "open?") == "QUEUED":
        engine.execute("EXEC")
    engine.execute("SELECT", "0")


def primary_with_replica(clock: Clock) -> tuple[Engine, Engine]:
    primary = Engine(clock=clock, **LIMITS)
    replica = Engine(clock=clock, **LIMITS)
    primary.add_sink(replica.replay.apply)
    return primary, replica


BOUNDED_AND_SOAK = pytest.mark.parametrize("scale", [
    pytest.param(1, id="bounded"),
    # (twenty times the sequences: `make soak` only)
    pytest.param(20, id="soak", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])


@BOUNDED_AND_SOAK
def test_replica_matches_primary(scale: int) -> None:
    @settings(max_examples=60 * scale, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(replay_steps)
    def check_sequence(script: list[tuple[list[bytes], int]]) -> None:
        clock = Clock()
        clock.now = START_MS
        primary, replica = primary_with_replica(clock)

        def check(argv: list[bytes]) -> None:
            assert replica.digest() == primary.digest(), f"after {argv!r}"

        setup(primary)
        run(primary, clock, script, check)
        finish(primary)
        # reads after time moved on expire keys and fields lazily on the primary: the
        # replica follows its DEL / HDEL effects
        clock.now += 10_000
        for key in ALL_KEYS:
            if primary.execute("TYPE", key) == "hash":
                primary.execute("HGETALL", key)
            primary.execute("EXISTS", key)
            check([b"EXISTS", key])

    check_sequence()


@BOUNDED_AND_SOAK
def test_aof_restart_same_digest(scale: int) -> None:
    @settings(max_examples=12 * scale, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(replay_steps, st.booleans())
    def check_sequence(script: list[tuple[list[bytes], int]], compact: bool) -> None:
        clock = Clock()
        clock.now = START_MS
        with tempfile.TemporaryDirectory() as path:
            engine = Engine.open(path, clock=clock, appendfsync="no", **LIMITS)
            stop_active_expiry(engine)
            try:
                setup(engine)
                half = len(script) // 2
                run(engine, clock, script[:half])
                if compact:  # a snapshot base, then the log's tail
                    finish(engine)
                    engine.compact()
                run(engine, clock, script[half:])
                finish(engine)
                digest = engine.digest()
            finally:
                engine.close()
            again = Engine.open(path, clock=clock, **LIMITS)
            stop_active_expiry(again)
            try:
                assert again.digest() == digest
            finally:
                again.close()

    check_sequence()


def stop_active_expiry(engine: Engine) -> None:
    """The fake clock does not move between the digests; the timer must not expire keys
    between them either (its deletions are logged, but after the first digest)."""
    if engine.expiry_timer is not None:
        engine.expiry_timer.stop()
        engine.expiry_timer = None
