"""The sorted set's RDB codec (snapshot.rdb_zset): every RDB version written and read back with
the type Redis writes (12 or 17 for a listpack set, 5 for a skiplist one), hand-built values of
each legacy type (3's scores as text, 5, 12's ziplist, 17) loaded in the encoding Redis's loading
gives them, refusals (NaN, a duplicate member, an empty set, bad blobs), hostile bytes refused
with RdbError only; and against redis-server 7.0.15: its DUMPs of small and big sorted sets
RESTOREd here and ours (RDB 10) RESTOREd there, byte for byte where neither side compresses,
a dump.rdb of its sorted sets imported, an export-rdb loaded by it, a RESTORE from a primary
applied by a replica's applier."""

from __future__ import annotations

import contextlib
import math
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from streamkeep.engine.model.zset import LISTPACK, SKIPLIST, ZSet, ZSetLimits
from streamkeep.snapshot import rdb
from streamkeep.snapshot.rdb import RdbError, Reader, encode_length, encode_string
from streamkeep.snapshot.rdb_packed import ziplist
from streamkeep.snapshot.rdb_types import dump_value_payload, load_value_payload
from streamkeep.snapshot.rdb_zset import ZSET_TYPES, read_zset, skip_zset, write_zset

SMALL = [(b"a", 1.0), (b"b", 2.5), (b"12", -0.0), (b"-7", -3.0), (b"c", math.inf),
         (b"d", -math.inf), (b"e", 0.1), (b"f", 1e20), (b"x" * 64, 7.0), (b"\x00\xff", 2.5)]
BIG = [(b"m%d" % i, (i % 37) * 0.5 - 3) for i in range(300)] + [(b"%d" % i, i) for i in range(5)]


def _roundtrip(items: list[tuple[bytes, float]], version: int) -> tuple[int, ZSet, ZSet]:
    z = ZSet.from_items(items)
    rdb_type, body = write_zset(z, version)
    r = Reader(body)
    back = read_zset(r, rdb_type)
    assert r.pos == len(body)
    skipper = Reader(body)
    skip_zset(skipper, rdb_type)
    assert skipper.pos == len(body)
    return rdb_type, z, back


def _same(a: ZSet, b: ZSet) -> None:
    """The same members and scores, signs of zero apart (a listpack stores -0 as 0)."""
    assert [(m, s) for m, s in a.items()] == [(m, s) for m, s in b.items()]


@pytest.mark.parametrize("version", range(9, 16))
def test_every_version_round_trips_with_the_type_redis_writes(version: int) -> None:
    rdb_type, z, back = _roundtrip(SMALL, version)
    assert rdb_type == (12 if version == 9 else 17)
    assert back.encoding == LISTPACK == z.encoding
    _same(z, back)
    rdb_type, z, back = _roundtrip(BIG, version)
    assert rdb_type == 5 and back.encoding == SKIPLIST == z.encoding
    _same(z, back)
    # A skiplist set small enough comes back a listpack, as Redis's loading converts it.
    z = ZSet.from_items(SMALL[:3])
    z.convert(SKIPLIST)
    rdb_type, body = write_zset(z, version)
    assert rdb_type == 5 and read_zset(Reader(body), 5).encoding == LISTPACK


def test_the_skiplist_form_is_written_highest_first_with_binary_doubles() -> None:
    z = ZSet.from_items([(b"m%03d" % i, float(i)) for i in range(200)])
    _type, body = write_zset(z, 10)
    r = Reader(body)
    assert r.length() == 200
    assert r.string() == b"m199" and struct.unpack("<d", r.take(8))[0] == 199.0


def test_listpack_scores_are_integers_when_they_are_whole() -> None:
    z = ZSet.from_items([(b"a", 3.0), (b"b", 1.5), (b"c", -0.0)])
    _type, body = write_zset(z, 11)
    items = rdb.listpack_items(Reader(body).string())
    assert items == [b"c", 0, b"b", b"1.5", b"a", 3]


