"""The property the AOF and replicas rely on: applying a command's effects to the state it ran on
reproduces its state change exactly. For random command sequences, a fresh engine that applies
the recorded effects ends with the same state digest, step by step; failed commands change
nothing and emit nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, Record, ReplyError

KEYS = [b"s1", b"s2"]
GROUPS = [b"g1", b"g2"]
CONSUMERS = [b"alice", b"bob", b"carol"]


def ids() -> st.SearchStrategy[bytes]:
    return st.builds(lambda ms, seq: b"%d-%d" % (ms, seq), st.integers(0, 40), st.integers(0, 3))


keys = st.sampled_from(KEYS)
groups = st.sampled_from(GROUPS)
consumers = st.sampled_from(CONSUMERS)
fields = st.lists(st.sampled_from([b"a", b"b", b"c"]), min_size=1, max_size=2).map(
    lambda fs: [x for f in fs for x in (f, b"v" + f)]
)
policy = st.sampled_from([[], [b"KEEPREF"], [b"DELREF"], [b"ACKED"]])
trim = st.one_of(
    st.just([]),
    st.builds(lambda op, n: [b"MAXLEN", op, b"%d" % n], st.sampled_from([b"=", b"~"]),
              st.integers(0, 6)),
    st.builds(lambda op, i: [b"MINID", op, i], st.sampled_from([b"=", b"~"]), ids()),
)
small = st.integers(0, 5).map(lambda n: b"%d" % n)

_common = [
    st.builds(lambda k, t, p, i, f: [b"XADD", k, *t, *p, i, *f], keys, trim, policy,
              st.one_of(st.just(b"*"), ids(), st.integers(0, 40).map(lambda m: b"%d-*" % m)),
              fields),
    st.builds(lambda k, i: [b"XDEL", k, *i], keys, st.lists(ids(), min_size=1, max_size=3)),
    st.builds(lambda k, t, p: [b"XTRIM", k, *t, *p], keys, trim.filter(bool), policy),
    st.builds(lambda k, p, i: [b"XDELEX", k, *p, b"IDS", b"%d" % len(i), *i], keys, policy,
              st.lists(ids(), min_size=1, max_size=3)),
    st.builds(lambda k, g, i, mk: [b"XGROUP", b"CREATE", k, g, i, *mk], keys, groups,
              st.one_of(st.just(b"$"), st.just(b"0"), ids()),
              st.sampled_from([[], [b"MKSTREAM"]])),
    st.builds(lambda k, g, i: [b"XGROUP", b"SETID", k, g, i], keys, groups,
              st.one_of(st.just(b"$"), st.just(b"0"), ids())),
    st.builds(lambda k, g: [b"XGROUP", b"DESTROY", k, g], keys, groups),
    st.builds(lambda k, g, c: [b"XGROUP", b"CREATECONSUMER", k, g, c], keys, groups, consumers),
    st.builds(lambda k, g, c: [b"XGROUP", b"DELCONSUMER", k, g, c], keys, groups, consumers),
    st.builds(
        lambda g, c, n, noack, claim, k, i: [
            b"XREADGROUP", b"GROUP", g, c, b"COUNT", n, *noack, *claim, b"STREAMS", k, i],
        groups, consumers, small, st.sampled_from([[], [b"NOACK"]]),
        st.sampled_from([[], [b"CLAIM", b"0"], [b"CLAIM", b"3"]]), keys,
        st.sampled_from([b">", b">", b"0", b"5-0"])),
    st.builds(lambda k, g, i: [b"XACK", k, g, *i], keys, groups,
              st.lists(ids(), min_size=1, max_size=3)),
    st.builds(lambda k, g, p, i: [b"XACKDEL", k, g, *p, b"IDS", b"%d" % len(i), *i], keys,
              groups, policy, st.lists(ids(), min_size=1, max_size=3)),
    st.builds(lambda k, g, c, idle, i, o: [b"XCLAIM", k, g, c, idle, *i, *o], keys, groups,
              consumers, small, st.lists(ids(), min_size=1, max_size=3),
              st.lists(st.sampled_from([[b"FORCE"], [b"JUSTID"], [b"IDLE", b"2"],
                                        [b"RETRYCOUNT", b"7"], [b"TIME", b"5"],
                                        [b"LASTID", b"30-0"]]), max_size=3).map(
                  lambda xs: [a for x in xs for a in x])),
    st.builds(lambda k, g, c, idle, i, n, j: [b"XAUTOCLAIM", k, g, c, idle, i, b"COUNT", n, *j],
              keys, groups, consumers, small, st.sampled_from([b"0", b"0-0", b"10-0"]),
              st.sampled_from([b"1", b"2", b"10"]), st.sampled_from([[], [b"JUSTID"]])),
    st.builds(lambda k, i, e, m: [b"XSETID", k, i, b"ENTRIESADDED", e, b"MAXDELETEDID", m],
              keys, ids(), st.integers(0, 50).map(lambda n: b"%d" % n), ids()),
    st.builds(lambda k, i, f: [b"XADD", k, i, *f], keys, st.just(b"*"), fields),
]
_rare = [
    st.builds(lambda k: [b"DEL", k], keys),
    st.builds(lambda a, b: [b"RENAME", a, b], keys, keys),
    st.just([b"FLUSHDB"]),
    st.builds(lambda d: [b"SELECT", d], st.sampled_from([b"0", b"1"])),
]
# Deletions are rare so that groups and PELs live long enough to be exercised.
commands = st.sampled_from([True] * 12 + [False]).flatmap(
    lambda common: st.one_of(*_common) if common else st.one_of(*_rare)
)
# Transactions too: an EXEC is one record holding every queued command's effects (with SELECT
# effects when the transaction switches databases).
commands_with_tx = st.one_of(commands, st.sampled_from([[b"MULTI"], [b"EXEC"]]))

SETUP = [
    [b"XADD", k, b"%d-1" % i, b"a", b"x"] for k in KEYS for i in range(1, 6)
] + [[b"XGROUP", b"CREATE", k, g, b"0"] for k in KEYS for g in GROUPS]


class Clock:
    def __init__(self) -> None:
        self.now = 1

    def __call__(self) -> int:
        return self.now


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
            follower.apply(record)
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
        replica.apply(r)
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
    follower.apply_many([tuple(records[0])])
    assert follower.digest() == e.digest()
