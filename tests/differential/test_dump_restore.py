"""DUMP and RESTORE against a real redis-server (7.0): payloads travel both ways.

Streams built on redis-server (binary and repeated fields, deletions, many nodes, groups with
pending entries, consumers with none, an empty MKSTREAM stream) are DUMPed there and RESTOREd
into the engine: the same entries and the same XINFO STREAM FULL once DUMPed back (RDB 10, what
7.0 reads) and RESTOREd on redis-server beside the original. RESTORE's errors are Redis's lines;
corrupt payloads with a valid checksum are refused with `ERR Bad data format`, never a crash.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from streamkeep.snapshot import rdb
from tests.support.diffutil import WallClock


def _fill(client, key: str, n: int, seed: int = 0) -> None:
    for i in range(1, n + 1):
        fields = {"temp": str(i * 7 % 101)}
        if i % 5 == 0:
            fields["unit"] = "C"
        if i % 11 == 0:
            fields = {b"bin\x00\xff": b"\x00\xff" * (i % 40), b"n": b"-%d" % i}
        client.xadd(key, fields, id=f"{1700000000000 + i * 3}-{(i + seed) % 4}")


def _build(client) -> list[str]:
    client.flushall()
    _fill(client, "big", 450)  # five nodes, a field set change, binary values
    client.xdel("big", "1700000000015-1", "1700000000300-0", "1700000000303-1")
    client.xgroup_create("big", "g1", "0")
    client.xreadgroup("g1", "alice", {"big": ">"}, count=7)
    client.xreadgroup("g1", "bob", {"big": ">"}, count=2)
    client.execute_command("XGROUP", "CREATECONSUMER", "big", "g1", "idle")
    client.xgroup_create("big", "g2", "$")
    _fill(client, "small", 3)
    client.execute_command("XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    client.xadd("gone", {"f": "v"}, id="5-5")
    client.xdel("gone", "5-5")  # no entries left, metadata kept
    return ["big", "small", "empty", "gone"]


@pytest.fixture
def engine():
    e = Engine(clock=WallClock(), dump_rdb_version=10)
    yield e
    e.close()


def test_redis_payloads_restore_here_and_go_back(redis_client, engine) -> None:
    for key in _build(redis_client):
        payload = redis_client.dump(key)
        assert engine.execute("RESTORE", key, "0", payload) == "OK"
        assert engine.execute("XRANGE", key, "-", "+") == [
            [i, [x for pair in f.items() for x in pair]]
            for i, f in redis_client.xrange(key)], key
        assert engine.execute("XLEN", key) == redis_client.xlen(key)
        back = engine.execute("DUMP", key)
        assert struct.unpack("<H", back[-10:-8])[0] == 10
        redis_client.restore(key + ":back", 0, back)
        assert redis_client.xrange(key + ":back") == redis_client.xrange(key)
        assert redis_client.execute_command("XINFO", "STREAM", key + ":back", "FULL") == \
            redis_client.execute_command("XINFO", "STREAM", key, "FULL"), key


def test_payloads_made_here_restore_on_redis(redis_client, engine) -> None:
    redis_client.flushall()
    engine.execute("XADD", "s", "1-1", "f", "v", "g", "12345")
    engine.execute("XADD", "s", "2-0", "other", "x" * 300)
    for i in range(250):
        engine.execute("XADD", "s", "*", "f", str(i))
    engine.execute("XDEL", "s", "2-0")
    engine.execute("XGROUP", "CREATE", "s", "grp", "0")
    engine.execute("XREADGROUP", "GROUP", "grp", "c1", "COUNT", "3", "STREAMS", "s", ">")
    engine.execute("XGROUP", "CREATECONSUMER", "s", "grp", "c2")
    redis_client.restore("s", 0, engine.execute("DUMP", "s"))
    assert [[i, [x for p in f.items() for x in p]] for i, f in redis_client.xrange("s")] == \
        engine.execute("XRANGE", "s", "-", "+")
    info = _pairs(redis_client.execute_command("XINFO", "STREAM", "s", "FULL"))
    mine = _pairs(engine.execute("XINFO", "STREAM", "s", "FULL"))
    for name in (b"length", b"last-generated-id", b"max-deleted-entry-id", b"entries-added",
                 b"recorded-first-entry-id", b"radix-tree-keys"):
        assert info[name] == mine[name], name
    theirs_group, my_group = _pairs(info[b"groups"][0]), _pairs(mine[b"groups"][0])
    for name in (b"name", b"last-delivered-id", b"entries-read", b"pel-count", b"pending"):
        assert theirs_group[name] == my_group[name], name
    assert [_pairs(c)[b"name"] for c in theirs_group[b"consumers"]] == [b"c1", b"c2"]


def _pairs(items: list) -> dict:
    return dict(zip(items[0::2], items[1::2], strict=True))


def test_restore_errors_are_redis_lines(redis_client, engine) -> None:
    redis_client.flushall()
    redis_client.xadd("s", {"f": "v"}, id="1-1")
    payload = redis_client.dump("s")
    engine.execute("RESTORE", "s", "0", payload)
    corrupt = payload[:-1] + bytes([payload[-1] ^ 1])
    cases = [("s", "0", payload), ("t", "-1", payload), ("t", "0", b"short"),
             ("t", "0", corrupt), ("t", "0", payload, "IDLETIME", "-1"),
             ("t", "0", payload, "FREQ", "256"), ("t", "0", payload, "IDLETIME", "1", "FREQ", "1"),
             ("t", "0", payload, "BOGUS"), ("t", "x", payload)]
    for args in cases:
        with pytest.raises(Exception) as theirs:
            redis_client.execute_command("RESTORE", *args)
        with pytest.raises(ReplyError) as mine:
            engine.execute("RESTORE", *args)
        assert mine.value.line == str(theirs.value) or \
            mine.value.line.split(" ", 1)[1] == str(theirs.value), args
    assert engine.execute("RESTORE", "s", "0", payload, "REPLACE", "IDLETIME", "5") == "OK"
    assert engine.execute("DUMP", "missing") is None


def test_other_types_and_ttls_are_refused_clearly(redis_client, engine) -> None:
    redis_client.flushall()
    redis_client.set("str", "hello")
    with pytest.raises(ReplyError, match="streams only: the payload holds a string"):
        engine.execute("RESTORE", "k", "0", redis_client.dump("str"))
    redis_client.xadd("s", {"f": "v"}, id="1-1")
    payload = redis_client.dump("s")
    with pytest.raises(ReplyError, match="do not expire"):
        engine.execute("RESTORE", "k", "100000", payload)
    # An expiry already past: OK, and nothing is made (as Redis).
    assert engine.execute("RESTORE", "k", "1", payload, "ABSTTL") == "OK"
    assert engine.execute("EXISTS", "k") == 0


def test_restore_is_logged_and_replayed(tmp_path, redis_client) -> None:
    redis_client.flushall()
    _fill(redis_client, "s", 120)
    redis_client.xgroup_create("s", "g", "0")
    redis_client.xreadgroup("g", "c", {"s": ">"}, count=4)
    with Engine.open(str(tmp_path / "d")) as e:
        e.execute("RESTORE", "s", "0", redis_client.dump("s"))
        digest = e.digest()
    with Engine.open(str(tmp_path / "d")) as e:
        assert e.digest() == digest
        assert e.execute("XPENDING", "s", "g")[0] == 4


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_corrupt_payloads_are_refused_cleanly(data) -> None:
    e = Engine(clock=lambda: 1_700_000_000_000)
    e.execute("XADD", "s", "1-1", "f", "v", "n", "7")
    for i in range(130):
        e.execute("XADD", "s", f"{i + 2}-{i % 3}", "f", str(i))
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    body = bytearray(e.execute("DUMP", "s")[:-8])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(1, len(body) - 3))
        body[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del body[data.draw(st.integers(1, len(body) - 3)):-2]
    payload = bytes(body) + struct.pack("<Q", rdb.crc64(bytes(body)))
    try:
        assert e.execute("RESTORE", "t", "0", payload, "REPLACE") == "OK"
        e.execute("XRANGE", "t", "-", "+")
        e.execute("XINFO", "STREAM", "t", "FULL")
    except ReplyError as err:
        assert err.line in ("ERR Bad data format",
                            "ERR DUMP payload version or checksum are wrong"), err.line




@pytest.mark.parametrize("version", [9, 10, 11, 12, 13])
def test_every_rdb_version_round_trips(redis_client, version: int) -> None:
    """DUMP at each version RESTOREs here with the same entries (types 15, 19, 21, 21, 26);
    9 and 10, the versions redis-server 7.0 reads, also RESTORE there."""
    e = Engine(clock=lambda: 1_700_000_000_000, dump_rdb_version=version)
    for i in range(1, 260):
        e.execute("XADD", "s", f"{i}-{i % 2}", "f", str(i), *(["g", "x"] if i % 9 else []))
    e.execute("XDEL", "s", "3-1", "100-0")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "4", "STREAMS", "s", ">")
    e.execute("XADD", "i", "IDMP", "p", "k1", "*", "f", "v")
    for key in ("s", "i"):
        payload = e.execute("DUMP", key)
        assert payload[0] == rdb.TYPE_STREAM[version]
        assert e.execute("RESTORE", key + "2", "0", payload) == "OK"
        assert e.execute("XRANGE", key + "2", "-", "+") == e.execute("XRANGE", key, "-", "+")
        assert e.execute("XPENDING", key + "2", "g") == e.execute("XPENDING", key, "g") \
            if key == "s" else True
        if version >= 11:  # every field kept (26: the IDMP state too)
            full = e.execute("XINFO", "STREAM", key, "FULL")
            again = e.execute("XINFO", "STREAM", key + "2", "FULL")
            if version < 13:  # no IDMP tail: the settings come back as the defaults
                full, again = full[:14], again[:14]
            assert again == full
        if version <= 10:
            redis_client.delete(key)
            redis_client.restore(key, 0, payload)
            assert redis_client.xlen(key) == e.execute("XLEN", key)
    e.close()
