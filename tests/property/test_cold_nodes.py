"""Cold nodes change nothing: random command sequences on a resident engine and on one whose
every node is read back from a snapshot give the same replies, errors and digests.

The cold engine is settled after every command (tests.support.cold_nodes: a budget of one byte,
a fresh snapshot when something changed since the last one), so nearly every command reads its
entries back from an LMDB file, and changes land on nodes that were cold a moment before. Two
node sizes: the default (one node per stream: the tail goes cold) and two entries per node
(many nodes: trimming, deletion and ranges across cold and resident ones).

The same for hashes, sets and sorted sets (tests.support.type_strategies), their small
encodings' limits at four elements and the snapshot's chunks cut small, so that a table's
runs go cold after a few elements and the commands read buckets back from the snapshot.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from tests.support.cold_nodes import settle, small_chunks
from tests.support.command_strategies import SETUP, Clock, commands_with_tx
from tests.support.type_strategies import SETUP as TYPE_SETUP
from tests.support.type_strategies import replay_steps


def _plain(value: object) -> object:
    """Errors as their lines (EXEC replies hold ReplyError objects, equal only to themselves)."""
    if isinstance(value, ReplyError):
        return ("error", value.line)
    if isinstance(value, list):
        return [_plain(x) for x in value]
    return value


def _outcome(engine: Engine, argv: list[bytes]) -> object:
    try:
        return _plain(engine.execute(*argv))
    except ReplyError as err:
        return ("error", err.line)


def _run_both(resident: Engine, cold: Engine, clock: Clock,
              steps: list[tuple[list[bytes], int]]) -> None:
    """Each step (the clock moved on first) on both engines: the same outcome, and, the cold
    one settled after it, the same digest."""
    for argv, delta in steps:
        clock.now += delta
        expected = _outcome(resident, argv)
        got = _outcome(cold, argv)
        assert got == expected, f"{argv!r}"
        settle(cold)
        assert cold.digest() == resident.digest(), f"after {argv!r}"


@pytest.mark.parametrize("node_entries", [100, 2])
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(script=st.lists(st.tuples(commands_with_tx, st.integers(0, 3)), min_size=1,
                       max_size=50))
def test_cold_engine_answers_as_the_resident_one(node_entries: int,
                                                 script: list[tuple[list[bytes], int]]) -> None:
    clock = Clock()
    resident = Engine(clock=clock, stream_node_max_entries=node_entries)
    cold = Engine(clock=clock, stream_node_max_entries=node_entries)
    _run_both(resident, cold, clock, [(argv, 0) for argv in SETUP] + script)
    settle(cold)
    assert cold.residency.loads > 0 or not any(cold.dbs), "nothing was ever read back"


TYPE_LIMITS = {"zset-max-listpack-entries": 4, "hash-max-listpack-entries": 4,
               "set-max-intset-entries": 4, "set-max-listpack-entries": 4}
# Their draws differ between two engines (each command module's own generator): left out.
_RANDOM = {b"SPOP", b"SRANDMEMBER", b"HRANDFIELD", b"ZRANDMEMBER"}
# Beside the strategies' few fields and members, enough for tables of several buckets, cut
# in runs of several.
_BIG = [[b"HSET", b"h1", *(b"x%d" % (i // 2) if i % 2 == 0 else b"%d" % i for i in range(80))],
        [b"SADD", b"s1", *(b"y%d" % i for i in range(40))]]


def _drawn(argv: list[bytes]) -> bool:
    """Whether the step draws at random (itself, or through the fuzz library's function)."""
    command = argv[3] if argv[0] == b"FCALL" and len(argv) > 3 else argv[0]
    return command.upper() in _RANDOM


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(script=replay_steps.map(lambda steps: [s for s in steps if not _drawn(s[0])]))
def test_cold_tables_answer_as_resident_ones(script: list[tuple[list[bytes], int]]) -> None:
    clock = Clock()
    clock.now = 1_000  # (the strategies' expiry times are around it)
    with small_chunks(4):
        resident = Engine(clock=clock, **TYPE_LIMITS)
        cold = Engine(clock=clock, **TYPE_LIMITS)
        _run_both(resident, cold, clock, [(argv, 0) for argv in TYPE_SETUP + _BIG] + script)


def test_the_type_mode_reads_cold_runs_back() -> None:
    """The property above exercises cold runs: in its setting, a hash and a set of a few
    elements go cold after a command, and reads take their buckets from the snapshot."""
    with small_chunks(4):
        engine = Engine(**TYPE_LIMITS)
        for argv in TYPE_SETUP:
            engine.execute(*argv)
            settle(engine)
        engine.execute("HSET", "h2", "f6", "6")
        settle(engine)
        info = engine.execute("INFO", "memory").decode()
        assert "hash_runs_cold:0" not in info and "set_runs_cold:0" not in info, info
        before = engine.residency.loads
        assert engine.execute("HGET", "h2", "f6") == b"6"
        assert engine.execute("SISMEMBER", "s2", "10") == 1
        assert engine.residency.loads >= before + 2
