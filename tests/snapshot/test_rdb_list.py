"""The list's RDB codec (snapshot.rdb_list): every RDB version written and read back with the type
Redis writes (18, a quicklist of packed and plain nodes, from RDB 10; 14, a quicklist of
ziplists, for RDB 9), a listpack list as one packed node, an element past the node limit in a
plain node; hand-built values of every type Redis has written (1, 10, 14, 18 with LZF-compressed
and plain nodes, empty nodes skipped) loaded in the encoding Redis's loading gives them under the
limits given; listpacks checked as Redis's deep sanitization checks them (and kept canonical);
refusals (an empty list, an empty node, an unknown container); hostile bytes refused with
RdbError only. Against redis-server 7.0.15: its DUMPs of small, big, binary and integer lists
read here and ours (RDB 9 and 10) RESTOREd there, node for node; its plain nodes (DEBUG
QUICKLIST-PACKED-THRESHOLD) and its LZF-compressed nodes (list-compress-depth); RESTORE and DUMP
in the keyspace; a dump.rdb of its lists imported; an export-rdb (RDB 9 and 10) loaded by it; a
primary's lists applied by a replica's applier."""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine
from streamkeep.engine.model import lists
from streamkeep.engine.model.list_node import node_count, node_new, node_range
from streamkeep.engine.model.lists import ListLimits, ListValue, QuickList
from streamkeep.snapshot import rdb
from streamkeep.snapshot.rdb import RdbError, Reader, encode_length, encode_string
from streamkeep.snapshot.rdb_list import (
    LIST_TYPES,
    node_from_listpack,
    read_list,
    skip_list,
    write_list,
)
from streamkeep.snapshot.rdb_packed import ziplist
from streamkeep.snapshot.rdb_types import dump_value_payload, load_value_payload

L, S = encode_length, encode_string
SMALL = [b"a", b"12", b"-7", b"", b"\x00\xff", b"9223372036854775807", b"x" * 70, b"a"]
BIG = [b"element-%d" % i for i in range(3000)] + [b"%d" % i for i in range(300)]
HUGE = [b"h", b"y" * 10_000, b"t"]  # a plain node between two packed ones
ALONE = [b"z" * 9000]  # one plain node
EDGE = [b"w" * 8192]  # not past the 8 KiB limit: a packed node of its own
LISTS = {"small": SMALL, "big": BIG, "huge": HUGE, "alone": ALONE, "edge": EDGE}


def _read(body: bytes, rdb_type: int, limits: ListLimits | None = None) -> ListValue:
    r = Reader(body)
    value = read_list(r, rdb_type) if limits is None else read_list(r, rdb_type, limits)
    assert r.pos == len(body)
    skipper = Reader(body)
    skip_list(skipper, rdb_type)
    assert skipper.pos == len(body)
    return value


def _elements(value: ListValue) -> list[bytes]:
    return list(lists.elements(value))


def _nodes(value: ListValue) -> list[list[bytes]]:
    """The value's elements node by node."""
    return [node_range(node, 0, node_count(node)) for node in lists.nodes_of(value)]


def _quicklist_2(body: bytes) -> list[tuple[int, bytes]]:
    """A type-18 value's nodes as (container, its bytes decompressed)."""
    r = Reader(body)
    nodes = [(r.length(), r.string()) for _ in range(r.length())]
    assert r.pos == len(body)
    return nodes


def _lzf(data: bytes) -> bytes:
    """`data` as an LZF string (literal runs only: valid LZF, whatever Redis's compressor
    would have made of it)."""
    runs = b"".join(bytes((len(data[i:i + 32]) - 1,)) + data[i:i + 32]
                    for i in range(0, len(data), 32))
    return b"\xc3" + L(len(runs)) + L(len(data)) + runs


# --- the codec -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", range(9, 16))
def test_every_version_round_trips_with_the_type_redis_writes(version: int) -> None:
    for name, items in LISTS.items():
        value = lists.from_elements(items)
        rdb_type, body = write_list(value, version)
        assert rdb_type == (14 if version == 9 else 18)
        back = _read(body, rdb_type)
        assert _elements(back) == items, name
        assert lists.encoding(back) == lists.encoding(value), name
        assert _nodes(back) == _nodes(value), name  # (loaded nodes are kept as they are)
        if version >= 10:  # the nodes themselves, byte for byte
            assert lists.nodes_of(back) == lists.nodes_of(value), name


