"""The redis-py facade (engine.runtime.redis_api.RedisAPI) on its own.

Checked here, against a recording engine (no command runs) and against a real Engine: the argv
each method sends (a command the method declares it sends); redis-py's client-side DataError
checks, raised before anything is sent; argument types redis-py's encoder refuses; replies
decoded or not by the facade's own `decode_responses` (two facades over one engine differ); and
the reply callbacks (entries as (id, {field: value}), XPENDING as a dict, XINFO with str keys,
OK as True). The same stream methods are compared with redis-py itself in
tests/differential/test_redis_py_compat.py; the sorted set, hash, set and function methods here
(TYPE_CALLS: each call made on the facade and on redis-py connected to redis-server, every
result compared), with the Redis 7.2+ and 8.x options redis-server 7.0 lacks checked against
redis.io's replies.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime.clients import base
from streamkeep.engine.runtime.redis_api import DataError, RedisAPI, execute_command_callbacks
from tests.support.facade_calls import assert_declared


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
    """The argv `method` sends, which must be a command it declares (clients.base.sends)."""
    engine = Recorder(Sent())
    with pytest.raises(Sent):
        getattr(RedisAPI(engine), method)(*args, **kwargs)
    [argv] = engine.sent
    if method != "execute_command":  # (any command)
        assert_declared(method, argv)
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


# --- strings, expiry and server calls ------------------------------------------------------------
# The redis-py facade's string, expiry and server calls (engine.runtime.redis_api.RedisAPI).
#
# Three checks, as tests/engine/runtime/test_redis_api.py makes them for the other types:
#
# * the argv each method sends and the client-side DataError it raises, compared with what
#   redis-py 8.1's own `redis.Redis` method hands to its `execute_command` (no server needed);
# * STRING_CALLS: each call made in order on `Engine().redis()` and on redis-py (RESP2) connected
#   to redis-server 7.0, `decode_responses` off and on, every outcome compared: the value, or the
#   kind of error (a reply error, redis-py's DataError, another ValueError) and its message.
#   Time-dependent replies go through a normaliser (a TTL within a second of what was set) or use
#   fixed absolute times (EXPIREAT 2100-01-01, then EXPIRETIME);
# * redis-py's RESP2 reply parsers ported into the module (parse_info, parse_client_list, ...):
#   fed the same texts as redis-py's own, the engine's INFO and redis-server's among them.
#
# Redis 8.x options redis-server 7.0 lacks (SET IFEQ/IFNE/IFDEQ/IFDNE, DELEX, DIGEST, MSETEX,
# WAITAOF) are checked on the engine alone, against the replies redis.io documents.

FAR = 4102444800  # 2100-01-01T00:00:00Z: absolute expiry times whose EXPIRETIME is exact


# --- argv and client-side checks, against redis-py's own methods -------------------------------


class _Captured(Exception):
    """Raised by the capturing redis-py client once a method calls execute_command."""

    def __init__(self, args: tuple[Any, ...], options: dict[str, Any]) -> None:
        super().__init__()
        self.args_sent = args
        self.options = options


def _redis_py_argv(method: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
    """What redis-py 8.1's method sends, as the facade hands it to the engine (the command
    name split and encoded), or ("data error", message) / ("value error", message)."""
    import redis

    class Capture(redis.Redis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            raise _Captured(args, options)

    client = Capture(protocol=2)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            getattr(client, method)(*args, **kwargs)
    except _Captured as sent:
        name, *rest = sent.args_sent
        return "argv", (*name.encode().split(), *rest)
    except redis.DataError as err:
        return "data error", str(err)
    except ValueError as err:
        return "value error", str(err)
    finally:
        client.close()
    raise AssertionError(f"redis-py's {method} sent nothing")


def _facade_argv(method: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
    try:
        return "argv", sent_by(method, *args, **kwargs)
    except DataError as err:
        return "data error", str(err)
    except ValueError as err:
        return "value error", str(err)


class _Persist:
    """redis-py's DataPersistOptions stand-in (an enum member: its `.value` is sent)."""

    value = "NX"


