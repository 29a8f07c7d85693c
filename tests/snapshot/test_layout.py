"""snapshot.layout: the on-disk format's encodings, both ways. IDs, keys (big-endian, so that
LMDB's byte order is numeric order), values (round trips, node headers read without decoding
entries), the per-value checksum (checked against the format as the README documents it,
computed independently in tests/support/snapshot_util.py) refusing any damaged body, key or
place, the meta version in both formats, the whole-file checksum, and how keys are named in
error messages."""

from __future__ import annotations

import random
import zlib

import msgpack
import pytest

from streamkeep.snapshot import layout
from streamkeep.snapshot.layout import ID
from tests.support.snapshot_util import sealed

U64 = (1 << 64) - 1
TABLES = (*layout.TABLES, *layout.OPTIONAL_TABLES)


# --- IDs -------------------------------------------------------------------------------------

def test_id_parts_and_text() -> None:
    value = 1700000000000 << 64 | 7
    sid = ID.of(value)
    assert sid == ID(1700000000000, 7)
    assert str(sid) == "1700000000000-7"
    assert sid.as_int() == value
    assert ID.of(layout.MAX_ID) == ID(U64, U64)


def test_ids_order_like_redis_and_their_bytes_order_the_same() -> None:
    rng = random.Random(1)
    values = [rng.choice([0, 1, U64, rng.getrandbits(64)]) << 64 | rng.getrandbits(64)
              for _ in range(300)]
    assert sorted(map(ID.of, values)) == [ID.of(v) for v in sorted(values)]
    assert sorted(map(layout.id_bytes, values)) == [layout.id_bytes(v) for v in sorted(values)]
    for value in values:
        assert len(layout.id_bytes(value)) == 16
        assert layout.id_int(layout.id_bytes(value)) == value


# --- keys ------------------------------------------------------------------------------------

def test_stream_keys() -> None:
    raw = layout.stream_key(3, b"orders\x00\xff")
    assert raw == b"\x03orders\x00\xff"
    assert layout.split_stream_key(raw) == (3, b"orders\x00\xff")
    assert layout.split_stream_key(layout.stream_key(0, b"")) == (0, b"")


def test_node_keys_sort_by_stream_then_master() -> None:
    masters = [0, 1, U64, 5 << 64, (U64 << 64) | U64]  # ascending
    keys = [layout.node_key(number, master) for number in (1, 2, 300) for master in masters]
    assert sorted(keys) == keys
    for key, (number, master) in zip(keys, [(n, m) for n in (1, 2, 300) for m in masters],
                                     strict=True):
        assert len(key) == 24
        assert layout.number_of(key) == number
        assert layout.node_master(key) == master
        assert key.startswith(layout.number_prefix(number))


def test_group_keys_and_member_prefixes() -> None:
    assert layout.group_key(2, b"billing") == b"\0" * 7 + b"\x02billing"
    assert layout.number_of(layout.group_key(2, b"billing")) == 2
    prefix = layout.group_prefix(2, b"billing")
    assert prefix == b"\0" * 7 + b"\x02" + b"\x00\x07" + b"billing"
    assert layout.group_member(prefix + b"alice", len(prefix)) == b"alice"
    # the length keeps groups apart: group b's prefix does not start group bi's keys
    assert not layout.group_prefix(2, b"bi").startswith(layout.group_prefix(2, b"b"))


# --- checksums -------------------------------------------------------------------------------

@pytest.mark.parametrize("table", TABLES)
def test_seal_is_the_documented_check(table: str) -> None:
    key, body = b"\x00\x01key", msgpack.packb([1, b"x", None])
    assert layout.seal(table, key, body) == sealed(table, key, body)
    assert layout.unseal(table, key, layout.seal(table, key, body)) == body
    assert len(layout.seal(table, key, body)) == len(body) + layout.CHECK_SIZE


@pytest.mark.parametrize("lp", [b"", b"\x07\x00\x00\x00\x00\x00\xff", bytes(range(256)) * 9])
def test_seal_node_is_seal_of_both_tables(lp: bytes) -> None:
    key, info = layout.node_key(3, 12 << 64 | 5), layout.encode_node_info(2, len(lp), 3, (b"f",))
    pair = (layout.seal("nodes", key, lp), layout.seal("nodeinfo", key, info))
    assert layout.seal_node(key, lp, info) == pair
    value, sealed_info = layout.seal_node(key, bytearray(lp), info)  # a node's own bytes
    assert (bytes(value), sealed_info) == pair


def test_unseal_refuses_damage_to_the_body_the_check_the_key_or_the_place() -> None:
    key, body = layout.node_key(1, 5 << 64), msgpack.packb([1, 2, [b"f"], b"", []])
    value = layout.seal("nodes", key, body)
    for i in range(len(value)):  # any one bit, anywhere, body or check
        damaged = bytearray(value)
        damaged[i] ^= 0x10
        assert layout.unseal("nodes", key, bytes(damaged)) is None, i
    assert layout.unseal("nodes", layout.node_key(2, 5 << 64), value) is None  # another key
    assert layout.unseal("nodeinfo", key, value) is None  # another table
    assert layout.unseal("nodes", key, value[:3]) is None  # shorter than a check
    assert layout.unseal("nodes", key, b"") is None