def _text_score(x: float | None, text: bytes = b"") -> bytes:
    special = {math.inf: 254, -math.inf: 255}
    if x is None:
        return bytes((253,))  # NaN
    if x in special:
        return bytes((special[x],))
    return bytes((len(text),)) + text


def test_type_3_scores_as_text_with_the_special_lengths() -> None:
    body = (encode_length(4) + encode_string(b"a") + _text_score(1.5, b"1.5")
            + encode_string(b"b") + _text_score(math.inf) + encode_string(b"c")
            + _text_score(-math.inf) + encode_string(b"d") + _text_score(0.0, b"-2.5e3"))
    z = read_zset(Reader(body), 3)
    assert list(z.items()) == [(b"c", -math.inf), (b"d", -2500.0), (b"a", 1.5),
                               (b"b", math.inf)]
    assert z.encoding == LISTPACK
    nan = encode_length(1) + encode_string(b"a") + _text_score(None)
    with pytest.raises(RdbError, match="NaN"):
        read_zset(Reader(nan), 3)
    junk = encode_length(1) + encode_string(b"a") + b"\x03abc"
    with pytest.raises(RdbError, match="not a number"):
        read_zset(Reader(junk), 3)


def test_type_5_loads_as_redis_decides_the_encoding() -> None:
    def body(items: list[tuple[bytes, float]]) -> bytes:
        return encode_length(len(items)) + b"".join(
            encode_string(m) + struct.pack("<d", s) for m, s in items)
    assert read_zset(Reader(body([(b"a", 2.0), (b"b", 1.0)])), 5).encoding == LISTPACK
    long_member = body([(b"a" * 65, 1.0)])
    assert read_zset(Reader(long_member), 5).encoding == SKIPLIST
    assert read_zset(Reader(long_member), 5, ZSetLimits(128, 100)).encoding == LISTPACK
    many = body([(b"%d" % i, float(i)) for i in range(129)])
    assert read_zset(Reader(many), 5).encoding == SKIPLIST
    with pytest.raises(RdbError, match="twice"):
        read_zset(Reader(body([(b"a", 1.0), (b"a", 2.0)])), 5)
    with pytest.raises(RdbError, match="NaN"):
        read_zset(Reader(body([(b"a", math.nan)])), 5)
    with pytest.raises(RdbError, match="empty"):
        read_zset(Reader(body([])), 5)


# A ziplist as Redis 6 wrote it for ZADD z 1 a 2.5 b: header (bytes 24, tail at 18, count 4),
# entries with their previous lengths, "a", 1 as an immediate int, "b", "2.5", the end.
ZIPLIST_Z = bytes.fromhex("18000000120000000400" "0001 61" "03 f2" "02 01 62" "03 03 322e35"
                          "ff".replace(" ", ""))


def test_type_12_a_ziplist_redis_6_wrote() -> None:
    body = encode_length(len(ZIPLIST_Z)) + ZIPLIST_Z
    z = read_zset(Reader(body), 12)
    assert list(z.items()) == [(b"a", 1.0), (b"b", 2.5)] and z.encoding == LISTPACK
    assert ziplist([b"a", b"1", b"b", b"2.5"]) == ZIPLIST_Z  # what RDB 9 writes is the same
    # Past the entries limit: a skiplist, as Redis converts it.
    items = [x for i in range(130) for x in (b"m%d" % i, b"%d" % i)]
    zl = ziplist(items)
    assert read_zset(Reader(encode_length(len(zl)) + zl), 12).encoding == SKIPLIST
    bad_prev = bytearray(ZIPLIST_Z)
    bad_prev[13] = 9  # the second entry's previous-entry length
    with pytest.raises(RdbError):
        read_zset(Reader(encode_length(len(bad_prev)) + bytes(bad_prev)), 12)


