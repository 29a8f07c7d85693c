"""engine.commands.string_ranges: GETRANGE/SUBSTR, SETRANGE (its effect is itself: the record
stays the command's size), LCS (its table bounded by proto-max-bulk-len as Redis bounds it).
The replies are checked against redis-server in tests/differential/test_diff_string_ranges.py."""

from __future__ import annotations

import pytest

from tests.support.effects_util import Recorded

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
TOO_BIG = "ERR string exceeds maximum allowed size (proto-max-bulk-len)"


@pytest.fixture
def r() -> Recorded:
    return Recorded()


def test_getrange_clamps_like_redis(r):
    r("SET", "k", "This is a string")
    assert r("GETRANGE", "k", "0", "3") == b"This"
    assert r("GETRANGE", "k", "-3", "-1") == b"ing"
    assert r("GETRANGE", "k", "0", "-1") == b"This is a string"
    assert r("GETRANGE", "k", "10", "100") == b"string"
    assert r("SUBSTR", "k", "-100", "3") == b"This"
    big = str(2**63 - 1)
    assert r("GETRANGE", "k", "-" + big, big) == b"This is a string"
    assert r("GETRANGE", "k", "-1", "-5") == b""
    assert r("GETRANGE", "nokey", "0", "-1") == b""
    assert r.err("GETRANGE", "k", "a", "1") == "ERR value is not an integer or out of range"
    assert r.err("GETRANGE", "k", "0", str(2**63)) == "ERR value is not an integer or out of range"
    r("XADD", "s", "1-1", "f", "v")
    assert r.err("GETRANGE", "s", "0", "1") == WRONGTYPE


def test_setrange_logs_itself_and_keeps_the_ttl(r):
    r("SET", "k", "Hello World", "EX", "100")
    assert r.effects("SETRANGE", "k", "6", "Redis") == (11, [[b"SETRANGE", b"k", b"6", b"Redis"]])
    assert (r("GET", "k"), r("TTL", "k")) == (b"Hello Redis", 100)
    assert r("SETRANGE", "k", "13", "!") == 14
    assert r("GET", "k") == b"Hello Redis\x00\x00!"
    assert r.effects("SETRANGE", "new", "3", "ab") == (5, [[b"SETRANGE", b"new", b"3", b"ab"]])
    assert r("GET", "new") == b"\x00\x00\x00ab"
    assert r.effects("SETRANGE", "k", "100", "") == (14, [])  # nothing written: no record
    assert r.effects("SETRANGE", "none", "5", "") == (0, [])
    assert r("EXISTS", "none") == 0
    r.assert_replays()


def test_setrange_bounds(r):
    r("SET", "k", "v")
    assert r.err("SETRANGE", "k", "-1", "x") == "ERR offset is out of range"
    assert r.err("SETRANGE", "k", "x", "x") == "ERR value is not an integer or out of range"
    assert r.err("SETRANGE", "k", str(512 << 20), "x") == TOO_BIG
    assert r.err("SETRANGE", "k", str(2**63 - 1), "x") == TOO_BIG  # no overflow, no allocation
    assert r.err("SETRANGE", "new", str(512 << 20), "x") == TOO_BIG
    assert r("EXISTS", "new") == 0
    r("XADD", "s", "1-1", "f", "v")
    assert r.err("SETRANGE", "s", "0", "x") == WRONGTYPE
    assert all(e[0] != b"SETRANGE" for rec in r.records for e in rec.effects)


def test_replay_of_setrange_is_not_bounded_by_this_nodes_limit():
    primary = Recorded()
    primary("SETRANGE", "k", str((1 << 20) + 10), "x")  # past 1 MiB
    replica = primary.replay()
    replica.set_config("proto-max-bulk-len", 1 << 20)
    for record in primary.records:  # applied again on a node with a smaller limit
        replica.replay.apply(record)
    assert replica.execute("STRLEN", "k") == (1 << 20) + 11


def test_lcs(r):
    r("MSET", "key1", "ohmytext", "key2", "mynewtext")
    assert r("LCS", "key1", "key2") == b"mytext"
    assert r("LCS", "key1", "key2", "LEN") == 6
    assert r("LCS", "key1", "key2", "IDX") == [
        b"matches", [[[4, 7], [5, 8]], [[2, 3], [0, 1]]], b"len", 6]
    assert r("LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN") == [
        b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]
    assert r("LCS", "key1", "nokey") == b""
    assert r("LCS", "key1", "key2", "MINMATCHLEN", "-5", "IDX")[3] == 6
    assert r.err("LCS", "key1", "key2", "LEN", "IDX") == (
        "ERR If you want both the length and indexes, please just use IDX.")
    assert r.err("LCS", "key1", "key2", "FOO") == "ERR syntax error"
    assert r.err("LCS", "key1", "key2", "MINMATCHLEN") == "ERR syntax error"
    assert r.err("LCS", "key1", "key2", "MINMATCHLEN", "x") == (
        "ERR value is not an integer or out of range")
    r("XADD", "s", "1-1", "f", "v")
    # The keys' types are checked before the options.
    assert r.err("LCS", "key1", "s", "FOO") == "ERR The specified keys must contain string values"


def test_lcs_table_is_bounded_by_proto_max_bulk_len():
    r = Recorded(proto_max_bulk_len=1 << 20)
    r("SET", "a", "x" * 500)
    r("SET", "b", "y" * 500)
    assert r("LCS", "a", "b", "LEN") == 0  # 501 * 501 * 4 bytes: under 1 MiB
    r("SET", "b", "y" * 600)
    assert r.err("LCS", "a", "b") == (
        "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