def test_unseal_of_a_buffer_gives_a_view() -> None:
    value = layout.seal("meta", b"lsn", msgpack.packb(42))
    body = layout.unseal("meta", b"lsn", memoryview(value))
    assert isinstance(body, memoryview) and bytes(body) == msgpack.packb(42)


def test_reseal_moves_a_value_to_a_new_key_checked() -> None:
    old, new = layout.node_key(1, 9), layout.node_key(4, 9)
    body = msgpack.packb([3, 100, [b"f"], b"", []])
    moved = layout.reseal("nodes", old, new, layout.seal("nodes", old, body))
    assert moved == layout.seal("nodes", new, body)
    assert layout.unseal("nodes", old, moved) is None
    damaged = bytearray(layout.seal("nodes", old, body))
    damaged[0] ^= 1
    assert layout.reseal("nodes", old, new, bytes(damaged)) is None
    assert layout.reseal("nodes", new, new, layout.seal("nodes", old, body)) is None  # wrong key
    assert layout.reseal("nodes", old, new, b"abc") is None


def test_meta_version_in_both_formats() -> None:
    assert layout.meta_version(msgpack.packb(1)) == layout.UNCHECKED_VERSION == 1
    v2 = layout.seal("meta", b"version", msgpack.packb(2))
    assert layout.meta_version(v2) == layout.KEYLESS_VERSION == 2
    v3 = layout.seal("meta", b"version", msgpack.packb(3))
    assert layout.meta_version(v3) == layout.UNPACKED_VERSION == 3
    v4 = layout.seal("meta", b"version", msgpack.packb(4))
    assert layout.meta_version(v4) == layout.VERSION == 4
    damaged = bytearray(v2)
    damaged[0] ^= 1
    assert layout.meta_version(bytes(damaged)) is None
    assert layout.meta_version(msgpack.packb(2)) is None  # version 2 is always sealed
    assert layout.meta_version(layout.seal("meta", b"version", msgpack.packb("2"))) is None
    assert layout.meta_version(layout.seal("meta", b"lsn", msgpack.packb(2))) is None
    assert layout.meta_version(layout.seal("meta", b"version", b"\xc1")) is None  # undecodable


def test_file_checksum_is_crc32_of_the_chunks_in_order() -> None:
    data = random.Random(2).randbytes(10_000)
    assert layout.file_checksum([data]) == zlib.crc32(data)
    assert layout.file_checksum([data[:1], data[1:5000], b"", data[5000:]]) == zlib.crc32(data)
    assert layout.file_checksum([]) == 0
    assert layout.file_checksum([data[5000:], data[:5000]]) != zlib.crc32(data)


# --- values ----------------------------------------------------------------------------------

def test_meta_values() -> None:
    for value in (42, "streamkeep-snapshot", "ab" * 20, 0):
        assert layout.decode_value(layout.encode_meta_value(value)) == value


def test_stream_value_round_trip_with_and_without_idmp() -> None:
    idmp = layout.encode_idmp(60, 100, 3, 1, [(b"p1", [(b"i1", 1 << 64 | 1, 900),
                                                      (b"i2", 2 << 64, 950)])])
    assert idmp == [60, 100, 3, 1, [[b"p1", [[b"i1", layout.id_bytes(1 << 64 | 1), 900],
                                             [b"i2", layout.id_bytes(2 << 64), 950]]]]]
    raw = layout.encode_stream(7, 10, 1 << 64, 9 << 64 | 3, 4 << 64, 12, 3, 2, idmp)
    doc = layout.decode_value(raw)
    assert doc["number"] == 7 and doc["length"] == 10 and doc["entries_added"] == 12
    assert layout.id_int(doc["first_id"]) == 1 << 64
    assert layout.id_int(doc["last_id"]) == 9 << 64 | 3
    assert layout.id_int(doc["max_deleted_id"]) == 4 << 64
    assert (doc["nodes"], doc["groups"]) == (3, 2)
    assert doc["idmp"][4][0][0] == b"p1"
    assert "idmp" not in layout.decode_value(layout.encode_stream(1, 0, 0, 0, 0, 0, 0, 0))


def node_sample() -> tuple[list[int], list]:
    ids = [5 << 64, 5 << 64 | 1, U64 << 64 | U64]
    fields = [[b"f", b"a"], None, [b"f", b"b", b"g", b"\x00\xff"]]
    return ids, fields