ARGV_CASES: list[tuple[str, tuple, dict]] = [
    ("get", ("k",), {}),
    ("set", ("k", "v"), {}),
    ("set", ("k", 1.5), {"ex": 10, "nx": True}),
    ("set", ("k", b"v"), {"px": datetime.timedelta(seconds=2), "xx": True, "get": True}),
    ("set", ("k", "v"), {"ex": datetime.timedelta(minutes=1)}),
    ("set", ("k", "v"), {"ex": "30"}),
    ("set", ("k", "v"), {"exat": FAR, "get": True}),
    ("set", ("k", "v"), {"pxat": datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)}),
    ("set", ("k", "v"), {"exat": datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)}),
    ("set", ("k", "v"), {"keepttl": True, "get": True}),
    ("set", ("k", "v"), {"ifeq": "old"}),
    ("set", ("k", "v"), {"ifne": b"old", "ex": 5}),
    ("set", ("k", "v"), {"ifdeq": "abcdef0123456789"}),
    ("set", ("k", "v"), {"ifdne": "abcdef0123456789", "get": True}),
    ("set", ("k", "v"), {"ex": 1, "px": 1}),
    ("set", ("k", "v"), {"ex": 1, "keepttl": True}),
    ("set", ("k", "v"), {"exat": 1, "pxat": 1}),
    ("set", ("k", "v"), {"nx": True, "xx": True}),
    ("set", ("k", "v"), {"xx": True, "ifeq": "x"}),
    ("set", ("k", "v"), {"ex": "ten"}),
    ("set", ("k", "v"), {"ex": 1.5}),
    ("set", ("k", "v"), {"px": "10"}),
    ("setnx", ("k", "v"), {}),
    ("setex", ("k", 10, "v"), {}),
    ("setex", ("k", datetime.timedelta(seconds=90), "v"), {}),
    ("psetex", ("k", 1500, "v"), {}),
    ("psetex", ("k", datetime.timedelta(seconds=1.5), "v"), {}),
    ("getset", ("k", "v"), {}),
    ("getdel", ("k",), {}),
    ("getex", ("k",), {}),
    ("getex", ("k",), {"px": 100}),
    ("getex", ("k",), {"exat": datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)}),
    ("getex", ("k",), {"persist": True}),
    ("getex", ("k",), {"ex": 1, "persist": True}),
    ("getex", ("k",), {"ex": "x"}),
    ("mget", (["a", "b"],), {}),
    ("mget", ("a", "b", "c"), {}),
    ("mget", ([],), {}),
    ("mset", ({"a": 1, "b": "2"},), {}),
    ("msetnx", ({"a": 1, b"b": 2.5},), {}),
    ("msetex", ({"a": 1, "b": 2},), {"data_persist_option": _Persist(), "ex": 5}),
    ("msetex", ({"a": 1},), {"keepttl": True}),
    ("msetex", ({"a": 1},), {"pxat": FAR * 1000}),
    ("msetex", ({"a": 1},), {"ex": 1, "keepttl": True}),
    ("incr", ("k",), {}),
    ("incr", ("k", 5), {}),
    ("incrby", ("k",), {}),
    ("incrbyfloat", ("k",), {}),
    ("incrbyfloat", ("k", -0.5), {}),
    ("decr", ("k",), {}),
    ("decrby", ("k", 3), {}),
    ("append", ("k", "v"), {}),
    ("strlen", ("k",), {}),
    ("getrange", ("k", 0, -1), {}),
    ("setrange", ("k", 3, "v"), {}),
    ("substr", ("k", 1), {}),
    ("substr", ("k", 1, 2), {}),
    ("lcs", ("a", "b"), {}),
    ("lcs", ("a", "b"), {"len": True}),
    ("lcs", ("a", "b"), {"idx": True, "minmatchlen": 3, "withmatchlen": True}),
    ("lcs", ("a", "b"), {"minmatchlen": None}),
    ("delex", ("k",), {}),
    ("delex", ("k",), {"ifne": "v"}),
    ("delex", ("k",), {"ifdeq": "0123"}),
    ("delex", ("k",), {"ifeq": "a", "ifne": "b"}),
    ("digest", ("k",), {}),
    ("expire", ("k", 10), {}),
    ("expire", ("k", datetime.timedelta(hours=1)), {"nx": True}),
    ("expire", ("k", 10), {"xx": True, "gt": True, "lt": True}),
    ("pexpire", ("k", datetime.timedelta(seconds=1.5)), {"gt": True}),
    ("expireat", ("k", datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)), {"lt": True}),
    ("expireat", ("k", FAR), {}),
    ("pexpireat", ("k", datetime.datetime(2100, 1, 1, tzinfo=datetime.UTC)), {"xx": True}),
    ("ttl", ("k",), {}),
    ("pttl", ("k",), {}),
    ("expiretime", ("k",), {}),
    ("pexpiretime", ("k",), {}),
    ("persist", ("k",), {}),
    ("dump", ("k",), {}),
    ("restore", ("k", 0, b"payload"), {}),
    ("restore", ("k", FAR * 1000, b"p"), {"replace": True, "absttl": True, "idletime": "5",
                                          "frequency": 3}),
    ("restore", ("k", 0, b"p"), {"idletime": "soon"}),
    ("restore", ("k", 0, b"p"), {"frequency": "often"}),
    ("object", ("encoding", "k"), {}),
    ("object", ("REFCOUNT", "k"), {}),
    ("info", (), {}),
    ("info", ("server",), {}),
    ("info", ("server", "clients"), {}),
    ("config_get", (), {}),
    ("config_get", ("max*", "hz"), {}),
    ("config_set", ("maxmemory", 0), {}),
    ("config_set", ("maxmemory", 0, "hz", 10), {}),
    ("config_resetstat", (), {}),
    ("lastsave", (), {}),
    ("save", (), {}),
    ("bgsave", (), {}),
    ("bgsave", (), {"schedule": False}),
    ("bgrewriteaof", (), {}),
    ("wait", (0, 100), {}),
    ("waitaof", (1, 0, 100), {}),
    ("memory_usage", ("k",), {}),
    ("memory_usage", ("k",), {"samples": 5}),
    ("memory_usage", ("k",), {"samples": "5"}),
    ("command_count", (), {}),
    ("client_id", (), {}),
    ("client_setname", ("me",), {}),
    ("client_getname", (), {}),
    ("client_list", (), {}),
    ("client_list", ("pubsub",), {}),
    ("client_list", ("NORMAL",), {"client_id": [1, 2]}),
    ("client_list", ("bogus",), {}),
    ("client_list", (), {"client_id": (1, 2)}),
    ("client_list", (), {"client_id": None}),
    ("__setitem__", ("k", "v"), {}),
    ("__delitem__", ("k",), {}),
    ("__contains__", ("k",), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), ARGV_CASES,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(ARGV_CASES)])
