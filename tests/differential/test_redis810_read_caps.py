"""XREAD / XREADGROUP MAXCOUNT and MAXSIZE (Redis 8.10), which the local 7.0 oracle lacks:
asserted against the engine from https://redis.io/docs/latest/commands/xread/ and
https://redis.io/docs/latest/commands/xreadgroup/ ("MAXCOUNT: the maximum number of entries to
return in total across all streams", COUNT stays per stream; MAXSIZE a cap on the reply's total
size, at least one entry, the entry crossing the cap included), the 8.10 release notes
(https://redis.io/docs/latest/operate/oss_and_stack/stack-with-enterprise/release-notes/redisce/redisos-8.10-release-notes/:
"cap the cumulative reply entries and size"), Redis's PR
https://github.com/redis/redis/pull/15282 and the client PRs that test a real 8.10 (redis-py
#4173, redis-rb #1358: server rules "max_count >= count, non-zero limits"). Also the maximal ID
as `>` in blocking and CLAIM reads (the 7.0-common part is in test_diff_groups.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from streamkeep import Engine
from streamkeep.engine.runtime.core import Session
from tests.support.command_strategies import Clock as StrategyClock
from tests.support.diffutil import err

MAX_ID = "18446744073709551615-18446744073709551615"


class Clock(StrategyClock):
    """The shared settable clock, started at 1,000,000 ms."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now


def two_streams(clock: Clock | None = None) -> Engine:
    e = Engine(clock=clock or Clock())
    for key in ("s1", "s2"):
        for i in range(1, 4):
            e.execute("XADD", key, f"{i}-0", "f", f"v{i}")
        e.execute("XGROUP", "CREATE", key, "g", "0")
    return e


def shape(reply: Any) -> list[tuple[bytes, list[bytes]]]:
    """Stream names and entry IDs of an XREAD-like reply: a list of pairs, a blocked read's
    RespMap, or redis-py's RESP3 dict ({stream: [entries]})."""
    if reply is None:
        return []
    if hasattr(reply, "as_pairs"):
        reply = reply.items
    if isinstance(reply, dict):
        reply = [(key, value[0]) for key, value in reply.items()]
    return [(key, [m[0] for m in msgs]) for key, msgs in reply]


def test_maxcount_caps_the_total_count_stays_per_stream() -> None:
    """COUNT 2 MAXCOUNT 3 over two streams of three: two from the first, one from the second."""
    e = two_streams()
    got = e.execute("XREAD", "COUNT", "2", "MAXCOUNT", "3", "STREAMS", "s1", "s2", "0", "0")
    assert shape(got) == [(b"s1", [b"1-0", b"2-0"]), (b"s2", [b"1-0"])]
    got = e.execute("XREAD", "MAXCOUNT", "2", "STREAMS", "s1", "s2", "0", "0")
    assert shape(got) == [(b"s1", [b"1-0", b"2-0"])]  # the cap is used up: s2 is left out
    got = e.execute("XREAD", "MAXCOUNT", "100", "STREAMS", "s1", "s2", "0", "0")
    assert shape(got) == [(b"s1", [b"1-0", b"2-0", b"3-0"]), (b"s2", [b"1-0", b"2-0", b"3-0"])]


def test_maxsize_serves_at_least_one_entry_and_the_crossing_one() -> None:
    """MAXSIZE 1 still returns one entry; a cap a little above one entry's size returns two (the
    entry crossing the cap is included), a cap that fits everything returns everything."""
    e = two_streams()
    assert shape(e.execute("XREAD", "MAXSIZE", "1", "STREAMS", "s1", "s2", "0", "0")) == [
        (b"s1", [b"1-0"])]
    assert shape(e.execute("XREAD", "MAXSIZE", "40", "STREAMS", "s1", "s2", "0", "0")) == [
        (b"s1", [b"1-0", b"2-0"])]
    assert shape(e.execute("XREAD", "MAXSIZE", "100000", "COUNT", "1", "STREAMS", "s1", "s2",
                           "0", "0")) == [(b"s1", [b"1-0"]), (b"s2", [b"1-0"])]
    big = Engine()
    big.execute("XADD", "b", "1-0", "f", "x" * 10_000)
    big.execute("XADD", "b", "2-0", "f", "y")
    assert shape(big.execute("XREAD", "MAXSIZE", "100", "STREAMS", "b", "0")) == [
        (b"b", [b"1-0"])]  # an oversized first entry is returned whole


def test_xreadgroup_caps_deliver_only_what_they_serve() -> None:
    """Only the entries in the capped reply become pending; the group's last ID stops at the
    last one served; a stream the cap left out is not touched
    (https://redis.io/docs/latest/commands/xreadgroup/)."""
    e = two_streams()
    got = e.execute("XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", "2", "STREAMS", "s1", "s2",
                    ">", ">")
    assert shape(got) == [(b"s1", [b"1-0", b"2-0"])]
    assert e.execute("XPENDING", "s1", "g")[0] == 2
    assert e.execute("XPENDING", "s2", "g")[0] == 0
    info = e.execute("XINFO", "GROUPS", "s1")[0]
    assert info[info.index(b"last-delivered-id") + 1] == b"2-0"
    assert e.execute("XINFO", "CONSUMERS", "s2", "g") == []
    got = e.execute("XREADGROUP", "GROUP", "g", "c", "MAXSIZE", "1", "NOACK", "STREAMS", "s1",
                    "s2", ">", ">")
    assert shape(got) == [(b"s1", [b"3-0"])]
    assert e.execute("XPENDING", "s1", "g")[0] == 2  # NOACK: delivered, not pending
    got = e.execute("XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", "1", "STREAMS", "s1", "0")
    assert shape(got) == [(b"s1", [b"1-0"])]  # history reads are capped too