def test_packed_and_plain_nodes_as_redis_writes_them() -> None:
    containers = {name: [c for c, _data in _quicklist_2(write_list(
        lists.from_elements(items), 10)[1])] for name, items in LISTS.items()}
    assert containers["huge"] == [2, 1, 2] and containers["alone"] == [1]
    assert containers["edge"] == [2] and containers["small"] == [2]
    assert set(containers["big"]) == {2} and len(containers["big"]) > 1
    # A plain node holds the element itself; a packed one, the node's listpack as it is.
    value = lists.from_elements(HUGE)
    nodes = _quicklist_2(write_list(value, 15)[1])
    assert nodes[1] == (1, b"y" * 10_000)
    assert nodes[0] == (2, bytes(lists.nodes_of(value)[0]))
    # A listpack list: a quicklist of one packed node (as Redis 7.2 writes it).
    small = lists.from_elements(SMALL)
    assert isinstance(small, bytearray)
    assert write_list(small, 11) == (18, L(1) + L(2) + L(len(small)) + bytes(small))


def test_type_1_is_built_by_pushes_then_converted() -> None:
    def body(items: list[bytes]) -> bytes:
        return L(len(items)) + b"".join(map(S, items))
    small = _read(body(SMALL), 1)
    assert isinstance(small, bytearray) and _elements(small) == SMALL
    big = _read(body(BIG), 1)
    assert isinstance(big, QuickList) and _nodes(big) == _nodes(lists.from_elements(BIG))
    by_two = _read(body(SMALL), 1, ListLimits(2))  # list-max-listpack-size 2
    assert isinstance(by_two, QuickList) and [len(n) for n in _nodes(by_two)] == [2, 2, 2, 2]


def test_type_10_stays_a_quicklist() -> None:
    value = _read(S(ziplist(SMALL)), 10)
    assert lists.encoding(value) == "quicklist" and _elements(value) == SMALL  # (as Redis)
    big = _read(S(ziplist(BIG)), 10)
    assert _nodes(big) == _nodes(lists.from_elements(BIG))


def test_type_14_keeps_its_nodes_and_skips_empty_ones() -> None:
    value = _read(L(3) + S(ziplist(SMALL)) + S(ziplist([])) + S(ziplist([b"q", b"7"])), 14)
    assert _nodes(value) == [SMALL, [b"q", b"7"]] and lists.encoding(value) == "quicklist"
    lone = _read(L(2) + S(ziplist([])) + S(ziplist([b"q", b"7"])), 14)
    assert isinstance(lone, bytearray) and _elements(lone) == [b"q", b"7"]  # converted
    assert lone == node_new([b"q", b"7"])  # (a ziplist's elements in a listpack)


def test_type_18_nodes_compressed_plain_and_packed() -> None:
    packed = bytes(node_new(SMALL))
    value = _read(L(4) + L(2) + _lzf(packed) + L(1) + _lzf(b"p" * 100) + L(2)
                  + S(bytes(node_new([]))) + L(1) + S(b"12"), 18)
    assert _nodes(value) == [SMALL, [b"p" * 100], [b"12"]]
    # A lone plain node stays a quicklist whatever its size, as Redis keeps it.
    lone = _read(L(1) + L(1) + S(b"tiny"), 18)
    assert isinstance(lone, QuickList) and _elements(lone) == [b"tiny"]
    # A lone small packed node: a listpack, sized by the limits given.
    assert isinstance(_read(L(1) + L(2) + S(packed), 18), bytearray)
    assert isinstance(_read(L(1) + L(2) + S(packed), 18, ListLimits(4)), QuickList)


