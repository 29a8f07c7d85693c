"""The redis-py facade (engine.runtime.redis_api.RedisAPI) on its own.

Checked here, against a recording engine (no command runs) and against a real Engine: the argv
each method sends; redis-py's client-side DataError checks, raised before anything is sent;
argument types redis-py's encoder refuses; replies decoded or not by the facade's own
`decode_responses` (two facades over one engine differ); and the reply callbacks (entries as
(id, {field: value}), XPENDING as a dict, XINFO with str keys, OK as True). The same methods
are compared with redis-py itself in tests/differential/test_redis_py_compat.py.
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
