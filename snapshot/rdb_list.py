"""The list's RDB codec: RDB types 1 (a linked list of strings), 10 (one ziplist), 14 (a
quicklist of ziplists) and 18 (a quicklist of nodes with a container type: a listpack, or one
element alone, "plain"), read from RDB files and DUMP payloads, written as the chosen version
expects. Registered with `snapshot.rdb`'s codec registry on import once the keyspace holds
lists (`engine.model.value_types` has a type for `QuickList`).

Owns, byte-compatibly with Redis's rdb.c (7.2 and later): what each type holds and what loading
makes of it, under the engine's `ListLimits` when given:
- type 1: the elements pushed at the tail of a quicklist one by one, then converted as
  listTypeTryConversion converts a loaded list (one packed node within the limits: a
  listpack);
- type 10: the ziplist's elements pushed at the tail of a quicklist, which stays one (Redis
  converts no type-10 list);
- types 14 and 18: each node kept as it is (a ziplist becomes a listpack of the same elements;
  a plain node, a node of its one element), empty nodes skipped, then converted as type 1's.
And what saving writes (rdbSaveObject): type 18 from RDB 10 (Redis 7.0) on, a quicklist's nodes
in order, each PACKED (2: its listpack as it is) or, for a node holding one element too large
for a packed node (the model's plain node, by the default `list-max-listpack-size`: Redis's
writer keeps no fill either, it writes the container each node was made with), PLAIN (1: the
element's bytes); a listpack list as a quicklist of one packed node, as Redis 7.2 writes it;
type 14 for RDB 9 (Redis 5 and 6), every node a ziplist.

Every blob is checked as Redis's deep sanitization checks it (a ziplist by
`rdb_packed.ziplist_items`; a listpack by `rdb.listpack_items`, then its header count and
backlens: `node_from_listpack`), and a kept node is always in the model's canonical form (what
`engine.model.list_node.node_new` makes of its elements): a listpack another writer encoded
otherwise is re-encoded, never adopted as it is. Refused (RdbError, never another exception):
an empty list (Redis's "empty keys": its RESTORE refuses them, its loader skips them), a node
that is an empty string, an unknown container, malformed blobs. Lengths read are never
allocated ahead: a hostile count runs out of bytes first.

Also owns the list's other formats (`FORMATS`, snapshot.value_formats' shape): its snapshot
chunks (a quicklist is a value kept as nodes, engine.model.lists.NODES: its chunks are the
value-nodes layout, [index of its first element, nodes], each node read back checked as an
RDB's is, `node_from_listpack`, before the list adopts it) and its export table
(`list_elements`: index, element).

Must not touch: the RDB container,
files, sockets, the keyspace, the model (engine.model.lists and list_node are used through
their public API).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from streamkeep.engine.model import lists
from streamkeep.engine.model.list_node import node_count, node_new, node_range
from streamkeep.engine.model.lists import (
    DEFAULT_LIMITS,
    NODES,
    ListLimits,
    ListNode,
    ListValue,
    QuickList,
)
from streamkeep.engine.model.value_types import BY_CLASS
from streamkeep.snapshot.rdb import (
    RdbError,
    Reader,
    encode_length,
    listpack_items,
    register_value_codec,
)
from streamkeep.snapshot.rdb_packed import as_bytes, ziplist, ziplist_items
from streamkeep.snapshot.value_formats import (
    Body,
    Chunk,
    ChunkCodec,
    Column,
    Cut,
    OnNodes,
    TypeFormats,
    ValueTable,
    node_chunks,
    unpack,
)

TYPE_LIST = 1
TYPE_LIST_ZIPLIST = 10
TYPE_LIST_QUICKLIST = 14
TYPE_LIST_QUICKLIST_2 = 18
LIST_TYPES = (TYPE_LIST, TYPE_LIST_ZIPLIST, TYPE_LIST_QUICKLIST, TYPE_LIST_QUICKLIST_2)
QUICKLIST_2_VERSION = 10  # the first RDB version with type 18 (Redis 7.0)
CONTAINER_PLAIN = 1  # QUICKLIST_NODE_CONTAINER_PLAIN: one element, its bytes
CONTAINER_PACKED = 2  # QUICKLIST_NODE_CONTAINER_PACKED: a listpack
_LP_HEADER = 6
_LP_UNKNOWN_COUNT = 65535
_LP_INT_WIDTHS = {0xF1: 2, 0xF2: 3, 0xF3: 4, 0xF4: 8}


# --- nodes ---------------------------------------------------------------------------------------


def node_from_listpack(blob: bytes | bytearray) -> bytearray:
    """A list node holding the elements of the listpack `blob`, checked as Redis's deep
    validation (lpValidateIntegrity) checks it: its header's byte count, every entry inside
    it, every backlen its entry's size, the end marker last, the header's count (unless 65535,
    "unknown") its entries'. The node holds `blob`'s bytes when they are the canonical encoding
    of its elements (all Redis writes), else their canonical encoding. RdbError otherwise."""
    items = listpack_items(bytes(blob))  # (bounds, encodings, the end marker)
    elements = [as_bytes(item) for item in items]
    node = node_new(elements)
    if node == blob:  # (what Redis writes: backlens and count right, since node_new's are)
        return node
    _check_listpack(bytes(blob), len(elements))
    return node


def _check_listpack(lp: bytes, count: int) -> None:
    """What `listpack_items` leaves unchecked: each entry's backlen and the header's count
    (`count`: the entries it found)."""
    header_count = lp[4] | lp[5] << 8
    if header_count != _LP_UNKNOWN_COUNT and header_count != count:
        raise RdbError("bad listpack count")
    pos, end = _LP_HEADER, len(lp) - 1
    while pos < end:
        size = _entry_size(lp, pos)
        back = _backlen(size)
        if lp[pos + size:pos + size + len(back)] != back:
            raise RdbError("bad listpack backlen")
        pos += size + len(back)


def _entry_size(lp: bytes, pos: int) -> int:
    """The size of the entry at `pos` (its encoding and data; `listpack_items` checked it is
    inside the listpack)."""
    b = lp[pos]
    if b < 0x80:
        return 1
    if b < 0xC0:
        return 1 + (b & 0x3F)
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 2 + (((b & 0x0F) << 8) | lp[pos + 1])
    if b == 0xF0:
        return 5 + int.from_bytes(lp[pos + 1:pos + 5], "little")
    return 1 + _LP_INT_WIDTHS[b]


def _backlen(size: int) -> bytes:
    """An entry's backlen as lpEncodeBacklen writes it."""
    if size <= 127:
        return bytes((size,))
    n = 2 if size < 16383 else 3 if size < 2097151 else 4 if size < 268435455 else 5
    out = [(size >> (7 * (n - 1))) & 0x7F]
    out.extend(((size >> (7 * (n - 1 - k))) & 0x7F) | 0x80 for k in range(1, n))
    return bytes(out)