def test_listpacks_are_checked_and_kept_canonical() -> None:
    canonical = node_new([b"5", b"12", b"ab"])
    assert node_from_listpack(bytes(canonical)) == canonical
    # Another writer's forms (5 as a 16-bit integer, 12 as a string): the same elements,
    # re-encoded as Redis would have written them.
    body = b"\xf1\x05\x00\x03" + b"\x8212\x03" + b"\x82ab\x03"
    other = struct.pack("<IH", 6 + len(body) + 1, 3) + body + b"\xff"
    assert node_from_listpack(other) == canonical
    for broken, why in ((other[:-2] + b"\x04" + other[-1:], "backlen"),
                        (other[:4] + b"\x04\x00" + other[6:], "count"),
                        (other[:-1] + b"\xfe", "header"),
                        (struct.pack("<I", len(other) + 1) + other[4:], "header"),
                        (b"\x07\x00", "header")):
        with pytest.raises(RdbError, match=why):
            node_from_listpack(broken)
    # 65535 in the header: a count too big to hold, any count taken (as Redis takes it)
    unknown = other[:4] + b"\xff\xff" + other[6:]
    assert node_from_listpack(unknown) == canonical


def test_refusals() -> None:
    empty_lp = bytes(node_new([]))
    for rdb_type, body, message in (
            (1, L(0), "empty list"),
            (10, S(ziplist([])), "empty list"),
            (14, L(0), "empty list"),
            (14, L(1) + S(ziplist([])), "empty list"),
            (18, L(0), "empty list"),
            (18, L(2) + L(2) + S(empty_lp) + L(2) + S(empty_lp), "empty list"),
            (18, L(1) + L(3) + S(b"x"), "container 3"),
            (18, L(1) + L(0) + S(b"x"), "container 0"),
            (18, L(1) + L(2) + S(b""), "empty quicklist node"),
            (18, L(1) + L(1) + S(b""), "empty quicklist node"),
            (18, L(1) + L(2) + S(b"not a listpack"), "listpack"),
            (14, L(1) + S(b"not a ziplist"), "ziplist"),
            (18, L(2) + L(2) + S(bytes(node_new([b"a"]))), "truncated"),
            (1, L(1 << 40), "truncated"),  # (a hostile count: never allocated ahead)
            (18, L(1) + L(2) + b"\x80\xff\xff\xff\xf0", "truncated")):
        with pytest.raises(RdbError, match=message):
            read_list(Reader(body), rdb_type)
    with pytest.raises(RdbError, match="not a list type"):
        read_list(Reader(L(1)), 2)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(rdb_type=st.sampled_from(LIST_TYPES), data=st.binary(max_size=300))
def test_hostile_bytes_raise_rdb_error_only(rdb_type: int, data: bytes) -> None:
    for reader in (read_list, skip_list):
        with contextlib.suppress(RdbError):
            reader(Reader(data), rdb_type)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_damaged_values_raise_rdb_error_only(data: Any) -> None:
    version = data.draw(st.sampled_from([9, 10, 15]))
    items = data.draw(st.sampled_from([SMALL, BIG[:300], HUGE, [b"1", b"-2", b"300000"]]))
    rdb_type, body = write_list(lists.from_elements(items, ListLimits(5)), version)
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
        value = read_list(Reader(bytes(raw)), rdb_type)
        # What loads is sound: every node walks, both ways, as the commands walk it.
        for node in lists.nodes_of(value):
            count = node_count(node)
            assert len(node_range(node, 0, count)) == count
            lists.get(value, -1)


def test_payloads_and_limits() -> None:
    value = lists.from_elements(SMALL)
    payload = dump_value_payload(value, 10)
    rdb.check_payload(payload, rdb.MAX_VERSION)
    assert payload[0] == 18 and _elements(load_value_payload(payload)) == SMALL
    assert lists.encoding(load_value_payload(payload, ListLimits(3))) == "quicklist"
    old = dump_value_payload(lists.from_elements(BIG), 9)
    assert old[0] == 14 and _elements(load_value_payload(old)) == BIG


# --- in the keyspace ------------------------------------------------------------------------------