def test_type_17_stays_a_listpack_unless_it_has_too_many_members() -> None:
    def body(items: list[bytes | int]) -> bytes:
        lp = rdb.listpack(items)
        return encode_length(len(lp)) + lp
    # A member over zset-max-listpack-value: still a listpack (Redis's loader does not look).
    z = read_zset(Reader(body([b"a" * 100, 1, b"b", b"-2.5"])), 17)
    assert z.encoding == LISTPACK and list(z.items()) == [(b"b", -2.5), (b"a" * 100, 1.0)]
    many = [x for i in range(129) for x in (b"m%d" % i, i)]
    assert read_zset(Reader(body(many)), 17).encoding == SKIPLIST
    assert read_zset(Reader(body(many)), 17, ZSetLimits(200, 64)).encoding == LISTPACK
    for items, message in (([b"a"], "odd"), ([b"a", 1, b"a", 2], "twice"),
                           ([b"a", b"x1"], "not a number"), ([b"a", b"nan"], "not a number|NaN"),
                           ([], "empty")):
        with pytest.raises(RdbError, match=message):
            read_zset(Reader(body(items)), 17)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(rdb_type=st.sampled_from(ZSET_TYPES), data=st.binary(max_size=300))
def test_hostile_bytes_raise_rdb_error_only(rdb_type: int, data: bytes) -> None:
    for reader in (read_zset, skip_zset):
        with contextlib.suppress(RdbError):
            reader(Reader(data), rdb_type)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_values_raise_rdb_error_only(data) -> None:
    version = data.draw(st.sampled_from([9, 10, 15]))
    items = data.draw(st.sampled_from([SMALL, BIG[:40], BIG]))
    rdb_type, body = write_zset(ZSet.from_items(items), version)
    raw = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            raw[at] = data.draw(st.integers(0, 255))
        else:  # a hostile length: the biggest forms
            raw[at:at + 9] = data.draw(st.sampled_from([b"\x81" + b"\xff" * 8,
                                                        b"\x80\xff\xff\xff\xff",
                                                        b"\xc3\x80\xff\xff\xff\xff"]))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw))):]
    with contextlib.suppress(RdbError):
        read_zset(Reader(bytes(raw)), rdb_type)
    payload = rdb.payload_from(rdb_type, bytes(raw), version)
    with contextlib.suppress(RdbError):
        load_value_payload(payload)


# --- DUMP / RESTORE against redis-server 7.0.15 -----------------------------------------------------


def _build_on_redis(client) -> dict[str, list[tuple[bytes, float]]]:
    sets = {"small": [(b"a", 1.0), (b"b", 2.5), (b"c", -4.0), (b"1000", 3.0), (b"d", 1e20)],
            "ints": [(b"%d" % i, float(i * 7 - 20)) for i in range(20)],
            "big": [(b"m%d" % i, (i % 41) * 0.25 - 5) for i in range(400)],
            "long": [(b"k" * 80, 1.0), (b"j", 2.0)]}  # a member past 64 bytes: a skiplist
    for key, items in sets.items():
        client.zadd(key, {m: s for m, s in items})
    return sets


def _decoded(payload: bytes) -> tuple:
    """A sorted set payload's type, footer and value with every string decompressed (Redis
    LZF-compresses a string over 20 bytes when that saves space; streamkeep never does)."""
    r = Reader(payload[:-8])
    rdb_type = r.byte()
    if rdb_type in (12, 17):
        value: object = r.string()
    else:
        value = [(r.string(), r.take(8)) for _ in range(r.length())]
    return rdb_type, value, r.take(2), r.pos == len(r.data)


def _pairs(reply: list) -> list[tuple[bytes, float]]:
    return [(reply[i], float(reply[i + 1])) for i in range(0, len(reply), 2)]


def test_redis_payloads_restore_here_and_ours_restore_there(redis_client) -> None:
    sets = _build_on_redis(redis_client)
    e = Engine(dump_rdb_version=10)
    for key in sets:
        theirs = redis_client.dump(key)
        assert theirs[0] in (17, 5)
        assert e.execute("RESTORE", key, "0", theirs) == "OK"
        expected = _pairs(redis_client.execute_command("ZRANGE", key, 0, -1, "WITHSCORES"))
        assert _pairs(e.execute("ZRANGE", key, "0", "-1", "WITHSCORES")) == expected
        encoding = redis_client.object("encoding", key)
        assert e.execute("OBJECT", "ENCODING", key) == encoding
        ours = e.execute("DUMP", key)
        assert _decoded(ours) == _decoded(theirs), key  # the same bytes, compression apart
        redis_client.restore(key + "-back", 0, ours)
        assert _pairs(redis_client.execute_command("ZRANGE", key + "-back", 0, -1,
                                                   "WITHSCORES")) == expected
        assert redis_client.object("encoding", key + "-back") == encoding


