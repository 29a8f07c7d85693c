"""snapshot.value_formats and the registry of snapshot.rdb_types: every registered value type has
one formats entry, in the registry's order; each chunk codec keeps the body layout snapshots
already hold, reads back the elements its export table's columns name and builds back the value
it cut; the shared cuts end where they say (a chunk at the byte limit, an element or a node past
it alone, a value node chunk at a node's end)."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest

from streamkeep.engine.model import lists
from streamkeep.engine.model.hashes import Hash
from streamkeep.engine.model.list_node import node_count, node_new
from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.value_types import BY_NAME, TYPES
from streamkeep.engine.model.zset import ZSet
from streamkeep.snapshot import layout
from streamkeep.snapshot.rdb_types import FORMATS, formats_of, stored_text
from streamkeep.snapshot.value_formats import (
    Cut,
    cut_columns,
    node_chunk_blobs,
    node_chunks,
)

SMALL = Cut(100, 1024)


def _packb(doc: Any) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)


def test_every_registered_type_has_one_entry_in_the_registrys_order() -> None:
    assert [f.type_name for f in FORMATS] == [t.name for t in TYPES]
    assert stored_text() == "streams, strings, sorted sets, hashes, sets and lists"
    for f in FORMATS:
        assert formats_of(f.type_name) is f and f.plural
        if f.table is not None:
            assert f.table.type_name == f.type_name
        if BY_NAME[f.type_name].nodes is not None:  # (chunked by its nodes)
            assert f.chunks is not None
    assert formats_of("gcra") is None


def _values() -> dict[str, Any]:
    """A value of each chunked type, big enough for several chunks under SMALL."""
    h = Hash.from_pairs([(b"f%d" % i, b"v" * (i % 50)) for i in range(700)])
    h.set_field_expiry(b"f3", 1_900_000_000_000)
    h.set_field_expiry(b"f699", 1_800_000_000_000)
    return {
        "zset": ZSet.from_items([(b"m%d" % i, i / 3) for i in range(700)]),
        "hash": h,
        "set": RSet.from_members([b"s%d" % i for i in range(700)]),
        "list": lists.from_elements([b"e" * (i % 90) for i in range(3000)]),
    }


@pytest.mark.parametrize("name", ["zset", "hash", "set", "list"])
def test_a_codec_reads_back_its_export_columns_and_builds_back_the_value(name: str) -> None:
    vt = BY_NAME[name]
    formats = formats_of(name)
    assert formats is not None and formats.chunks is not None and formats.table is not None
    codec, table = formats.chunks, formats.table
    value = _values()[name]
    chunks = list(codec.chunks(value, SMALL))
    assert len(chunks) > 2 and all(  # (a node past the cut: a chunk of its own; a table's
        # run holds the cut's elements at the table's full load, its buckets not split yet
        # this round up to twice as many)
        count <= SMALL.elements or (isinstance(nodes, list) and len(nodes) == 1)
        or (isinstance(nodes, layout.TableRunRow) and count <= 2 * SMALL.elements)
        for _b, count, nodes in chunks)
    assert sum(count for _b, count, _n in chunks) == len(vt.open(value))
    rows: list[tuple] = []
    for body, count, nodes in chunks:
        if vt.nodes is not None:
            assert isinstance(nodes, list)
        elif vt.table_of is not None and vt.table_of(value) is not None:  # a table's run
            assert isinstance(nodes, layout.TableRunRow) and nodes.elements == count
        else:
            assert nodes is None
        found = codec.elements(body, len(rows), True)
        assert len(found) == count and all(len(r) == len(table.columns) for r in found)
        rows += found
    expected = list(table.rows(vt.open(value)))
    assert sorted(rows) == sorted(expected)  # (a hash's and a set's chunks: its scan order)
    if name in ("zset", "list"):
        assert rows == expected
    built, seen = codec.build(len(rows), [body for body, _c, _n in chunks], True, None)
    assert seen == codec.length(built) == len(rows)
    assert vt.digest is not None and vt.digest(built) == vt.digest(value)


def test_chunk_bodies_keep_the_layouts_snapshots_hold() -> None:
    def bodies(name: str, value: Any) -> list[bytes]:
        formats = formats_of(name)
        assert formats is not None and formats.chunks is not None
        return [body for body, _count, _nodes in formats.chunks.chunks(value, Cut(4096, 1 << 16))]

    z = ZSet.from_items([(b"b", 2.5), (b"a", 1.0)])
    assert bodies("zset", z) == [_packb([[b"a", b"b"], struct.pack("<2d", 1.0, 2.5)])]
    h = Hash.from_pairs([(b"f", b"v"), (b"g", b"w")])
    h.set_field_expiry(b"g", 1_900_000_000_000)
    # (a listpackex: its fields with a TTL first, in its iteration order)
    assert bodies("hash", h) == [_packb([[b"g", b"f"], [b"w", b"v"],
                                         [[0, 1_900_000_000_000]]])]
    assert bodies("set", RSet.from_members([b"x"])) == [_packb([[b"x"]])]
    node = node_new([b"a", b"bc"])
    assert bodies("list", lists.from_elements([b"a", b"bc"])) == [_packb([0, [bytes(node)]])]


def test_cut_columns_ends_a_chunk_at_the_byte_limit_an_element_past_it_alone() -> None:
    columns = ([b"a", b"b", b"c", b"d", b"e"], [1, 2, 3, 4, 5])
    parts = list(cut_columns(columns, [3, 3, 10, 1, 1], 6))
    assert parts == [([b"a", b"b"], [1, 2]), ([b"c"], [3]), ([b"d", b"e"], [4, 5])]
    assert next(cut_columns(columns, [1] * 5, 100)) is columns  # (whole: not copied)


def test_node_chunks_end_at_a_node_and_number_their_first_element() -> None:
    nodes = [node_new([b"x"] * n) for n in (3, 3, 3, 1)]
    chunks = list(node_chunks(nodes, node_count, Cut(6, 1 << 16), first=10))
    assert [(count, len(held)) for _body, count, held in chunks] == [(6, 2), (4, 2)]
    assert [msgpack.unpackb(body)[0] for body, _c, _h in chunks] == [10, 16]
    assert chunks[1][2][0] is nodes[2]  # (the value's own nodes: their identities are kept)
    big = node_new([b"y" * 3000])
    alone = list(node_chunks([nodes[0], big, nodes[1]], node_count, Cut(100, 1000)))
    assert [held for _b, _c, held in alone] == [[nodes[0]], [big], [nodes[1]]]
    assert node_chunk_blobs(alone[1][0]) == [bytes(big)]
    for bad in (_packb([0, b"not an array"]), _packb([0])):
        with pytest.raises((ValueError, IndexError)):
            node_chunk_blobs(bad)