def test_dump_and_restore_in_the_keyspace() -> None:
    e = Engine()
    e.execute("RPUSH", "small", *SMALL)
    e.execute("RPUSH", "big", *BIG)
    e.execute("RPUSH", "huge", *HUGE)
    for key in ("small", "big", "huge"):
        payload = e.execute("DUMP", key)
        assert payload[0] == 18
        assert e.execute("RESTORE", key + "-back", "0", payload) == "OK"
        assert e.execute("TYPE", key + "-back") == "list"
        assert e.execute("LRANGE", key + "-back", "0", "-1") == \
            e.execute("LRANGE", key, "0", "-1")
        assert e.execute("OBJECT", "ENCODING", key + "-back") == \
            e.execute("OBJECT", "ENCODING", key)
        assert e.execute("DUMP", key + "-back") == payload  # the same nodes written back
    with pytest.raises(Exception, match="Bad data format"):
        e.execute("RESTORE", "empty", "0", rdb.payload_from(18, L(0), 10))


# --- against redis-server 7.0.15 ----------------------------------------------------------------


def _build_on_redis(client: Any) -> dict[str, list[bytes]]:
    for key, items in LISTS.items():
        client.rpush(key, *items)
    client.lpush("pushed", *BIG[:500])  # (built from the head)
    return {**LISTS, "pushed": BIG[:500][::-1]}


def test_redis_payloads_read_here_and_ours_restore_there(redis_client) -> None:
    built = _build_on_redis(redis_client)
    here = Engine(dump_rdb_version=10)
    for key, items in LISTS.items():
        here.execute("RPUSH", key, *items)
    here.execute("LPUSH", "pushed", *BIG[:500])
    for key, items in built.items():
        theirs = redis_client.dump(key)
        assert theirs[0] == 18
        if key not in ("huge", "alone"):  # (7.0 makes no plain node: see below)
            # the same pushes here fill the same nodes: the same DUMP, node for node
            assert _quicklist_2(here.execute("DUMP", key)[1:-10]) == \
                _quicklist_2(theirs[1:-10]), key
        r = Reader(theirs[:-10])
        value = read_list(r, r.byte())
        assert _elements(value) == items, key
        theirs_nodes = _quicklist_2(theirs[1:-10])
        for version in (9, 10):
            rdb_type, body = write_list(value, version)
            if version == 10:  # node for node: a packed node's listpack is Redis's own
                ours = _quicklist_2(body)
                assert len(ours) == len(theirs_nodes), key
                for (container, data), (their_container, their_data) in zip(
                        ours, theirs_nodes, strict=True):
                    assert their_container == 2  # (7.0 makes a plain node from 1 GB on)
                    if container == 2:
                        assert data == their_data, key
                    else:  # an element past 8 KiB: plain here (Redis 7.2), packed by 7.0
                        assert _nodes(node_from_listpack(their_data)) == [[data]], key
            redis_client.restore(f"{key}-{version}", 0,
                                 rdb.payload_from(rdb_type, body, version))
            assert redis_client.lrange(f"{key}-{version}", 0, -1) == items, (key, version)


def test_redis_plain_nodes_and_compressed_nodes(start_redis) -> None:
    import redis

    server = start_redis("--enable-debug-command", "yes")
    client = redis.Redis(host=server.host, port=server.port, protocol=2)
    # Redis 7.0 makes an element a plain node from 1 GB on; 7.2 past the node's size limit
    # (8 KiB by default), as the model does: the threshold set to that.
    client.execute_command("DEBUG", "QUICKLIST-PACKED-THRESHOLD", "8193")
    for key in ("huge", "alone", "edge", "big"):
        client.rpush(key, *LISTS[key])
    client.config_set("list-compress-depth", "1")  # (every inner node LZF-compressed)
    client.rpush("compressed", *BIG)
    for key, items in [*((k, LISTS[k]) for k in ("huge", "alone", "edge", "big")),
                       ("compressed", BIG)]:
        theirs = client.dump(key)
        r = Reader(theirs[:-10])
        value = read_list(r, r.byte())
        assert _elements(value) == items
        # Our payload is theirs, node for node: containers and bytes (compression apart).
        assert _quicklist_2(write_list(value, 10)[1]) == _quicklist_2(theirs[1:-10]), key
        client.restore(key + "-back", 0, dump_value_payload(value, 10))
        assert client.lrange(key + "-back", 0, -1) == items
        # The same pushes here fill the same nodes: the same DUMP, node for node.
        e = Engine(dump_rdb_version=10)
        e.execute("RPUSH", key, *items)
        assert _quicklist_2(e.execute("DUMP", key)[1:-10]) == _quicklist_2(theirs[1:-10]), key
    containers = [c for c, _d in _quicklist_2(client.dump("huge")[1:-10])]
    assert containers == [2, 1, 2]