def test_argv_and_data_errors_equal_redis_py(method: str, args: tuple, kwargs: dict) -> None:
    assert _facade_argv(method, args, kwargs) == _redis_py_argv(method, args, kwargs)


def test_a_data_error_is_raised_before_anything_is_sent() -> None:
    engine = Recorder()
    r = RedisAPI(engine)
    with pytest.raises(DataError, match="mutually exclusive"):
        r.set("k", "v", ex=1, px=1)
    with pytest.raises(DataError, match="ex must be datetime.timedelta or int"):
        r.set("k", "v", ex=1.5)
    with pytest.raises(DataError, match="CLIENT LIST _type must be one of"):
        r.client_list(_type="bogus")
    with pytest.raises(ValueError, match="Only one of IFEQ/IFNE/IFDEQ/IFDNE"):
        r.delex("k", ifeq="a", ifdne="b")
    assert engine.sent == []


def test_the_new_callbacks_are_in_the_table() -> None:
    """execute_command applies them by name, as redis-py's RESP2 client does."""
    for name in ("SET", "SETNX", "SETEX", "PSETEX", "MSET", "MSETNX", "INCRBYFLOAT", "EXPIRE",
                 "EXPIREAT", "PEXPIRE", "PEXPIREAT", "PERSIST", "INFO", "LASTSAVE", "SAVE",
                 "BGSAVE", "BGREWRITEAOF", "CONFIG GET", "CONFIG SET", "CONFIG RESETSTAT",
                 "CLIENT SETNAME", "CLIENT GETNAME", "CLIENT LIST"):
        assert name in execute_command_callbacks, name


# --- the calls on both backends --------------------------------------------------------------


def _within(expected: int, slack: int) -> Callable[[Any], Any]:
    """A TTL read some time after it was set: True when in [expected - slack, expected]."""
    return lambda value: expected - slack <= value <= expected or value


def _of_type(kind: type) -> Callable[[Any], Any]:
    return lambda value: type(value) is kind or value


def _list_of_dicts(value: Any) -> Any:
    return (isinstance(value, list) and all(isinstance(c, dict) for c in value)) or value


def _info_shape(value: Any) -> Any:
    """The INFO fields both servers report, as parse_info types them."""
    return (type(value["redis_version"]), type(value["uptime_in_seconds"]),
            type(value["connected_clients"]), type(value["used_memory"]),
            type(value["keyspace_hits"]))


def _keyspace(value: Any) -> Any:
    db = value["db0"]
    return db["keys"], db["expires"]


