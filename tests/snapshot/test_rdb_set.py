"""The set's RDB codec (snapshot.rdb_set): every RDB version written and read back with the type
Redis writes (11 for an intset, 20 for a listpack set from RDB 11 and 2 before it, 2 for a
hashtable), hand-built values of each type (2, an intset at each width, 20) loaded in the
encoding Redis's loading gives them, refusals, hostile bytes refused with RdbError only; and
against redis-server 7.0.15: its DUMPs of small and big sets read here and ours (RDB 10)
RESTOREd there. The keyspace's part (RESTORE) runs once the engine holds sets
(engine.model.value_types)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.value_types import BY_CLASS
from streamkeep.snapshot import rdb
from streamkeep.snapshot.rdb import RdbError, Reader, encode_length, encode_string
from streamkeep.snapshot.rdb_packed import intset, intset_values
from streamkeep.snapshot.rdb_set import SET_TYPES, read_set, skip_set, write_set

INTS = [b"1", b"-5", b"70000", b"-9223372036854775808", b"12"]
WORDS = [b"a", b"b", b"12", b"\x00\xff"]
BIG = [b"member%d" % i for i in range(300)]
BIG_INTS = [b"%d" % (i * 3) for i in range(600)]
IN_KEYSPACE = pytest.mark.skipif(RSet not in BY_CLASS, reason="the keyspace holds no sets")


def _read(body: bytes, rdb_type: int) -> RSet:
    r = Reader(body)
    s = read_set(r, rdb_type)
    assert r.pos == len(body)
    skipper = Reader(body)
    skip_set(skipper, rdb_type)
    assert skipper.pos == len(body)
    return s


@pytest.mark.parametrize("version", range(9, 16))
def test_every_version_round_trips_with_the_type_redis_writes(version: int) -> None:
    for members, encoding, rdb_type in (
            (INTS, "intset", 11), (WORDS, "listpack", 20 if version >= 11 else 2),
            (BIG, "hashtable", 2), (BIG_INTS, "hashtable", 2)):
        s = RSet.from_members(members)
        assert s.encoding == encoding
        written, body = write_set(s, version)
        assert written == rdb_type
        back = _read(body, written)
        assert sorted(back.members()) == sorted(members)
        # (a listpack set written as type 2 for Redis 7.0 comes back a listpack all the same)
        assert back.encoding == encoding


def test_intsets_at_each_width() -> None:
    for values, width in (([1, -2, 300], 2), ([1, 70000], 4), ([-(1 << 40), 5], 8)):
        blob = intset(sorted(values))
        assert struct.unpack_from("<II", blob) == (width, len(values))
        assert intset_values(blob) == sorted(values)
        s = _read(encode_length(len(blob)) + blob, 11)
        assert s.encoding == "intset" and sorted(map(int, s.members())) == sorted(values)
    # Past set-max-intset-entries: a hashtable, as Redis converts it.
    blob = intset(list(range(513)))
    assert _read(encode_length(len(blob)) + blob, 11).encoding == "hashtable"


def test_a_listpack_of_integers_stays_a_listpack() -> None:
    lp = rdb.listpack([b"1", b"2", b"3"])
    s = _read(encode_length(len(lp)) + lp, 20)
    assert s.encoding == "listpack" and sorted(s.members()) == [b"1", b"2", b"3"]
    lp = rdb.listpack([b"m%d" % i for i in range(129)])
    assert _read(encode_length(len(lp)) + lp, 20).encoding == "hashtable"


def test_type_2_builds_as_sadd_would() -> None:
    def body(members: list[bytes]) -> bytes:
        return encode_length(len(members)) + b"".join(map(encode_string, members))
    assert _read(body([b"1", b"2"]), 2).encoding == "intset"
    assert _read(body([b"1", b"a"]), 2).encoding == "listpack"
    assert _read(body([b"x" * 65]), 2).encoding == "hashtable"


def test_refusals() -> None:
    lp = rdb.listpack
    for rdb_type, body, message in (
            (2, encode_length(2) + encode_string(b"a") + encode_string(b"a"), "twice"),
            (2, encode_length(0), "empty"),
            (20, encode_length(7) + lp([]), "empty"),
            (11, encode_length(12) + struct.pack("<IIhh", 2, 2, 5, 5), "order"),
            (11, encode_length(10) + struct.pack("<IIh", 2, 2, 5), "header"),
            (11, encode_length(10) + struct.pack("<IIh", 3, 1, 5), "header")):
        with pytest.raises(RdbError, match=message):
            read_set(Reader(body), rdb_type)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(rdb_type=st.sampled_from(SET_TYPES), data=st.binary(max_size=300))
def test_hostile_bytes_raise_rdb_error_only(rdb_type: int, data: bytes) -> None:
    for reader in (read_set, skip_set):
        with contextlib.suppress(RdbError):
            reader(Reader(data), rdb_type)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_values_raise_rdb_error_only(data) -> None:
    version = data.draw(st.sampled_from([9, 10, 11, 15]))
    s = RSet.from_members(data.draw(st.sampled_from([INTS, WORDS, BIG, BIG_INTS[:40]])))
    rdb_type, body = write_set(s, version)
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
        read_set(Reader(bytes(raw)), rdb_type)


# --- against redis-server 7.0.15 ----------------------------------------------------------------


def _build_on_redis(client) -> dict[str, list[bytes]]:
    sets = {"ints": INTS, "words": WORDS, "big": BIG, "bigints": BIG_INTS}
    for key, members in sets.items():
        client.sadd(key, *members)
    return sets


def test_redis_payloads_read_here_and_ours_restore_there(redis_client) -> None:
    sets = _build_on_redis(redis_client)
    for key, members in sets.items():
        theirs = redis_client.dump(key)
        r = Reader(theirs[:-10])
        s = read_set(r, r.byte())
        assert sorted(s.members()) == sorted(members)
        rdb_type, body = write_set(s, 10)
        ours = rdb.payload_from(rdb_type, body, 10)
        if key == "ints":  # an intset: the same bytes as Redis's (which may LZF-compress them)
            assert ours[0] == theirs[0] == 11
            assert Reader(ours[1:]).string() == Reader(theirs[1:]).string()
        redis_client.restore(key + "-back", 0, ours)
        assert redis_client.smembers(key + "-back") == set(members)
        # 7.0 has no listpack sets: what it made of ours is what it makes of its own
        assert redis_client.object("encoding", key + "-back") == \
            redis_client.object("encoding", key)


@IN_KEYSPACE
def test_restore_and_dump_in_the_keyspace(redis_client) -> None:
    from streamkeep import Engine

    sets = _build_on_redis(redis_client)
    e = Engine(dump_rdb_version=10)
    for key, members in sets.items():
        assert e.execute("RESTORE", key, "0", redis_client.dump(key)) == "OK"
        assert e.execute("TYPE", key) == "set"
        redis_client.restore(key + "-back", 0, e.execute("DUMP", key))
        assert redis_client.smembers(key + "-back") == set(members)


@IN_KEYSPACE
def test_restore_sizes_by_the_current_limits_and_import_keeps_sets(redis_client, tmp_path,
                                                                    capsys) -> None:
    from pathlib import Path

    from streamkeep import Engine
    from streamkeep.tools.main import main

    e = Engine()
    e.execute("CONFIG", "SET", "set-max-listpack-entries", "2")
    e.execute("RESTORE", "w", "0", rdb.payload_from(*write_set(RSet.from_members(WORDS), 15),
                                                   15))
    assert e.execute("OBJECT", "ENCODING", "w") == b"hashtable"
    sets = _build_on_redis(redis_client)
    redis_client.save()
    directory = redis_client.config_get("dir")["dir"]
    name = redis_client.config_get("dbfilename")["dbfilename"]
    source = tmp_path / "dump.rdb"
    source.write_bytes((Path(directory) / name).read_bytes())
    assert main(["import", str(source), "--out", str(tmp_path / "d")]) == 0
    assert "4 set key(s)" in capsys.readouterr().out
    with Engine.open(str(tmp_path / "d")) as engine:
        for key, members in sets.items():
            assert sorted(engine.execute("SMEMBERS", key)) == sorted(members)
            # (7.0 has no listpack sets: Redis 8 loads its type-2 "words" as SADD makes it)
            expected = b"listpack" if key == "words" else redis_client.object("encoding", key)
            assert engine.execute("OBJECT", "ENCODING", key) == expected
