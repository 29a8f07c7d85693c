"""The redis-py facade (engine.runtime.redis_api.RedisAPI) on its own.

Checked here, against a recording engine (no command runs) and against a real Engine: the argv
each method sends; redis-py's client-side DataError checks, raised before anything is sent;
argument types redis-py's encoder refuses; replies decoded or not by the facade's own
`decode_responses` (two facades over one engine differ); and the reply callbacks (entries as
(id, {field: value}), XPENDING as a dict, XINFO with str keys, OK as True). The same stream
methods are compared with redis-py itself in tests/differential/test_redis_py_compat.py; the
sorted set, hash, set and function methods here (TYPE_CALLS: each call made on the facade and
on redis-py connected to redis-server, every result compared), with the Redis 7.2+ and 8.x
options redis-server 7.0 lacks checked against redis.io's replies.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.redis_api import DataError, RedisAPI


class Sent(Exception):
    """Raised by a Recorder told to stop once a command is sent."""


class Recorder:
    """An engine that records each argv and replies with what it is given (raises it, if it
    is an exception)."""

    def __init__(self, reply: Any = None) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.reply = reply

    def execute(self, *args: Any) -> Any:
        self.sent.append(args)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


def sent_by(method: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
    engine = Recorder(Sent())
    with pytest.raises(Sent):
        getattr(RedisAPI(engine), method)(*args, **kwargs)
    [argv] = engine.sent
    return argv


@pytest.fixture
def engine() -> Any:
    with Engine() as e:
        yield e


# --- the argv sent ---------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "args", "kwargs", "argv"), [
    ("xadd", ("s", {"a": "1", "b": "2"}), {}, (b"XADD", "s", "*", "a", "1", "b", "2")),
    ("xadd", ("s", {"a": "1"}), {"maxlen": 5, "nomkstream": True, "limit": 9},
     (b"XADD", "s", b"NOMKSTREAM", b"MAXLEN", b"~", "5", b"LIMIT", 9, "*", "a", "1")),
    ("xadd", ("s", {"a": "1"}), {"minid": "3-0", "approximate": False, "ref_policy": "ACKED"},
     (b"XADD", "s", "ACKED", b"MINID", "3-0", "*", "a", "1")),
    ("xadd", ("s", {"a": "1"}), {"idmp": ("p", b"i")},
     (b"XADD", "s", b"IDMP", "p", b"i", "*", "a", "1")),
    ("xrange", ("s",), {}, (b"XRANGE", "s", "-", "+")),
    ("xrevrange", ("s",), {"count": 2}, (b"XREVRANGE", "s", "+", "-", b"COUNT", "2")),
    ("xtrim", ("s",), {"minid": "5-0", "limit": 3, "ref_policy": "DELREF"},
     (b"XTRIM", "s", b"MINID", b"~", "5-0", b"LIMIT", 3, "DELREF")),
    ("xdelex", ("s", "1-0", "2-0"), {}, (b"XDELEX", "s", "KEEPREF", "IDS", 2, "1-0", "2-0")),
    ("xackdel", ("s", "g", "1-0"), {"ref_policy": "ACKED"},
     (b"XACKDEL", "s", "g", "ACKED", "IDS", 1, "1-0")),
    ("xnack", ("s", "g", "FAIL", "1-0"), {"retrycount": 2, "force": True},
     (b"XNACK", "s", "g", "FAIL", "IDS", 1, "1-0", b"RETRYCOUNT", 2, b"FORCE")),
    ("xread", ({"a": 0, "b": "$"},), {"count": 2, "block": 10, "max_count": 4, "max_size": 9},
     (b"XREAD", b"BLOCK", "10", b"COUNT", "2", b"MAXCOUNT", "4", b"MAXSIZE", "9",
      b"STREAMS", "a", "b", 0, "$")),
    ("xreadgroup", ("g", "c", {"a": ">"}), {"count": 1, "block": 0, "noack": True,
                                             "claim_min_idle_time": 50},
     (b"XREADGROUP", b"GROUP", "g", "c", b"COUNT", "1", b"BLOCK", "0", b"NOACK", b"CLAIM", 50,
      b"STREAMS", "a", ">")),
    ("xgroup_create", ("s", "g", "0"), {"mkstream": True, "entries_read": 3},
     (b"XGROUP", b"CREATE", "s", "g", "0", b"MKSTREAM", "ENTRIESREAD", 3)),
    ("xgroup_setid", ("s", "g", "5-0"), {"entries_read": 1},
     (b"XGROUP", b"SETID", "s", "g", "5-0", "ENTRIESREAD", 1)),
    ("xcfgset", ("s",), {"idmp_duration": 60, "idmp_maxsize": 10},
     (b"XCFGSET", "s", b"IDMP-DURATION", 60, b"IDMP-MAXSIZE", 10)),
    ("xpending_range", ("s", "g", "-", "+", 10), {"consumername": "c", "idle": 5},
     (b"XPENDING", "s", "g", "IDLE", 5, "-", "+", 10, "c")),
    ("xclaim", ("s", "g", "c", 100, ["1-0"]), {"idle": 1, "time": 2, "retrycount": 3,
                                              "force": True, "justid": True},
     (b"XCLAIM", "s", "g", "c", "100", "1-0", b"IDLE", "1", b"TIME", "2", b"RETRYCOUNT", "3",
      b"FORCE", b"JUSTID")),
    ("xautoclaim", ("s", "g", "c", 100), {"start_id": "1-0", "count": 5, "justid": True},
     (b"XAUTOCLAIM", "s", "g", "c", 100, "1-0", b"COUNT", 5, b"JUSTID")),
    ("scan", (3,), {"match": "s*", "count": 10, "_type": "stream"},
     (b"SCAN", 3, b"MATCH", "s*", b"COUNT", 10, b"TYPE", "stream")),
    ("flushall", (), {"asynchronous": True}, (b"FLUSHALL", b"ASYNC")),
    ("execute_command", ("XGROUP CREATE", "s", "g", "$"), {},
     (b"XGROUP", b"CREATE", "s", "g", "$")),
])
def test_argv_sent(method: str, args: tuple, kwargs: dict, argv: tuple) -> None:
    assert sent_by(method, *args, **kwargs) == argv


# --- redis-py's checks, before anything is sent ------------------------------------------------


@pytest.mark.parametrize(("method", "args", "kwargs", "message"), [
    ("xadd", ("s", {}), {}, "XADD fields must be a non-empty dict"),
    ("xadd", ("s", {"a": 1}), {"maxlen": 1, "minid": "1"}, "Only one of ```maxlen```"),
    ("xadd", ("s", {"a": 1}), {"idmpauto": "p", "id": "1-1"}, "IDMPAUTO and IDMP can only"),
    ("xadd", ("s", {"a": 1}), {"ref_policy": "NOPE"}, "XADD ref_policy must be one of"),
    ("xadd", ("s", {"a": 1}), {"maxlen": -1}, "XADD maxlen must be non-negative integer"),
    ("xrange", ("s",), {"count": 0}, "XRANGE count must be a positive integer"),
    ("xrevrange", ("s",), {"count": "2"}, "XREVRANGE count must be a positive integer"),
    ("xtrim", ("s",), {}, "One of ``maxlen`` or ``minid`` must be specified"),
    ("xdelex", ("s",), {}, "XDELEX requires at least one message ID"),
    ("xackdel", ("s", "g", "1-0"), {"ref_policy": "x"}, "XACKDEL ref_policy must be one of"),
    ("xnack", ("s", "g", "LATER", "1-0"), {}, "XNACK mode must be one of"),
    ("xread", ({"a": 0},), {"block": -1}, "XREAD block must be a non-negative integer"),
    ("xread", ({"a": 0},), {"count": 3, "max_count": 2},
     "XREAD max_count must be greater than or equal to count"),
    ("xread", ({},), {}, "XREAD streams must be a non empty dict"),
    ("xreadgroup", ("g", "c", {"a": ">"}), {"max_size": 0},
     "XREADGROUP max_size must be a positive integer"),
    ("xreadgroup", ("g", "c", {"a": ">"}), {"claim_min_idle_time": -5},
     "XREADGROUP claim_min_idle_time must be a non-negative integer"),
    ("xcfgset", ("s",), {}, "XCFGSET requires at least one of"),
    ("xpending_range", ("s", "g", None, None, None), {"idle": 5}, "if XPENDING is provided"),
    ("xpending_range", ("s", "g", "-", "+", -1), {}, "XPENDING count must be a integer >= 0"),
    ("xclaim", ("s", "g", "c", 1, []), {}, "XCLAIM message_ids must be a non empty list"),
    ("xclaim", ("s", "g", "c", 1, ["1-0"]), {"time": "2"}, "XCLAIM time must be an integer"),
    ("xautoclaim", ("s", "g", "c", -1), {}, "XAUTOCLAIM min_idle_time must be a nonnegative"),
])
def test_data_errors_send_nothing(method: str, args: tuple, kwargs: dict, message: str) -> None:
    engine = Recorder()
    with pytest.raises(DataError) as info:
        getattr(RedisAPI(engine), method)(*args, **kwargs)
    assert str(info.value).startswith(message)
    assert engine.sent == []


def test_an_argument_redis_py_cannot_encode_is_a_data_error(engine: Engine) -> None:
    r = engine.redis()
    with pytest.raises(DataError, match="Invalid input of type: 'bool'"):
        r.xadd("s", {"f": True})
    with pytest.raises(DataError, match="Invalid input of type: 'NoneType'"):
        r.xlen(None)
    assert r.xlen("s") == 0  # nothing was added


def test_data_error_is_a_value_error() -> None:
    assert issubclass(DataError, ValueError)


# --- replies: decoded or not, and redis-py's callbacks --------------------------------------------


def test_decode_responses_belongs_to_each_facade(engine: Engine) -> None:
    raw, text = engine.redis(), engine.redis(decode_responses=True)
    assert raw.xadd("s", {"f": "v"}, id="1-1") == b"1-1"
    assert text.xadd("s", {"f": "w"}, id="2-1") == "2-1"
    assert raw.xrange("s") == [(b"1-1", {b"f": b"v"}), (b"2-1", {b"f": b"w"})]
    assert text.xrange("s") == [("1-1", {"f": "v"}), ("2-1", {"f": "w"})]
    assert raw.type("s") == b"stream" and text.type("s") == "stream"
    assert text.execute_command("ECHO", "x", NEVER_DECODE=True) == b"x"


def test_callbacks_shape_the_replies(engine: Engine) -> None:
    r = engine.redis()
    assert r.xgroup_create("s", "g", id="$", mkstream=True) is True
    assert r.xadd("s", {"f": "v"}, id="1-0") == b"1-0"
    assert r.xreadgroup("g", "c", {"s": ">"}) == [[b"s", [(b"1-0", {b"f": b"v"})]]]
    assert r.xpending("s", "g") == {"pending": 1, "min": b"1-0", "max": b"1-0",
                                    "consumers": [{"name": b"c", "pending": 1}]}
    [row] = r.xpending_range("s", "g", "-", "+", 10)
    assert (row["message_id"], row["consumer"], row["times_delivered"]) == (b"1-0", b"c", 1)
    assert r.xclaim("s", "g", "d", 0, ["1-0"], justid=True) == [b"1-0"]
    assert r.xautoclaim("s", "g", "e", 0) == [b"0-0", [(b"1-0", {b"f": b"v"})], []]
    info = r.xinfo_stream("s")
    assert info["length"] == 1 and info["last-entry"] == (b"1-0", {b"f": b"v"})
    assert [g["name"] for g in r.xinfo_groups("s")] == [b"g"]
    assert [c["name"] for c in r.xinfo_consumers("s", "g")] == [b"c", b"d", b"e"]
    assert r.xgroup_destroy("s", "g") is True
    assert r.ping() is True
    assert r.scan(0) == (0, [b"s"])
    assert r.xread({"missing": 0}) == []


def test_error_replies_raise_and_empty_response_replaces_them(engine: Engine) -> None:
    r = engine.redis()
    with pytest.raises(ReplyError, match="no such key"):
        r.xinfo_groups("missing")
    assert r.execute_command("XINFO GROUPS", "missing", EMPTY_RESPONSE=[]) == []


def test_a_facade_over_any_executor() -> None:
    """Anything with `execute` serves: the engine is reached through it alone."""
    recorder = Recorder([[b"1-0", [b"f", b"v"]]])
    assert RedisAPI(recorder, decode_responses=True).xrange("s") == [("1-0", {"f": "v"})]
    assert recorder.sent == [(b"XRANGE", "s", "-", "+")]


# --- scripting -------------------------------------------------------------------------------


def test_eval_evalsha_script_commands_and_register_script() -> None:
    pytest.importorskip("lupa")
    r = Engine().redis(decode_responses=True)
    assert r.eval("return redis.call('SET', KEYS[1], ARGV[1])", 1, "k", "v") == "OK"
    assert r.eval_ro("return redis.call('GET', KEYS[1])", 1, "k") == "v"
    sha = r.script_load("return ARGV[1]")
    assert isinstance(sha, str) and len(sha) == 40
    assert r.evalsha(sha, 0, "x") == "x"
    assert r.evalsha_ro(sha, 0, "y") == "y"
    assert r.script_exists(sha, "0" * 40) == [True, False]
    incr = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
    assert incr(keys=["n"], args=[5]) == 5  # NOSCRIPT: loaded, then run
    assert r.script_flush() is True
    assert r.script_exists(sha) == [False]
    assert incr(keys=["n"], args=[1]) == 6
    with pytest.raises(DataError):
        r.script_flush("LATER")
    with pytest.raises(ReplyError, match="^NOTBUSY"):
        r.script_kill()


# --- sorted sets, hashes, sets, functions: the same calls on redis-py and redis-server ---------

LIBRARY = ("#!lua name=mylib\n"
           "redis.register_function('echo', function(keys, args) return args[1] end)\n"
           "redis.register_function{function_name='get', callback=function(keys, args) "
           "return redis.call('HGET', keys[1], args[1]) end, flags={'no-writes'}}\n")


def _sorted(value: Any) -> Any:
    """A reply whose order is random (SPOP, SRANDMEMBER, a SCAN of a hash table), sorted."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], list):
        return value[0], sorted(value[1])
    return sorted(value)