# (method, args, kwargs, normalise): run in order on a fresh facade and on redis-py connected to
# redis-server 7.0, every outcome compared (after `normalise`, when given, on a value).
STRING_CALLS: list[tuple[str, tuple, dict, Any]] = [
    ("set", ("s", "hello"), {}, None),
    ("get", ("s",), {}, None),
    ("get", ("nope",), {}, None),
    ("set", ("s", "x"), {"nx": True}, None),
    ("set", ("s", "world"), {"xx": True, "get": True}, None),
    ("set", ("n", "x"), {"xx": True}, None),
    ("set", ("n", "x"), {"xx": True, "get": True}, None),
    ("set", ("n", 12), {"nx": True, "get": True}, None),
    ("set", ("s", "v"), {"ex": 1, "px": 1}, None),
    ("set", ("s", "v"), {"nx": True, "xx": True}, None),
    ("set", ("s", "v"), {"ex": "abc"}, None),
    ("set", ("s", "v"), {"ex": 0}, None),
    ("set", ("s", "v"), {"px": -5}, None),
    ("set", ("s", True), {}, None),
    ("set", ("s", None), {}, None),
    ("get", ("s",), {}, None),
    ("set", ("e", "v"), {"exat": FAR}, None),
    ("expiretime", ("e",), {}, None),
    ("pexpiretime", ("e",), {}, None),
    ("set", ("e", "w"), {"keepttl": True}, None),
    ("expiretime", ("e",), {}, None),
    ("set", ("e", "w"), {"pxat": FAR * 1000 + 123}, None),
    ("pexpiretime", ("e",), {}, None),
    ("set", ("e", "w"), {"ex": datetime.timedelta(seconds=100)}, None),
    ("ttl", ("e",), {}, _within(100, 2)),
    ("set", ("e", "w"), {"get": True, "px": 50_000}, None),
    ("pttl", ("e",), {}, _within(50_000, 2000)),
    ("set", ("e", "w"), {}, None),
    ("ttl", ("e",), {}, None),
    ("setnx", ("s", "v"), {}, None),
    ("setnx", ("s2", "v"), {}, None),
    ("setex", ("sx", 100, "v"), {}, None),
    ("ttl", ("sx",), {}, _within(100, 2)),
    ("setex", ("sx", 0, "v"), {}, None),
    ("psetex", ("px", datetime.timedelta(seconds=5), "v"), {}, None),
    ("pttl", ("px",), {}, _within(5000, 2000)),
    ("psetex", ("px", -1, "v"), {}, None),
    ("getset", ("s", "new"), {}, None),
    ("getset", ("fresh", "new"), {}, None),
    ("getdel", ("s",), {}, None),
    ("getdel", ("s",), {}, None),
    ("getex", ("s2",), {}, None),
    ("getex", ("s2",), {"ex": 50}, None),
    ("ttl", ("s2",), {}, _within(50, 2)),
    ("getex", ("s2",), {"exat": FAR}, None),
    ("expiretime", ("s2",), {}, None),
    ("getex", ("s2",), {"persist": True}, None),
    ("ttl", ("s2",), {}, None),
    ("getex", ("s2",), {"ex": 1, "persist": True}, None),
    ("getex", ("nope",), {"px": 100}, None),
    ("mset", ({"a": 1, "b": "2", "c": 3.5, b"\xff": b"\x00"},), {}, None),
    ("mget", (["a", "b", "zz", "c"],), {}, None),
    ("mget", ("a", "b"), {}, None),
    ("mget", ([],), {}, None),
    ("msetnx", ({"a": 1, "d": 2},), {}, None),
    ("msetnx", ({"d": 1, "f": 2},), {}, None),
    ("mget", ("d", "f"), {}, None),
    ("incr", ("i",), {}, None),
    ("incr", ("i", 5), {}, None),
    ("incrby", ("i", -2), {}, None),
    ("decr", ("i",), {}, None),
    ("decr", ("i", 10), {}, None),
    ("decrby", ("i", 3), {}, None),
    ("incrby", ("i", "x"), {}, None),
    ("incrby", ("i", 1.5), {}, None),
    ("incrbyfloat", ("fl", 1.5), {}, None),
    ("incrbyfloat", ("fl", "2.25"), {}, None),
    ("incrbyfloat", ("fl",), {}, None),
    ("incrbyfloat", ("fl", "x"), {}, None),
    ("incr", ("c",), {}, None),
    ("incrbyfloat", ("c",), {}, None),
    ("set", ("big", "9223372036854775807"), {}, None),
    ("incr", ("big",), {}, None),
    ("append", ("ap", "ab"), {}, None),
    ("append", ("ap", "cd"), {}, None),
    ("strlen", ("ap",), {}, None),
    ("strlen", ("nope",), {}, None),
    ("getrange", ("ap", 1, 2), {}, None),
    ("getrange", ("ap", -3, -1), {}, None),
    ("getrange", ("nope", 0, 1), {}, None),
    ("substr", ("ap", 1), {}, None),
    ("substr", ("ap", 0, 1), {}, None),
    ("setrange", ("ap", 6, "xy"), {}, None),
    ("get", ("ap",), {}, None),
    ("setrange", ("ap", -1, "x"), {}, None),
    ("setrange", ("sr", 2, "z"), {}, None),
    ("get", ("sr",), {}, None),
    ("mset", ({"k1": "ohmytext", "k2": "mynewtext"},), {}, None),
    ("lcs", ("k1", "k2"), {}, None),
    ("lcs", ("k1", "k2"), {"len": True}, None),
    ("lcs", ("k1", "k2"), {"idx": True}, None),
    ("lcs", ("k1", "k2"), {"idx": True, "minmatchlen": 4, "withmatchlen": True}, None),
    ("lcs", ("k1", "nope"), {}, None),
    ("lcs", ("k1", "k2"), {"len": True, "idx": True}, None),
    # keyspace and expiry
    ("expire", ("a", 100), {}, None),
    ("ttl", ("a",), {}, _within(100, 2)),
    ("expire", ("a", 200), {"nx": True}, None),
    ("expire", ("a", 200), {"gt": True}, None),
    ("expire", ("a", 50), {"lt": True}, None),
    ("expire", ("a", 500), {"lt": True}, None),
    ("ttl", ("a",), {}, _within(50, 2)),
    ("expire", ("nope", 1), {}, None),
    ("expire", ("b", datetime.timedelta(minutes=2)), {"xx": True}, None),
    ("pexpire", ("b", 100_000), {"nx": True}, None),
    ("pttl", ("b",), {}, _within(100_000, 2000)),
    ("pexpire", ("b", 100_000), {"xx": True}, None),
    ("expireat", ("b", FAR), {}, None),
    ("expiretime", ("b",), {}, None),
    ("expireat", ("b", FAR - 10), {"gt": True}, None),
    ("expireat", ("b", FAR - 10), {"lt": True}, None),
    ("expiretime", ("b",), {}, None),
    ("pexpireat", ("c", FAR * 1000 + 500), {}, None),
    ("pexpiretime", ("c",), {}, None),
    ("expiretime", ("c",), {}, None),
    ("pexpireat", ("c", FAR * 1000), {"nx": True}, None),
    ("expire", ("a", 10), {"nx": True, "xx": True}, None),
    ("expire", ("a", 10), {"gt": True, "lt": True}, None),
    ("expire", ("a", "x"), {}, None),
    ("ttl", ("nope",), {}, None),
    ("ttl", ("d",), {}, None),
    ("pttl", ("nope",), {}, None),
    ("pttl", ("d",), {}, None),
    ("expiretime", ("d",), {}, None),
    ("pexpiretime", ("nope",), {}, None),
    ("persist", ("c",), {}, None),
    ("persist", ("c",), {}, None),
    ("persist", ("nope",), {}, None),
    ("ttl", ("c",), {}, None),
    ("__contains__", ("c",), {}, None),
    ("__contains__", ("nope",), {}, None),
    ("__getitem__", ("c",), {}, None),
    ("__getitem__", ("nope",), {}, None),
    ("__setitem__", ("item", "v"), {}, None),
    ("__getitem__", ("item",), {}, None),
    ("__delitem__", ("item",), {}, None),
    ("__delitem__", ("item",), {}, None),
    ("exists", ("item",), {}, None),
    ("object", ("encoding", "i"), {}, None),
    ("object", ("ENCODING", "k1"), {}, None),
    ("set", ("long", "x" * 50), {}, None),
    ("object", ("encoding", "long"), {}, None),
    ("object", ("refcount", "long"), {}, None),
    ("object", ("idletime", "long"), {}, _of_type(int)),
    ("object", ("encoding", "nope"), {}, None),
    ("object", ("freq", "k1"), {}, None),
    ("object", ("bogus", "k1"), {}, None),
    ("dump", ("k1",), {}, _of_type(bytes)),
    ("dump", ("nope",), {}, None),
    ("restore", ("r", 0, b"junk"), {}, None),
    ("restore", ("r", 0, b"junk"), {"idletime": "x"}, None),
    # wrong types
    ("hset", ("hash", "f", "v"), {}, None),
    ("get", ("hash",), {}, None),
    ("set", ("hash", "v"), {"get": True}, None),
    ("incr", ("hash",), {}, None),
    ("append", ("hash", "x"), {}, None),
    ("strlen", ("hash",), {}, None),
    ("getrange", ("hash", 0, 1), {}, None),
    ("setrange", ("hash", 0, "x"), {}, None),
    ("getdel", ("hash",), {}, None),
    ("getex", ("hash",), {"ex": 5}, None),
    ("getset", ("hash", "x"), {}, None),
    ("mget", ("hash", "k1"), {}, None),
    ("lcs", ("hash", "k1"), {}, None),
    ("expire", ("hash", 100), {}, None),
    ("persist", ("hash",), {}, None),
    ("ttl", ("hash",), {}, _within(100, 2)),
    # server and connection
    ("config_get", ("maxmemory",), {}, None),
    ("config_get", ("maxmemory", "maxmemory-policy"), {}, None),
    ("config_get", ("nope*",), {}, None),
    ("config_set", ("maxmemory", 0), {}, None),
    ("config_resetstat", (), {}, None),
    ("client_setname", ("me",), {}, None),
    ("client_getname", (), {}, None),
    ("client_setname", ("has space",), {}, None),
    ("client_id", (), {}, _of_type(int)),
    ("client_list", (), {}, _list_of_dicts),
    ("client_list", ("pubsub",), {}, None),
    ("client_list", ("bogus",), {}, None),
    ("client_list", (None, "x"), {}, None),
    ("memory_usage", ("long",), {}, _of_type(int)),
    ("memory_usage", ("long",), {"samples": 0}, _of_type(int)),
    ("memory_usage", ("nope",), {}, None),
    ("wait", (0, 0), {}, None),
    ("command_count", (), {}, lambda n: (type(n), n > 200)),
    ("lastsave", (), {}, _of_type(datetime.datetime)),
    ("info", (), {}, _info_shape),
    ("info", ("keyspace",), {}, _keyspace),
    ("info", ("server",), {}, lambda info: (type(info["tcp_port"]), "redis_version" in info)),
    # execute_command applies the new callbacks by name
    ("execute_command", ("SET", "x", "1"), {}, None),
    ("execute_command", ("set", "x", "2", "GET"), {"get": True}, None),
    ("execute_command", ("SETNX", "x", "1"), {}, None),
    ("execute_command", ("INCRBYFLOAT", "fx", "1.5"), {}, None),
    ("execute_command", ("MSET", "x", "1"), {}, None),
    ("execute_command", ("EXPIRE", "x", "100"), {}, None),
    ("execute_command", ("PERSIST", "x"), {}, None),
    ("execute_command", ("CONFIG GET", "maxmemory"), {}, None),
    ("execute_command", ("CONFIG", "GET", "maxmemory"), {}, None),
    ("execute_command", ("CLIENT GETNAME",), {}, None),
    ("execute_command", ("INFO", "keyspace"), {}, _keyspace),
]


