"""XNACK (Redis 8.8), which the local 7.0 oracle lacks: asserted against the engine from the
command's page, https://redis.io/docs/latest/commands/xnack/ (modes, RETRYCOUNT, FORCE, the
reply, the XPENDING example, "immediately claimable regardless of min-idle-time", "will only
process message IDs that exist in the consumer group's PEL") and the 8.8 release notes,
https://redis.io/docs/latest/operate/oss_and_stack/stack-with-enterprise/release-notes/redisce/redisos-8.8-release-notes/
Then: effects survive a restart (AOF replay) and a snapshot, and redis-py 8.1's `xnack` works
unchanged against the Engine and a served one, RESP2 and RESP3.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from streamkeep import Engine
from tests.support.command_strategies import Clock as StrategyClock
from tests.support.diffutil import err

LLONG_MAX = 9223372036854775807


class Clock(StrategyClock):
    """The shared settable clock, started at 1,000,000 ms."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now


def delivered(clock: Clock | None = None) -> Engine:
    """The page's example: two entries read by consumer1 (delivery count 1 each)."""
    e = Engine(clock=clock or Clock())
    e.execute("XADD", "mystream", "1526569498055-0", "field", "value1")
    e.execute("XADD", "mystream", "1526569498056-0", "field", "value2")
    e.execute("XGROUP", "CREATE", "mystream", "mygroup", "0")
    e.execute("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream", ">")
    return e


def pending(e: Engine) -> list:
    return e.execute("XPENDING", "mystream", "mygroup", "-", "+", "10")


def test_fail_releases_with_empty_consumer_and_idle_minus_one() -> None:
    """The page's "Basic usage with FAIL mode" example, XPENDING output included."""
    e = delivered()
    assert e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "2",
                     "1526569498055-0", "1526569498056-0") == 2
    assert pending(e) == [[b"1526569498055-0", b"", -1, 1], [b"1526569498056-0", b"", -1, 1]]


@pytest.mark.parametrize(("mode", "extra", "count"), [
    ("SILENT", [], 0),  # "Decrements the delivery counter by 1"
    ("FAIL", [], 1),  # "Keeps the current delivery counter value unchanged"
    ("FATAL", [], LLONG_MAX),  # "Sets the delivery counter to the maximum value (LLONG_MAX)"
    ("FAIL", ["RETRYCOUNT", "5"], 5),  # "Directly sets the delivery counter"
    ("FATAL", ["RETRYCOUNT", "0"], 0),  # "overriding the mode-based adjustment"
])
def test_delivery_counter_by_mode(mode: str, extra: list[str], count: int) -> None:
    """The page's mode list and RETRYCOUNT (https://redis.io/docs/latest/commands/xnack/)."""
    e = delivered()
    assert e.execute("XNACK", "mystream", "mygroup", mode, "IDS", "1", "1526569498055-0",
                     *extra) == 1
    assert pending(e)[0] == [b"1526569498055-0", b"", -1, count]
    assert pending(e)[1] == [b"1526569498056-0", b"consumer1", 0, 1]


def test_silent_never_goes_below_zero_and_double_release_counts() -> None:
    """SILENT undoes one delivery each time; a released entry is still in the PEL, so releasing
    it again counts (the page: only IDs not in the PEL are ignored)."""
    e = delivered()
    for _ in range(3):
        assert e.execute("XNACK", "mystream", "mygroup", "SILENT", "IDS", "1",
                         "1526569498055-0") == 1
    assert pending(e)[0][3] == 0


def test_ids_not_pending_are_ignored_unless_force_finds_them_in_the_stream() -> None:
    """"Messages that are not pending will be ignored and not counted"; FORCE "Creates new
    unowned PEL entries for IDs that are not already in the group PEL. The entry must exist in
    the stream ... delivery counter is set to 0 (or to RETRYCOUNT ..., or to LLONG_MAX if mode is
    FATAL)"."""
    e = delivered()
    e.execute("XADD", "mystream", "1526569498057-0", "field", "value3")
    e.execute("XADD", "mystream", "1526569498058-0", "field", "value4")
    e.execute("XADD", "mystream", "1526569498059-0", "field", "value5")
    e.execute("XACK", "mystream", "mygroup", "1526569498055-0")
    assert e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "2", "1526569498055-0",
                     "1526569498057-0") == 0
    assert e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "3", "1526569498057-0",
                     "9-9", "1526569498055-0", "FORCE") == 2  # 9-9 is not in the stream
    assert e.execute("XNACK", "mystream", "mygroup", "SILENT", "IDS", "1", "1526569498058-0",
                     "RETRYCOUNT", "7", "FORCE") == 1
    assert e.execute("XNACK", "mystream", "mygroup", "FATAL", "IDS", "1", "1526569498059-0",
                     "FORCE") == 1
    counts = {p[0]: (p[1], p[3]) for p in pending(e)}
    assert counts == {
        b"1526569498055-0": (b"", 0), b"1526569498056-0": (b"consumer1", 1),
        b"1526569498057-0": (b"", 0), b"1526569498058-0": (b"", 7),
        b"1526569498059-0": (b"", LLONG_MAX)}