@pytest.mark.parametrize("version", [10, 11])
def test_dumps_at_versions_7_0_accepts_or_refuses_as_it_should(redis_client,
                                                               version: int) -> None:
    e = Engine(dump_rdb_version=version)
    e.execute("ZADD", "z", "1", "a", "2", "b")
    payload = e.execute("DUMP", "z")
    assert payload[0] == 17 and payload[-10:-8] == struct.pack("<H", version)
    if version == 10:
        redis_client.restore("z", 0, payload)
        assert redis_client.zscore("z", "b") == 2.0
    else:  # 7.0 refuses a footer newer than its RDB 10
        with pytest.raises(Exception, match="payload version or checksum"):
            redis_client.restore("z", 0, payload)


def test_restore_sizes_the_set_by_the_current_limits() -> None:
    e = Engine()
    payload = dump_value_payload(ZSet.from_items(BIG[:100]), 15)
    e.execute("CONFIG", "SET", "zset-max-listpack-entries", "50")
    e.execute("RESTORE", "z", "0", payload)
    assert e.execute("OBJECT", "ENCODING", "z") == b"skiplist"


def test_restore_keeps_redis_ttl_replace_and_busykey_rules() -> None:
    e = Engine()
    payload = dump_value_payload(ZSet.from_items([(b"a", 1.0)]), 15)
    e.execute("SET", "k", "v")
    with pytest.raises(ReplyError) as busy:
        e.execute("RESTORE", "k", "0", payload)
    assert busy.value.line == "BUSYKEY Target key name already exists."
    reply, effects = e.execute_with_effects("RESTORE", "k", "5000", payload, "REPLACE")
    assert reply == "OK" and e.execute("TYPE", "k") == "zset"
    assert effects[0] == [b"RESTORE", b"k", b"0", payload, b"REPLACE"]
    assert effects[1][0] == b"PEXPIREAT" and 0 < e.execute("PTTL", "k") <= 5000
    reply, effects = e.execute_with_effects("RESTORE", "k", "1", payload, "REPLACE", "ABSTTL")
    assert reply == "OK" and effects == [[b"DEL", b"k"]] and e.execute("EXISTS", "k") == 0
    bad = rdb.payload_from(17, encode_length(3) + b"abc", 15)
    with pytest.raises(ReplyError) as refused:
        e.execute("RESTORE", "k", "0", bad)
    assert refused.value.line == "ERR Bad data format"


def test_restore_is_replayed_from_the_journal(tmp_path: Path) -> None:
    payload = dump_value_payload(ZSet.from_items(BIG), 15)
    with Engine.open(str(tmp_path / "d")) as e:
        e.execute("RESTORE", "z", "0", payload)
        digest = e.digest()
    with Engine.open(str(tmp_path / "d")) as e:
        assert e.digest() == digest and e.execute("ZCARD", "z") == len(BIG)


# --- files: import, export-rdb, a replica's applier -----------------------------------------------


def _saved_dump(client) -> Path:
    client.save()
    directory = client.config_get("dir")["dir"]
    return Path(directory) / client.config_get("dbfilename")["dbfilename"]


def test_import_of_a_redis_dump_with_sorted_sets(redis_client, tmp_path, capsys) -> None:
    from streamkeep.tools.main import main

    sets = _build_on_redis(redis_client)
    redis_client.expire("small", 1000)
    redis_client.rpush("l", "v")  # (a list: imported too)
    dump = tmp_path / "dump.rdb"
    dump.write_bytes(_saved_dump(redis_client).read_bytes())
    assert main(["import", str(dump), "--out", str(tmp_path / "d")]) == 0
    printed = capsys.readouterr().out
    assert "4 zset key(s)" in printed and "1 list key(s)" in printed
    assert "skipped" not in printed
    with Engine.open(str(tmp_path / "d")) as e:
        for key in sets:
            expected = _pairs(redis_client.execute_command("ZRANGE", key, 0, -1, "WITHSCORES"))
            assert _pairs(e.execute("ZRANGE", key, "0", "-1", "WITHSCORES")) == expected
        assert 0 < e.execute("TTL", "small") <= 1000


