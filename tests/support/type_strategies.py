"""Hypothesis strategies for random command sequences over sorted sets, hashes and sets, and the
generic commands over them; shared by the differential fuzz against redis-server
(tests/differential/test_fuzz_types.py) and the replay property
(tests/property/test_types_replay.py).

A step is `(kind, argv)`: `kind` says how a differential run compares it ("cmd": reply for
reply; "pop": SPOP, whose pick is random, checked by its properties; "rand": SRANDMEMBER,
ZRANDMEMBER, HRANDFIELD, checked by their properties; "dumprestore": DUMP of one key RESTOREd
into another on each side, each side's payload or both the oracle's; "rankws": ZRANK /
ZREVRANK WITHSCORE, which 7.0 lacks, checked against ZRANK and ZSCORE). `steps` draws what
Redis 7.0 and 8.x share; `replay_steps` adds hash field expiry (7.4+), relative times short
enough to pass on the property's fake clock, MULTI/EXEC and SELECT.

Any step may run inside a Redis Function (FCALL of `LIBRARY`'s `fuzz_run`, which SETUP loads).
Alphabets are small so that commands collide: three sorted-set keys, two hash keys, three set
keys and a string, each family drawing its own keys mostly and the others now and then
(WRONGTYPE), a few members, and a member or value past the listpack value limit (64 bytes) to
force conversions.
"""

from __future__ import annotations

from hypothesis import strategies as st

Step = tuple[str, list[bytes]]

ZKEYS = [b"z1", b"z2", b"z3"]
HKEYS = [b"h1", b"h2"]
SKEYS = [b"s1", b"s2", b"s3"]
ALL_KEYS = ZKEYS + HKEYS + SKEYS + [b"str"]
LONG = b"L" * 70  # past the 64-byte listpack value limit of every type

zkey = st.sampled_from(ZKEYS * 4 + [b"h1", b"s1", b"str", b"nokey"])
hkey = st.sampled_from(HKEYS * 5 + [b"z1", b"s1", b"str", b"nokey"])
skey = st.sampled_from(SKEYS * 4 + [b"z1", b"h1", b"str", b"nokey"])
anykey = st.sampled_from(ALL_KEYS + [b"nokey"])

member = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"a", b"b", b"c", LONG])
members = st.lists(member, min_size=1, max_size=3)
SCORES = [b"1", b"2", b"-1", b"0", b"-0", b"0.5", b"1.5", b"3", b"inf", b"-inf", b"+inf",
          b"1e308", b"-1e308", b"5e-324", b"9007199254740993", b"0.1", b"abc", b"nan", b"",
          b"1e400", b"0x10", b" 1"]
score = st.sampled_from(SCORES[:16] * 3 + SCORES[16:])
score_bound = st.sampled_from([b"-inf", b"+inf", b"(1", b"1", b"(0", b"0", b"2", b"(2", b"inf",
                               b"(inf", b"-1", b"(-inf", b"0.5", b"x", b"(", b"nan"])
lex_bound = st.sampled_from([b"-", b"+", b"[a", b"(a", b"(b", b"[c", b"(e", b"[e", b"a", b"["])
rank = st.sampled_from([b"0", b"1", b"2", b"-1", b"-2", b"-100", b"100", b"x",
                        b"9223372036854775807"])
limit = st.sampled_from([[], [], [b"LIMIT", b"0", b"1"], [b"LIMIT", b"1", b"2"],
                         [b"LIMIT", b"0", b"-1"], [b"LIMIT", b"-1", b"2"], [b"LIMIT", b"1", b"x"],
                         [b"LIMIT", b"5", b"1"]])
