"""Redis 8.6 idempotent producers (XADD IDMP/IDMPAUTO, XCFGSET, XINFO STREAM's IDMP fields).

Ports of the IDMP tests in Redis's own stream test suite (tests/unit/type/stream.tcl, the tests
named "XADD IDMP ..."); each test cites the Redis test it ports. The local redis-server is 7.x and
lacks IDMP, so these run against the engine only, with a controllable clock.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from streamkeep import Engine, Record
from tests.support.diffutil import err

ID_RE = re.compile(rb"^[0-9]+-[0-9]+$")


@pytest.fixture
def clock() -> list[int]:
    return [1_700_000_000_000]


@pytest.fixture
def e(clock: list[int]) -> Engine:
    return Engine(clock=lambda: clock[0])


def info(engine: Engine, key: str = "s") -> dict[bytes, Any]:
    flat = engine.execute("XINFO", "STREAM", key)
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def fields(engine: Engine, key: str = "s") -> list[dict[bytes, bytes]]:
    return [dict(zip(f[0::2], f[1::2], strict=True)) for _id, f in engine.execute("XRANGE", key, "-", "+")]


# Redis: "XADD IDMP with invalid syntax"
def test_invalid_syntax(e: Engine) -> None:
    assert err(e, "XADD", "s", "IDMP", "p1", "*", "f", "v") == "ERR Invalid stream ID specified as stream command argument"
    assert err(e, "XADD", "s", "IDMP", "p1", "iid1", "1-1", "f", "v") == "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"
    assert err(e, "XADD", "s", "IDMP", "p1", "iid1", "IDMP", "p2", "iid2", "*", "f", "v") == "ERR IDMP/IDMPAUTO specified multiple times"
    assert err(e, "XADD", "s", "IDMPAUTO", "p1", "IDMP", "p2", "iid2", "*", "f", "v") == "ERR IDMP/IDMPAUTO specified multiple times"
    assert err(e, "XADD", "s", "IDMP", "", "iid1", "*", "f", "v") == "ERR IDMP requires a non-empty producer ID"
    assert err(e, "XADD", "s", "IDMP", "p1", "", "*", "f", "v") == "ERR IDMP requires a non-empty idempotent ID"
    assert err(e, "XADD", "s", "IDMPAUTO", "", "*", "f", "v") == "ERR IDMPAUTO requires a non-empty producer ID"
    assert e.execute("EXISTS", "s") == 0


# Redis: "XADD IDMP basic addition"
def test_basic_addition(e: Engine) -> None:
    iids = ["1", "A", "B", "-", "+", "*", "^", "$", "#", "@", "?", "\\", "IDMP", "123-456",
            "9999999999999-9999999999999", "hello世界", "héllo", "line1\nline2", "tab\there",
            'quote"test', "with spaces", "long" * 100, "x" * 1000, "special!@#$%^&*()",
            "path/to/file", "key:value"]
    for iid in iids:
        assert ID_RE.match(e.execute("XADD", "s", "IDMP", "p1", iid, "*", "f", "v"))
    assert e.execute("XLEN", "s") == 26


# Redis: "XADD IDMP duplicate request returns same ID"
def test_duplicate_returns_same_id(e: Engine) -> None:
    id1 = e.execute("XADD", "s", "IDMP", "p1", "payment-abc", "*", "amount", "100", "currency", "USD")
    id2 = e.execute("XADD", "s", "IDMP", "p1", "payment-abc", "*", "amount", "200", "currency", "EUR")
    assert id1 == id2
    assert e.execute("XLEN", "s") == 1
    assert fields(e) == [{b"amount": b"100", b"currency": b"USD"}]


# Redis: "XADD IDMP multiple different IIDs create multiple entries"
def test_different_iids(e: Engine) -> None:
    ids = [e.execute("XADD", "s", "IDMP", "p1", f"req-{i}", "*", "user", u)
           for i, u in enumerate(["alice", "bob", "charlie"])]
    assert len(set(ids)) == 3
    assert [f[b"user"] for f in fields(e)] == [b"alice", b"bob", b"charlie"]


# Redis: "XADD IDMP with binary-safe iid", "XADD IDMP with maximum length iid"
def test_binary_and_long_iid(e: Engine) -> None:
    iid = b"\x00\x01\x02\xff"
    assert e.execute("XADD", "s", "IDMP", "p1", iid, "*", "field", "value") == \
        e.execute("XADD", "s", "IDMP", "p1", iid, "*", "field", "dup")
    assert ID_RE.match(e.execute("XADD", "s", "IDMP", "p1", "x" * 65536, "*", "field", "value"))
    assert e.execute("XLEN", "s") == 2


# Redis: "XADD IDMP with MAXLEN option", "... with MINID option", "... with KEEPREF option",
# "... with combined options"
@pytest.mark.parametrize("opts", [
    ["MAXLEN", "~", "100"], ["MINID", "~", "1000000000-0"], ["KEEPREF"],
    ["KEEPREF", "MAXLEN", "~", "1000", "LIMIT", "10"],
])
def test_with_trim_and_ref_options(e: Engine, opts: list[str]) -> None:
    id1 = e.execute("XADD", "s", "IDMP", "p1", "req-1", *opts, "*", "field1", "value1", "field2", "value2")
    id2 = e.execute("XADD", "s", "IDMP", "p1", "req-1", *opts, "*", "field3", "value3")
    assert id1 == id2
    assert e.execute("XLEN", "s") == 1
    assert fields(e) == [{b"field1": b"value1", b"field2": b"value2"}]


# Redis: "XADD IDMP with NOMKSTREAM option"
def test_with_nomkstream(e: Engine) -> None:
    assert e.execute("XADD", "s", "NOMKSTREAM", "IDMP", "p1", "req-1", "*", "field", "value") is None
    assert e.execute("EXISTS", "s") == 0
    e.execute("XADD", "s", "IDMP", "p1", "req-2", "*", "field", "value")
    assert ID_RE.match(e.execute("XADD", "s", "NOMKSTREAM", "IDMP", "p1", "req-3", "*", "field", "value"))
    assert e.execute("XLEN", "s") == 2


# Redis: "XADD IDMP argument order variations"
def test_argument_order(e: Engine) -> None:
    e.execute("XADD", "s", "IDMP", "p1", "req-1", "MAXLEN", "~", "100", "*", "field", "value1")
    e.execute("XADD", "s", "MAXLEN", "~", "100", "IDMP", "p1", "req-2", "*", "field", "value2")
    e.execute("XADD", "s", "NOMKSTREAM", "IDMP", "p1", "req-3", "MAXLEN", "~", "100", "*", "field", "value3")
    assert e.execute("XLEN", "s") == 3


# Redis: "XADD IDMP with consumer groups"
def test_with_consumer_groups(e: Engine) -> None:
    id1 = e.execute("XADD", "s", "IDMP", "p1", "cg-1", "*", "field", "value1")
    id2 = e.execute("XADD", "s", "IDMP", "p1", "cg-2", "*", "field", "value2")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    read = e.execute("XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "s", ">")
    assert len(read[0][1]) == 2
    assert e.execute("XACK", "s", "g", id1, id2) == 2
    assert e.execute("XADD", "s", "IDMP", "p1", "cg-1", "*", "field", "dup") == id1


# Redis: "XADD IDMP multiple producers have isolated namespaces", "... with binary producer IDs",
# "... with unicode producer IDs", "... with long producer IDs"
@pytest.mark.parametrize("pids", [
    ["producer1", "producer2"], [b"\x00\x01\x02", b"\x03\x04\x05"],
    ["producer-世界", "producer-héllo", "producer-日本"], ["a" * 1000, "b" * 1000],
])
def test_producers_isolated(e: Engine, pids: list[Any]) -> None:
    ids = [e.execute("XADD", "s", "IDMP", pid, "req-123", "*", "field", f"v{i}") for i, pid in enumerate(pids)]
    assert len(set(ids)) == len(pids)
    for pid, first in zip(pids, ids, strict=True):
        assert e.execute("XADD", "s", "IDMP", pid, "req-123", "*", "field", "dup") == first
    assert e.execute("XLEN", "s") == len(pids)
    assert info(e)[b"pids-tracked"] == len(pids)


# Redis: "XADD IDMP multiple producers each have their own MAXSIZE limit"
def test_maxsize_per_producer(e: Engine) -> None:
    e.execute("XADD", "s", "IDMP", "p1", "init", "*", "field", "init")
    assert e.execute("XCFGSET", "s", "IDMP-MAXSIZE", "3", "IDMP-DURATION", "60") == "OK"
    p1 = [e.execute("XADD", "s", "IDMP", "p1", f"req-{i}", "*", "field", "v") for i in range(3)]
    p2 = [e.execute("XADD", "s", "IDMP", "p2", f"req-{i}", "*", "field", "v") for i in range(3)]
    for pid, ids in (("p1", p1), ("p2", p2)):
        for i, first in enumerate(ids):
            assert e.execute("XADD", "s", "IDMP", pid, f"req-{i}", "*", "field", "dup") == first
    assert info(e)[b"pids-tracked"] == 2
    # a fourth iid evicts p1's oldest: req-0 is new again
    e.execute("XADD", "s", "IDMP", "p1", "req-3", "*", "field", "v")
    assert e.execute("XADD", "s", "IDMP", "p1", "req-0", "*", "field", "again") != p1[0]


# Redis: "XADD IDMP multiple producers with mixed IDMP and IDMPAUTO"; IDMPAUTO ignores field order
def test_idmpauto(e: Engine) -> None:
    id1 = e.execute("XADD", "s", "IDMPAUTO", "p1", "*", "a", "1", "b", "2")
    assert e.execute("XADD", "s", "IDMPAUTO", "p1", "*", "b", "2", "a", "1") == id1
    assert e.execute("XADD", "s", "IDMPAUTO", "p1", "*", "a", "1", "b", "3") != id1
    assert e.execute("XADD", "s", "IDMPAUTO", "p2", "*", "a", "1", "b", "2") != id1
    assert e.execute("XLEN", "s") == 3


def test_duration_expiry_by_command_time(e: Engine, clock: list[int]) -> None:
    id1 = e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v")
    e.execute("XCFGSET", "s", "IDMP-DURATION", "5")  # changed settings clear the maps
    id2 = e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v")
    assert id2 != id1
    clock[0] += 4999
    assert e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v") == id2
    clock[0] += 1
    assert e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v") != id2


def test_xinfo_counters(e: Engine) -> None:
    e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v")
    e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v")
    e.execute("XADD", "s", "IDMP", "p2", "b", "*", "f", "v")
    got = info(e)
    keys = list(got)
    assert keys[keys.index(b"recorded-first-entry-id") + 1:keys.index(b"groups")] == [
        b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added",
        b"iids-duplicates"]
    assert [got[k] for k in keys[7:13]] == [100, 100, 2, 2, 2, 1]


def test_xcfgset_errors(e: Engine) -> None:
    assert err(e, "XCFGSET", "nokey", "IDMP-DURATION", "5") == "ERR no such key"
    e.execute("XADD", "s", "*", "f", "v")
    assert err(e, "XCFGSET", "s", "IDMP-DURATION", "0") == "ERR IDMP-DURATION must be between 1 and 86400 seconds"
    assert err(e, "XCFGSET", "s", "IDMP-MAXSIZE", "10001") == "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"
    assert err(e, "XCFGSET", "s").startswith("ERR wrong number of arguments") or \
        err(e, "XCFGSET", "s") == "ERR At least one parameter must be specified: IDMP-DURATION or IDMP-MAXSIZE"


def test_replay_rebuilds_maps(e: Engine, clock: list[int]) -> None:
    """The records (XADD + XIDMPRECORD, SK.XIDMPDUP for a duplicate) replayed at another
    wall-clock time rebuild the same maps: same digest, and the duplicate is still detected."""
    records: list[Record] = []
    e.add_sink(records.append)
    id1 = e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "v")
    e.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "w")
    e.execute("XADD", "s", "IDMPAUTO", "p2", "*", "f", "v")
    names = [eff[0].upper() for r in records for eff in r.effects]
    assert b"XIDMPRECORD" in names
    other = Engine(clock=lambda: clock[0] + 50_000)  # within the duration
    for r in records:
        other.replay.apply(r)
    assert other.digest() == e.digest()
    assert other.execute("XADD", "s", "IDMP", "p1", "a", "*", "f", "x") == id1
    assert other.execute("XLEN", "s") == 2


# Redis: "XCFGSET invalid syntax"
def test_xcfgset_invalid_syntax(e: Engine) -> None:
    e.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "value")
    assert err(e, "XCFGSET", "s").startswith("ERR At least one parameter")
    assert "syntax" in err(e, "XCFGSET", "s", "IDMP-DURATION")
    assert "syntax" in err(e, "XCFGSET", "s", "IDMP-MAXSIZE")
    assert "syntax" in err(e, "XCFGSET", "s", "INVALID")
    for option in ("IDMP-DURATION", "IDMP-MAXSIZE"):
        for bad in ("A", "AAA", "*", "-", "+", "120-5", "3.14", "000000000", option):
            assert err(e, "XCFGSET", "s", option, bad).startswith("ERR value is not an integer"), bad
        assert err(e, "XCFGSET", "s", option, option, option).startswith("ERR value is not an integer")
    assert err(e, "XCFGSET", "s", "IDMP-DURATION", "INVALID", "IDMP-MAXSIZE").startswith("ERR value is not an integer")
    assert err(e, "XCFGSET", "s", "IDMP-MAXSIZE", "INVALID", "IDMP-DURATION").startswith("ERR value is not an integer")


# Redis: "XCFGSET IDMP-DURATION/IDMP-MAXSIZE maximum/minimum value validation", "XCFGSET set both
# IDMP-DURATION and IDMP-MAXSIZE", "XINFO STREAM shows default IDMP parameters", "XCFGSET multiple
# configuration changes"
def test_xcfgset_validation(e: Engine) -> None:
    e.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "value")
    assert (info(e)[b"idmp-duration"], info(e)[b"idmp-maxsize"]) == (100, 100)
    assert e.execute("XCFGSET", "s", "IDMP-DURATION", "86400", "IDMP-MAXSIZE", "10000") == "OK"
    assert err(e, "XCFGSET", "s", "IDMP-DURATION", "86401").startswith("ERR IDMP-DURATION must be")
    assert err(e, "XCFGSET", "s", "IDMP-MAXSIZE", "10001").startswith("ERR IDMP-MAXSIZE must be between")
    for option, bad in (("IDMP-DURATION", "0"), ("IDMP-DURATION", "-100"), ("IDMP-MAXSIZE", "0"),
                        ("IDMP-MAXSIZE", "-50")):
        assert err(e, "XCFGSET", "s", option, bad).startswith(f"ERR {option} must be between")
    assert (info(e)[b"idmp-duration"], info(e)[b"idmp-maxsize"]) == (86400, 10000)
    for option, value in (("IDMP-DURATION", "1"), ("IDMP-DURATION", "3"), ("IDMP-MAXSIZE", "1"), ("IDMP-MAXSIZE", "200")):
        assert e.execute("XCFGSET", "s", option, value) == "OK"
    assert (info(e)[b"idmp-duration"], info(e)[b"idmp-maxsize"]) == (3, 200)


# Redis: "XCFGSET changing IDMP-DURATION clears all iids history", "... IDMP-MAXSIZE clears ..."
@pytest.mark.parametrize("option,value", [("IDMP-DURATION", "5"), ("IDMP-MAXSIZE", "5000")])
def test_xcfgset_change_clears_history(e: Engine, option: str, value: str) -> None:
    id1 = e.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "value1")
    assert e.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "dup") == id1
    e.execute("XCFGSET", "s", option, value)
    assert e.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "new1") != id1
    assert e.execute("XLEN", "s") == 2


def test_hot_path_matches_general_path(clock: list[int]) -> None:
    """`XADD key IDMP pid iid * ...` alone takes a hot path; with any other option the general
    one: same replies, same effects (apart from the option itself), same arity errors."""
    fast, general = Engine(clock=lambda: clock[0]), Engine(clock=lambda: clock[0])
    for e in (fast, general):
        e.execute("XADD", "s", "*", "f", "v")
    for iid in ("a", "b", "a"):
        got_fast = fast.execute_with_effects("XADD", "s", "IDMP", "p", iid, "*", "f", "v")
        got_general = general.execute_with_effects("XADD", "s", "NOMKSTREAM", "IDMP", "p", iid, "*", "f", "v")
        assert got_fast == got_general
        clock[0] += 1
    assert fast.digest() == general.digest()
    for argv in (("XADD", "s", "IDMP", "p", "i", "*", "f"), ("XADD", "s", "IDMP", "p", "i", "*")):
        assert err(fast, *argv) == "ERR wrong number of arguments for 'xadd' command"
    assert fast.execute("XADD", "new", "idmp", "p", "i", "*", "f", "v") == fast.execute(
        "XADD", "new", "IDMP", "p", "i", "*", "g", "w")


# Redis: "XADD IDMPAUTO with invalid syntax"
def test_idmpauto_invalid_syntax(e: Engine) -> None:
    for argv in (("IDMPAUTO", "p1", "IDMPAUTO", "p2"), ("IDMPAUTO", "p1", "IDMP", "p2", "iid1"),
                 ("IDMP", "p1", "iid1", "IDMPAUTO", "p2")):
        assert err(e, "XADD", "s", *argv, "*", "f", "v") == "ERR IDMP/IDMPAUTO specified multiple times"
    assert err(e, "XADD", "s", "IDMPAUTO", "p1", "1-1", "f", "v") == \
        "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"


# Redis: "XADD IDMPAUTO basic deduplication based on field-value pairs", "... deduplicates
# regardless of field order", "... different field-value pairs create different entries", "...
# with single field-value pair", "... with many field-value pairs", "... with binary-safe values",
# "... with unicode values", "... with long values", "... with empty string values", "... field
# names matter", "... with numeric field names and values"
@pytest.mark.parametrize("same,other", [
    ((["amount", "100", "currency", "USD"], ["amount", "100", "currency", "USD"]), ["amount", "200", "currency", "USD"]),
    ((["field1", "a", "field2", "b", "field3", "c"], ["field2", "b", "field3", "c", "field1", "a"]),
     ["field3", "c", "field1", "x", "field2", "b"]),
    ((["user", "alice", "action", "login"],) * 2, ["user", "bob", "action", "login"]),
    ((["status", "active"],) * 2, ["status", "inactive"]),
    (([f"f{i}" if j == 0 else f"v{i}" for i in range(1, 9) for j in (0, 1)],) * 2,
     [*[f"f{i}" if j == 0 else f"v{i}" for i in range(1, 8) for j in (0, 1)], "f8", "different"]),
    (([b"field", b"\x00\x01\x02\xff"],) * 2, [b"field", b"\x00\x01\x02"]),
    ((["message", "hello世界"],) * 2, ["message", "héllo"]),
    ((["data", "x" * 10000],) * 2, ["data", "x" * 9999]),
    ((["field", ""],) * 2, ["field", "value"]),
    ((["field1", "value"],) * 2, ["field2", "value"]),
    ((["123", "456", "789", "012"],) * 2, ["123", "999", "789", "012"]),
])
def test_idmpauto_content(e: Engine, same: tuple[list[Any], list[Any]], other: list[Any]) -> None:
    id1 = e.execute("XADD", "s", "IDMPAUTO", "p1", "*", *same[0])
    assert ID_RE.match(id1)
    assert e.execute("XADD", "s", "IDMPAUTO", "p1", "*", *same[1]) == id1
    assert e.execute("XLEN", "s") == 1
    assert e.execute("XADD", "s", "IDMPAUTO", "p1", "*", *other) != id1
    assert e.execute("XLEN", "s") == 2


# Redis: "XADD IDMPAUTO with MAXLEN option", "... with MINID option", "... with KEEPREF option",
# "... with NOMKSTREAM option", "... argument order variations", "... with consumer groups"
def test_idmpauto_options(e: Engine) -> None:
    assert e.execute("XADD", "s", "NOMKSTREAM", "IDMPAUTO", "p1", "*", "field", "value") is None
    e.execute("XADD", "s", "*", "initial", "value")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    id1 = e.execute("XADD", "s", "IDMPAUTO", "p1", "MAXLEN", "~", "100", "*", "field", "value1")
    for opts in (["MINID", "~", "1000000000-0"], ["KEEPREF"], ["NOMKSTREAM"]):
        assert e.execute("XADD", "s", *opts, "IDMPAUTO", "p1", "*", "field", "value1") == id1
        assert e.execute("XADD", "s", "IDMPAUTO", "p1", *opts, "*", "field", "value1") == id1
    for i, opts in enumerate((["MAXLEN", "~", "100", "IDMPAUTO", "p1"], ["KEEPREF", "IDMPAUTO", "p1"],
                              ["IDMPAUTO", "p1", "KEEPREF"])):
        assert ID_RE.match(e.execute("XADD", "s", *opts, "*", "field", f"test{i}"))
    read = e.execute("XREADGROUP", "GROUP", "g", "c1", "COUNT", "10", "STREAMS", "s", ">")
    assert len(read[0][1]) == 5


# Redis: "XADD IDMP multiple producers stress test"
def test_many_producers(e: Engine) -> None:
    ids = [e.execute("XADD", "s", "IDMP", f"producer-{i}", "request-1", "*", "field", f"value-{i}") for i in range(50)]
    got = info(e)
    assert (got[b"pids-tracked"], got[b"iids-tracked"]) == (50, 50)
    for i, first in enumerate(ids):
        assert e.execute("XADD", "s", "IDMP", f"producer-{i}", "request-1", "*", "field", "dup") == first
    assert e.execute("XLEN", "s") == 50


# Redis: "XIDMP set evicts entries when MAXSIZE is reached"
def test_maxsize_eviction_order(e: Engine) -> None:
    e.execute("XADD", "s", "IDMP", "p1", "init", "*", "field", "init")
    e.execute("XCFGSET", "s", "IDMP-MAXSIZE", "3", "IDMP-DURATION", "60")
    ids = [e.execute("XADD", "s", "IDMP", "p1", f"req-{i}", "*", "field", "v") for i in (1, 2, 3)]
    for i, first in zip((1, 2, 3), ids, strict=True):
        assert e.execute("XADD", "s", "IDMP", "p1", f"req-{i}", "*", "field", "dup") == first
    e.execute("XADD", "s", "IDMP", "p1", "req-4", "*", "field", "v4")
    assert e.execute("XADD", "s", "IDMP", "p1", "req-1", "*", "field", "new") != ids[0]
    assert e.execute("XADD", "s", "IDMP", "p1", "req-3", "*", "field", "dup2") == ids[2]
    assert e.execute("XLEN", "s") == 6


# The XINFO STREAM page (https://redis.io/docs/latest/commands/xinfo-stream/): the six fields
# follow recorded-first-entry-id, in FULL too; a stream that never used IDMP shows them.
def test_xinfo_field_order_summary_and_full(e: Engine) -> None:
    e.execute("XADD", "s", "*", "f", "v")
    names = e.execute("XINFO", "STREAM", "s")[0::2]
    assert names == [b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id",
                     b"max-deleted-entry-id", b"entries-added", b"recorded-first-entry-id",
                     b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked",
                     b"iids-added", b"iids-duplicates", b"groups", b"first-entry",
                     b"last-entry"]
    full = e.execute("XINFO", "STREAM", "s", "FULL")[0::2]
    assert full[7:13] == names[7:13] and full[13:] == [b"entries", b"groups"]
    e.execute("CONFIG", "SET", "stream-idmp-duration", "300", "stream-idmp-maxsize", "3")
    assert [info(e)[n] for n in names[7:13]] == [300, 3, 0, 0, 0, 0]  # the configured defaults


# Redis: "CONFIG SET stream-idmp-duration and stream-idmp-maxsize validation"
def test_config_set_stream_idmp_ranges(e: Engine) -> None:
    for name, bad, good in (("stream-idmp-duration", ("86401", "100000", "0", "-1", "-100"),
                             ("86400", "1", "100")),
                            ("stream-idmp-maxsize", ("10001", "50000", "0", "-1", "-100"),
                             ("10000", "1", "100"))):
        for value in bad:
            assert "must be between" in err(e, "CONFIG", "SET", name, value)
        for value in good:
            assert e.execute("CONFIG", "SET", name, value) == "OK"
            assert e.execute("CONFIG", "GET", name) == [name.encode(), value.encode()]


# The XIDMPRECORD page (https://redis.io/docs/latest/commands/xidmprecord/, Redis 8.8): OK when
# recorded or already mapped to the same ID; errors for a missing key, a missing or deleted
# entry, an empty pid or iid, a pair mapped to another ID. A recorded pair makes XADD IDMP a
# duplicate.
def test_xidmprecord(e: Engine) -> None:
    assert err(e, "XIDMPRECORD", "s", "p", "i", "1-0") == "ERR no such key"
    e.execute("XADD", "s", "1-0", "f", "v")
    e.execute("XADD", "s", "2-0", "f", "v")
    assert e.execute("XIDMPRECORD", "s", "p", "i", "1-0") == "OK"
    assert e.execute("XIDMPRECORD", "s", "p", "i", "1-0") == "OK"
    assert err(e, "XIDMPRECORD", "s", "p", "i", "2-0").startswith("ERR ")
    assert err(e, "XIDMPRECORD", "s", "p", "j", "9-0") == "ERR No such message in stream"
    e.execute("XDEL", "s", "2-0")
    assert err(e, "XIDMPRECORD", "s", "p", "j", "2-0") == "ERR No such message in stream"
    assert "producer ID" in err(e, "XIDMPRECORD", "s", "", "j", "1-0")
    assert "idempotent ID" in err(e, "XIDMPRECORD", "s", "p", "", "1-0")
    assert e.execute("XADD", "s", "IDMP", "p", "i", "*", "f", "x") == b"1-0"
    assert info(e)[b"iids-added"] == 1


def test_replay_under_another_configuration_with_trim_and_expiry(clock: list[int]) -> None:
    """What the AOF logs (XADD, XCFGSET when the state is created, XIDMPRECORD, the trim after
    it, SK.XIDMPDUP) rebuilds the same maps, settings and counters on an engine configured
    otherwise: an entry trimmed by its own XADD (MAXLEN 0) still records its iid, an expired
    iid is recorded again, and XINFO agrees at the same time."""
    e = Engine(clock=lambda: clock[0])
    e.execute("CONFIG", "SET", "stream-idmp-duration", "7")
    records: list[Record] = []
    e.add_sink(records.append)
    first = e.execute("XADD", "s", "IDMP", "p", "i1", "MAXLEN", "0", "*", "f", "v")
    clock[0] += 5
    assert e.execute("XADD", "s", "IDMP", "p", "i1", "*", "f", "v") == first
    e.execute("XADD", "s", "IDMPAUTO", "q", "*", "a", "b")
    clock[0] += 7000  # i1 expired
    assert e.execute("XADD", "s", "IDMP", "p", "i1", "*", "f", "v") != first
    e.execute("XCFGSET", "s", "IDMP-MAXSIZE", "2")
    last = e.execute("XADD", "s", "IDMP", "p", "i3", "*", "f", "v")
    other = Engine(clock=lambda: clock[0])  # stream-idmp-duration: the default, 100
    for record in records:
        other.replay.apply(record)
    assert other.digest() == e.digest()
    assert info(other) == info(e)
    assert other.execute("XADD", "s", "IDMP", "p", "i3", "*", "f", "w") == last
