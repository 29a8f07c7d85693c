"""engine.commands.expiry: the EXPIRE and TTL families and PERSIST on keys of every type, the
active cycle, the keyspace commands seeing expired keys as Redis does, and replay of every
record giving the same state at any later time (lazy expiry: tests/engine/exec/test_keys.py)."""

from __future__ import annotations

import pytest

from tests.support.effects_util import Recorded

NOW = 1_000_000


@pytest.fixture
def r() -> Recorded:
    return Recorded(now=NOW)


def test_expire_family_logs_pexpireat(r):
    r("SET", "k", "v")
    assert r.effects("EXPIRE", "k", "10") == (1, [[b"PEXPIREAT", b"k", b"%d" % (NOW + 10_000)]])
    assert r.effects("PEXPIRE", "k", "10") == (1, [[b"PEXPIREAT", b"k", b"%d" % (NOW + 10)]])
    assert r.effects("EXPIREAT", "k", "2000") == (1, [[b"PEXPIREAT", b"k", b"2000000"]])
    assert r.effects("PEXPIREAT", "k", "2000001") == (1, [[b"PEXPIREAT", b"k", b"2000001"]])
    assert (r("TTL", "k"), r("PTTL", "k")) == (1000, 1_000_001)
    assert (r("EXPIRETIME", "k"), r("PEXPIRETIME", "k")) == (2000, 2_000_001)
    assert r("EXPIRE", "missing", "10") == 0
    assert (r("TTL", "missing"), r("PTTL", "missing")) == (-2, -2)
    assert (r("EXPIRETIME", "missing"), r("PEXPIRETIME", "missing")) == (-2, -2)
    r.assert_replays()


def test_ttl_rounds_to_the_nearest_second(r):
    r("SET", "k", "v", "PX", "1499")
    assert r("TTL", "k") == 1
    r("SET", "k", "v", "PX", "1500")
    assert r("TTL", "k") == 2


def test_expire_in_the_past_deletes(r):
    r("SET", "k", "v")
    assert r.effects("EXPIRE", "k", "-1") == (1, [[b"DEL", b"k"]])
    assert r("EXISTS", "k") == 0
    r.assert_replays()


def test_expire_conditions(r):
    r("SET", "k", "v")
    assert r("EXPIRE", "k", "100", "XX") == 0
    assert r("EXPIRE", "k", "100", "GT") == 0  # no TTL is an infinite one
    assert r("EXPIRE", "k", "100", "LT") == 1
    assert r("EXPIRE", "k", "100", "NX") == 0
    assert r("EXPIRE", "k", "50", "gt") == 0
    assert r("EXPIRE", "k", "200", "GT") == 1
    assert r("EXPIRE", "k", "300", "LT") == 0
    assert r.err("EXPIRE", "k", "1", "NX", "XX") == (
        "ERR NX and XX, GT or LT options at the same time are not compatible")
    assert r.err("EXPIRE", "k", "1", "GT", "LT") == (
        "ERR GT and LT options at the same time are not compatible")
    assert r.err("EXPIRE", "k", "1", "foo") == "ERR Unsupported option foo"
    assert r.err("EXPIRE", "k", "x", "foo") == "ERR Unsupported option foo"  # options first
    assert r.err("EXPIRE", "k", "x") == "ERR value is not an integer or out of range"
    assert r.err("EXPIRE", "k", "9223372036854775807") == (
        "ERR invalid expire time in 'expire' command")
    assert r.err("PEXPIRE", "k", "9223372036854775807") == (
        "ERR invalid expire time in 'pexpire' command")


def test_persist(r):
    r("SET", "k", "v", "EX", "10")
    assert r.effects("PERSIST", "k") == (1, [[b"PERSIST", b"k"]])
    assert r.effects("PERSIST", "k") == (0, [])
    assert r("PERSIST", "missing") == 0
    assert r("TTL", "k") == -1
    r.assert_replays()






def test_stream_keys_expire_too(r):
    r("XADD", "s", "1-1", "f", "v")
    assert r("EXPIRE", "s", "1") == 1
    assert r("TTL", "s") == 1
    r.clock.now += 1001
    assert r.effects("XLEN", "s") == (0, [[b"DEL", b"s"]])
    assert r("TYPE", "s") == "none"
    r.assert_replays()