def _kind(err: BaseException) -> str:
    import redis

    if isinstance(err, (ReplyError, redis.ResponseError)):
        return "reply error"
    if isinstance(err, (DataError, redis.DataError)):
        return "data error"
    if isinstance(err, KeyError):
        return "key error"
    return "value error"


def _string_outcome(client: Any, method: str, args: tuple, kwargs: dict) -> tuple[str, Any]:
    """("ok", result) or (kind of error, its message): a ReplyError and redis-py's
    ResponseError alike (redis-py's drops the "ERR " an error line starts with), the facade's
    DataError and redis-py's alike."""
    import redis

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # redis-py's setex
            return "ok", getattr(client, method)(*args, **kwargs)
    except (ReplyError, redis.RedisError, ValueError, KeyError) as err:
        return _kind(err), str(err).removeprefix("ERR ")


@pytest.fixture
def oracle_factory(redis_server: Any) -> Iterator[Callable[[bool], Any]]:
    import redis

    clients: list[Any] = []

    def make(decode: bool) -> Any:
        client = redis.Redis(host=redis_server.host, port=redis_server.port, protocol=2,
                             decode_responses=decode)
        client.flushall()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.flushall()
        client.close()


@pytest.mark.redis
@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
def test_string_and_server_methods_equal_redis_py_on_redis_server(
        decode: bool, oracle_factory: Callable[[bool], Any]) -> None:
    oracle = oracle_factory(decode)
    with Engine() as engine:
        facade = engine.redis(decode_responses=decode)
        for method, args, kwargs, normalise in STRING_CALLS:
            got, want = (_string_outcome(r, method, args, kwargs) for r in (facade, oracle))
            if normalise is not None:
                got, want = ((kind, normalise(value) if kind == "ok" else value)
                             for kind, value in (got, want))
            assert got == want, (method, args, kwargs)