def test_node_round_trip_with_tombstones() -> None:
    ids, fields = node_sample()
    raw = layout.encode_node(2, 77, (b"f",), ids, fields)
    node = layout.decode_node(5 << 64, raw)
    assert node.master == 5 << 64
    assert (node.live, node.size, node.master_fields) == (2, 77, (b"f",))
    assert node.ids == ids
    assert node.fields == ((b"f", b"a"), None, (b"f", b"b", b"g", b"\x00\xff"))


def test_node_header_without_decoding_entries() -> None:
    ids, fields = node_sample()
    raw = layout.encode_node(2, 77, [b"f"], ids, fields)
    assert layout.node_header(raw) == (2, 77, (b"f",), 3)
    assert layout.node_header(memoryview(raw)) == (2, 77, (b"f",), 3)
    info = layout.encode_node_info(2, 77, 3, [b"f"])
    assert layout.decode_node_info(info) == layout.node_header(raw)


def test_node_header_with_long_master_fields_reads_the_whole_value() -> None:
    master_fields = tuple(b"field-%03d" % i for i in range(100))  # past the header peek
    ids = [1 << 64 | i for i in range(300)]
    raw = layout.encode_node(300, 5000, master_fields, ids, [[b"x", b"y"]] * 300)
    assert layout.node_header(raw) == (300, 5000, master_fields, 300)


def test_group_consumer_and_pending_values() -> None:
    group = layout.decode_value(layout.encode_group(9 << 64 | 2, -1, 4, 2))
    assert group == {"last_id": layout.id_bytes(9 << 64 | 2), "entries_read": -1,
                     "pending": 4, "consumers": 2}
    assert layout.decode_binary(layout.encode_consumer(1000, -1)) == [1000, -1]
    assert layout.decode_binary(layout.encode_pending(b"al\xffce", 1200, 3)) == \
        [b"al\xffce", 1200, 3]
    assert layout.decode_binary(layout.encode_pending(None, 0, 1)) == [None, 0, 1]  # released


def test_a_cut_value_does_not_decode() -> None:
    ids, fields = node_sample()
    raw = layout.encode_node(2, 77, [b"f"], ids, fields)
    with pytest.raises((ValueError, msgpack.UnpackException)):
        layout.decode_node(0, raw[:-3])


# --- naming keys in messages -----------------------------------------------------------------

def test_describe_key_names_what_the_key_belongs_to() -> None:
    names = {3: "'orders' (db 0)"}
    prefix = layout.group_prefix(3, b"billing")
    assert layout.describe_key("meta", b"lsn") == "meta 'lsn'"
    assert layout.describe_key("streams", layout.stream_key(2, b"orders")) == \
        "stream 'orders' (db 2)"
    assert layout.describe_key("nodes", layout.node_key(3, 5 << 64 | 1), names) == \
        "stream 'orders' (db 0) (#3), node 5-1"
    assert layout.describe_key("nodeinfo", layout.node_key(4, 5 << 64)) == \
        "stream #4, node 5-0"
    assert layout.describe_key("groups", layout.group_key(3, b"billing")) == \
        "stream #3, group 'billing'"
    assert layout.describe_key("consumers", prefix + b"alice") == \
        "stream #3, group 'billing', consumer 'alice'"
    assert layout.describe_key("pel", prefix + layout.id_bytes(7 << 64 | 2)) == \
        "stream #3, group 'billing', entry 7-2"
    assert layout.describe_key("nodes", b"\x01\x02") == "key 0102"  # too short to parse
    assert layout.describe_key("listnodes", layout.chunk_key(2, 7)) == "value #2, chunk 7"


def test_list_node_index_values_round_trip_and_refuse_what_is_not_one() -> None:
    nodes = [(b"\xff" * 16, 8192, 500), (bytes(16), 11, 1)]
    assert layout.decode_list_nodes(layout.encode_list_nodes(nodes)) == nodes
    assert layout.decode_list_nodes(layout.encode_list_nodes([])) == []
    for bad in ([[bytes(16), 2]], [[bytes(16), 2, -3]], [[bytes(16), b"x", 3]], {"a": 1},
                [[1, 2, 3]], [[b"short", 2, 3]]):  # (a hash is 16 bytes: xxh3-128)
        with pytest.raises(ValueError, match="listnodes"):
            layout.decode_list_nodes(msgpack.packb(bad))


def test_keys_values_round_trip() -> None:
    for value, expires_ms in ((b"v", None), (b"", 5), (None, 1_795_000_000_000)):
        assert layout.decode_key(layout.encode_key(value, expires_ms)) == (
            value, expires_ms, None if value is None else "string")
    # A string's row is as it always was ([value, expiry]); another type's names the type.
    assert msgpack.unpackb(layout.encode_key(b"v", 5)) == [b"v", 5]
    assert layout.decode_key(layout.encode_key(b"\x01packed", None, "zset")) == (
        b"\x01packed", None, "zset")
    for bad in (["text", None], [b"v", None, 7], [b"v"], "v"):
        with pytest.raises(ValueError):
            layout.decode_key(msgpack.packb(bad))