def _node_elements(node: bytearray) -> list[bytes]:
    return node_range(node, 0, node_count(node))


# --- reading -------------------------------------------------------------------------------------


def read_list(r: Reader, rdb_type: int, limits: ListLimits = DEFAULT_LIMITS) -> ListValue:
    """The list of `rdb_type` at the reader's position, in the encoding Redis's loading gives
    it under `limits`."""
    if rdb_type == TYPE_LIST:
        elements = [r.string() for _ in range(r.length())]
        return _converted(_pushed(elements, limits), limits)
    if rdb_type == TYPE_LIST_ZIPLIST:
        return _pushed([as_bytes(item) for item in ziplist_items(r.string())], limits)
    if rdb_type not in (TYPE_LIST_QUICKLIST, TYPE_LIST_QUICKLIST_2):
        raise RdbError(f"not a list type: {rdb_type}")
    nodes: list[bytearray] = []
    plain: list[bool] = []
    for _ in range(r.length()):
        container = CONTAINER_PACKED
        if rdb_type == TYPE_LIST_QUICKLIST_2:
            container = r.length()
            if container not in (CONTAINER_PLAIN, CONTAINER_PACKED):
                raise RdbError(f"unknown quicklist node container {container}")
        data = r.string()
        if not data:
            raise RdbError("an empty quicklist node")
        if container == CONTAINER_PLAIN:
            node = node_new((data,))
        elif rdb_type == TYPE_LIST_QUICKLIST_2:
            node = node_from_listpack(data)
        else:
            node = node_new([as_bytes(item) for item in ziplist_items(data)])
        if node_count(node):  # (an empty node is skipped, as Redis skips it)
            nodes.append(node)
            plain.append(container == CONTAINER_PLAIN)
    if not nodes:
        raise RdbError("an empty list")
    if plain == [True]:  # a lone plain node: Redis keeps it a quicklist whatever its size
        return QuickList(list[ListNode](nodes), 1)
    return lists.from_nodes(nodes, limits)


def _pushed(elements: list[bytes], limits: ListLimits) -> QuickList:
    """A quicklist of `elements` pushed at its tail one by one (quicklistPushTail)."""
    if not elements:
        raise RdbError("an empty list")
    value = lists.push(QuickList([], 0), elements, True, limits)
    assert isinstance(value, QuickList)  # (a quicklist never converts while growing)
    return value


def _converted(value: QuickList, limits: ListLimits) -> ListValue:
    """listTypeTryConversion(LIST_CONV_AUTO): a loaded quicklist of one packed node within the
    limits is a listpack."""
    return lists.shrink(value, limits, shrinking=False)


def skip_list(r: Reader, rdb_type: int) -> None:
    """Past a list value, its structure followed, nothing decoded or checked."""
    if rdb_type == TYPE_LIST_ZIPLIST:
        r.skip_string()
    elif rdb_type in (TYPE_LIST, TYPE_LIST_QUICKLIST):
        for _ in range(r.length()):
            r.skip_string()
    elif rdb_type == TYPE_LIST_QUICKLIST_2:
        for _ in range(r.length()):
            r.length()
            r.skip_string()
    else:
        raise RdbError(f"not a list type: {rdb_type}")