@pytest.mark.redis
@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
def test_dump_restore_round_trip_like_redis_py(
        decode: bool, oracle_factory: Callable[[bool], Any]) -> None:
    """Each backend restores its own DUMP payload (the RDB versions differ: 7.0's and 8.x's);
    the replies and the restored values compare."""
    oracle = oracle_factory(decode)
    with Engine() as engine:
        facade = engine.redis(decode_responses=decode)
        results = []
        for client in (facade, oracle):
            client.set("k", "ünïcode")
            client.expireat("k", FAR)
            payload = client.dump("k")
            assert type(payload) is bytes  # never decoded, as redis-py's NEVER_DECODE
            steps = [
                _string_outcome(client, "restore", ("k2", 0, payload), {}),
                _string_outcome(client, "restore", ("k2", 0, payload), {}),
                _string_outcome(client, "restore", ("k2", 0, payload), {"replace": True,
                                                                 "idletime": 10}),
                _string_outcome(client, "get", ("k2",), {}),
                _string_outcome(client, "ttl", ("k2",), {}),
                _string_outcome(client, "restore", ("k3", FAR * 1000, payload), {"absttl": True}),
                _string_outcome(client, "pexpiretime", ("k3",), {}),
                _string_outcome(client, "restore", ("k4", 5000, payload), {}),
                _string_outcome(client, "restore", ("k5", -1, payload), {}),
                _string_outcome(client, "object", ("encoding", "k3"), {}),
            ]
            ttl = client.pttl("k4")
            assert 3000 <= ttl <= 5000
            results.append(steps)
        assert results[0] == results[1]