def test_released_entries_are_claimable_at_once_and_not_redelivered_by_gt() -> None:
    """"immediately claimable regardless of the min-idle-time parameter in claiming commands"
    (XREADGROUP CLAIM, XCLAIM, XAUTOCLAIM), prioritized over other idle pending entries; a plain
    `>` read only serves new entries."""
    clock = Clock()
    e = delivered(clock)
    e.execute("XADD", "mystream", "1526569498057-0", "field", "value3")
    e.execute("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream", ">")
    clock.now += 10_000  # every entry idle 10 s; the released one still comes first
    got = e.execute("XREADGROUP", "GROUP", "mygroup", "c2", "COUNT", "1", "CLAIM", "999999999",
                    "STREAMS", "mystream", ">")
    assert got is None  # 999999999 ms: nothing owned is that idle, and nothing is released
    assert e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498056-0") == 1
    assert e.execute("XREADGROUP", "GROUP", "mygroup", "c2", "STREAMS", "mystream", ">") is None
    got = e.execute("XREADGROUP", "GROUP", "mygroup", "c2", "COUNT", "1", "CLAIM", "5000",
                    "STREAMS", "mystream", ">")
    assert [m[0] for m in got[0][1]] == [b"1526569498056-0"]
    assert got[0][1][0][3] == 1  # the delivery count before this claim
    assert pending(e)[1] == [b"1526569498056-0", b"c2", 0, 2]
    e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498057-0")
    assert e.execute("XCLAIM", "mystream", "mygroup", "c3", "999999999", "1526569498057-0",
                     "JUSTID") == [b"1526569498057-0"]
    e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498057-0")
    assert e.execute("XAUTOCLAIM", "mystream", "mygroup", "c4", "999999999", "0",
                     "JUSTID")[1] == [b"1526569498057-0"]
    e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498057-0")
    assert e.execute("XPENDING", "mystream", "mygroup", "IDLE", "999999999", "-", "+",
                     "10") == [[b"1526569498057-0", b"", -1, 1]]  # JUSTID: no increment


def test_released_entries_leave_their_consumer() -> None:
    """"Disassociates the entry from its owning consumer": the consumer's own counts drop, the
    group's PEL keeps it, the consumer's history read no longer returns it."""
    e = delivered()
    e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498055-0")
    consumers = e.execute("XINFO", "CONSUMERS", "mystream", "mygroup")
    assert consumers[0][3] == 1  # pending
    group = e.execute("XINFO", "GROUPS", "mystream")[0]
    assert group[group.index(b"pending") + 1] == 2
    summary = e.execute("XPENDING", "mystream", "mygroup")
    assert summary == [2, b"1526569498055-0", b"1526569498056-0", [[b"consumer1", b"1"]]]
    history = e.execute("XREADGROUP", "GROUP", "mygroup", "consumer1", "STREAMS", "mystream",
                        "0")
    assert [m[0] for m in history[0][1]] == [b"1526569498056-0"]
    assert e.execute("XACK", "mystream", "mygroup", "1526569498055-0") == 1
    assert e.execute("XPENDING", "mystream", "mygroup")[0] == 1


def test_errors() -> None:
    """NOGROUP for a missing key or group; the IDS block's errors as XACKDEL's (8.2's numids
    lines); a bad mode or option is a syntax error; arity -7, flags write fast
    (https://redis.io/docs/latest/commands/xnack/)."""
    e = delivered()
    assert err(e, "XNACK", "mystream", "nope", "FAIL", "IDS", "1", "1-0") == (
        "NOGROUP No such key 'mystream' or consumer group 'nope'")
    assert err(e, "XNACK", "missing", "mygroup", "FAIL", "IDS", "1", "1-0") == (
        "NOGROUP No such key 'missing' or consumer group 'mygroup'")
    assert err(e, "XNACK", "mystream", "mygroup", "MAYBE", "IDS", "1", "1-0") == (
        "ERR syntax error")
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "ID", "1", "1-0") == "ERR syntax error"
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "IDS", "0", "1-0") == (
        "ERR Number of IDs must be a positive integer")
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "IDS", "2", "1-0") == (
        "ERR The `numids` parameter must match the number of arguments")
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1-0", "BOGUS") == (
        "ERR syntax error")
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "nope") == (
        "ERR Invalid stream ID specified as stream command argument")
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT",
               "-1") == "ERR Invalid RETRYCOUNT option argument for XNACK"
    assert err(e, "XNACK", "mystream", "mygroup", "FAIL", "IDS") == (
        "ERR wrong number of arguments for 'xnack' command")
    info = e.execute("COMMAND", "INFO", "XNACK")[0]
    assert info[1] == -7 and set(info[2]) == {"write", "fast"}


