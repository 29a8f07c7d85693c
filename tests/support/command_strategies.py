"""Hypothesis strategies for random stream command sequences, shared by the effects-replay
property (tests/property/test_effects_replay.py) and the snapshot round trip
(tests/snapshot/test_reader.py).

`commands` draws one argv (bytes) over two keys (s1, s2), two groups (g1, g2) and three
consumers: mostly entry and group commands, rarely DEL/RENAME/FLUSHDB/SELECT, so groups and PELs
live long enough to be exercised; `commands_with_tx` adds MULTI and EXEC. `SETUP` is the argv
list both suites start from (5 entries in s1 and s2, groups g1 and g2 on both), and `Clock` the
settable fake clock (`clock.now`).
"""

from __future__ import annotations

from hypothesis import strategies as st

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
    # Redis 8.10's reply caps over both streams (https://redis.io/docs/latest/commands/xreadgroup/)
    st.builds(
        lambda g, c, caps, claim, i, j: [
            b"XREADGROUP", b"GROUP", g, c, *caps, *claim, b"STREAMS", b"s1", b"s2", i, j],
        groups, consumers,
        st.sampled_from([[b"MAXCOUNT", b"1"], [b"MAXCOUNT", b"3"], [b"MAXSIZE", b"1"],
                         [b"MAXSIZE", b"40"], [b"COUNT", b"1", b"MAXCOUNT", b"2"]]),
        st.sampled_from([[], [b"CLAIM", b"0"]]), st.sampled_from([b">", b"0"]),
        st.sampled_from([b">", b"0"])),
    st.builds(lambda k, g, i: [b"XACK", k, g, *i], keys, groups,
              st.lists(ids(), min_size=1, max_size=3)),
    # Redis 8.8's XNACK (https://redis.io/docs/latest/commands/xnack/)
    st.builds(lambda k, g, m, i, o: [b"XNACK", k, g, m, b"IDS", b"%d" % len(i), *i, *o], keys,
              groups, st.sampled_from([b"SILENT", b"FAIL", b"FATAL"]),
              st.lists(ids(), min_size=1, max_size=3),
              st.sampled_from([[], [b"FORCE"], [b"RETRYCOUNT", b"4"],
                               [b"RETRYCOUNT", b"0", b"FORCE"]])),
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
    # Redis 8.6's idempotent producers (https://redis.io/docs/latest/commands/xadd/, xcfgset/)
    st.builds(lambda k, m, t, f: [b"XADD", k, *m, *t, b"*", *f], keys,
              st.one_of(st.builds(lambda p, i: [b"IDMP", p, i], st.sampled_from([b"p", b"q"]),
                                  st.sampled_from([b"i1", b"i2", b"i3"])),
                        st.builds(lambda p: [b"IDMPAUTO", p], st.sampled_from([b"p", b"r"]))),
              st.one_of(st.just([]), trim), fields),
    st.builds(lambda k, o: [b"XCFGSET", k, *o], keys,
              st.sampled_from([[b"IDMP-MAXSIZE", b"1"], [b"IDMP-MAXSIZE", b"2"],
                               [b"IDMP-DURATION", b"1"], [b"IDMP-DURATION", b"100"]])),
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