@pytest.mark.redis
def test_save_and_lastsave_like_redis_py(oracle_factory: Callable[[bool], Any],
                                         tmp_path: Any) -> None:
    """SAVE is True on both; the facade's BGSAVE and BGREWRITEAOF are True (redis-py's
    `lambda r: True`), on an engine with a data directory (in memory, the engine refuses)."""
    oracle = oracle_factory(False)
    assert oracle.save() is True
    assert isinstance(oracle.lastsave(), datetime.datetime)
    with Engine.open(str(tmp_path)) as engine:
        r = engine.redis()
        r.set("k", "v")
        assert r.save() is True
        assert r.bgsave() is True
        assert r.bgrewriteaof() is True
        assert r.bgsave(schedule=False) is True
        saved = r.lastsave()
        assert isinstance(saved, datetime.datetime)
        now = datetime.datetime.now()
        assert abs((now - saved).total_seconds()) < 60
    with Engine() as memory, pytest.raises(ReplyError, match="no data directory"):
        memory.redis().save()


# --- the Redis 8.x string options, on the engine alone (redis-server 7.0 lacks them) ----------


@pytest.mark.parametrize("decode", [False, True], ids=["bytes", "decoded"])
def test_redis_8_string_options(decode: bool) -> None:
    """SET IFEQ/IFNE/IFDEQ/IFDNE, DELEX, DIGEST (Redis 8.4), MSETEX (8.4) and WAITAOF (7.2)
    through redis-py's shapes: https://redis.io/docs/latest/commands/set/,
    https://redis.io/docs/latest/commands/delex/, https://redis.io/docs/latest/commands/digest/,
    https://redis.io/docs/latest/commands/msetex/."""
    with Engine() as engine:
        r = engine.redis(decode_responses=decode)

        def d(value: bytes) -> Any:
            return value.decode() if decode else value

        assert r.set("k", "v") is True
        assert r.set("k", "w", ifeq="other") is None
        assert r.set("k", "w", ifeq="v") is True
        assert r.set("missing", "w", ifeq="v") is None and r.exists("missing") == 0
        assert r.set("k", "x", ifne="w") is None
        assert r.set("k", "x", ifne="zz", get=True) == d(b"w")
        assert r.set("created", "c", ifne="zz") is True  # IFNE creates a missing key
        digest = r.digest("k")
        assert isinstance(digest, str if decode else bytes) and len(digest) == 16
        assert r.digest("nope") is None
        assert r.set("k", "y", ifdeq=digest) is True
        assert r.set("k", "z", ifdeq=digest) is None
        assert r.set("k", "z", ifdne=digest, ex=100) is True
        assert r.get("k") == d(b"z") and 98 <= r.ttl("k") <= 100
        assert r.delex("k", ifeq="nope") == 0
        assert r.delex("k", ifne="z") == 0
        assert r.delex("k", ifdeq=r.digest("k")) == 1
        assert r.delex("nope") == 0
        r.set("k", "v")
        assert r.delex("k", ifdne=r.digest("k")) == 0 and r.delex("k") == 1
        assert r.msetex({"a": 1, "b": 2}, ex=100) == 1
        assert 98 <= r.ttl("a") <= 100
        assert r.msetex({"a": 3, "c": 4}, data_persist_option=_Persist()) == 0
        assert r.msetex({"a": 3, "b": 4}, data_persist_option="XX", keepttl=True) == 1
        assert r.mget("a", "b", "c") == [d(b"3"), d(b"4"), None]
        assert 98 <= r.ttl("b") <= 100
        assert r.waitaof(0, 0, 0) == [0, 0]
        r.hset("h", "f", "v")
        with pytest.raises(ReplyError, match="WRONGTYPE"):
            r.digest("h")


# --- the reply callbacks ported from redis-py --------------------------------------------------