def _functions_sorted(value: list) -> list:
    """FUNCTION LIST with each library's functions sorted (Redis lists them in its dict's
    order, which its hash seed randomises)."""
    def library(fields: list) -> list:
        return [x for k, v in zip(fields[::2], fields[1::2], strict=True)
                for x in (k, sorted(v) if k in (b"functions", "functions") else v)]

    return [library(fields) for fields in value]


def _pairs_sorted(value: list) -> list:
    """A flat [member, score, ...] reply of random order, its pairs sorted."""
    return sorted(zip(value[::2], value[1::2], strict=True))


# (method, args, kwargs, normalise): run in order on a fresh facade and on redis-py connected
# to redis-server 7.0 (RESP2, as the facade's replies are shaped), every result compared. The
# scores are exact in binary (7.0 writes %.17g, 8.x the shortest text: the same for these).
TYPE_CALLS: list[tuple[str, tuple, dict, Any]] = [
    ("zadd", ("z", {"a": 1, "b": 2.5, "c": 3.25, "d": -4}), {}, None),
    ("zadd", ("z", {"a": 5}), {"nx": True}, None),
    ("zadd", ("z", {"a": 1.5}), {"xx": True, "ch": True}, None),
    ("zadd", ("z", {"a": 1}), {"incr": True}, None),
    ("zadd", ("z", {"zz": 1}), {"incr": True, "xx": True}, None),
    ("zadd", ("z", {"e": 10, "b": 1}), {"gt": True, "ch": True}, None),
    ("zadd", ("lex", {"a": 0, "b": 0, "c": 0, "d": 0, "e": 0}), {}, None),
    ("zcard", ("z",), {}, None),
    ("zcount", ("z", "-inf", "(3"), {}, None),
    ("zlexcount", ("lex", "[b", "+"), {}, None),
    ("zscore", ("z", "a"), {}, None),
    ("zscore", ("z", "nope"), {}, None),
    ("zmscore", ("z", ["a", "nope", "e"]), {}, None),
    ("zincrby", ("z", 0.25, "b"), {}, None),
    ("zrange", ("z", 0, -1), {}, None),
    ("zrange", ("z", 0, -1), {"withscores": True}, None),
    ("zrange", ("z", 0, 2), {"desc": True, "withscores": True}, None),
    ("zrange", ("z", 0, "+inf"), {"byscore": True, "offset": 1, "num": 2,
                                  "withscores": True, "score_cast_func": int}, None),
    ("zrange", ("lex", "[b", "(e"), {"bylex": True, "desc": False}, None),
    ("zrange", ("lex", "+", "-"), {"bylex": True, "desc": True, "offset": 0, "num": 2}, None),
    ("zrevrange", ("z", 0, 1), {"withscores": True}, None),
    ("zrangebyscore", ("z", 1, "+inf"), {"start": 0, "num": 2, "withscores": True}, None),
    ("zrevrangebyscore", ("z", "+inf", "-inf"), {"withscores": True}, None),
    ("zrangebylex", ("lex", "[b", "(d"), {}, None),
    ("zrevrangebylex", ("lex", "+", "-"), {"start": 1, "num": 2}, None),
    ("zrank", ("z", "c"), {}, None),
    ("zrank", ("z", "nope"), {}, None),
    ("zrevrank", ("z", "c"), {}, None),
    ("zrangestore", ("dst", "z", 0, 1), {}, None),
    ("zrangestore", ("dst2", "z", 2, 3), {"byscore": True}, None),
    ("zunionstore", ("u", ["z", "dst"]), {}, None),
    ("zunionstore", ("u2", {"z": 2, "dst": 1}), {"aggregate": "MAX"}, None),
    ("zinterstore", ("i", ["z", "dst"]), {}, None),
    ("zunion", (["z", "dst"],), {"withscores": True}, None),
    ("zunion", (["z", "dst"],), {}, None),
    ("zinter", ({"z": 1, "dst": 3},), {"aggregate": "min", "withscores": True}, None),
    ("zdiff", (["z", "dst"],), {}, None),
    ("zdiff", (["z", "dst"],), {"withscores": True}, None),
    ("zdiffstore", ("diff", ["z", "dst"]), {}, None),
    ("zintercard", (2, ["z", "dst"]), {}, None),
    ("zintercard", (2, ["z", "dst"]), {"limit": 1}, None),
    ("zscan", ("z",), {}, None),
    ("zscan", ("z",), {"match": "[ab]", "score_cast_func": str}, None),
    ("zscan_iter", ("z",), {}, list),
    ("zrandmember", ("lex", 10), {}, _sorted),
    ("zrandmember", ("i", 10), {"withscores": True}, _pairs_sorted),
    ("zrandmember", ("nope",), {}, None),
    ("zpopmin", ("z",), {}, None),
    ("zpopmax", ("z", 2), {}, None),
    ("zpopmin", ("nope",), {}, None),
    ("zmpop", (1, ["u"]), {"min": True}, None),
    ("zmpop", (2, ["nope", "u"]), {"max": True, "count": 2}, None),
    ("zmpop", (1, ["nope"]), {"max": True}, None),
    ("bzpopmin", (["nope", "u2"], 1), {}, None),
    ("bzpopmax", ("u2",), {"timeout": 1}, None),
    ("bzpopmin", ("nope", 0.01), {}, None),
    ("bzmpop", (1, 1, ["u2"]), {"min": True, "count": 2}, None),
    ("zrem", ("z", "a", "nope"), {}, None),
    ("zremrangebyrank", ("u", 0, 0), {}, None),
    ("zremrangebyscore", ("u2", "-inf", 0), {}, None),
    ("zremrangebylex", ("lex", "-", "[b"), {}, None),
    ("zrange", ("lex", 0, -1), {}, None),
    ("zadd", ("z", {}), {}, None),  # redis-py's DataError
    ("zrange", ("z", 0, 1), {"byscore": True, "bylex": True}, None),
    ("zinterstore", ("i", ["z"]), {"aggregate": "avg"}, None),
    # hashes
    ("hset", ("h", "f", "v"), {}, None),
    ("hset", ("h",), {"mapping": {"g": "w", "n": 1}}, None),
    ("hset", ("h", "f", "v2"), {"items": ["a", 1, "b", 2], "mapping": {"c": 3}}, None),
    ("hset", ("h",), {}, None),  # DataError
    ("hsetnx", ("h", "f", "x"), {}, None),
    ("hsetnx", ("h", "x", "y"), {}, None),
    ("hget", ("h", "f"), {}, None),
    ("hget", ("h", "nope"), {}, None),
    ("hmget", ("h", ["f", "g", "nope"]), {}, None),
    ("hmget", ("h", "f", "g"), {}, None),
    ("hgetall", ("h",), {}, None),
    ("hgetall", ("nope",), {}, None),
    ("hdel", ("h", "a", "nope"), {}, None),
    ("hincrby", ("h", "n", 5), {}, None),
    ("hincrby", ("h", "n"), {}, None),
    ("hincrbyfloat", ("h", "n", 0.5), {}, None),
    ("hincrbyfloat", ("h", "fl"), {}, None),
    ("hincrby", ("h", "f", 1), {}, None),  # ERR hash value is not an integer
    ("hkeys", ("h",), {}, None),
    ("hvals", ("h",), {}, None),
    ("hlen", ("h",), {}, None),
    ("hexists", ("h", "f"), {}, None),
    ("hexists", ("h", "nope"), {}, None),
    ("hstrlen", ("h", "f"), {}, None),
    ("hrandfield", ("h", 20), {}, _sorted),
    ("hrandfield", ("h", 20), {"withvalues": True}, _pairs_sorted),
    ("hrandfield", ("nope",), {}, None),
    ("hscan", ("h",), {}, None),
    ("hscan", ("h", 0), {"match": "f*", "count": 100}, None),
    ("hscan_iter", ("h",), {}, list),
    ("zadd", ("h", {"x": 1}), {}, None),  # WRONGTYPE
    ("hget", ("z", "f"), {}, None),  # WRONGTYPE
    # sets
    ("sadd", ("s", "a", "b", "c"), {}, None),
    ("sadd", ("s2", "b", "c", "d", "e"), {}, None),
    ("sadd", ("ints", 3, 1, 2), {}, None),
    ("srem", ("s2", "e", "nope"), {}, None),
    ("scard", ("s",), {}, None),
    ("smembers", ("s",), {}, None),
    ("smembers", ("nope",), {}, None),
    ("sismember", ("s", "a"), {}, None),
    ("sismember", ("s", "x"), {}, None),
    ("smismember", ("s", ["a", "x"]), {}, None),
    ("smismember", ("s", "a", "b"), {}, None),
    ("smove", ("s", "s2", "a"), {}, None),
    ("smove", ("s", "s2", "nope"), {}, None),
    ("sdiff", (["s2", "s"],), {}, None),
    ("sdiff", ("s2", "s"), {}, None),
    ("sinter", (["s", "s2"],), {}, None),
    ("sunion", ("s", "s2", "ints"), {}, None),
    ("sdiffstore", ("sd", ["s2", "s"]), {}, None),
    ("sinterstore", ("si", "s", "s2"), {}, None),
    ("sunionstore", ("su", ["s", "s2"]), {}, None),
    ("sintercard", (2, ["s", "s2"]), {}, None),
    ("sintercard", (2, ["s", "s2"]), {"limit": 1}, None),
    ("sscan", ("ints",), {}, None),
    ("sscan", ("su",), {"match": "*"}, _sorted),
    ("sscan_iter", ("su",), {}, _sorted),
    ("srandmember", ("su", 10), {}, _sorted),
    ("srandmember", ("nope",), {}, None),
    ("spop", ("nope",), {}, None),
    ("spop", ("sd", 10), {}, _sorted),
    ("spop", ("ints",), {"count": 0}, None),
    ("sadd", ("z", "x"), {}, None),  # WRONGTYPE
    # functions, COPY
    ("function_flush", (), {}, None),
    ("function_load", (LIBRARY,), {}, None),
    ("function_load", (LIBRARY,), {}, None),  # already exists
    ("function_load", (LIBRARY,), {"replace": True}, None),
    ("function_list", (), {}, _functions_sorted),
    ("function_list", ("my*",), {"withcode": True}, _functions_sorted),
    ("function_list", ("nope",), {}, None),
    ("fcall", ("echo", 0, "hello"), {}, None),
    ("fcall", ("get", 1, "h", "f"), {}, None),
    ("fcall_ro", ("get", 1, "h", "g"), {}, None),
    ("fcall_ro", ("echo", 0, "x"), {}, None),  # a function without no-writes
    ("fcall", ("nope", 0), {}, None),
    ("function_delete", ("mylib",), {}, None),
    ("function_delete", ("mylib",), {}, None),
    ("copy", ("h", "h3"), {}, None),
    ("copy", ("h", "h3"), {}, None),
    ("copy", ("s2", "h3"), {"replace": True}, None),
    ("copy", ("z", "z"), {"destination_db": 1}, None),
    ("smembers", ("h3",), {}, None),
]


