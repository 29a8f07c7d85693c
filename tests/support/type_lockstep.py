"""The type fuzz's two sides in lockstep (tests/differential/test_fuzz_types.py, and its
cluster-mode run tests/differential/test_fuzz_cluster.py): the strategies of list steps beside
tests.support.type_strategies', `Lockstep` (the engine under test and the oracle driven step by
step, replies normalised where 7.0 and 8.x differ or where the order is a hashtable's, random
picks checked by their properties, DUMP/RESTORE each side's own payload or the oracle's, the
keys' state compared at the end), and `fuzz` (hypothesis runs `steps` through a Lockstep)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.diffutil import outcome
from tests.support.resp_client import RespClient
from tests.support.type_strategies import (
    ALL_KEYS,
    LONG,
    SETUP,
    Step,
    anykey,
    step,
    through_fcall,
    zblock,
)

_NUMBER = re.compile(rb"^[+-]?(inf|(\d+\.?\d*|\.\d+)(e[+-]?\d+)?)$", re.I)
LIMITS = {"zset-max-listpack-entries": "4", "hash-max-listpack-entries": "4",
          "set-max-intset-entries": "4", "list-max-listpack-size": "4"}
DEFAULTS = {"zset-max-listpack-entries": "128", "hash-max-listpack-entries": "512",
            "set-max-intset-entries": "512", "list-max-listpack-size": "-2"}
SET_READS = {b"SMEMBERS", b"SINTER", b"SUNION", b"SDIFF"}
HASH_LISTS = {b"HKEYS", b"HVALS", b"HGETALL"}
LEX_COMMANDS = {b"ZRANGEBYLEX", b"ZREVRANGEBYLEX", b"ZLEXCOUNT", b"ZREMRANGEBYLEX"}

# --- lists (beside type_strategies' steps) -------------------------------------------------------

LKEYS = [b"l1", b"l2", b"l3"]
LIST_SETUP = [[b"RPUSH", b"l1", b"a", b"b", b"c", b"1", b"2"],
              [b"RPUSH", b"l2", *[b"e%d" % i for i in range(10)], b"a", LONG]]
LIST_COMMANDS = {b"LPUSH", b"RPUSH", b"LPUSHX", b"RPUSHX", b"LPOP", b"RPOP", b"LINSERT", b"LSET",
                 b"LREM", b"LTRIM", b"LMOVE", b"RPOPLPUSH", b"LMPOP", b"LRANGE", b"LINDEX",
                 b"LLEN", b"LPOS", b"BLPOP", b"BRPOP", b"BLMOVE", b"BRPOPLPUSH", b"BLMPOP"}

lkey = st.sampled_from(LKEYS * 4 + [b"z1", b"s1", b"h1", b"str", b"nokey"])
lkeys = st.lists(lkey, min_size=1, max_size=3)
element = st.sampled_from([b"a", b"b", b"c", b"a", b"b", b"1", b"2", b"-7", b"01", b"", LONG])
elements = st.lists(element, min_size=1, max_size=4)
lindex = st.sampled_from([b"0", b"1", b"2", b"-1", b"-2", b"5", b"-6", b"100", b"-100", b"x"])
lside = st.sampled_from([b"LEFT", b"RIGHT", b"LEFT", b"RIGHT", b"left", b"UP"])


def _numkeys(keys: list[bytes], wrong: bool) -> list[bytes]:
    return [b"%d" % (len(keys) + 1 if wrong else len(keys)), *keys]


_wrong = st.integers(0, 15).map(lambda i: i == 0)
_mpop_count = st.sampled_from([[], [b"COUNT", b"2"], [b"COUNT", b"5"], [b"COUNT", b"0"]])
_lwrites = [
    st.builds(lambda c, k, es: [c, k, *es],
              st.sampled_from([b"LPUSH", b"RPUSH", b"LPUSHX", b"RPUSHX"]), lkey, elements),
    st.builds(lambda c, k, n: [c, k, *n], st.sampled_from([b"LPOP", b"RPOP"]), lkey,
              st.sampled_from([[], [], [b"0"], [b"1"], [b"3"], [b"10"], [b"-1"], [b"x"]])),
    st.builds(lambda k, w, p, e: [b"LINSERT", k, w, p, e], lkey,
              st.sampled_from([b"BEFORE", b"AFTER", b"after", b"MIDDLE"]), element, element),
    st.builds(lambda k, i, e: [b"LSET", k, i, e], lkey, lindex, element),
    st.builds(lambda k, n, e: [b"LREM", k, n, e], lkey,
              st.sampled_from([b"0", b"1", b"-1", b"2", b"-2", b"x"]), element),
    st.builds(lambda k, a, b: [b"LTRIM", k, a, b], lkey, lindex, lindex),
    st.builds(lambda a, b, x, y: [b"LMOVE", a, b, x, y], lkey, lkey, lside, lside),
    st.builds(lambda a, b: [b"RPOPLPUSH", a, b], lkey, lkey),
    st.builds(lambda ks, w, d, n: [b"LMPOP", *_numkeys(ks, w), d, *n], lkeys, _wrong, lside,
              _mpop_count),
]
_lreads = [
    st.builds(lambda k, a, b: [b"LRANGE", k, a, b], lkey, lindex, lindex),
    st.builds(lambda k, i: [b"LINDEX", k, i], lkey, lindex),
    st.builds(lambda k: [b"LLEN", k], lkey),
    st.builds(lambda k, e, o: [b"LPOS", k, e, *o], lkey, element,
              st.sampled_from([[], [b"RANK", b"2"], [b"RANK", b"-1"], [b"COUNT", b"0"],
                               [b"COUNT", b"2", b"RANK", b"-2"], [b"MAXLEN", b"3"],
                               [b"RANK", b"0"], [b"COUNT", b"-1"], [b"MAXLEN", b"-1"]])),
]
_lgeneric = [
    st.builds(lambda c, k: [c, k], st.sampled_from([b"TYPE", b"EXISTS", b"DEL"]), lkey),
    st.builds(lambda c, a, b: [c, a, b], st.sampled_from([b"RENAME", b"RENAMENX"]), lkey,
              st.one_of(lkey, anykey)),
    st.builds(lambda a, b, r: [b"COPY", a, b, *r], lkey, st.one_of(lkey, anykey),
              st.sampled_from([[], [b"REPLACE"]])),
    st.builds(lambda k: [b"OBJECT", b"ENCODING", k], lkey),
]
# Blocking pops that time out after 10 ms on empty keys (never through FCALL: see above).
_lblock = [
    st.builds(lambda c, ks: [c, *ks, b"0.01"], st.sampled_from([b"BLPOP", b"BRPOP"]), lkeys),
    st.builds(lambda a, b, x, y: [b"BLMOVE", a, b, x, y, b"0.01"], lkey, lkey, lside, lside),
    st.builds(lambda a, b: [b"BRPOPLPUSH", a, b, b"0.01"], lkey, lkey),
    st.builds(lambda ks, d, n: [b"BLMPOP", b"0.01", *_numkeys(ks, False), d, *n], lkeys, lside,
              _mpop_count),
]
_list_cmd = st.one_of(*_lwrites, *_lwrites, *_lreads, *_lgeneric, *_lblock).map(
    lambda argv: ("cmd", argv))
_list_restore = st.builds(lambda a, b, src: ("dumprestore", [a, b, src]), lkey,
                          st.one_of(lkey, anykey), st.sampled_from([b"own", b"oracle"]))
list_step = st.one_of(_list_cmd, _list_cmd, _list_cmd, _list_restore)
list_through_fcall = st.one_of(*_lwrites, *_lreads).map(
    lambda argv: ("cmd", [b"FCALL", b"fuzz_run", b"0", *argv]))
steps = st.lists(st.one_of(step, step, step, step, step, step, through_fcall, zblock,
                           list_step, list_step, list_step, list_through_fcall),
                 min_size=15, max_size=40)


def num(reply: Any) -> Any:
    """Score texts read as doubles (both sides alike), whatever the nesting."""
    if isinstance(reply, list):
        return [num(x) for x in reply]
    if isinstance(reply, bytes) and _NUMBER.match(reply):
        return float(reply)
    return reply


def multiset(reply: Any) -> Any:
    return sorted(reply) if isinstance(reply, list) else reply


def pairs(reply: Any) -> Any:
    if not isinstance(reply, list):
        return reply
    return sorted(zip(reply[::2], reply[1::2], strict=True))


class Lockstep:
    """The engine under test and the oracle, driven step by step (a step: type_strategies)."""

    def __init__(self, engine: Any, redis: RespClient) -> None:
        self.engine = engine
        self.redis = redis
        # Hashes RESTOREd from a hashtable's DUMP: the payload lists the fields in the
        # table's iteration order, which is each server's own, so the listpack RESTORE makes
        # of it (a small hash) keeps an order no two implementations share.
        self.unordered: set[bytes] = set()

    def reset(self) -> None:
        self.unordered.clear()
        for side in (self.engine, self.redis):
            assert side.execute("FLUSHALL") == "OK"
            for name, value in LIMITS.items():
                assert side.execute("CONFIG", "SET", name, value) == "OK"
        for argv in SETUP + LIST_SETUP:
            self.compare(argv)

    def compare(self, argv: list[bytes], norm: Any = None) -> tuple[str, Any]:
        ours, theirs = outcome(self.engine, *argv), outcome(self.redis, *argv)
        if norm is not None:
            ours = (ours[0], norm(ours[1])) if ours[0] == "ok" else ours
            theirs = (theirs[0], norm(theirs[1])) if theirs[0] == "ok" else theirs
        assert ours == theirs, f"\nargv:   {argv!r}\nengine: {ours!r}\nredis:  {theirs!r}"
        return theirs

    def oracle_type(self, key: bytes) -> bytes:
        kind: bytes = self.redis.execute("TYPE", key)
        return kind.encode() if isinstance(kind, str) else kind

    def norm_for(self, argv: list[bytes]) -> Any:
        if argv[0] == b"FCALL":  # the inner command's normaliser
            return self.norm_for(argv[3:])
        name = argv[0].upper()
        if name.startswith((b"Z", b"BZ")):
            return num
        if name in SET_READS:
            return multiset
        if name in HASH_LISTS and (argv[1] in self.unordered or self.redis.execute(
                "OBJECT", "ENCODING", argv[1]) != b"listpack"):
            return multiset if name != b"HGETALL" else pairs
        if name == b"TTL":
            return lambda t: t if t < 0 else "ttl"
        if name == b"OBJECT" and self.oracle_type(argv[2]) == b"set":  # (before the command)
            return lambda enc: enc if enc == b"intset" else b"table"
        if name == b"OBJECT" and self.oracle_type(argv[2]) == b"list":
            return lambda enc: b"quicklist" if enc == b"listpack" else enc
        return None

    def run(self, kind: str, argv: list[bytes]) -> None:
        if kind == "cmd":
            if not self.lex_on_mixed_scores(argv[3:] if argv[0] == b"FCALL" else argv):
                self.compare(argv, self.norm_for(argv))
        elif kind == "pop":
            self.spop(argv)
        elif kind == "rand":
            self.random_pick(argv)
        elif kind == "rankws":
            self.rank_withscore(argv)
        else:
            self.dump_restore(*argv)

    def lex_on_mixed_scores(self, argv: list[bytes]) -> bool:
        """A lex range over members of different scores: what Redis documents as unspecified
        (its skiplist search then depends on the nodes' random levels), left out."""
        name = argv[0].upper()
        if name in LEX_COMMANDS:
            key = argv[1]
        elif name in (b"ZRANGE", b"ZRANGESTORE") and b"BYLEX" in (a.upper() for a in argv):
            key = argv[2] if name == b"ZRANGESTORE" else argv[1]
        else:
            return False
        kind, content = self.content(key)
        return kind == b"zset" and len(set(content.values())) > 1

    # --- the random picks ----------------------------------------------------------------

    def content(self, key: bytes) -> tuple[bytes, dict[bytes, Any]]:
        """The oracle's key: its type and {member: score or value, or 1 for a set}."""
        kind = self.oracle_type(key)
        if kind == b"set":
            return kind, dict.fromkeys(self.redis.execute("SMEMBERS", key), 1)
        if kind == b"zset":
            flat = self.redis.execute("ZRANGE", key, "0", "-1", "WITHSCORES")
            return kind, dict(zip(flat[::2], num(flat[1::2]), strict=True))
        if kind == b"hash":
            flat = self.redis.execute("HGETALL", key)
            return kind, dict(zip(flat[::2], flat[1::2], strict=True))
        return kind, {}

    def spop(self, argv: list[bytes]) -> None:
        kind, before = self.content(argv[1])
        ours = outcome(self.engine, *argv)
        if ours[0] == "err" or kind not in (b"set", b"none"):
            self.compare(argv)  # an error on both sides, the same line (and no change)
            return
        if len(argv) == 2:
            assert ours[1] is None if not before else ours[1] in before, (argv, ours, before)
            popped = [] if ours[1] is None else [ours[1]]
        else:
            n = int(argv[2])
            popped = ours[1]
            assert n >= 0 and len(popped) == len(set(popped)) == min(n, len(before)), (
                argv, ours, before)
            assert set(popped) <= set(before), (argv, ours, before)
        if popped:
            assert self.redis.execute("SREM", argv[1], *popped) == len(popped)

    def random_pick(self, argv: list[bytes]) -> None:
        kind, before = self.content(argv[1])
        ours, theirs = outcome(self.engine, *argv), outcome(self.redis, *argv)
        if "err" in (ours[0], theirs[0]) or len(argv) == 2:
            if len(argv) == 2 and ours[0] == theirs[0] == "ok":
                assert (ours[1] is None) == (theirs[1] is None) == (not before), (argv, ours)
                assert ours[1] is None or ours[1] in before, (argv, ours, before)
                return
            assert ours == theirs, (argv, ours, theirs)
            return
        n, with_values = int(argv[2]), len(argv) > 3
        mine = ours[1]
        got = list(zip(mine[::2], mine[1::2], strict=True)) if with_values else mine
        names = [g[0] for g in got] if with_values else got
        assert len(mine) == len(theirs[1]), (argv, ours, theirs)
        assert len(names) == (min(n, len(before)) if n >= 0 else (abs(n) if before else 0)), (
            argv, ours, before)
        assert set(names) <= set(before), (argv, ours, before)
        if n >= 0:
            assert len(set(names)) == len(names), (argv, ours)
        if with_values:
            for name, val in got:
                expected = before[name]
                assert (num(val) if kind == b"zset" else val) == expected, (argv, ours, before)
        if n >= len(before):
            assert Counter(names) == Counter(list(before)), (argv, ours, before)

    def rank_withscore(self, argv: list[bytes]) -> None:
        """ZRANK WITHSCORE (7.2+) against the oracle's ZRANK and ZSCORE."""
        ours = outcome(self.engine, *argv)
        rank = outcome(self.redis, *argv[:3])
        if rank[0] == "err" or rank[1] is None:
            expected = rank if rank[0] == "err" else ("ok", None)
            assert ours == expected, (argv, ours, rank)
            return
        score = self.redis.execute("ZSCORE", argv[1], argv[2])
        assert ours[0] == "ok" and [ours[1][0], num(ours[1][1])] == [rank[1], num(score)], (
            argv, ours, rank, score)

    def dump_restore(self, src: bytes, dst: bytes, whose: bytes) -> None:
        """DUMP src, RESTORE dst REPLACE: each side its own payload (they differ between
        versions), or both the oracle's (the engine reads 7.0's)."""
        oracle = self.redis.execute("DUMP", src)
        if self.oracle_type(src) == b"hash" and self.redis.execute(
                "OBJECT", "ENCODING", src) != b"listpack":
            self.unordered.add(dst)
        results = []
        for side in (self.engine, self.redis):
            payload = side.execute("DUMP", src) if whose == b"own" else oracle
            results.append(None if payload is None else
                           outcome(side, "RESTORE", dst, "0", payload, "REPLACE"))
        assert results[0] == results[1], (src, dst, whose, results)

    # --- the state -----------------------------------------------------------------------

    def same_state(self) -> None:
        for key in ALL_KEYS + LKEYS + [b"nokey"]:
            kind = self.compare([b"TYPE", key])[1]
            kind = kind.encode() if isinstance(kind, str) else kind
            self.compare([b"TTL", key], self.norm_for([b"TTL", key]))
            if kind == b"zset":
                self.compare([b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"], num)
            elif kind == b"hash":
                self.compare([b"HGETALL", key], self.norm_for([b"HGETALL", key]))
            elif kind == b"set":
                self.compare([b"SMEMBERS", key], multiset)
            elif kind == b"string":
                self.compare([b"GET", key])
            elif kind == b"list":
                self.compare([b"LRANGE", key, b"0", b"-1"])
            if kind != b"none":
                self.compare([b"OBJECT", b"ENCODING", key],
                             self.norm_for([b"OBJECT", b"ENCODING", key]))


# Sequences the fuzz once found wrong, replayed first on every run: a lex removal over z2's
# mixed scores (Redis: unspecified; left out by `lex_on_mixed_scores`), then over z3's one score.
REGRESSIONS: list[list[Step]] = [
    [("cmd", [b"ZREMRANGEBYLEX", b"z2", b"-", b"[a"]),
     ("cmd", [b"ZREMRANGEBYLEX", b"z3", b"-", b"[b"]),
     ("cmd", [b"ZRANGESTORE", b"z1", b"z3", b"[a", b"+", b"BYLEX", b"REV", b"LIMIT", b"0", b"2"]),
     ("dumprestore", [b"z1", b"z2", b"oracle"])],
]


def fuzz(lock: Lockstep, examples: int) -> None:
    @settings(max_examples=examples, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(steps)
    def run(script: list[Step]) -> None:
        lock.reset()
        for kind, argv in script:
            lock.run(kind, argv)
        lock.same_state()

    for regression in REGRESSIONS:
        run = example(regression)(run)
    run()