INFO_TEXTS = [
    "# Server\r\nredis_version:8.10.2\r\nos:Linux 6.1 x86_64\r\nuptime:12\r\nratio:1.50\r\n",
    "module:name=search,ver=21005,api=1,filters=0,usedby=[],using=[ReJSON],options=[]\r\n"
    "module:name=ReJSON,ver=20803,api=1\r\n",
    "cmdstat_host:calls=1,usec=2,usec_per_call=2.00\r\ncmdstat_get:calls=3,usec=4\r\n",
    "list:a,b,,c\r\nflags:x=1,novalue,y=z=2,,\r\nempty:\r\nraw line without colon\r\n#c\r\n",
    "db0:keys=3,expires=1,avg_ttl=0,subexpiry=0\r\nhost:port:6379\r\nneg:-5\r\nsci:1e5\r\n",
    "errorstat_ERR:count=2\r\nmem_fragmentation_ratio:nan\r\nnum:007\r\nv:1.2.3\r\n",
    "ünïcode:välue\r\nbin:\xff\r\n",
]


def _redis_info_texts(oracle: Any) -> list[bytes]:
    """INFO everything as redis-server sends it (the callback replaced: the raw text)."""
    oracle.set_response_callback("INFO", lambda r, **options: r)
    return [oracle.info("everything"), oracle.info("commandstats"), oracle.info()]


@pytest.mark.redis
def test_parse_info_equals_redis_pys(oracle_factory: Callable[[bool], Any]) -> None:
    from redis._parsers import helpers

    oracle = oracle_factory(False)
    oracle.set("k", "v")
    oracle.expire("k", 100)
    texts: list[Any] = list(INFO_TEXTS)
    texts += [t.encode("utf-8", errors="surrogateescape") for t in INFO_TEXTS]
    texts += _redis_info_texts(oracle)
    with Engine() as engine:
        engine.execute("SET", "k", "v")
        engine.execute("GET", "k")
        texts += [engine.execute("INFO"), engine.execute("INFO", "everything")]
    for text in texts:
        assert base.parse_info(text) == helpers.parse_info(text), text


def test_parse_info_of_the_engines_info() -> None:
    with Engine() as engine:
        r = engine.redis()
        r.set("a", 1)
        r.expire("a", 100)
        info = r.info()
        assert info["redis_version"] == "8.10.2"
        assert isinstance(info["uptime_in_seconds"], int)
        assert info["db0"]["keys"] == 1 and info["db0"]["expires"] == 1
        assert r.info("keyspace") == {"db0": info["db0"]}
        assert r.execute_command("INFO", "server")["redis_version"] == "8.10.2"


CLIENT_LIST_TEXTS = [
    "",
    "id=3 addr=127.0.0.1:5000 laddr=127.0.0.1:6379 fd=8 name= age=1 cmd=client|list\n",
    "id=3 addr=/tmp/redis sock/redis.sock laddr=/tmp/redis sock/redis.sock name=a=b\n"
    "id=4 addr=127.0.0.1:1 name=x\n",
]


@pytest.mark.redis
def test_parse_client_list_config_get_set_and_lastsave_equal_redis_pys(
        oracle_factory: Callable[[bool], Any]) -> None:
    from redis._parsers import helpers

    oracle = oracle_factory(False)
    oracle.client_setname("someone")
    oracle.set_response_callback("CLIENT LIST", lambda r, **options: r)
    texts: list[Any] = [*CLIENT_LIST_TEXTS, *(t.encode() for t in CLIENT_LIST_TEXTS),
                        oracle.client_list()]
    for text in texts:
        assert base.parse_client_list(text) == helpers.parse_client_list(text), text
    for reply in ([b"maxmemory", b"0", b"hz", b"10"], ["a", None], [], [b"\xff", b"x"]):
        assert base.parse_config_get(list(reply)) == helpers.parse_config_get(list(reply))
    for reply, options in ((b"OK", {}), ("OK", {}), (None, {}), (b"old", {"get": True}),
                           (None, {"get": True})):
        assert (base.parse_set_result(reply, **options)
                == helpers.parse_set_result(reply, **options))
    for reply in (1795820117, b"1795820117", 0, None, b"", b"soon"):
        assert base.timestamp_to_datetime(reply) == helpers.timestamp_to_datetime(reply)


def test_client_calls_on_the_engine() -> None:
    """CLIENT GETNAME is str with or without decoding (redis-py's str_if_bytes callback)."""
    with Engine() as engine:
        r = engine.redis()
        assert r.client_getname() is None
        assert r.client_setname("worker") is True
        assert r.client_getname() == "worker"
        assert type(r.client_id()) is int
        assert r.client_list() == [] or all(isinstance(c, dict) for c in r.client_list())
        assert r.config_get("maxmemory") == {"maxmemory": "0"}
        assert r.memory_usage("nope") is None
        assert r.command_count() > 200