def test_export_rdb_writes_sorted_sets_redis_loads(start_redis, tmp_path, capsys) -> None:
    import redis

    from streamkeep.tools.main import main

    data = tmp_path / "data"
    with Engine.open(str(data)) as e:
        e.execute("ZADD", "small", "1", "a", "2.5", "b")
        e.execute("ZADD", "big", *[x for i in range(300) for x in (str(i % 17), f"m{i}")])
        e.execute("XADD", "s", "1-1", "f", "v")
        e.execute("PEXPIRE", "small", "100000")
        e.execute("BGREWRITEAOF")  # the sorted sets go through the snapshot's keys table too
        e.execute("ZADD", "after", "3", "c")
        expected = {k: e.execute("ZRANGE", k, "0", "-1", "WITHSCORES")
                    for k in ("small", "big", "after")}
    out = tmp_path / "redis" / "dump.rdb"
    out.parent.mkdir()
    assert main(["export-rdb", str(data), "--out", str(out), "--rdb-version", "10"]) == 0
    assert "3 zset key(s)" in capsys.readouterr().out
    server = start_redis("--dir", str(out.parent), "--dbfilename", out.name)
    client = redis.Redis(host=server.host, port=server.port, protocol=2)
    for key, pairs in expected.items():
        assert _pairs(client.execute_command("ZRANGE", key, 0, -1, "WITHSCORES")) == \
            _pairs(pairs)
    assert client.object("encoding", "big") == b"skiplist"
    assert client.object("encoding", "small") == b"listpack"
    assert 0 < client.pttl("small") <= 100000


def test_a_replica_applier_restores_a_primary_s_sorted_sets(redis_client) -> None:
    from streamkeep.replication.redis_commands import RedisApplier

    sets = _build_on_redis(redis_client)
    version, _aux, keys = rdb.read_rdb(_saved_dump(redis_client).read_bytes())
    e = Engine()
    applier = RedisApplier(e)
    applier.load(keys, version, replace_all=True)
    assert applier.loaded_keys["zset"] == len(sets)
    payload = redis_client.dump("small")
    applier.apply([b"RESTORE", b"copied", b"0", payload], 0)
    for key in [*sets, "copied"]:
        source = "small" if key == "copied" else key
        expected = _pairs(redis_client.execute_command("ZRANGE", source, 0, -1, "WITHSCORES"))
        assert _pairs(e.execute("ZRANGE", key, "0", "-1", "WITHSCORES")) == expected


@pytest.mark.parametrize("rdb_type, body, framing", [
    (5, b"\x81" + b"\xff" * 8 + encode_string(b"a") + bytes(8), True),  # 2**64-1 members
    (3, b"\x80\xff\xff\xff\xff" + encode_string(b"a") + b"\x011", True),
    (17, b"\x80\x7f\xff\xff\xff" + b"\x00" * 16, True),  # 2 GiB announced, 16 bytes there
    (17, b"\xc3\x05\x80\xff\xff\xff\xff" + b"\x04abcde", False),  # LZF announcing 4 GiB
    (17, encode_length(12) + b"\xff\xff\xff\x7f\x02\x00\x81a\x02\x01\x01\xff", False),
    (12, encode_length(11) + b"\xff\xff\xff\x7f\x0a\x00\x00\x00\xff\xff\xff", False),
])
def test_hostile_lengths_are_refused_at_once(rdb_type: int, body: bytes, framing: bool) -> None:
    """A length far past the data: refused when read (and when skipped, if it is the value's
    framing: a skip does not decode a packed blob)."""
    with pytest.raises(RdbError):
        read_zset(Reader(body), rdb_type)
    if framing:
        with pytest.raises(RdbError):
            skip_zset(Reader(body), rdb_type)