# --- writing -------------------------------------------------------------------------------------


def list_type(version: int) -> int:
    """The RDB type Redis writes a list as in an RDB of `version`."""
    return TYPE_LIST_QUICKLIST_2 if version >= QUICKLIST_2_VERSION else TYPE_LIST_QUICKLIST


def is_plain(node: bytearray) -> bool:
    """Whether Redis would hold `node` as a plain node (one element too large for a packed
    node under the default list-max-listpack-size): written with the PLAIN container."""
    return DEFAULT_LIMITS.is_plain(node)


def write_list(value: ListValue, version: int) -> tuple[int, bytes]:
    """(the RDB type, the value's bytes) for the list in an RDB of `version` (9 to 15)."""
    rdb_type = list_type(version)
    nodes = lists.nodes_of(value)
    out = [encode_length(len(nodes))]
    for node in nodes:
        if rdb_type == TYPE_LIST_QUICKLIST:
            blob = ziplist(_node_elements(node))
            out += [encode_length(len(blob)), blob]
        elif is_plain(node):
            element = _node_elements(node)[0]
            out += [encode_length(CONTAINER_PLAIN), encode_length(len(element)), element]
        else:
            out += [encode_length(CONTAINER_PACKED), encode_length(len(node)), bytes(node)]
    return rdb_type, b"".join(out)


if QuickList in BY_CLASS:  # (the keyspace holds lists: their keys are kept, not skipped)
    # (a small list is kept bare in the keyspace, as its listpack: a bytearray)
    register_value_codec(LIST_TYPES, read_list, write_list, name="list", kind=QuickList,
                         skip=skip_list, also=(bytearray,))


# --- the snapshot's chunks -----------------------------------------------------------------------

def _chunks(value: ListValue, cut: Cut) -> Iterator[Chunk]:
    """The list's chunks: its nodes as they are, head first (a cold one read when reached)."""
    return node_chunks(NODES.resident(value), NODES.count, cut)


def _chunk_nodes(body: Body) -> tuple[int, list[bytearray]]:
    """A list chunk's first index and its nodes, each checked as an RDB's list node is (a
    snapshot read back is not trusted: a node the list kernels walk must be sound)."""
    first, blobs = unpack(body)
    if not isinstance(first, int) or first < 0 or not isinstance(blobs, list) or \
            not all(isinstance(b, bytes) for b in blobs):
        raise ValueError("a list chunk is not its first index and its nodes")
    try:
        return first, [node_from_listpack(b) for b in blobs]
    except RdbError as err:
        raise ValueError(f"a list chunk's node is not a listpack: {err}") from None


def _elements(body: Body, at: int | None, check: bool) -> list[tuple]:
    """(index, element) of each element of the chunk; its indexes start at `at` when given,
    which with `check` its stored first index must equal (a row of the first form; a referred
    chunk's stored one is where it was when written)."""
    first, nodes = _chunk_nodes(body)
    if at is not None:
        if check and first != at:
            raise ValueError(f"a list chunk starts at index {first}, not {at}")
        first = at
    out: list[tuple] = []
    for node in nodes:
        out.extend(enumerate(_node_elements(node), first + len(out)))
    return out


def _build(count: int, bodies: Iterable[Body], indexed: bool, on_nodes: OnNodes | None
           ) -> tuple[ListValue, int]:
    """The list of the chunks' nodes, in order; with `indexed` each chunk's stored first index
    must be where it is."""
    seen = 0
    nodes: list[bytearray] = []
    for body in bodies:
        first, chunk = _chunk_nodes(body)
        if indexed and first != seen:
            raise ValueError(f"a list chunk starts at index {first}, not {seen}")
        elements = sum(map(node_count, chunk))
        if seen + elements > count:
            raise ValueError(f"a list chunk of {elements} elements after {seen}, of {count}")
        nodes.extend(chunk)
        seen += elements
        if on_nodes is not None:
            on_nodes(chunk, elements)
    return lists.from_nodes(nodes), seen


def _rows(value: ListValue) -> Iterator[tuple]:
    return enumerate(lists.elements(value))


FORMATS: TypeFormats = TypeFormats(
    "list", "lists", ChunkCodec(_chunks, _elements, _build, lists.length),
    ValueTable("list", "list_elements", (Column("index", "index"), Column("element", "binary")),
               _rows))

__all__ = ["CONTAINER_PACKED", "CONTAINER_PLAIN", "FORMATS", "LIST_TYPES", "QUICKLIST_2_VERSION",
           "TYPE_LIST", "TYPE_LIST_QUICKLIST", "TYPE_LIST_QUICKLIST_2", "TYPE_LIST_ZIPLIST",
           "is_plain", "list_type", "node_from_listpack", "read_list",
           "skip_list", "write_list"]
