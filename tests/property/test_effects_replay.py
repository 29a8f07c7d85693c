"""The property the AOF and replicas rely on: applying a command's effects to the state it ran on
reproduces its state change exactly. For random command sequences, a fresh engine that applies
the recorded effects ends with the same state digest, step by step; failed commands change
nothing and emit nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, Record, ReplyError
from tests.support.command_strategies import SETUP, Clock, commands_with_tx


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(commands_with_tx, st.integers(0, 3)), min_size=1, max_size=60))
def test_effects_reproduce_state(script: list[tuple[list[bytes], int]]) -> None:
    clock = Clock()
    primary = Engine(clock=clock)
    records: list[Record] = []
    primary.add_sink(records.append)
    follower = Engine(clock=lambda: 10**12)  # its own clock must not matter
    applied = 0
    for argv, delta in [(argv, 0) for argv in SETUP] + script:
        clock.now += delta
        before = primary.digest()
        count = len(records)
        try:
            primary.execute(*argv)
        except ReplyError:
            assert primary.digest() == before, f"failed {argv!r} changed state"
            assert len(records) == count, f"failed {argv!r} emitted effects"
            continue
        for record in records[applied:]:
            follower.replay.apply(record)
        applied = len(records)
        assert follower.digest() == primary.digest(), (
            f"after {argv!r}: effects {[r.effects for r in records[count:]]!r}"
        )


def test_no_effect_when_nothing_changes() -> None:
    e = Engine(clock=lambda: 5)
    e.execute("XADD", "s", "1-1", "f", "v")
    for argv in (
        ["XDEL", "s", "9-9"],
        ["XTRIM", "s", "MAXLEN", "5"],
        ["XACK", "s", "nogroup", "1-1"],
        ["XGROUP", "DESTROY", "s", "nogroup"],
        ["DEL", "missing"],
        ["XRANGE", "s", "-", "+"],
    ):
        assert e.execute_with_effects(*argv)[1] == [], argv


def test_poison_message_counter_survives_replay() -> None:
    """History reads bump delivery counts; Redis does not propagate that, we do."""
    t = Clock()
    e = Engine(clock=t)
    records: list[Record] = []
    e.add_sink(records.append)
    e.execute("XADD", "s", "1-1", "f", "v")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    for _ in range(4):
        t.now += 10
        e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0")
    replica = Engine()
    for r in records:
        replica.replay.apply(r)
    assert replica.execute("XPENDING", "s", "g", "-", "+", "10", "c")[0][3] == 5
    assert replica.digest() == e.digest()


def test_xadd_effect_has_resolved_id_and_exact_trim() -> None:
    e = Engine(clock=lambda: 7)
    for i in range(250):
        e.execute("XADD", "s", "*", "f", str(i))
    reply, effects = e.execute_with_effects("XADD", "s", "MAXLEN", "~", "10", "*", "f", "x")
    assert effects == [[b"XADD", b"s", b"MAXLEN", b"=", b"51", reply, b"f", b"x"]]
    assert e.execute("XLEN", "s") == 51


def test_exec_is_one_record_across_databases() -> None:
    e = Engine(clock=lambda: 9)
    records: list[Record] = []
    e.add_sink(records.append)
    e.execute("SELECT", "1")
    e.execute("MULTI")
    for argv in (["XADD", "a", "1-1", "f", "v"], ["SELECT", "2"], ["XADD", "b", "1-1", "f", "v"],
                 ["XADD", "b", "1-1", "f", "v"], ["SELECT", "1"], ["XDEL", "a", "1-1"]):
        assert e.execute(*argv) == "QUEUED"
    replies = e.execute("EXEC")
    assert replies[:3] == [b"1-1", "OK", b"1-1"] and isinstance(replies[3], ReplyError)
    assert len(records) == 1 and records[0].db == 1
    assert records[0].effects == [
        [b"XADD", b"a", b"1-1", b"f", b"v"], [b"SELECT", b"2"], [b"XADD", b"b", b"1-1", b"f", b"v"],
        [b"SELECT", b"1"], [b"XDEL", b"a", b"1-1"]]
    follower = Engine()
    follower.replay.apply_many([tuple(records[0])])
    assert follower.digest() == e.digest()
