"""What a handler sees (engine.exec.context): `Ctx` and its kinds (replay, re-run, inside EXEC),
the effects it collects, the wake-ups it asks for, `Block` and `Later`; and that the engine reads
its clock once per command, so one command's effects share one time."""

from __future__ import annotations

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.commands import groups, read
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.exec.context import Block, Ctx, Later, MultiCtx, ReplayCtx, RerunCtx
from streamkeep.engine.wire.reply import NULL_ARRAY
from tests.support.effects_util import Recorded, argv_bytes


def waiting_engine(*keys: tuple[int, bytes]) -> Engine:
    """A real engine with a client blocked on each (db, key) of `keys`."""
    engine = Engine()
    for db, key in keys:
        engine.waiters.add(Waiter(Session(db), (b"XREAD", b"BLOCK", b"0", b"STREAMS", key,
                                                 b"$"), [(db, key)]))
    return engine


def test_a_context_holds_the_sessions_database_time_and_effects() -> None:
    engine = Engine()
    ctx = Ctx(engine, Session(3), 1234)
    assert ctx.db is engine.dbs[3] and ctx.now == 1234 and ctx.session.db == 3
    assert ctx.config is engine.config
    assert ctx.effects == []
    ctx.emit([b"XDEL", b"s", b"1-0"])
    ctx.emit([b"XDEL", b"s", b"2-0"])
    assert ctx.effects == [[b"XDEL", b"s", b"1-0"], [b"XDEL", b"s", b"2-0"]]
    with pytest.raises(AttributeError):
        ctx.anything_else = 1  # type: ignore[attr-defined]  # slots: handlers keep no state


@pytest.mark.parametrize(("kind", "replaying", "rerun", "in_multi"), [
    (Ctx, False, False, False), (ReplayCtx, True, False, False),
    (RerunCtx, False, True, False), (MultiCtx, False, False, True),
])
def test_the_kind_is_the_type(kind: type[Ctx], replaying: bool, rerun: bool,
                              in_multi: bool) -> None:
    ctx = kind(Engine(), Session(), 0)
    assert (ctx.replaying, ctx.rerun, ctx.in_multi) == (replaying, rerun, in_multi)


def test_signal_names_the_sessions_database_unless_told() -> None:
    engine = waiting_engine((5, b"a"), (0, b"b"), (0, b"a"))
    ctx = Ctx(engine, Session(5), 0)
    ctx.signal(b"a")
    ctx.signal(b"b", db=0)
    assert list(engine.waiters.ready) == [(5, b"a"), (0, b"b")]
    idle = Engine()
    Ctx(idle, Session(), 0).signal(b"a")  # nobody waits: nothing to record
    assert not idle.waiters.ready


def test_block_and_later_carry_what_they_are_given() -> None:
    argv = argv_bytes(("XREAD", "BLOCK", "0", "STREAMS", "s", "1-0"))
    block = Block([b"s"], 0, argv)
    assert (block.keys, block.timeout_ms, block.argv) == ([b"s"], 0, argv)
    assert (block.wake_at, block.ready, block.rerun) == (None, None, None)
    ready = lambda: True  # noqa: E731
    block = Block([b"s"], 10, argv, wake_at=99, ready=ready)
    assert (block.wake_at, block.ready) == (99, ready)
    later = Later(lambda: "OK")
    assert later.wait() == "OK" and later.start is None


def engine_with_pending() -> Engine:
    engine = Engine(clock=lambda: 50)
    engine.execute("XADD", "s", "1-0", "f", "v")
    engine.execute("XGROUP", "CREATE", "s", "g", "0")
    engine.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    return engine


def test_a_replay_context_collects_no_client_effects() -> None:
    """Replayed effects must not log effects again (XACK emits only for a client)."""
    argv = argv_bytes(("XACK", "s", "g", "1-0"))
    engine = engine_with_pending()
    replay = ReplayCtx(engine, Session(), 60)
    assert groups.xack(replay, argv) == 1 and replay.effects == []
    engine = engine_with_pending()
    client = Ctx(engine, Session(), 60)
    assert groups.xack(client, argv) == 1 and client.effects == [[b"XACK", b"s", b"g", b"1-0"]]


def test_inside_exec_a_blocking_read_does_not_block() -> None:
    engine = Engine(clock=lambda: 50)
    engine.execute("XADD", "s", "1-0", "f", "v")
    argv = argv_bytes(("XREAD", "BLOCK", "100", "STREAMS", "s", "$"))
    block = read.xread(Ctx(engine, Session(), 50), argv)
    assert isinstance(block, Block)
    assert (block.keys, block.timeout_ms) == ((b"s",), 100)
    assert block.argv == argv_bytes(("XREAD", "BLOCK", "100", "STREAMS", "s", "1-0"))
    assert read.xread(MultiCtx(engine, Session(), 50), argv) is NULL_ARRAY


def test_the_clock_is_read_once_per_command() -> None:
    ticks = iter(range(100, 200))
    engine = Engine(clock=lambda: next(ticks))
    assert engine.execute("XADD", "s", "*", "f", "v") == b"100-0"
    assert engine.execute("XADD", "s", "*", "f", "v") == b"101-0"
    rec = Recorded(now=100)
    rec("XADD", "s", "1-0", "f", "v")
    rec("XADD", "s", "2-0", "f", "v")
    rec("XGROUP", "CREATE", "s", "g", "0")
    rec.clock.now = 777
    rec("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    record = rec.records[-1]
    # Every effect of the command carries the one time, and so does its record.
    assert record.time_ms == 777
    assert [e[e.index(b"TIME") + 1] for e in record.effects if e[0] == b"XCLAIM"] == [b"777"]
    assert record.effects[-1] == [b"SK.XCONSUMER", b"s", b"g", b"c", b"777", b"777"]