def test_keys_scan_skip_expired_keys_dbsize_counts_them(r):
    r("SET", "a", "1", "PX", "1")
    r("SET", "b", "2")
    r("XADD", "s", "1-1", "f", "v")
    r.clock.now += 2
    assert r("KEYS", "*") == [b"b", b"s"]
    assert sorted(r("SCAN", "0", "COUNT", "100")[1]) == [b"b", b"s"]
    assert r("SCAN", "0", "TYPE", "string")[1] == [b"b"]
    assert r("SCAN", "0", "TYPE", "stream")[1] == [b"s"]
    assert r("DBSIZE") == 3


def test_rename_moves_the_ttl(r):
    r("SET", "a", "1", "EX", "100")
    r("XADD", "s", "1-1", "f", "v")
    assert r("RENAME", "a", "b") == "OK"
    assert (r("TTL", "a"), r("TTL", "b")) == (-2, 100)
    assert r("RENAME", "s", "b") == "OK"  # a stream over a string: the TTL goes with b
    assert (r("TYPE", "b"), r("TTL", "b")) == ("stream", -1)
    r("SET", "c", "x")
    assert r("RENAMENX", "b", "c") == 0
    r.assert_replays()




def test_exec_expires_each_queued_commands_keys(r):
    r("SET", "k", "v", "PX", "1")
    r.clock.now += 2
    session = r.engine.session
    for argv in (("MULTI",), ("GET", "k"), ("SET", "k", "w")):
        r.effects(*argv, session=session)
    assert r.effects("EXEC", session=session) == (
        [None, "OK"], [[b"DEL", b"k"], [b"SET", b"k", b"w"]])
    r.assert_replays()


def test_active_cycle_deletes_expired_keys_and_logs_them(r):
    r("SET", "a", "1", "PX", "1")
    r("SET", "b", "2", "PX", "100")
    r("SELECT", "1")
    r("SET", "c", "3", "PX", "1")
    r.clock.now += 2
    assert r.engine.expiry_cycle.run() == 2
    assert [(rec.db, rec.effects) for rec in r.records[-2:]] == [
        (0, [[b"DEL", b"a"]]), (1, [[b"DEL", b"c"]])]
    assert r.engine.expiry_cycle.run() == 0
    r.assert_replays()


def test_replay_at_a_later_time_gives_the_same_state(r):
    r("SET", "k", "v", "EX", "10")
    r("XADD", "s", "1-1", "f", "v")
    r("PEXPIRE", "s", "5")
    replica = r.replay()  # its clock is far past both times: effects decide, not the clock
    assert replica.execute("DEBUG", "DIGEST") == r.digest()


def test_restore_with_a_ttl(r):
    r("XADD", "s", "1-1", "f", "v")
    payload = r("DUMP", "s")
    reply, effects = r.effects("RESTORE", "t", "5000", payload)
    assert (reply, effects[1]) == ("OK", [b"PEXPIREAT", b"t", b"%d" % (NOW + 5000)])
    assert r("PTTL", "t") == 5000
    assert r("RESTORE", "u", "1", payload, "ABSTTL") == "OK"  # already expired: nothing made
    assert r("EXISTS", "u") == 0
    r("SET", "str", "v")
    assert r.err("RESTORE", "str", "0", payload) == "BUSYKEY Target key name already exists."
    assert r("RESTORE", "str", "0", payload, "REPLACE") == "OK"
    assert r("TYPE", "str") == "stream"
    r.assert_replays()


def test_active_cycle_reaches_keys_behind_long_lived_ones(r):
    for i in range(30):
        r("SET", f"long{i}", "v", "EX", "1000")
    r("SET", "short", "v", "PX", "1")
    r.clock.now += 2
    assert r.engine.expiry_cycle.run() == 0  # the first 20 looked at, all live
    assert r.engine.expiry_cycle.run() == 1  # then the rest: the short one goes
    assert r("EXISTS", "short") == 0
    for i in range(100):
        r("SET", f"brief{i}", "v", "PX", "1")
    r.clock.now += 2
    # Past the 30 long-lived keys, round after round while most of a sample has expired.
    assert sum(r.engine.expiry_cycle.run() for _ in range(3)) == 100
    r.assert_replays()