def _outcome(client: Any, method: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
    """("ok", result) or ("error", its message): a ReplyError and redis-py's ResponseError
    alike (redis-py's drops the "ERR " an error line starts with), the facade's DataError and
    redis-py's alike."""
    import redis

    try:
        return "ok", getattr(client, method)(*args, **kwargs)
    except (ReplyError, redis.ResponseError) as err:
        return "error", str(err).removeprefix("ERR ")
    except (DataError, redis.DataError, ValueError) as err:
        return "data error", str(err)


@pytest.mark.redis
@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
def test_type_methods_equal_redis_py_on_redis_server(decode: bool, redis_server: Any) -> None:
    import redis

    oracle = redis.Redis(host=redis_server.host, port=redis_server.port, protocol=2,
                         decode_responses=decode)
    oracle.flushall()
    oracle.function_flush()
    try:
        with Engine() as engine:
            facade = engine.redis(decode_responses=decode)
            for method, args, kwargs, normalise in TYPE_CALLS:
                got, want = (_outcome(r, method, args, kwargs) for r in (facade, oracle))
                if normalise is not None:
                    got, want = ((kind, normalise(value) if kind == "ok" else value)
                                 for kind, value in (got, want))
                assert got == want, (method, args, kwargs)
    finally:
        oracle.function_flush()
        oracle.flushall()
        oracle.close()


def test_type_methods_of_redis_8() -> None:
    """Redis 7.2+ and 8.x options (ZRANK WITHSCORE, hash field expiry, HGETDEL, HGETEX,
    HSETEX, HSCAN NOVALUES) and FUNCTION DUMP/RESTORE: the replies redis.io documents, through
    redis-py's shapes."""
    import datetime

    r = Engine().redis()
    r.zadd("z", {"a": 1, "b": 2.5})
    assert r.zrank("z", "b", withscore=True) == [1, 2.5]
    assert r.zrevrank("z", "b", withscore=True, score_cast_func=int) == [0, 2]
    assert r.zrank("z", "nope", withscore=True) is None
    r.hset("h", mapping={"f": "v", "g": "w", "k": "x"})
    assert r.hscan("h", no_values=True) == (0, [b"f", b"g", b"k"])
    assert list(r.hscan_iter("h", no_values=True)) == [b"f", b"g", b"k"]
    assert r.hexpire("h", 100, "f", "nope") == [1, -2]
    assert r.hexpire("h", datetime.timedelta(seconds=50), "f", gt=True) == [0]
    assert r.httl("h", "f", "g") in ([100, -1], [99, -1])  # (the engine's clock is the wall's)
    assert r.hpexpire("h", 5000, "g", nx=True) == [1]
    assert 4000 < r.hpttl("h", "g")[0] <= 5000
    assert r.hexpireat("h", 4102444800, "k") == [1]  # 2100-01-01
    assert r.hexpiretime("h", "k") == [4102444800]
    assert r.hpexpireat("h", 4102444800123, "k", xx=True) == [1]
    assert r.hpexpiretime("h", "k") == [4102444800123]
    assert r.hpersist("h", "f", "nope") == [1, -2]
    with pytest.raises(ValueError, match="Only one of 'nx', 'xx', 'gt', 'lt'"):
        r.hexpire("h", 1, "f", nx=True, xx=True)
    assert r.hgetdel("h", "k", "nope") == [b"x", None]
    with pytest.raises(DataError, match="'hgetdel' should have at least one key"):
        r.hgetdel("h")
    assert r.hgetex("h", "f", ex=30) == [b"v"]
    assert r.httl("h", "f") in ([30], [29])
    assert r.hgetex("h", "f", persist=True) == [b"v"] and r.httl("h", "f") == [-1]
    with pytest.raises(DataError, match="mutually exclusive"):
        r.hgetex("h", "f", ex=1, px=1)
    assert r.hsetex("h", "n", "1", mapping={"m": "2"}, px=9000) == 1
    assert all(8000 < ttl <= 9000 for ttl in r.hpttl("h", "n", "m"))
    assert r.hsetex("h", "n", "3", data_persist_option="FNX") == 0
    assert r.hsetex("h", items=["n", "4"], keepttl=True) == 1
    assert r.hget("h", "n") == b"4" and 8000 < r.hpttl("h", "n")[0] <= 9000
    with pytest.raises(DataError, match="odd number of items"):
        r.hsetex("h", items=["n"])
    r.function_load(LIBRARY)
    payload = r.function_dump()
    assert isinstance(payload, bytes)
    assert r.function_flush() is True and r.function_list() == []
    assert r.function_restore(payload) is True
    assert r.fcall("echo", 0, "back") == b"back"
    assert r.function_delete("mylib") is True
    assert r.function_restore(payload, "REPLACE") is True


@pytest.mark.parametrize(("method", "args", "kwargs", "argv"), [
    ("zadd", ("z", {"a": 1, "b": 2}), {"xx": True, "ch": True, "gt": True},
     (b"ZADD", "z", b"XX", b"CH", b"GT", 1, "a", 2, "b")),
    ("zrange", ("z", 0, 5), {"byscore": True, "desc": True, "offset": 1, "num": 2,
                             "withscores": True},
     (b"ZRANGE", "z", 0, 5, "BYSCORE", "REV", "LIMIT", 1, 2, "WITHSCORES")),
    ("zunionstore", ("d", {"a": 2, "b": 3}), {"aggregate": "MAX"},
     (b"ZUNIONSTORE", "d", 2, "a", "b", b"WEIGHTS", 2, 3, b"AGGREGATE", "MAX")),
    ("bzpopmin", (["a", "b"],), {"timeout": 2}, (b"BZPOPMIN", "a", "b", 2)),
    ("hset", ("h", "k", "v"), {"items": ["i", 1], "mapping": {"m": 2}},
     (b"HSET", "h", "i", 1, "k", "v", "m", 2)),
    ("hexpire", ("h", 10, "a", "b"), {"lt": True},
     (b"HEXPIRE", "h", 10, "LT", "FIELDS", 2, "a", "b")),
    ("hsetex", ("h", "k", "v"), {"ex": 5, "data_persist_option": "FXX"},
     (b"HSETEX", "h", "EX", 5, "FXX", "FIELDS", 1, "k", "v")),
    ("hscan", ("h", 3), {"match": "a*", "count": 9, "no_values": True},
     (b"HSCAN", "h", 3, b"MATCH", "a*", b"COUNT", 9, b"NOVALUES")),
    ("smismember", ("s", ["a", "b"], "c"), {}, (b"SMISMEMBER", "s", "a", "b", "c")),
    ("sdiffstore", ("d", "a", "b"), {}, (b"SDIFFSTORE", "d", "a", "b")),
    ("function_load", ("code",), {"replace": True}, (b"FUNCTION", b"LOAD", "REPLACE", "code")),
    ("function_list", (), {"withcode": True},
     (b"FUNCTION", b"LIST", "LIBRARYNAME", "*", "WITHCODE")),
    ("copy", ("a", "b"), {"destination_db": 2, "replace": True},
     (b"COPY", "a", "b", "DB", 2, "REPLACE")),
])
def test_type_argv_sent(method: str, args: tuple, kwargs: dict, argv: tuple) -> None:
    assert sent_by(method, *args, **kwargs) == argv


def test_type_methods_through_a_shared_engine(shared_dir: Any) -> None:
    """A shared directory's Engine (engine.services.shared_client) builds the same facade."""
    with Engine.open(str(shared_dir), shared=True) as engine:
        r = engine.redis(decode_responses=True)
        assert r.zadd("z", {"a": 1, "b": 2}) == 2
        assert r.zrange("z", 0, -1, withscores=True) == [("a", 1.0), ("b", 2.0)]
        assert r.hset("h", mapping={"f": "v"}) == 1 and r.hgetall("h") == {"f": "v"}
        assert r.sadd("s", "x", "y") == 2 and r.smembers("s") == {"x", "y"}
        assert r.bzpopmin("z", 1) == ("z", "a", 1.0)
        assert r.copy("h", "h2") is True and r.hget("h2", "f") == "v"