count = st.sampled_from([b"0", b"1", b"2", b"3", b"10", b"-1", b"-3", b"x"])
withscores = st.sampled_from([[], [b"WITHSCORES"]])
flag = st.sampled_from([b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"])

fields = st.sampled_from([b"f1", b"f2", b"f3", b"f4", b"f5", b"f1", b"f2", LONG])
field_list = st.lists(fields, min_size=1, max_size=3)
value = st.sampled_from([b"v", b"1", b"-3", b"10.5", b"9223372036854775807", b"abc", b"", LONG,
                         b"1e3", b"0x1"])
incr_int = st.sampled_from([b"1", b"-1", b"5", b"9223372036854775807", b"-9223372036854775808",
                            b"x", b"1.5"])
incr_float = st.sampled_from([b"1.5", b"-0.25", b"3", b"inf", b"nan", b"1e308", b"abc",
                              b"0.1", b"-1"])

# (integers an intset takes, and texts it must not: not canonical, or past 64 bits)
smember = st.sampled_from([b"a", b"b", b"c", b"1", b"2", b"3", b"-7", b"10", b"1", b"2", b"3",
                           b"9223372036854775807", b"-9223372036854775808",
                           b"18446744073709551616", b"0x1", b"01", b"-0", b"+3", b" 1", LONG])
smembers = st.lists(smember, min_size=1, max_size=4)


def _flat(pairs: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [x for pair in pairs for x in pair]


def _numkeys(keys: list[bytes], wrong: bool) -> list[bytes]:
    return [b"%d" % (len(keys) + 1 if wrong else len(keys)), *keys]


# --- sorted sets -----------------------------------------------------------------------------

@st.composite
def zrange_args(draw: st.DrawFn, store: bool) -> list[bytes]:
    """ZRANGE's (or ZRANGESTORE's) arguments after the key(s): by index, score or lex, REV,
    LIMIT, WITHSCORES, with now and then an option that makes it an error."""
    mode = draw(st.sampled_from(["index", "score", "lex"]))
    rev = draw(st.booleans())
    if mode == "index":
        lo, hi, by = draw(rank), draw(rank), []
    elif mode == "score":
        lo, hi, by = draw(score_bound), draw(score_bound), [b"BYSCORE"]
    else:
        lo, hi, by = draw(lex_bound), draw(lex_bound), [b"BYLEX"]
    lim = draw(limit) if mode != "index" or draw(st.integers(0, 9)) == 0 else []
    ws = [] if store and draw(st.integers(0, 9)) else draw(withscores)
    return [lo, hi, *by, *([b"REV"] if rev else []), *lim, *ws]


def _zadd(k: bytes, flags: list[bytes], pairs: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [b"ZADD", k, *flags, *_flat(pairs)]


_zwrites = [
    st.builds(_zadd, zkey, st.lists(flag, max_size=2, unique=True),
              st.lists(st.tuples(score, member), min_size=1, max_size=3)),
    st.builds(lambda k, s, m: [b"ZADD", k, s, m], zkey, score, member),
    st.builds(lambda k, s, m: [b"ZINCRBY", k, s, m], zkey, score, member),
    st.builds(lambda k, ms: [b"ZREM", k, *ms], zkey, members),
    st.builds(lambda k, a, b: [b"ZREMRANGEBYRANK", k, a, b], zkey, rank, rank),
    st.builds(lambda k, a, b: [b"ZREMRANGEBYSCORE", k, a, b], zkey, score_bound, score_bound),
    st.builds(lambda k, a, b: [b"ZREMRANGEBYLEX", k, a, b], zkey, lex_bound, lex_bound),
    st.builds(lambda c, k, n: [c, k, *n], st.sampled_from([b"ZPOPMIN", b"ZPOPMAX"]), zkey,
              st.sampled_from([[], [b"1"], [b"2"], [b"0"], [b"10"], [b"-1"], [b"x"]])),
    st.builds(lambda ks, w, m, n: [b"ZMPOP", *_numkeys(ks, w), m, *n],
              st.lists(zkey, min_size=1, max_size=3), st.integers(0, 15).map(lambda i: i == 0),
              st.sampled_from([b"MIN", b"MAX", b"max", b"LEFT"]),
              st.sampled_from([[], [b"COUNT", b"1"], [b"COUNT", b"3"], [b"COUNT", b"0"]])),
    st.builds(lambda d, k, a: [b"ZRANGESTORE", d, k, *a], zkey, zkey, zrange_args(True)),
]


@st.composite
def zalgebra(draw: st.DrawFn) -> list[bytes]:
    op = draw(st.sampled_from([b"ZUNION", b"ZINTER", b"ZDIFF"]))
    store = draw(st.booleans())
    keys = draw(st.lists(zkey, min_size=1, max_size=3))  # (a set is an input too: scores 1)
    opts: list[bytes] = []
    if draw(st.integers(0, 2)) == 0:
        n = len(keys) + draw(st.sampled_from([0, 0, 0, 1]))
        opts += [b"WEIGHTS", *draw(st.lists(st.sampled_from([b"1", b"2", b"-1", b"0", b"inf",
                                                             b"0.5", b"x"]),
                                            min_size=n, max_size=n))]
    if draw(st.integers(0, 2)) == 0:
        opts += [b"AGGREGATE", draw(st.sampled_from([b"SUM", b"MIN", b"MAX", b"max", b"AVG"]))]
    if not store or draw(st.integers(0, 9)) == 0:
        opts += draw(withscores)
    wrong = draw(st.integers(0, 15)) == 0
    if store:
        return [op + b"STORE", draw(zkey), *_numkeys(keys, wrong), *opts]
    return [op, *_numkeys(keys, wrong), *opts]


_zreads = [
    st.builds(lambda k, a: [b"ZRANGE", k, *a], zkey, zrange_args(False)),
    st.builds(lambda c, k, a, b, w: [c, k, a, b, *w],
              st.sampled_from([b"ZREVRANGE", b"ZRANGE"]), zkey, rank, rank, withscores),
    st.builds(lambda c, k, a, b, w, lim: [c, k, a, b, *w, *lim],
              st.sampled_from([b"ZRANGEBYSCORE", b"ZREVRANGEBYSCORE"]), zkey, score_bound,
              score_bound, withscores, limit),
    st.builds(lambda c, k, a, b, lim: [c, k, a, b, *lim],
              st.sampled_from([b"ZRANGEBYLEX", b"ZREVRANGEBYLEX"]), zkey, lex_bound, lex_bound,
              limit),
    st.builds(lambda k, a, b: [b"ZCOUNT", k, a, b], zkey, score_bound, score_bound),
    st.builds(lambda k, a, b: [b"ZLEXCOUNT", k, a, b], zkey, lex_bound, lex_bound),
    st.builds(lambda k, ms: [b"ZMSCORE", k, *ms], zkey, members),
    st.builds(lambda k, m: [b"ZSCORE", k, m], zkey, member),
    st.builds(lambda k: [b"ZCARD", k], zkey),
    st.builds(lambda c, k, m: [c, k, m], st.sampled_from([b"ZRANK", b"ZREVRANK"]), zkey, member),
    st.builds(lambda ks, w, lim: [b"ZINTERCARD", *_numkeys(ks, w), *lim],
              st.lists(zkey, min_size=1, max_size=3), st.integers(0, 15).map(lambda i: i == 0),
              st.sampled_from([[], [b"LIMIT", b"1"], [b"LIMIT", b"0"], [b"LIMIT", b"-1"]])),
]
zrankws = st.builds(lambda c, k, m: ("rankws", [c, k, m, b"WITHSCORE"]),
                    st.sampled_from([b"ZRANK", b"ZREVRANK"]), zkey, member)
zrand = st.builds(lambda k, n: ("rand", [b"ZRANDMEMBER", k, *n]), zkey,
                  st.sampled_from([[], [b"2"], [b"-3"], [b"10"], [b"0"], [b"3", b"WITHSCORES"],
                                   [b"-2", b"WITHSCORES"], [b"x"]]))

# --- hashes ----------------------------------------------------------------------------------

_hwrites = [
    st.builds(lambda k, fv: [b"HSET", k, *_flat(fv)], hkey,
              st.lists(st.tuples(fields, value), min_size=1, max_size=3)),
    st.builds(lambda k, fv: [b"HMSET", k, *_flat(fv)], hkey,
              st.lists(st.tuples(fields, value), min_size=1, max_size=2)),
    st.builds(lambda k, f, v: [b"HSETNX", k, f, v], hkey, fields, value),
    st.builds(lambda k, fs: [b"HDEL", k, *fs], hkey, field_list),
    st.builds(lambda k, f, n: [b"HINCRBY", k, f, n], hkey, fields, incr_int),
    st.builds(lambda k, f, n: [b"HINCRBYFLOAT", k, f, n], hkey, fields, incr_float),
]
_hreads = [
    st.builds(lambda k, f: [b"HGET", k, f], hkey, fields),
    st.builds(lambda k, fs: [b"HMGET", k, *fs], hkey, field_list),
    st.builds(lambda c, k: [c, k], st.sampled_from([b"HLEN", b"HKEYS", b"HVALS", b"HGETALL"]),
              hkey),
    st.builds(lambda c, k, f: [c, k, f], st.sampled_from([b"HSTRLEN", b"HEXISTS"]), hkey,
              fields),
]
hrand = st.builds(lambda k, n: ("rand", [b"HRANDFIELD", k, *n]), hkey,
                  st.sampled_from([[], [b"2"], [b"-3"], [b"10"], [b"0"], [b"2", b"WITHVALUES"],
                                   [b"-4", b"WITHVALUES"], [b"x"]]))

# --- sets ------------------------------------------------------------------------------------

_swrites = [
    st.builds(lambda k, ms: [b"SADD", k, *ms], skey, smembers),
    st.builds(lambda k, ms: [b"SREM", k, *ms], skey, smembers),
    st.builds(lambda a, b, m: [b"SMOVE", a, b, m], skey, skey, smember),
    st.builds(lambda c, d, ks: [c, d, *ks],
              st.sampled_from([b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"]), skey,
              st.lists(skey, min_size=1, max_size=3)),
]
_sreads = [
    st.builds(lambda c, k: [c, k], st.sampled_from([b"SMEMBERS", b"SCARD"]), skey),
    st.builds(lambda k, m: [b"SISMEMBER", k, m], skey, smember),
    st.builds(lambda k, ms: [b"SMISMEMBER", k, *ms], skey, smembers),
    st.builds(lambda c, ks: [c, *ks], st.sampled_from([b"SINTER", b"SUNION", b"SDIFF"]),
              st.lists(skey, min_size=1, max_size=3)),
    st.builds(lambda ks, w, lim: [b"SINTERCARD", *_numkeys(ks, w), *lim],
              st.lists(skey, min_size=1, max_size=3), st.integers(0, 15).map(lambda i: i == 0),
              st.sampled_from([[], [b"LIMIT", b"1"], [b"LIMIT", b"0"], [b"LIMIT", b"-1"]])),
]
spop = st.builds(lambda k, n: ("pop", [b"SPOP", k, *n]), skey,
                 st.sampled_from([[], [], [b"1"], [b"2"], [b"10"], [b"0"], [b"-1"], [b"x"]]))
srand = st.builds(lambda k, n: ("rand", [b"SRANDMEMBER", k, *n]), skey,
                  st.sampled_from([[], [b"2"], [b"-3"], [b"10"], [b"0"], [b"x"]]))

# --- generic ---------------------------------------------------------------------------------

_generic = [
    st.builds(lambda c, k: [c, k], st.sampled_from([b"TYPE", b"EXISTS", b"TTL", b"PERSIST"]),
              anykey),
    st.builds(lambda c, ks: [c, *ks], st.sampled_from([b"DEL", b"UNLINK"]),
              st.lists(anykey, min_size=1, max_size=2)),
    st.builds(lambda ks: [b"EXISTS", *ks], st.lists(anykey, min_size=2, max_size=3)),
    st.builds(lambda c, a, b: [c, a, b], st.sampled_from([b"RENAME", b"RENAMENX"]), anykey,
              anykey),
    st.builds(lambda a, b, r: [b"COPY", a, b, *r], anykey, anykey,
              st.sampled_from([[], [b"REPLACE"]])),
    st.builds(lambda k: [b"OBJECT", b"ENCODING", k], anykey),
]
# (each side RESTOREs its own DUMP, or both the oracle's: 7.0's payloads read by the engine)
dumprestore = st.builds(lambda a, b, src: ("dumprestore", [a, b, src]), anykey, anykey,
                        st.sampled_from([b"own", b"oracle"]))
# Long enough that no key expires during a differential run (the oracle runs on real time);
# GT and LT only with absolute times (two relative times a millisecond apart on one side and
# not on the other would compare differently).
expire_long = st.one_of(
    st.builds(lambda k, s, o: [b"EXPIRE", k, s, *o], anykey,
              st.sampled_from([b"1000", b"2000", b"x"]), st.sampled_from([[], [b"NX"], [b"XX"]])),
    st.builds(lambda c, k, t, o: [c, k, t, *o], st.sampled_from([b"EXPIREAT", b"PEXPIREAT"]),
              anykey, st.sampled_from([b"4102444800", b"4102444900", b"4102444800000"]),
              st.sampled_from([[], [b"NX"], [b"XX"], [b"GT"], [b"LT"]])),
)


def _cmds(strategies: list[st.SearchStrategy[list[bytes]]]) -> st.SearchStrategy[Step]:
    return st.one_of(*strategies).map(lambda argv: ("cmd", argv))


# Blocking pops with a timeout short enough to pass (differential runs only: the replay
# property's fake clock never reaches a timeout).
zblock = st.one_of(
    st.builds(lambda c, ks: [c, *ks, b"0.01"], st.sampled_from([b"BZPOPMIN", b"BZPOPMAX"]),
              st.lists(zkey, min_size=1, max_size=2)),
    st.builds(lambda ks, m, n: [b"BZMPOP", b"0.01", b"%d" % len(ks), *ks, m, *n],
              st.lists(zkey, min_size=1, max_size=2), st.sampled_from([b"MIN", b"MAX"]),
              st.sampled_from([[], [b"COUNT", b"2"]])),
).map(lambda argv: ("cmd", argv))
# (each family flat: every command form of a family equally likely, writes twice)
_zset_cmd = _cmds(_zwrites * 2 + _zreads + [zalgebra(), zalgebra()])
_hash_cmd = _cmds(_hwrites * 2 + _hreads)
_set_cmd = _cmds(_swrites * 2 + _sreads)
_gen_cmd = _cmds(_generic + [expire_long])
_zset = st.one_of(_zset_cmd, zrankws, zrand)
_hash = st.one_of(_hash_cmd, hrand)
_set = st.one_of(_set_cmd, spop, srand)
_gen = st.one_of(_gen_cmd, dumprestore)

# A library whose one function runs the command it is given: any step may go through FCALL
# (the scripting path's reply conversion and error lines; effects from inside a function).
LIBRARY = (b"#!lua name=fuzzlib\n"
           b"redis.register_function('fuzz_run', function(keys, args)"
           b" return redis.call(unpack(args)) end)")
step = st.one_of(_zset, _zset, _hash, _set, _gen)
through_fcall = st.one_of(_zset_cmd, _zset_cmd, _hash_cmd, _set_cmd, _gen_cmd).map(
    lambda s: ("cmd", [b"FCALL", b"fuzz_run", b"0", *s[1]]))
steps = st.lists(st.one_of(step, step, step, step, step, step, through_fcall, zblock),
                 min_size=15, max_size=40)

# Every sequence starts from these (with the listpack and intset limits at 4 entries): a
# listpack sorted set and two skiplists (z1 and z3 of one score, for the lex ranges), a
# listpack and a hashtable hash, an intset and a set of strings, and a string.
SETUP = [
    [b"ZADD", b"z1", b"0", b"a", b"0", b"b", b"0", b"c"],
    [b"ZADD", b"z2", b"0", b"a", b"0", b"b", b"0", b"c", b"-1.5", b"d", b"3", b"e", b"inf", b"f"],
    [b"ZADD", b"z3", b"1", b"a", b"1", b"b", b"1", b"c", b"1", b"d", b"1", b"e"],
    [b"HSET", b"h1", b"f1", b"v", b"f2", b"10"],
    [b"HSET", b"h2", b"f1", b"1", b"f2", b"2.5", b"f3", b"x", b"f4", b"4", b"f5", b"-3"],
    [b"SADD", b"s1", b"1", b"2", b"3"],
    [b"SADD", b"s2", b"a", b"b", b"1", b"10", b"c"],
    [b"SET", b"str", b"12"],
    [b"FUNCTION", b"LOAD", b"REPLACE", LIBRARY],
]

# --- the replay property's extras ------------------------------------------------------------

_fields_block = field_list.map(lambda fs: [b"FIELDS", b"%d" % len(fs), *fs])
_hfe = [
    st.builds(lambda c, k, t, o, fb: [c, k, t, *o, *fb],
              st.sampled_from([b"HEXPIRE", b"HPEXPIRE"]), hkey,
              st.sampled_from([b"0", b"1", b"2", b"100", b"-1", b"x"]),
              st.sampled_from([[], [b"NX"], [b"XX"], [b"GT"], [b"LT"]]), _fields_block),
    st.builds(lambda c, k, t, fb: [c, k, t, *fb],
              st.sampled_from([b"HEXPIREAT", b"HPEXPIREAT"]), hkey,
              st.sampled_from([b"0", b"1", b"5", b"1000", b"5000"]), _fields_block),
    st.builds(lambda c, k, fb: [c, k, *fb],
              st.sampled_from([b"HTTL", b"HPTTL", b"HEXPIRETIME", b"HPEXPIRETIME", b"HPERSIST",
                               b"HGETDEL"]), hkey, _fields_block),
    st.builds(lambda k, o, fb: [b"HGETEX", k, *o, *fb], hkey,
              st.sampled_from([[], [b"PERSIST"], [b"EX", b"1"], [b"PX", b"3"], [b"PX", b"100"],
                               [b"EXAT", b"2"], [b"PXAT", b"4000"]]), _fields_block),
    st.builds(lambda k, c, o, fv: [b"HSETEX", k, *c, *o, b"FIELDS", b"%d" % len(fv), *_flat(fv)],
              hkey, st.sampled_from([[], [b"FNX"], [b"FXX"]]),
              st.sampled_from([[], [b"EX", b"1"], [b"PX", b"2"], [b"PX", b"500"], [b"KEEPTTL"],
                               [b"PXAT", b"3000"]]),
              st.lists(st.tuples(fields, value), min_size=1, max_size=2)),
]
_short_expire = st.builds(lambda c, k, t: [c, k, t],
                          st.sampled_from([b"EXPIRE", b"PEXPIRE", b"PEXPIREAT"]), anykey,
                          st.sampled_from([b"1", b"2", b"5", b"100", b"3000"]))
_replay_only = st.one_of(*_hfe, _short_expire,
                         st.sampled_from([[b"MULTI"], [b"EXEC"], [b"SELECT", b"1"],
                                          [b"SELECT", b"0"]]))
_replayed = st.one_of(step, step, step, through_fcall).map(
    lambda s: s[1] if s[0] != "dumprestore" else [b"COPY", *s[1][:2], b"REPLACE"])
replay_step = st.one_of(_replayed, _replay_only, _replay_only,
                        _replay_only.map(lambda argv: [b"FCALL", b"fuzz_run", b"0", *argv]))
# (a step and how many ms the fake clock moves before it)
replay_steps = st.lists(st.tuples(replay_step, st.sampled_from([0, 0, 1, 3, 700, 2500])),
                        min_size=8, max_size=50)