def test_restore_and_dump_in_the_keyspace_against_redis(redis_client) -> None:
    built = _build_on_redis(redis_client)
    e = Engine(dump_rdb_version=10)
    for key, items in built.items():
        assert e.execute("RESTORE", key, "0", redis_client.dump(key)) == "OK"
        assert e.execute("TYPE", key) == "list"
        assert e.execute("LRANGE", key, "0", "-1") == items
        redis_client.restore(key + "-back", 0, e.execute("DUMP", key))
        assert redis_client.lrange(key + "-back", 0, -1) == items
    e.execute("LPUSH", "small", "more")  # (restored values take the commands as any other)
    assert e.execute("LINDEX", "small", "0") == b"more"


def _saved_dump(client: Any) -> Path:
    client.save()
    directory = client.config_get("dir")["dir"]
    return Path(directory) / client.config_get("dbfilename")["dbfilename"]


def test_import_of_a_redis_dump_with_lists(redis_client, tmp_path, capsys) -> None:
    from streamkeep.tools.main import main

    built = _build_on_redis(redis_client)
    redis_client.expire("small", 1000)
    dump = tmp_path / "dump.rdb"
    dump.write_bytes(_saved_dump(redis_client).read_bytes())
    assert main(["import", str(dump), "--out", str(tmp_path / "d")]) == 0
    printed = capsys.readouterr().out
    assert f"{len(built)} list key(s)" in printed and "skipped" not in printed
    with Engine.open(str(tmp_path / "d")) as e:
        for key, items in built.items():
            assert e.execute("LRANGE", key, "0", "-1") == items
        assert 0 < e.execute("TTL", "small") <= 1000
        # (7.0 has no listpack lists: a small one loads as Redis 7.2 loads it)
        assert e.execute("OBJECT", "ENCODING", "small") == b"listpack"
        assert e.execute("OBJECT", "ENCODING", "big") == b"quicklist"


@pytest.mark.parametrize("version", [9, 10])
def test_export_rdb_writes_lists_redis_loads(start_redis, tmp_path, capsys,
                                            version: int) -> None:
    import redis

    from streamkeep.tools.main import main

    data = tmp_path / "data"
    with Engine.open(str(data)) as e:
        e.execute("RPUSH", "small", *SMALL)
        e.execute("RPUSH", "big", *BIG)
        e.execute("PEXPIRE", "small", "100000")
        e.execute("BGREWRITEAOF")  # the lists go through the snapshot's keys table too
        e.execute("RPUSH", "huge", *HUGE)
        expected = {k: e.execute("LRANGE", k, "0", "-1") for k in ("small", "big", "huge")}
    out = tmp_path / "redis" / "dump.rdb"
    out.parent.mkdir()
    assert main(["export-rdb", str(data), "--out", str(out), "--rdb-version",
                 str(version)]) == 0
    assert "3 list key(s)" in capsys.readouterr().out
    keys = rdb.read_rdb(out.read_bytes())[2]
    assert {k.rdb_type for k in keys} == {14 if version == 9 else 18}
    server = start_redis("--dir", str(out.parent), "--dbfilename", out.name)
    client = redis.Redis(host=server.host, port=server.port, protocol=2)
    for key, items in expected.items():
        assert client.lrange(key, 0, -1) == items
    assert 0 < client.pttl("small") <= 100000


def test_a_replica_applier_restores_a_primary_s_lists(redis_client) -> None:
    from streamkeep.replication.redis_commands import RedisApplier

    built = _build_on_redis(redis_client)
    version, _aux, keys = rdb.read_rdb(_saved_dump(redis_client).read_bytes())
    e = Engine()
    applier = RedisApplier(e)
    applier.load(keys, version, replace_all=True)
    assert applier.loaded_keys["list"] == len(built) and not applier.skipped_keys
    for key, items in built.items():
        assert e.execute("LRANGE", key, "0", "-1") == items
    applier.apply([b"RESTORE", b"copy", b"0", redis_client.dump("small")], 0)
    assert e.execute("LRANGE", "copy", "0", "-1") == SMALL