def test_effects_replay_the_release_exactly() -> None:
    """What the AOF logs: applying a fresh engine the records gives the same digest (the
    counters and the ownership included)."""
    clock = Clock()
    e = delivered(clock)
    records: list = []
    e.add_sink(records.append)
    for mode in ("SILENT", "FATAL"):
        clock.now += 3
        e.execute("XNACK", "mystream", "mygroup", mode, "IDS", "1", "1526569498055-0")
    e.execute("XACK", "mystream", "mygroup", "1526569498056-0")
    e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498056-0", "FORCE")
    replica = delivered(Clock())
    for record in records:
        replica.replay.apply(record)
    assert replica.digest() == e.digest()
    assert replica.execute("XPENDING", "mystream", "mygroup", "-", "+", "10") == pending(e)


def _state(r: redis.Redis) -> list:
    return [[p["message_id"], p["consumer"], p["time_since_delivered"], p["times_delivered"]]
            for p in r.xpending_range("mystream", "mygroup", "-", "+", 10)]


def test_restart_keeps_released_entries_and_counters(tmp_path: Any, spawn: Any) -> None:
    """A release survives AOF replay (kill -9, restart) and a snapshot (SHUTDOWN SAVE,
    restart): ownerless, idle -1, the counter each mode set
    (https://redis.io/docs/latest/commands/xnack/)."""
    datadir = tmp_path / "data"
    server = spawn(datadir)
    r = server.client()
    for i in range(1, 5):
        r.xadd("mystream", {"f": "v"}, id=f"{i}-0")
    r.xgroup_create("mystream", "mygroup", id="0")
    r.xreadgroup("mygroup", "c", {"mystream": ">"})
    r.xreadgroup("mygroup", "c", {"mystream": "0"})  # delivery count 2
    assert r.xnack("mystream", "mygroup", "SILENT", "1-0") == 1
    assert r.xnack("mystream", "mygroup", "FATAL", "2-0") == 1
    assert r.xnack("mystream", "mygroup", "FAIL", "3-0", retrycount=9) == 1
    before = _state(r)
    assert [(p[1], p[2], p[3]) for p in before] == [
        (b"", -1, 1), (b"", -1, LLONG_MAX), (b"", -1, 9), (b"c", before[3][2], 2)]
    r.close()
    server.proc.kill()
    server.wait()
    again = spawn(datadir)
    r = again.client()
    after = _state(r)
    assert after[:3] == before[:3] and after[3][:2] == before[3][:2]
    r.shutdown(save=True)
    assert again.wait() == 0, again.output()
    assert list(datadir.glob("snapshot-*.mdb"))
    third = spawn(datadir)
    r = third.client()
    assert _state(r)[:3] == before[:3]
    assert r.xreadgroup("mygroup", "d", {"mystream": ">"}, claim_min_idle_time=10**9)[0][1][0][
        0] == b"1-0"
    r.close()


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_xnack_embedded_and_served(protocol: int, served: Any) -> None:
    """redis-py 8.1's `xnack(name, groupname, mode, *ids, retrycount=, force=)` returns the
    released count against the Engine and a served one; its client-side checks are the same
    (https://redis.io/docs/latest/commands/xnack/)."""
    client = redis.Redis(host=served.host, port=served.port, protocol=protocol)
    try:
        for target in (served.engine.redis(), client):
            target.xadd("s", {"f": "v"}, id="1-0")
            target.xadd("s", {"f": "v"}, id="2-0")
            target.xgroup_create("s", "g", id="0")
            target.xreadgroup("g", "c", {"s": ">"})
            assert target.xnack("s", "g", "FAIL", "1-0", "9-0") == 1
            assert target.xnack("s", "g", "FATAL", "2-0", retrycount=3, force=True) == 1
            assert target.xpending_range("s", "g", "-", "+", 10) == [
                {"message_id": b"1-0", "consumer": b"", "time_since_delivered": -1,
                 "times_delivered": 1},
                {"message_id": b"2-0", "consumer": b"", "time_since_delivered": -1,
                 "times_delivered": 3}]
            with pytest.raises(redis.DataError if target is client else Exception,
                               match="XNACK mode must be one of"):
                target.xnack("s", "g", "LATER", "1-0")
            with pytest.raises(Exception, match="XNACK retrycount must be >= 0"):
                target.xnack("s", "g", "FAIL", "1-0", retrycount=-1)
            target.delete("s")
    finally:
        client.close()


def test_release_wakes_a_blocked_claim_read() -> None:
    """Released entries are "immediately available for re-delivery": a consumer blocked in
    XREADGROUP ... CLAIM (whose own timer is far away) gets one as soon as XNACK releases it
    (https://redis.io/docs/latest/commands/xnack/)."""
    from streamkeep.engine.runtime.core import Session

    e = delivered()
    waiter, _ = e.submit(Session(), (b"XREADGROUP", b"GROUP", b"mygroup", b"c2", b"BLOCK",
                                     b"0", b"CLAIM", b"3600000", b"STREAMS", b"mystream", b">"))
    assert not waiter.done
    e.execute("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "1526569498056-0")
    assert waiter.done
    entries = waiter.result.items[0][1]
    assert [m[0] for m in entries] == [b"1526569498056-0"] and entries[0][3] == 1
