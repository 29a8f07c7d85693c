"""The hash's RDB codec (snapshot.rdb_hash): every RDB version written and read back with the
type Redis writes (13 or 16 for a listpack hash, 4 for a hashtable, 25 and 24 with field expiry
from RDB 12, refused before it), hand-built values of each legacy type (9's zipmap, 13's
ziplist, 16, 23, 24's relative TTLs, 25) loaded in the encoding Redis's loading gives them,
refusals, hostile bytes refused with RdbError only; and against redis-server 7.0.15: its DUMPs
of small and big hashes read here and ours (RDB 10) RESTOREd there. The keyspace's part
(RESTORE, import) runs once the engine holds hashes (engine.model.value_types)."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.hashes import Hash, HashLimits
from streamkeep.engine.model.value_types import BY_CLASS
from streamkeep.snapshot import rdb
from streamkeep.snapshot.rdb import RdbError, Reader, encode_length, encode_string
from streamkeep.snapshot.rdb_hash import HASH_TYPES, read_hash, skip_hash, write_hash
from streamkeep.snapshot.rdb_packed import ziplist

SMALL = [(b"f", b"v"), (b"n", b"12"), (b"-3", b""), (b"bin\x00", b"\xff" * 10)]
BIG = [(b"field%d" % i, b"value%d" % (i * 3)) for i in range(600)]  # past 512
IN_KEYSPACE = pytest.mark.skipif(Hash not in BY_CLASS, reason="the keyspace holds no hashes")


def test_a_hash_with_field_expiry_needs_rdb_12_the_codec_says() -> None:
    from streamkeep.engine.model.packed_hash import PackedHash
    from streamkeep.snapshot.rdb_hash import FIELD_EXPIRY_VERSION, hash_needs

    h = Hash.from_pairs(SMALL)
    assert hash_needs(h) == (rdb.MIN_VERSION, "")
    h.set_field_expiry(b"f", 1_900_000_000_000)
    assert hash_needs(h) == (FIELD_EXPIRY_VERSION, "field expiry") == (12, "field expiry")
    with pytest.raises(RdbError, match="needs RDB 12"):
        write_hash(h, FIELD_EXPIRY_VERSION - 1)
    if Hash in BY_CLASS:  # (the codec registered: what export-rdb asks)
        for cls in (Hash, PackedHash):
            codec = rdb.class_codec(cls)
            assert codec is not None and codec.needs is hash_needs


def _read(body: bytes, rdb_type: int, limits: HashLimits | None = None) -> Hash:
    r = Reader(body)
    h = read_hash(r, rdb_type) if limits is None else read_hash(r, rdb_type, limits)
    assert r.pos == len(body)
    skipper = Reader(body)
    skip_hash(skipper, rdb_type)
    assert skipper.pos == len(body)
    return h


@pytest.mark.parametrize("version", range(9, 16))
def test_every_version_round_trips_with_the_type_redis_writes(version: int) -> None:
    h = Hash.from_pairs(SMALL)
    rdb_type, body = write_hash(h, version)
    assert rdb_type == (13 if version == 9 else 16)
    back = _read(body, rdb_type)
    assert back.items() == h.items() and back.encoding == "listpack"
    h = Hash.from_pairs(BIG)
    rdb_type, body = write_hash(h, version)
    back = _read(body, rdb_type)
    assert rdb_type == 4 and back.encoding == "hashtable"
    assert sorted(back.items()) == sorted(h.items())


@pytest.mark.parametrize("version", range(9, 16))
def test_field_expiry_needs_rdb_12(version: int) -> None:
    small = Hash.from_pairs(SMALL)
    small.set_field_expiry(b"n", 1_900_000_000_000)
    small.set_field_expiry(b"f", 1_800_000_000_000)
    big = Hash.from_pairs(BIG)
    big.set_field_expiry(b"field7", 1_800_000_000_500)
    big.set_field_expiry(b"field9", 1_800_000_000_000)
    if version < 12:
        for h in (small, big):
            with pytest.raises(RdbError, match="needs RDB 12"):
                write_hash(h, version)
        return
    rdb_type, body = write_hash(small, version)
    assert rdb_type == 25
    back = _read(body, 25)
    assert back.encoding == "listpackex" and back.items() == small.items()
    assert back.fields_with_expiry() == [(b"f", 1_800_000_000_000), (b"n", 1_900_000_000_000)]
    assert body[:8] == struct.pack("<q", 1_800_000_000_000)  # the soonest, first
    rdb_type, body = write_hash(big, version)
    assert rdb_type == 24
    back = _read(body, 24)
    assert back.encoding == "hashtable" and sorted(back.items()) == sorted(big.items())
    assert back.fields_with_expiry() == [(b"field9", 1_800_000_000_000),
                                         (b"field7", 1_800_000_000_500)]


def test_a_listpackex_whose_ttls_are_gone() -> None:
    h = Hash.from_pairs(SMALL)
    h.set_field_expiry(b"n", 1_900_000_000_000)
    h.persist_field(b"n")
    assert h.encoding == "listpackex"
    rdb_type, body = write_hash(h, 12)
    assert rdb_type == 25 and body[:8] == b"\x00" * 8  # (no soonest time: 0, as Redis)
    assert _read(body, 25).encoding == "listpackex"
    rdb_type, body = write_hash(h, 11)  # an older version: a plain listpack
    assert rdb_type == 16 and _read(body, 16).items() == h.items()


def _blob(blob: bytes) -> bytes:
    return encode_length(len(blob)) + blob


def test_hand_built_legacy_types() -> None:
    # 9, a zipmap (Redis 2.4): count, then length, field, length, free byte, value, free space.
    zipmap = b"\x02" + b"\x01f\x02\x01vv\x00" + b"\x02ab\x01\x00c" + b"\xff"
    h = _read(_blob(zipmap), 9)
    assert h.items() == [(b"f", b"vv"), (b"ab", b"c")] and h.encoding == "listpack"
    # 13, a ziplist (Redis 6): field, value alternating, integers in their integer forms.
    zl = ziplist([b"f", b"v", b"n", b"7", b"big", b"100000"])
    assert zl[10:13] == b"\x00\x01f"
    h = _read(_blob(zl), 13)
    assert h.items() == [(b"f", b"v"), (b"n", b"7"), (b"big", b"100000")]
    # 4 with a value over hash-max-listpack-value: a hashtable, as Redis converts it.
    body = encode_length(2) + encode_string(b"a") + encode_string(b"x" * 65) + \
        encode_string(b"b") + encode_string(b"y")
    assert _read(body, 4).encoding == "hashtable"
    assert _read(body, 4, HashLimits(128, 100)).encoding == "listpack"
    # 24: TTLs relative to the soonest (+1; 0 is none), then field and value.
    soonest = 1_800_000_000_000
    body = (struct.pack("<q", soonest) + encode_length(2) + encode_length(1) + encode_string(b"a")
            + encode_string(b"1") + encode_length(0) + encode_string(b"b") + encode_string(b"2"))
    h = _read(body, 24)
    assert h.encoding == "listpackex" and h.fields_with_expiry() == [(b"a", soonest)]
    # 23 (7.4's release candidates): a listpack of triples, absolute times, no soonest before.
    lp = rdb.listpack([b"a", b"1", soonest, b"b", b"2", 0])
    h = _read(_blob(lp), 23)
    assert h.fields_with_expiry() == [(b"a", soonest)] and len(h) == 2


def test_refusals() -> None:
    lp = rdb.listpack
    for rdb_type, body, message in (
            (16, _blob(lp([b"a"])), "odd"),
            (16, _blob(lp([b"a", b"1", b"a", b"2"])), "twice"),
            (16, _blob(lp([])), "empty"),
            (4, encode_length(0), "empty"),
            (25, b"\x00" * 8 + _blob(lp([b"a", b"1", b"x"])), "not an integer"),
            (25, b"\x00" * 8 + _blob(lp([b"a", b"1", -5])), "out of range"),
            (25, b"\x00" * 8 + _blob(lp([b"a", b"1", 1 << 49])), "out of range"),
            (9, _blob(b"\x01\x05f\xff"), "zipmap")):
        with pytest.raises(RdbError, match=message):
            read_hash(Reader(body), rdb_type)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(rdb_type=st.sampled_from(HASH_TYPES), data=st.binary(max_size=300))
def test_hostile_bytes_raise_rdb_error_only(rdb_type: int, data: bytes) -> None:
    for reader in (read_hash, skip_hash):
        with contextlib.suppress(RdbError):
            reader(Reader(data), rdb_type)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_values_raise_rdb_error_only(data) -> None:
    version = data.draw(st.sampled_from([9, 10, 12, 15]))
    h = Hash.from_pairs(data.draw(st.sampled_from([SMALL, BIG[:30], BIG])))
    if version >= 12 and data.draw(st.booleans()):
        h.set_field_expiry(h.keys()[0], 1_800_000_000_000)
    rdb_type, body = write_hash(h, version)
    raw = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        if data.draw(st.booleans()):
            raw[at] = data.draw(st.integers(0, 255))
        else:
            raw[at:at + 9] = data.draw(st.sampled_from([b"\x81" + b"\xff" * 8,
                                                        b"\x80\xff\xff\xff\xff",
                                                        b"\xc3\x80\xff\xff\xff\xff"]))
    if data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw))):]
    with contextlib.suppress(RdbError):
        read_hash(Reader(bytes(raw)), rdb_type)


# --- against redis-server 7.0.15 ----------------------------------------------------------------


def _build_on_redis(client) -> dict[str, list[tuple[bytes, bytes]]]:
    hashes = {"small": SMALL, "big": BIG, "long": [(b"k", b"v" * 80), (b"j", b"1")]}
    for key, pairs in hashes.items():
        client.hset(key, mapping=dict(pairs))
    return hashes


def _value_of(payload: bytes) -> Hash:
    r = Reader(payload[:-10])
    return read_hash(r, r.byte())


def test_redis_payloads_read_here_and_ours_restore_there(redis_client) -> None:
    hashes = _build_on_redis(redis_client)
    for key, pairs in hashes.items():
        theirs = redis_client.dump(key)
        h = _value_of(theirs)
        assert sorted(h.items()) == sorted(pairs)
        assert h.encoding.encode() == redis_client.object("encoding", key)
        rdb_type, body = write_hash(h, 10)
        ours = rdb.payload_from(rdb_type, body, 10)
        if key == "small":  # a listpack: the same bytes as Redis's (nothing compressed)
            assert Reader(ours[1:]).string() == Reader(theirs[1:]).string()
        redis_client.restore(key + "-back", 0, ours)
        assert redis_client.hgetall(key + "-back") == dict(pairs)
        assert redis_client.object("encoding", key + "-back") == h.encoding.encode()


@IN_KEYSPACE
def test_restore_and_dump_in_the_keyspace(redis_client) -> None:
    from streamkeep import Engine

    hashes = _build_on_redis(redis_client)
    e = Engine(dump_rdb_version=10)
    for key, pairs in hashes.items():
        assert e.execute("RESTORE", key, "0", redis_client.dump(key)) == "OK"
        assert e.execute("TYPE", key) == "hash"
        redis_client.restore(key + "-back", 0, e.execute("DUMP", key))
        assert redis_client.hgetall(key + "-back") == dict(pairs)


@IN_KEYSPACE
def test_restore_of_field_expiry_limits_and_dump_versions() -> None:
    from streamkeep import Engine, ReplyError

    h = Hash.from_pairs(SMALL)
    h.set_field_expiry(b"f", 1_800_000_000_000)
    rdb_type, body = write_hash(h, 15)
    payload = rdb.payload_from(rdb_type, body, 15)
    e = Engine()
    e.execute("HSET", "other", "a", "1")
    e.execute("HPEXPIREAT", "other", "1900000000000", "FIELDS", "1", "a")  # (a registry now)
    assert e.execute("RESTORE", "h", "0", payload) == "OK"
    assert e.execute("HPEXPIRETIME", "h", "FIELDS", "2", "f", "n") == [1_800_000_000_000, -1]
    assert e.execute("OBJECT", "ENCODING", "h") == b"listpackex"
    assert b"subexpiry=2" in e.execute("INFO", "keyspace")
    assert e.execute("DUMP", "h") == payload  # RDB 15 by default: the same bytes back
    e.set_config("dump-rdb-version", 10)
    with pytest.raises(ReplyError, match="field expiry needs RDB 12"):
        e.execute("DUMP", "h")
    e.execute("CONFIG", "SET", "hash-max-listpack-entries", "2")
    plain = rdb.payload_from(*write_hash(Hash.from_pairs(SMALL), 10), 10)
    e.execute("RESTORE", "big", "0", plain)
    assert e.execute("OBJECT", "ENCODING", "big") == b"hashtable"


@IN_KEYSPACE
def test_import_of_a_redis_dump_with_hashes(redis_client, tmp_path, capsys) -> None:
    from streamkeep import Engine
    from streamkeep.tools.main import main

    hashes = _build_on_redis(redis_client)
    redis_client.save()
    source = tmp_path / "dump.rdb"
    config = redis_client.config_get("dir")["dir"], redis_client.config_get("dbfilename")
    source.write_bytes((Path(config[0]) / config[1]["dbfilename"]).read_bytes())
    assert main(["import", str(source), "--out", str(tmp_path / "d")]) == 0
    assert "3 hash key(s)" in capsys.readouterr().out
    with Engine.open(str(tmp_path / "d")) as e:
        for key, pairs in hashes.items():
            assert e.execute("HGETALL", key)[::2] and dict(
                zip(*[iter(e.execute("HGETALL", key))] * 2, strict=True)) == dict(pairs)


@IN_KEYSPACE
def test_export_rdb_of_field_expiry_takes_rdb_12(tmp_path, capsys) -> None:
    from streamkeep import Engine
    from streamkeep.tools.main import main

    data = tmp_path / "data"
    with Engine.open(str(data)) as e:
        e.execute("HSET", "h", "f", "v", "g", "w")
        e.execute("HPEXPIREAT", "h", "1900000000000", "FIELDS", "1", "f")
        e.execute("HSET", "plain", "a", "1")
    out = tmp_path / "dump.rdb"
    assert main(["export-rdb", str(data), "--out", str(out), "--json"]) == 0
    printed = capsys.readouterr()
    assert '"rdb_version": 12' in printed.out and 'field expiry of hash "h"' in printed.err
    assert main(["export-rdb", str(data), "--out", str(tmp_path / "old.rdb"),
                 "--rdb-version", "10"]) == 3
    assert "RDB 10 cannot hold the field expiry of hash" in capsys.readouterr().err
    assert main(["import", str(out), "--out", str(tmp_path / "back")]) == 0
    with Engine.open(str(tmp_path / "back")) as e:
        assert e.execute("HPEXPIRETIME", "h", "FIELDS", "2", "f", "g") == [1_900_000_000_000, -1]
        assert e.execute("HGET", "plain", "a") == b"1"
