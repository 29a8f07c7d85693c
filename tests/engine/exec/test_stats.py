"""engine.exec.stats: the counters' rules, and how the engine's command path feeds them (blocked
reads, NOAUTH, MULTI/EXEC, CONFIG RESETSTAT), embedded and through the server.

The rules are Redis's (src/server.c call/rejectCommand/incrementErrorCount, networking.c
afterErrorReply; redis.io INFO: commandstats, errorstats); Redis's own tests check the blocked
XREADGROUP case (tests/unit/type/stream-cgroups.tcl: a blocked XREADGROUP whose key is deleted
or group destroyed: `calls=1,*,rejected_calls=0,failed_calls=1` and errorstat NOGROUP count=1)
and the 128-code cap (tests/unit/info.tcl "errorstats: limit errors will not increase
indefinitely": `errorstat ERRORSTATS_DISABLED` is `count=1` after 1,100 distinct codes)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from streamkeep.engine.exec.latency import highest_equivalent, value_at_index
from streamkeep.engine.exec.stats import (
    ERROR_STATS_NUMBER,
    HIST_LEN,
    HIST_MAX,
    CommandCounters,
    ServerStats,
    error_code,
    hist_index,
    safe_info_name,
    usec_per_call,
)
from tests.support.resp_client import RespClient, RespError
from tests.support.server_util import ServerHandle, connect, start_server


def fields(engine_or_client: Any, section: str) -> dict[str, str]:
    text = engine_or_client.execute("INFO", section)
    text = text.decode() if isinstance(text, bytes) else str(text)
    return dict(line.split(":", 1) for line in text.split("\r\n")
                if line and not line.startswith("#"))


def cmdstat(engine_or_client: Any, name: str) -> str:
    return fields(engine_or_client, "commandstats").get(f"cmdstat_{name}", "")


# --- the counters --------------------------------------------------------------------------


def test_error_code_is_the_first_word_within_32_bytes() -> None:
    assert error_code("NOGROUP No such key 'k'") == "NOGROUP"
    assert error_code("ERR syntax error") == "ERR"
    assert error_code("WRONGTYPE Operation against a key") == "WRONGTYPE"
    assert error_code("X" * 30 + " long but in") == "X" * 30  # space at byte 32 with the '-'
    assert error_code("X" * 31 + " too long") == "ERR"
    assert error_code("NOSPACE") == "ERR"
    assert safe_info_name("A:B#C\r\nD") == "A_B_C__D"


def test_usec_per_call_is_redis_single_precision_division() -> None:
    assert usec_per_call(0, 0) == "0.00"
    assert usec_per_call(10, 3) == "3.33"
    assert usec_per_call(16777217, 1) == "16777216.00"  # (float)16777217


def test_counters_record_rejected_failed_and_errors() -> None:
    stats = ServerStats(["xadd", "xinfo", "xinfo|stream"])
    xadd = stats.counters("xadd")
    xadd.calls += 1
    xadd.nanos += 2500
    stats.failed(xadd, 1500, "ERR The ID specified in XADD is equal or smaller")
    stats.rejected(xadd, "ERR wrong number of arguments for 'xadd' command")
    stats.rejected(None, "ERR unknown command 'x', with args beginning with: ")
    stats.error_reply("NOGROUP No such key")
    assert (xadd.calls, xadd.nanos, xadd.rejected, xadd.failed) == (2, 4000, 1, 1)
    assert stats.commandstats() == [
        ("cmdstat_xadd", "calls=2,usec=4,usec_per_call=2.00,rejected_calls=1,failed_calls=1")]
    assert stats.errorstats() == [("errorstat_ERR", "count=3"), ("errorstat_NOGROUP", "count=1")]
    assert stats.total_error_replies == 4
    assert stats.total_calls() == 2
    stats.reset()
    # The same object: the engine's dispatch table holds it.
    assert (xadd.calls, xadd.nanos, xadd.rejected, xadd.failed, xadd.histogram) == (
        0, 0, 0, 0, None)
    assert stats.counters("xadd") is xadd
    assert stats.commandstats() == [] and stats.errorstats() == []
    assert stats.total_error_replies == 0


def test_commandstats_order_puts_subcommands_after_their_container() -> None:
    stats = ServerStats(["xinfo", "xinfo|groups", "xinfo|stream", "xlen"])
    for name in ("xlen", "xinfo|stream", "xinfo|groups"):
        stats.counters(name).calls += 1
    stats.counters("xinfo").rejected += 1
    assert [k for k, _ in stats.commandstats()] == [
        "cmdstat_xinfo", "cmdstat_xinfo|groups", "cmdstat_xinfo|stream", "cmdstat_xlen"]


def test_errorstats_stop_at_128_codes_until_reset() -> None:
    stats = ServerStats()
    for i in range(ERROR_STATS_NUMBER):
        stats.error_reply(f"E{i} x")
    assert len(stats.errorstats()) == ERROR_STATS_NUMBER
    stats.error_reply("E0 again")  # a known code still counts
    assert dict(stats.errorstats())["errorstat_E0"] == "count=2"
    for i in range(1000):  # Redis's test: 1,100 distinct codes
        stats.error_reply(f"NEW{i} x")
    assert stats.errorstats() == [("errorstat_ERRORSTATS_DISABLED", "count=1")]
    assert stats.total_error_replies == ERROR_STATS_NUMBER + 1 + 1000
    stats.reset()
    stats.error_reply("ERR again")
    assert stats.errorstats() == [("errorstat_ERR", "count=1")]


# --- the engine's command path -------------------------------------------------------------


def test_embedded_engine_counts_calls_failures_and_refusals() -> None:
    engine = Engine()
    engine.execute("XADD", "s", "1-1", "f", "v")
    for argv in (("XADD", "s", "1-1", "f", "v"), ("XADD", "s"), ("XINFO", "NOPE"),
                 ("XGROUP", "CREATECONSUMER", "s", "g", "c")):
        with pytest.raises(ReplyError):
            engine.execute(*argv)
    engine.execute("XINFO", "STREAM", "s")
    assert cmdstat(engine, "xadd").endswith(",rejected_calls=1,failed_calls=1")
    assert cmdstat(engine, "xadd").startswith("calls=2,usec=")
    assert cmdstat(engine, "xgroup|createconsumer").endswith(",rejected_calls=0,failed_calls=1")
    assert cmdstat(engine, "xinfo|stream").startswith("calls=1,")
    errors = fields(engine, "errorstats")
    assert errors == {"errorstat_ERR": "count=3", "errorstat_NOGROUP": "count=1"}
    stats = fields(engine, "stats")
    assert stats["total_error_replies"] == "4"
    # The 4 commands that ran and the 5 INFOs before this one; the 2 refused ones are not.
    assert stats["total_commands_processed"] == "9"
    assert engine.execute("CONFIG", "RESETSTAT") == "OK"
    assert fields(engine, "commandstats") == {
        "cmdstat_config|resetstat": "calls=1,usec=" + cmdstat(engine, "config|resetstat")
        .split("usec=")[1]}
    assert fields(engine, "errorstats") == {}


def test_multi_exec_counts_each_queued_command_at_exec() -> None:
    engine = Engine()
    assert engine.execute("MULTI") == "OK"
    assert engine.execute("XADD", "s", "1-1", "f", "v") == "QUEUED"
    assert engine.execute("XADD", "s", "1-1", "f", "v") == "QUEUED"
    xadd = engine.stats.counters("xadd")
    assert (xadd.calls, xadd.nanos, xadd.rejected, xadd.failed, xadd.histogram) == (
        0, 0, 0, 0, None)  # queueing: not running
    replies = engine.execute("EXEC")
    assert replies[0] == b"1-1" and isinstance(replies[1], ReplyError)
    assert cmdstat(engine, "xadd").startswith("calls=2,")
    assert cmdstat(engine, "xadd").endswith(",rejected_calls=0,failed_calls=1")
    assert cmdstat(engine, "exec").endswith(",rejected_calls=0,failed_calls=0")
    assert cmdstat(engine, "multi").startswith("calls=1,")
    assert fields(engine, "errorstats") == {"errorstat_ERR": "count=1"}


def test_blocked_xreadgroup_counts_once_when_served() -> None:
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    got: list[Any] = []
    reader = threading.Thread(target=lambda: got.append(engine.execute(
        "XREADGROUP", "GROUP", "g", "c", "BLOCK", "5000", "STREAMS", "s", ">")))
    reader.start()
    _wait_blocked(engine)
    assert cmdstat(engine, "xreadgroup") == ""  # blocked: not counted yet
    engine.execute("XADD", "s", "1-1", "f", "v")
    reader.join(5)
    assert got and got[0][0][0] == b"s"
    assert cmdstat(engine, "xreadgroup").startswith("calls=1,")
    assert cmdstat(engine, "xreadgroup").endswith(",rejected_calls=0,failed_calls=0")


def _wait_blocked(engine: Engine, n: int = 1) -> None:
    deadline = time.monotonic() + 5
    while engine.waiting.blocked_clients() < n:
        assert time.monotonic() < deadline, "the reader never blocked"
        time.sleep(0.005)


@pytest.mark.parametrize("ending", [("DEL", "s"), ("XGROUP", "DESTROY", "s", "g")],
                         ids=["key deleted", "group destroyed"])
def test_blocked_xreadgroup_ended_by_nogroup_is_one_failed_call(
        ending: tuple[str, ...], served: ServerHandle) -> None:
    client, other = connect(served), connect(served)
    client.execute("XADD", "s", "666", "f", "v")
    client.execute("XGROUP", "CREATE", "s", "g", "$")
    client.execute("CONFIG", "RESETSTAT")
    client.send("XREADGROUP", "GROUP", "g", "Alice", "BLOCK", "0", "STREAMS", "s", ">")
    _wait_blocked(served.engine)
    other.execute(*ending)
    with pytest.raises(RespError, match="^NOGROUP"):
        client.read()
    assert cmdstat(other, "xreadgroup").startswith("calls=1,")
    assert cmdstat(other, "xreadgroup").endswith(",rejected_calls=0,failed_calls=1")
    assert fields(other, "errorstats") == {"errorstat_NOGROUP": "count=1"}
    assert fields(other, "stats")["total_error_replies"] == "1"


def test_noauth_refusals_are_counted_as_rejected_calls() -> None:
    handle = start_server(Engine(requirepass="pw"))
    try:
        client = connect(handle)
        replies = client.pipeline(("XADD", "s", "*", "f", "v"), ("XADD", "s"), ("NOSUCH",),
                                  ("MULTI",), ("EXEC",), ("AUTH", "pw"),
                                  ("INFO", "everything"))
        assert [str(r).split()[0] for r in replies[:5]] == [
            "NOAUTH", "ERR", "ERR", "NOAUTH", "EXECABORT"]
        text = replies[6].decode()
        info = dict(line.split(":", 1) for line in text.split("\r\n")
                    if line and not line.startswith("#"))
        assert info["cmdstat_xadd"].startswith("calls=0,")
        assert info["cmdstat_xadd"].endswith(",rejected_calls=2,failed_calls=0")
        assert info["cmdstat_multi"].endswith(",rejected_calls=1,failed_calls=0")
        assert info["cmdstat_exec"].endswith(",rejected_calls=1,failed_calls=0")
        assert info["cmdstat_auth"].startswith("calls=1,")
        assert info["errorstat_NOAUTH"] == "count=2"
        assert info["errorstat_ERR"] == "count=2"
        assert info["errorstat_EXECABORT"] == "count=1"
        assert info["total_error_replies"] == "5"
        assert info["total_commands_processed"] == "1"  # AUTH; the INFO counts after it
        client.close()
    finally:
        handle.stop()


def test_client_info_cmd_before_any_command_is_null(served: ServerHandle) -> None:
    observer, fresh = connect(served), connect(served)
    fresh.execute("PING")  # the connection is accepted and registered
    listing = observer.execute("CLIENT", "LIST").decode()
    lines = {line.split()[0]: line for line in listing.splitlines()}
    assert sum(" cmd=client|list " in line for line in lines.values()) == 1
    assert sum(" cmd=ping " in line for line in lines.values()) == 1
    third = RespClient(served.host, served.port, timeout=10)
    deadline = time.monotonic() + 5
    while " cmd=NULL " not in observer.execute("CLIENT", "LIST").decode():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    third.close()


def test_protocol_errors_count_as_error_replies(served: ServerHandle) -> None:
    bad = connect(served)
    bad.send_raw(b"*1\r\n$-5\r\n")
    with pytest.raises(RespError, match="^ERR Protocol error"):
        bad.read()
    observer = connect(served)
    assert fields(observer, "errorstats") == {"errorstat_ERR": "count=1"}


def test_dispatch_counters_are_per_engine() -> None:
    one, two = Engine(), Engine()
    one.execute("XADD", "s", "*", "f", "v")
    assert one.stats.counters("xadd").calls == 1
    assert two.stats.counters("xadd").calls == 0
    assert one.stats.counters("xadd").failed == 0


# --- one command's counters: the histogram slot of a value, the figures a call updates ---

EDGES = [-5, 0, 1, 2, 127, 128, 255, 256, 257, 511, 512, 1000, 1023, 1024, 1031, 1032, 2047,
         2048, 65535, 65536, 10**6, 10**9 - 1, 10**9, 10**9 + 1, 10**12, (1 << 62)]


@pytest.mark.parametrize("nanos", EDGES)
def test_a_value_falls_in_the_slot_that_holds_it(nanos: int) -> None:
    index = hist_index(nanos)
    assert 0 <= index < HIST_LEN
    value = min(max(nanos, 1), HIST_MAX)
    assert value_at_index(index) <= value <= highest_equivalent(value_at_index(index))
    # Two significant digits: a slot is at most 1/128 of its values wide.
    assert highest_equivalent(value) - value_at_index(index) < max(value / 128, 1)


def test_slots_grow_with_the_value() -> None:
    indexes = [hist_index(v) for v in range(1, 70_000)]
    assert indexes == sorted(indexes)
    assert hist_index(HIST_MAX) == hist_index(10**15)


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=-(1 << 40), max_value=1 << 62))
def test_the_slot_holds_its_clamped_value(nanos: int) -> None:
    value = min(max(nanos, 1), HIST_MAX)
    index = hist_index(nanos)
    assert value_at_index(index) <= value <= highest_equivalent(value_at_index(index))


def test_a_call_counts_its_time_and_whether_it_was_slow() -> None:
    counters = CommandCounters(slow_ns=2000, tracked=False)  # slow from 2 µs, not tracked
    counters.rejected, counters.failed = 7, 3
    assert counters.count(1500) is False
    assert counters.count(2000) is True
    assert (counters.calls, counters.nanos, counters.rejected, counters.failed) == (2, 3500, 7, 3)
    assert counters.histogram is None


def test_a_tracked_call_fills_the_histogram() -> None:
    counters = CommandCounters()
    for nanos in (1500, 1500, 2500, 10**10):
        assert counters.count(nanos) is False
    assert (counters.calls, counters.nanos) == (4, 1500 + 1500 + 2500 + 10**10)
    histogram = counters.histogram
    assert histogram is not None and len(histogram) == HIST_LEN
    assert sum(histogram) == 4
    assert histogram[hist_index(1500)] == 2
    assert histogram[hist_index(HIST_MAX)] == 1  # a 10 s call counts as 1 s
    counters.count(1)
    assert counters.histogram is histogram  # made once, then updated in place
    counters.tracked = False  # tracking off: the histogram stays as it was
    counters.count(1)
    assert sum(histogram) == 5 and counters.calls == 6


def test_reset_drops_the_figures_and_keeps_the_settings() -> None:
    counters = CommandCounters(slow_ns=10, tracked=True)
    counters.count(50)
    counters.rejected += 1
    counters.reset()
    assert (counters.calls, counters.nanos, counters.rejected, counters.failed,
            counters.histogram) == (0, 0, 0, 0, None)
    assert (counters.slow_ns, counters.tracked) == (10, True)