def test_claimed_entries_count_toward_the_caps() -> None:
    """XREADGROUP ... CLAIM: claimed entries come first and use the caps."""
    clock = Clock()
    e = two_streams(clock)
    e.execute("XREADGROUP", "GROUP", "g", "a", "COUNT", "2", "STREAMS", "s1", ">")
    clock.now += 1000
    got = e.execute("XREADGROUP", "GROUP", "g", "b", "MAXCOUNT", "3", "CLAIM", "500",
                    "STREAMS", "s1", "s2", ">", ">")
    assert shape(got) == [(b"s1", [b"1-0", b"2-0", b"3-0"])]
    assert [len(m) for m in got[0][1]] == [4, 4, 4]
    assert e.execute("XPENDING", "s2", "g")[0] == 0
    clock.now += 1000
    got = e.execute("XREADGROUP", "GROUP", "g", "c", "MAXSIZE", "1", "CLAIM", "500",
                    "STREAMS", "s1", ">")
    assert shape(got) == [(b"s1", [b"1-0"])]


def test_a_blocked_read_served_later_respects_the_caps() -> None:
    """A blocked XREAD/XREADGROUP woken by a transaction adding three entries gets MAXCOUNT of
    them; only those become pending."""
    e = Engine(clock=Clock())
    e.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    reader, grouped = Session(), Session()
    w1, _ = e.submit(reader, (b"XREAD", b"MAXCOUNT", b"2", b"BLOCK", b"0", b"STREAMS", b"s",
                              b"$"))
    w2, _ = e.submit(grouped, (b"XREADGROUP", b"GROUP", b"g", b"c", b"MAXCOUNT", b"1",
                               b"BLOCK", b"0", b"STREAMS", b"s", MAX_ID.encode()))
    assert not w1.done and not w2.done
    e.execute("MULTI")
    for i in range(1, 4):
        e.execute("XADD", "s", f"{i}-0", "f", "v")
    e.execute("EXEC")
    assert w1.done and w2.done
    assert shape(w1.result) == [(b"s", [b"1-0", b"2-0"])]
    assert shape(w2.result) == [(b"s", [b"1-0"])]  # the maximal ID blocked as '>' does
    assert e.execute("XPENDING", "s", "g")[0] == 1


def test_maximal_id_is_gt_with_claim() -> None:
    """With CLAIM, the maximal ID claims idle entries as `>` does (Redis 8.4 drops CLAIM only
    for history reads: https://redis.io/docs/latest/commands/xreadgroup/)."""
    clock = Clock()
    e = two_streams(clock)
    e.execute("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s1", ">")
    clock.now += 1000
    got = e.execute("XREADGROUP", "GROUP", "g", "b", "CLAIM", "500", "STREAMS", "s1", MAX_ID)
    assert [len(m) for m in got[0][1]] == [4, 4, 4]


def test_errors() -> None:
    """Non-zero positive limits, MAXCOUNT at least COUNT (the server rules redis-rb #1358 lets
    surface); integers as COUNT's; the options are accepted anywhere before STREAMS."""
    e = two_streams()
    for cmd in (["XREAD"], ["XREADGROUP", "GROUP", "g", "c"]):
        tail = ["STREAMS", "s1", ">" if len(cmd) > 1 else "0"]
        assert err(e, *cmd, "MAXCOUNT", "0", *tail) == "ERR MAXCOUNT must be a positive integer"
        assert err(e, *cmd, "MAXCOUNT", "-1", *tail) == "ERR MAXCOUNT must be a positive integer"
        assert err(e, *cmd, "MAXSIZE", "0", *tail) == "ERR MAXSIZE must be a positive integer"
        assert err(e, *cmd, "MAXSIZE", "x", *tail) == "ERR MAXSIZE must be a positive integer"
        assert err(e, *cmd, "COUNT", "5", "MAXCOUNT", "2", *tail) == (
            "ERR MAXCOUNT must be greater than or equal to COUNT")
        assert e.execute(*cmd, "MAXSIZE", "10", "MAXCOUNT", "1", "COUNT", "1", *tail)


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_max_count_max_size_embedded_and_served(protocol: int, served: Any) -> None:
    """redis-py 8.1's `xread(..., max_count=, max_size=)` and `xreadgroup(..., max_count=,
    max_size=)` against the Engine and a served one, RESP2 and RESP3
    (https://github.com/redis/redis-py/pull/4173)."""
    client = redis.Redis(host=served.host, port=served.port, protocol=protocol)
    try:
        for target in (served.engine.redis(), client):
            for key in ("a", "b"):
                for i in range(1, 4):
                    target.xadd(key, {"f": "v"}, id=f"{i}-0")
                target.xgroup_create(key, "g", id="0")
            got = target.xread({"a": 0, "b": 0}, count=2, max_count=3)
            assert shape(got) == [(b"a", [b"1-0", b"2-0"]), (b"b", [b"1-0"])]
            got = target.xreadgroup("g", "c", {"a": ">", "b": ">"}, max_size=1)
            assert shape(got) == [(b"a", [b"1-0"])]
            with pytest.raises(Exception, match="max_count must be greater than or equal"):
                target.xread({"a": 0}, count=3, max_count=2)
            target.delete("a", "b")
    finally:
        client.close()
