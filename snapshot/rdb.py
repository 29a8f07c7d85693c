"""Redis's RDB encoding: the file's framing, a registry of value codecs by RDB type number, the
stream and string codecs, and the DUMP envelope: pure functions over bytes.

Owns reading and writing, byte-compatibly with Redis: RDB lengths and strings (integer encodings
read and written, LZF read), CRC-64 (Jones, reflected), listpacks, the stream value of types 15,
19, 21, 26 and 27 (RDB versions 9 to 15: nodes with the master entry and same-fields
compression, delta-encoded IDs, the stream metadata, groups with entries-read, the PEL,
consumers with seen and active time, the NACK zone of the entries XNACK released, the
idempotent producers' tail), strings in every encoding, DUMP payloads (type, value, RDB
version, CRC-64), and RDB files of versions 1 to 15 and Valkey 9's 80: the types streamkeep
stores read through their codec (`register_value_codec`: a type number finds its codec; sorted
sets, hashes, sets and lists add theirs from their own modules, which `snapshot.rdb_types` imports
all: a user of the registry imports that module), every other type whose layout is
known skipped so that it can be counted (Redis 8.10's templated hashes among them, through the
file's hash template registry; a GCRA rate limiter, whose layout is not known, refused), and
the function libraries a file carries read (`read_rdb_contents`) and written (`write_rdb`).
Values come in and go out as the engine holds them
(`engine.model.stream.Stream`, a string's bytes). Malformed input raises RdbError, never
anything else. Must not touch: files, sockets, the engine's locking or commands (DUMP/RESTORE
call these functions).

The per-byte work (CRC-64, LZF, generic listpacks, the walk over a stream value's structure
and the read of its nodes' bytes) comes from a kernel: the compiled
`_rdb_c.pyx` or its pure-Python reference `_rdb_py.py`, as `engine.wire.kernel_switches` chooses. A
stream node's listpack is neither decoded nor re-encoded: it is checked
(`engine.model.packed_node.validate`) and adopted as the node's bytes, and written back as they
are. The rest (the RDB container, stream metadata, groups, the idempotent producers) is here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from streamkeep.engine.model import packed_node
from streamkeep.engine.model.consumer_groups import ConsumerGroup, estimate_entries_read
from streamkeep.engine.model.idmp_maps import Idmp
from streamkeep.engine.model.listpack import as_int
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire import kernel_switches
from streamkeep.snapshot._rdb_py import RdbError

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.snapshot._rdb_c import (
        crc64,
        listpack,
        listpack_items,
        lp_element,
        lzf_decompress,
        stream_end,
        stream_nodes,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.snapshot._rdb_py import (
        crc64,
        listpack,
        listpack_items,
        lp_element,
        lzf_decompress,
        stream_end,
        stream_nodes,
    )
else:
    kernel_switches.loaded(__name__, True)

# RDB version -> the stream type it writes (Redis writes every stream as its newest type: 8.8
# moved to RDB 14 and type 27; 8.10's RDB 15 added other types, streams stay 27).
TYPE_STREAM = {9: 15, 10: 19, 11: 21, 12: 21, 13: 26, 14: 27, 15: 27}
STREAM_TYPES = (15, 19, 21, 26, 27)
TYPE_STRING = 0
MAX_VERSION = 15  # what Redis 8.10 writes
# Valkey 9 writes `VALKEY080` (its own numbering, past the 12-79 it leaves to Redis); its types
# are those of RDB 11 but for a hash with field expiries (type 22, a layout of its own) and the
# slot-import opcode 243 (Redis's key metadata). Valkey 8 writes REDIS0011.
VALKEY_VERSIONS = (80,)
_U64 = (1 << 64) - 1
_INVALID_ENTRIES_READ = -1


# --- reading ------------------------------------------------------------------------------------


class Reader:
    """A cursor over RDB bytes; every read checks the bounds (RdbError past the end)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise RdbError("truncated")
        out = self.data[self.pos:end]
        self.pos = end
        return out

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise RdbError("truncated")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def length(self) -> int:
        """A length (an encoded string's special form is an error here)."""
        data, pos = self.data, self.pos
        if pos + 9 <= len(data):  # the longest length fits: the common forms read inline
            first = data[pos]
            if first < 0x40:
                self.pos = pos + 1
                return first
            if first < 0x80:
                self.pos = pos + 2
                return (first & 0x3F) << 8 | data[pos + 1]
        value, special = self._length()  # (anything else, and every error, read the long way)
        if special:
            raise RdbError("a string encoding where a length was expected")
        return value

    def _length(self) -> tuple[int, bool]:
        first = self.byte()
        kind = first >> 6
        if kind == 0:
            return first & 0x3F, False
        if kind == 1:
            return (first & 0x3F) << 8 | self.byte(), False
        if kind == 3:
            return first & 0x3F, True
        if first == 0x80:
            return struct.unpack(">I", self.take(4))[0], False
        if first == 0x81:
            return struct.unpack(">Q", self.take(8))[0], False
        raise RdbError(f"unknown length encoding {first:#x}")

    def string(self) -> bytes:
        # A stream's node keys and listpacks: one per node, so the common forms (a raw string
        # with a 6- or 14-bit length, an LZF one) are read inline; anything else and every
        # error take the general path from the same position (same result, same message).
        data, pos = self.data, self.pos
        if pos + 9 <= len(data):
            first = data[pos]
            if first == 0xC3:  # LZF: compressed and uncompressed lengths, then the bytes
                self.pos = pos + 1
                clen, ulen = self.length(), self.length()
                return lzf_decompress(self.take(clen), ulen)
            if first < 0x80:
                start = pos + 1 if first < 0x40 else pos + 2
                end = start + (first if first < 0x40 else (first & 0x3F) << 8 | data[pos + 1])
                if end <= len(data):
                    self.pos = end
                    return data[start:end]
        return self._string()

    def _string(self) -> bytes:
        value, special = self._length()
        if not special:
            return self.take(value)
        if value == 0:
            return b"%d" % struct.unpack("<b", self.take(1))[0]
        if value == 1:
            return b"%d" % struct.unpack("<h", self.take(2))[0]
        if value == 2:
            return b"%d" % struct.unpack("<i", self.take(4))[0]
        if value == 3:
            clen, ulen = self.length(), self.length()
            return lzf_decompress(self.take(clen), ulen)
        raise RdbError(f"unknown string encoding {value}")

    def skip_string(self) -> None:
        """Past a string, without decoding it (an LZF one is not decompressed)."""
        data, pos = self.data, self.pos
        if pos + 9 <= len(data):  # the common forms inline, as in `string`
            first = data[pos]
            if first < 0x80:
                start = pos + 1 if first < 0x40 else pos + 2
                end = start + (first if first < 0x40 else (first & 0x3F) << 8 | data[pos + 1])
                if end <= len(data):
                    self.pos = end
                    return
        value, special = self._length()
        if not special:
            self.take(value)
        elif value <= 2:
            self.take(1 << value)
        elif value == 3:
            clen = self.length()
            self.length()
            self.take(clen)
        else:
            raise RdbError(f"unknown string encoding {value}")

    def millis(self) -> int:
        return struct.unpack("<q", self.take(8))[0]


# --- writing ------------------------------------------------------------------------------------


def encode_length(n: int) -> bytes:
    if n < 64:
        return bytes((n,))
    if n < 16384:
        return bytes((0x40 | n >> 8, n & 0xFF))
    if n <= 0xFFFFFFFF:
        return b"\x80" + struct.pack(">I", n)
    return b"\x81" + struct.pack(">Q", n & _U64)


def encode_string(s: bytes) -> bytes:
    """Raw, or an integer encoding when Redis would use one (a strict decimal that fits)."""
    if len(s) <= 11:
        value = as_int(s)
        if value is not None:
            if -128 <= value <= 127:
                return b"\xc0" + struct.pack("<b", value)
            if -32768 <= value <= 32767:
                return b"\xc1" + struct.pack("<h", value)
            if -(1 << 31) <= value < (1 << 31):
                return b"\xc2" + struct.pack("<i", value)
    return encode_length(len(s)) + s


# --- stream values ------------------------------------------------------------------------------


def _read_id(r: Reader) -> int:
    ms = r.length()
    seq = r.length()
    return (ms & _U64) << 64 | (seq & _U64)


def read_stream(r: Reader, rdb_type: int, s: Stream | None = None) -> Stream:
    """A stream value of `rdb_type` (15, 19, 21, 26 or 27) at the reader's position, into `s`
    (an empty stream) or a new one."""
    if rdb_type not in STREAM_TYPES:
        raise RdbError(f"not a stream type: {rdb_type}")
    s = Stream() if s is None else s
    # The nodes' bytes are read by the kernel, then checked here node by node in the order a
    # reader going node by node meets them: a node's key, its order, its listpack; a read error
    # after the last node returned (a last (key, None): its listpack could not be read).
    nodes, r.pos, problem = stream_nodes(r.data, r.pos)
    last_id = -1  # the previous node's last entry: every master is above it
    for key, lp in nodes:
        if len(key) != 16:
            raise RdbError("a stream node key is not 16 bytes")
        master = int.from_bytes(key, "big")
        if master <= last_id:
            raise RdbError("stream nodes out of order")
        if lp is None:
            break
        try:
            count, live, last_id = packed_node.validate(lp, master)
        except packed_node.Invalid as err:
            raise RdbError(f"a stream node is not a valid listpack: {err}") from None
        if not count:
            raise RdbError("an empty stream node")  # (Redis refuses them too)
        # (the next node's master must be above this node's last entry, not only its master:
        # every read finds a node by its master and trusts the order across nodes)
        s.restore_packed(master, lp, count, live)
    if problem is not None:
        raise RdbError(problem)
    s.length = r.length()
    s.last_id = _read_id(r)
    if rdb_type >= 19:
        s.first_id = _read_id(r)
        s.max_deleted_id = _read_id(r)
        s.entries_added = r.length()
    else:  # as Redis fills them in for an old type
        s.entries_added = s.length
        s.refresh_first_id()
    if s.length != sum(node.live for node in s.nodes):  # XLEN, trims rely on it
        raise RdbError("the stream's length does not match its entries")
    if s.nodes and s.nodes[-1].last_id() > s.last_id:  # XADD's IDs must stay above them
        raise RdbError("an entry is above the stream's last ID")
    for _ in range(r.length()):
        _read_group(r, rdb_type, s)
    if rdb_type >= 26:
        state = _read_idmp(r)
        # Zero settings and nothing recorded: what a stream that never used IDMP is written as
        # (`_write_idmp`; Redis's own settings are >= 1).
        if state.duration or state.maxsize or state.added or state.duplicates:
            s.idmp = state
    return s


def skip_stream(r: Reader, rdb_type: int) -> None:
    """Past a stream value, its structure followed but its nodes left undecoded (an RDB file's
    reader finds its keys so; RESTORE decodes and checks each value). The walk is the kernel's
    (`stream_end`, types 15 to 26); its error is raised with the reader where it happened.
    Type 27's (RDB 14: a NACK zone in each group) is walked here."""
    if rdb_type == 27:
        _skip_stream_27(r)
        return
    r.pos, problem = stream_end(r.data, r.pos, rdb_type)
    if problem is not None:
        raise RdbError(problem)


def _skip_stream_27(r: Reader) -> None:
    """Past a type-27 value: type 26's layout with, after each group's consumers, its NACK zone
    (a count, then as many 16-byte IDs)."""
    for _ in range(r.length()):
        r.skip_string()  # the node's master ID
        r.skip_string()  # its listpack
    for _ in range(8):  # length, last ID, first ID, max deleted ID (two lengths each), added
        r.length()
    for _ in range(r.length()):
        r.skip_string()
        for _ in range(3):  # last ID, entries read
            r.length()
        for _ in range(r.length()):
            r.take(24)  # ID, delivery time
            r.length()
        for _ in range(r.length()):
            r.skip_string()
            r.take(16)  # seen and active time
            r.take(16 * r.length())
        r.take(16 * r.length())  # the NACK zone
    r.length()  # the idempotent producers: duration, max size, producers, added, duplicates
    r.length()
    for _ in range(r.length()):
        r.skip_string()
        for _ in range(r.length()):
            r.skip_string()
            r.length()
            r.length()
    r.length()
    r.length()


def _read_group(r: Reader, rdb_type: int, s: Stream) -> None:
    name = r.string()
    if name in s.groups:
        raise RdbError("duplicate consumer group")
    last_id = _read_id(r)
    entries_read = _INVALID_ENTRIES_READ
    if rdb_type >= 19:
        raw = r.length()
        entries_read = _INVALID_ENTRIES_READ if raw == _U64 else raw
    else:  # as Redis fills it in for an old type: estimated from the stream
        entries_read = estimate_entries_read(s, last_id)
    group = s.groups[name] = ConsumerGroup(name, last_id, entries_read)
    pel: dict[int, tuple[int, int]] = {}
    for _ in range(r.length()):
        sid = int.from_bytes(r.take(16), "big")
        pel[sid] = (r.millis(), r.length())
    owned: set[int] = set()
    for _ in range(r.length()):
        cname = r.string()
        if cname in group.consumers:
            raise RdbError("duplicate consumer")
        seen = r.millis()
        consumer = group.create_consumer(cname, seen)
        consumer.active_time = r.millis() if rdb_type >= 21 else seen
        for _ in range(r.length()):
            sid = int.from_bytes(r.take(16), "big")
            if sid not in pel or sid in owned:
                raise RdbError("a consumer's pending entry is not in its group's")
            owned.add(sid)
            delivery_time, count = pel[sid]
            group.add_pending(sid, consumer, delivery_time, count)
    if rdb_type >= 27:  # the NACK zone: the entries XNACK released (Redis 8.8)
        nacked: set[int] = set()
        for _ in range(r.length()):
            sid = int.from_bytes(r.take(16), "big")
            if sid not in pel or sid in owned or sid in nacked:
                raise RdbError("a NACKed entry is not an unowned pending entry of its group")
            nacked.add(sid)
    for sid, (_time, count) in pel.items():
        if sid not in owned:  # owned by no consumer: as XNACK leaves it
            group.release(sid, count)


def _read_idmp(r: Reader) -> Idmp:
    duration, maxsize = r.length(), r.length()
    state = Idmp(duration, maxsize)
    for _ in range(r.length()):
        pid = r.string()
        recorded = []
        for _ in range(r.length()):
            iid = r.string()
            ms, seq = r.length(), r.length()
            recorded.append((iid, ms << 64 | seq, ms))  # (recorded at: the entry's time)
        state.restore(pid, recorded)
    state.added, state.duplicates = r.length(), r.length()
    return state


def _encode_id(sid: int) -> bytes:
    return encode_length(sid >> 64) + encode_length(sid & _U64)


def write_stream(s: Stream, rdb_type: int) -> bytes:
    """The stream value as `rdb_type` (15, 19, 21, 26 or 27) writes it."""
    if rdb_type not in STREAM_TYPES:
        raise ValueError(f"not a stream type: {rdb_type}")
    out = [encode_length(len(s.nodes))]
    for node in s.nodes:
        lp = bytes(node.buffer())  # the node is the listpack Redis writes
        out += [encode_string(node.master.to_bytes(16, "big")), encode_length(len(lp)) + lp]
    out += [encode_length(s.length), _encode_id(s.last_id)]
    if rdb_type >= 19:
        out += [_encode_id(s.first_id), _encode_id(s.max_deleted_id),
                encode_length(s.entries_added)]
    out.append(encode_length(len(s.groups)))
    for name in sorted(s.groups):
        out.append(_write_group(s.groups[name], rdb_type))
    if rdb_type >= 26:
        out.append(_write_idmp(s.idmp))
    return b"".join(out)


def _write_group(g: ConsumerGroup, rdb_type: int) -> bytes:
    out = [encode_string(g.name), _encode_id(g.last_id)]
    if rdb_type >= 19:
        out.append(encode_length(_U64 if g.entries_read < 0 else g.entries_read))
    out.append(encode_length(len(g.pel)))
    released = []  # owned by no consumer (XNACK): type 27's NACK zone names them
    for sid in g.pel_index:
        nack = g.pel[sid]
        out += [sid.to_bytes(16, "big"), struct.pack("<q", nack.delivery_time),
                encode_length(nack.delivery_count)]
        if nack.consumer is None:
            released.append(sid)
    out.append(encode_length(len(g.consumers)))
    for cname in sorted(g.consumers):
        c = g.consumers[cname]
        out += [encode_string(cname), struct.pack("<q", c.seen_time)]
        if rdb_type >= 21:
            out.append(struct.pack("<q", c.active_time))
        out.append(encode_length(len(c.pel)))
        out += [sid.to_bytes(16, "big") for sid in c.pel]
    if rdb_type >= 27:  # (in ID order: the group's PEL order; a reader takes any order)
        out.append(encode_length(len(released)))
        out += [sid.to_bytes(16, "big") for sid in released]
    return b"".join(out)


def _write_idmp(state: Idmp | None) -> bytes:
    if state is None:
        return encode_length(0) * 5  # duration, maxsize, producers, added, duplicates
    producers = list(state.entries())
    out = [encode_length(state.duration), encode_length(state.maxsize),
           encode_length(len(producers))]
    for pid, recorded in producers:
        out += [encode_string(pid), encode_length(len(recorded))]
        for iid, sid, _at in recorded:
            out += [encode_string(iid), encode_length(sid >> 64), encode_length(sid & _U64)]
    out += [encode_length(state.added), encode_length(state.duplicates)]
    return b"".join(out)


# --- which version a stream needs --------------------------------------------------------------

# The Redis versions that load each RDB version (redis-server refuses a version newer than its
# own; 12 is what 7.4 and 8.0 to 8.4 write, 13 what 8.6 writes, 14 8.8, 15 8.10). Valkey 8 and
# 9 load 11 and older only (9 refuses Redis's 12 and later unless told to try).
REDIS_LOADING = {9: "Redis 5.0 and later", 10: "Redis 7.0 and later", 11: "Redis 7.2 and later",
                 12: "Redis 7.4 and later", 13: "Redis 8.6 and later",
                 14: "Redis 8.8 and later", 15: "Redis 8.10 and later"}
MIN_VERSION = 9


def version_needed(s: Stream) -> tuple[int, str]:
    """The oldest RDB version whose stream type holds `s` exactly (what `read_stream`, like
    redis-server, rebuilds from an older type is not all of it), and what needs that version
    ("" for the oldest). An older type loses: without 26 (RDB 13), the idempotent producers'
    settings, maps and counters; without 21 (RDB 11), a consumer's active time (taken to be its
    seen time); without 19 (RDB 10), the first and max-deleted IDs and the entries added (taken
    to be 0-0, the first entry's ID and the length) and a group's entries read (estimated).
    Pending entries XNACK released (owned by no consumer) need 27 (RDB 14), whose NACK zone
    names them: a Redis older than 8.8 has no such thing."""
    for name in sorted(s.groups):
        group = s.groups[name]
        if len(group.pel) != sum(len(c.pel) for c in group.consumers.values()):
            return 14, (f"pending entries of group {key_text(name)} that XNACK released (owned "
                        f"by no consumer: Redis 8.8 and later)")
    idmp = s.idmp
    if idmp is not None and (idmp.duration or idmp.maxsize or idmp.added or idmp.duplicates):
        return 13, "idempotent producers' state (IDMP)"
    for name in sorted(s.groups):
        for cname in sorted(s.groups[name].consumers):
            consumer = s.groups[name].consumers[cname]
            if consumer.active_time != consumer.seen_time:
                return 11, (f"the active time of consumer {key_text(cname)} of group "
                            f"{key_text(name)} (apart from its seen time)")
    if s.max_deleted_id:
        return 10, "the ID of its last deleted entry"
    if s.entries_added != s.length:
        return 10, "the count of entries ever added (not its length)"
    if s.first_id != (0 if s.length == 0 else s.first_entry_id()):
        return 10, "its first ID"
    for name in sorted(s.groups):
        group = s.groups[name]
        if group.entries_read != estimate_entries_read(s, group.last_id):
            return 10, f"the entries-read counter of group {key_text(name)}"
    return MIN_VERSION, ""


# --- RDB files ---------------------------------------------------------------------------------

TYPE_NAMES = {0: "string", 1: "list", 2: "set", 3: "zset", 4: "hash", 5: "zset", 6: "module",
              7: "module", 9: "hash", 10: "list", 11: "set", 12: "zset", 13: "hash",
              14: "list", 15: "stream", 16: "hash", 17: "zset", 18: "list", 19: "stream",
              20: "set", 21: "stream", 22: "hash", 23: "hash", 24: "hash", 25: "hash",
              26: "stream", 27: "stream", 28: "array", 29: "templated hash",
              30: "templated hash", 31: "templated hash", 32: "templated hash", 33: "gcra"}
# Redis 8.10's (RDB 15) hashes stored against a shared template of field names: 29 and 31 hold
# their field names (DUMP's forms), 30 and 32 name a template of the file's registry (opcode
# 242) by its id. Skipped and named, never read into a hash.
TEMPLATED_HASH_TYPES = (29, 30, 31, 32)
TYPE_GCRA = 33
# A function library's record: the opcode, then the library's whole code as a string (Redis
# 7.0's rdbSaveFunctions, RDB 10 and later; snapshot.rdb_functions builds FUNCTION DUMP's payload
# of them). 246 is the format of 7.0's release candidates, which Redis's loader refuses.
RDB_OPCODE_FUNCTION2 = 245
RDB_OPCODE_FUNCTION_PRE_GA = 246
FUNCTIONS_VERSION = 10
_OPCODE_HASH_TEMPLATE = 242


class RdbKey(NamedTuple):
    db: int
    key: bytes
    rdb_type: int
    value: bytes  # the value's bytes as stored (for a stream: what a DUMP payload holds)
    expire_ms: int | None
    offset: int = -1  # where the key's record starts in the file (-1: not from a file)


# --- the value codecs: one per type streamkeep stores, found by RDB type number ---------------


class ValueCodec(NamedTuple):
    """How one kind of value is read and written. `read(reader, rdb_type)` returns the value at
    the reader's position as the engine holds it (RdbError if it is not one); `write(value,
    rdb_version)` returns (the RDB type that version writes, the value's bytes); `skip(reader,
    rdb_type)` moves the reader past the value (an RDB file's framing finds its keys so);
    `needs(value)`, when given, the oldest RDB version that holds the value and what of it
    needs that version ("" for MIN_VERSION): `write` refuses it for an older one."""

    name: str
    read: Callable[[Reader, int], Any]
    write: Callable[[Any, int], tuple[int, bytes]]
    skip: Callable[[Reader, int], None]
    kind: type | None  # the engine's class of the values `write` takes
    needs: Callable[[Any], tuple[int, str]] | None = None  # None: every version holds it


_CODECS: dict[int, ValueCodec] = {}
_WRITERS: dict[type, ValueCodec] = {}


def register_value_codec(type_numbers: Iterable[int], reader: Callable[[Reader, int], Any],
                         writer: Callable[[Any, int], tuple[int, bytes]], *, name: str,
                         kind: type | None = None,
                         skip: Callable[[Reader, int], None] | None = None,
                         also: tuple[type, ...] = (),
                         needs: Callable[[Any], tuple[int, str]] | None = None) -> None:
    """Make the RDB types `type_numbers` ones streamkeep stores: an RDB file's (or a full
    sync's) keys of these types are kept and the others skipped and counted; `write_rdb`
    writes a value of class `kind`, or of a class in `also` (another form the keyspace keeps
    such values in), with `writer`. `skip` defaults to reading the value and dropping it;
    `needs`: the oldest RDB version a value needs (ValueCodec.needs). A type number
    registered twice is a programming error (ValueError)."""
    numbers = tuple(type_numbers)
    taken = [n for n in numbers if n in _CODECS]
    if taken or not all(0 <= n < 0xF0 for n in numbers):
        raise ValueError(f"RDB type numbers taken or out of range: {taken or numbers}")

    def read_past(r: Reader, rdb_type: int) -> None:
        reader(r, rdb_type)

    codec = ValueCodec(name, reader, writer, skip or read_past, kind, needs)
    for n in numbers:
        _CODECS[n] = codec
        TYPE_NAMES[n] = name
    if kind is not None:
        _WRITERS[kind] = codec
    for cls in also:  # (before any class it derives from is tried: a PackedHash is bytes)
        _WRITERS[cls] = codec


def value_codec(rdb_type: int) -> ValueCodec | None:
    """The codec registered for `rdb_type`, None for a type streamkeep does not store."""
    return _CODECS.get(rdb_type)


def class_codec(cls: type) -> ValueCodec | None:
    """The codec that writes values of class `cls` (None: no codec does)."""
    return _WRITERS.get(cls)


def stored_types() -> frozenset[int]:
    """The RDB types streamkeep stores (every other is skipped and counted)."""
    return frozenset(_CODECS)


def _read_string_value(r: Reader, _rdb_type: int) -> bytes:
    return r.string()


def _write_string_value(value: bytes, _version: int) -> tuple[int, bytes]:
    return TYPE_STRING, encode_string(value)


def _skip_string_value(r: Reader, _rdb_type: int) -> None:
    r.string()  # (decoded: a damaged LZF string is refused where it is)


def _write_stream_value(s: Stream, version: int) -> tuple[int, bytes]:
    return TYPE_STREAM[version], write_stream(s, TYPE_STREAM[version])


register_value_codec((TYPE_STRING,), _read_string_value, _write_string_value, name="string",
                     kind=bytes, skip=_skip_string_value)
register_value_codec(STREAM_TYPES, read_stream, _write_stream_value, name="stream",
                     kind=Stream, skip=skip_stream)


# --- skipping what streamkeep does not store ------------------------------------------------------

_MODULE_OPCODE_UINT = 2


def _skip_module_opcodes(r: Reader) -> None:
    """Past a module's typed values (what RedisModule_Save* write, each after its opcode), up
    to their end marker (opcode 0)."""
    while (op := r.length()) != 0:
        if op in (1, 2):  # signed, unsigned integer
            r.length()
        elif op == 3:  # float
            r.take(4)
        elif op == 4:  # double
            r.take(8)
        elif op == 5:  # string
            r.skip_string()
        else:
            raise RdbError(f"bad module data (opcode {op}) at byte {r.pos}")


def _skip_array(r: Reader) -> None:
    """Past an array (type 28, Redis 8.8): its count, whether an insert index follows (0 or 1)
    and that index, then per element its index, a tag (0 a string, 1 an integer and 2 a
    double as 8 bytes, 3 a short string) and the element."""
    count = r.length()
    flag = r.length()
    if flag > 1:
        raise RdbError(f"bad array value (insert-index flag {flag})")
    if flag:
        r.length()
    for _ in range(count):
        r.length()
        tag = r.length()
        if tag in (1, 2):
            r.take(8)
        elif tag in (0, 3):
            r.skip_string()
        else:
            raise RdbError(f"bad array value (element tag {tag})")


_ONE_STRING = {0, 9, 10, 11, 12, 13, 16, 17, 20}  # the value is one (blob) string
_STRINGS = {1: 1, 2: 1, 4: 2, 14: 1}  # the value is a count of items of N strings each


def _skip_value(r: Reader, rdb_type: int, valkey: bool = False,
                templates: dict[int, int] | None = None) -> None:
    """Past a value of a type streamkeep does not store (`valkey`: the file is Valkey 9's,
    whose type 22 is its own hash with field expiries; `templates`: the hash templates the
    file registered so far, id -> field count)."""
    if rdb_type in _ONE_STRING:
        r.string()
    elif rdb_type in _STRINGS:
        for _ in range(r.length() * _STRINGS[rdb_type]):
            r.string()
    elif rdb_type == 3:  # zset with doubles as text: a length byte (253-255: nan, +inf, -inf)
        for _ in range(r.length()):
            r.string()
            n = r.byte()
            if n < 253:
                r.take(n)
    elif rdb_type == 5:
        for _ in range(r.length()):
            r.string()
            r.take(8)
    elif rdb_type == 18:
        for _ in range(r.length()):
            r.length()
            r.string()
    elif rdb_type == 7:  # a module's value (MODULE_2): its id, then typed values
        r.length()
        _skip_module_opcodes(r)
    elif rdb_type == 22 and valkey:  # Valkey 9: field, value, 8-byte expiry (-1: none) each
        for _ in range(r.length()):
            r.skip_string()
            r.skip_string()
            r.take(8)
    elif rdb_type in (22, 24):  # a hash with field expiries, as a dict (24: 7.4+; 22: pre-GA)
        if rdb_type == 24:
            r.take(8)  # the earliest expiry
        for _ in range(r.length()):
            r.length()  # the field's TTL
            r.skip_string()
            r.skip_string()
    elif rdb_type == 23:  # a hash with field expiries as a listpack (pre-GA)
        r.skip_string()
    elif rdb_type == 25:  # a hash with field expiries (7.4+): minimum expiry, listpack
        r.take(8)
        r.string()
    elif rdb_type == 28:
        _skip_array(r)
    elif rdb_type in TEMPLATED_HASH_TYPES:
        try:
            _skip_templated_hash(r, rdb_type, {} if templates is None else templates)
        except RdbError as err:
            if str(err) == "truncated":
                raise  # (the file cut short: said so with where it ends)
            raise RdbError(f"a templated hash (RDB type {rdb_type}, Redis 8.10) that cannot be "
                           f"read past: {err}") from None
    elif rdb_type == TYPE_GCRA:
        # Redis 8.10 is built without it (its loader refuses the type) and the layout of the
        # builds that have it is not published: no length to skip by.
        raise RdbError(f"a GCRA rate limiter (RDB type {rdb_type}, Redis 8.10): a type Redis "
                       "8.10 itself neither writes nor loads (only a build with GCRA enabled "
                       "does), whose layout streamkeep does not know, so it cannot read past it")
    else:
        raise RdbError(f"cannot read a value of RDB type {rdb_type} "
                       f"({TYPE_NAMES.get(rdb_type, 'unknown')})")


def _skip_template_fields(r: Reader) -> int:
    """Past a self-contained templated hash's field names (types 29 and 31): a format byte,
    then 0: a listpack of the names, 1: their count and each name. Returns their count."""
    fmt = r.byte()
    if fmt == 0:
        return len(listpack_items(r.string()))
    if fmt == 1:
        count = r.length()
        for _ in range(count):
            r.skip_string()
        return count
    raise RdbError(f"unknown field-name format {fmt}")


def _skip_templated_hash(r: Reader, rdb_type: int, templates: dict[int, int]) -> None:
    """Past a templated hash: 29 its names then a listpack of its template id and values; 30
    that listpack alone; 31 its names then one value per name; 32 its template's id then one
    value per field of that template. The template a reference form (30, 32) names must be in
    the file's registry, as Redis's loader requires."""
    if rdb_type == 30:
        items = listpack_items(r.string())
        if not items or not isinstance(items[0], int) or items[0] not in templates:
            raise RdbError(f"hash template {items[0] if items else '(none)'!r} is not in the "
                           f"file's template registry")
        return
    if rdb_type == 32:
        tid = r.length()
        count = templates.get(tid)
        if count is None:
            raise RdbError(f"hash template {tid} is not in the file's template registry")
    else:
        count = _skip_template_fields(r)
        if rdb_type == 29:
            r.skip_string()
            return
    for _ in range(count):
        r.skip_string()


def _read_hash_template(r: Reader, templates: dict[int, int]) -> None:
    """One template of the file's registry (opcode 242, RDB 15): its id, its field count, each
    field name; kept as id -> field count, what a type-32 value needs to be read past. Redis
    refuses a template with no field and an id registered twice; so is it here."""
    tid = r.length()
    count = r.length()
    if not count:
        raise RdbError(f"hash template {tid} has no field")
    if tid in templates:
        raise RdbError(f"hash template {tid} is registered twice")
    for _ in range(count):
        r.skip_string()
    templates[tid] = count


def describe_skipped(keys: Iterable[RdbKey], limit: int = 5) -> str:
    """The keys of types streamkeep does not store, for a log line: each type with its count
    and its first `limit` keys (`hash 3 ("h1", "h2", "h3"), array 1 ("a")`); "" for none."""
    counts: dict[str, int] = {}
    names: dict[str, list[str]] = {}
    for k in keys:
        if k.rdb_type in _CODECS:
            continue
        name = TYPE_NAMES.get(k.rdb_type, f"type {k.rdb_type}")
        counts[name] = counts.get(name, 0) + 1
        shown = names.setdefault(name, [])
        if len(shown) < limit:
            shown.append(key_text(k.key))
    parts = []
    for name in sorted(counts):
        more = ", ..." if counts[name] > len(names[name]) else ""
        parts.append(f"{name} {counts[name]} ({', '.join(names[name])}{more})")
    return ", ".join(parts)


def read_rdb(data: bytes) -> tuple[int, dict[bytes, bytes], list[RdbKey]]:
    """An RDB file's version, AUX fields and keys (every type; a stream's value decodable with
    `load_payload` once wrapped by `payload_from`). RdbError for a damaged or unknown file."""
    version, aux, keys, _end = read_rdb_prefix(data)
    return version, aux, keys


def rdb_version(data: bytes) -> int:
    """The RDB version the file starting with `data` declares (its first 9 bytes: `REDIS`
    and four digits, or Valkey 9's `VALKEY` and three). RdbError, saying what is there, for
    no RDB header or a version this module does not read."""
    if data[:6] == b"VALKEY":
        return _valkey_version(data)
    if data[:5] != b"REDIS":
        raise RdbError("not an RDB file (no REDIS magic)")
    digits = data[5:9]
    if len(digits) < 4:
        raise RdbError(f"truncated at byte {len(data)}, inside the RDB header (REDIS and a "
                       "4-digit version)")
    if not digits.isdigit():
        raise RdbError(f"REDIS magic without a version number (bytes 5 to 8 are "
                       f"{digits.hex(' ')})")
    version = int(digits)
    if not 1 <= version <= MAX_VERSION:
        raise RdbError(f"RDB version {version} is not one streamkeep reads (versions 1 "
                       f"to {MAX_VERSION}, {MAX_VERSION} is what Redis 8.10 writes; and "
                       f"Valkey 9's VALKEY080)")
    return version


def _valkey_version(data: bytes) -> int:
    digits = data[6:9]
    if len(digits) < 3:
        raise RdbError(f"truncated at byte {len(data)}, inside the RDB header (VALKEY and a "
                       "3-digit version)")
    if not digits.isdigit():
        raise RdbError(f"VALKEY magic without a version number (bytes 6 to 8 are "
                       f"{digits.hex(' ')})")
    version = int(digits)
    if version not in VALKEY_VERSIONS:
        raise RdbError(f"Valkey RDB version {version} is not one streamkeep reads (Valkey 9's "
                       f"{', '.join(map(str, VALKEY_VERSIONS))}; Valkey 8 writes REDIS0011)")
    return version


class RdbLibrary(NamedTuple):
    """A function library an RDB file carries (opcode 245): its whole code, shebang included,
    as FUNCTION LOAD takes it, and where its record starts in the file."""

    code: bytes
    offset: int


class RdbContents(NamedTuple):
    """What an RDB file holds: its version, AUX fields, keys (every type, in file order), function
    libraries (in file order), and where the RDB ends in the bytes read (after its checksum)."""

    version: int
    aux: dict[bytes, bytes]
    keys: list[RdbKey]
    libraries: list[RdbLibrary]
    end: int


def read_rdb_prefix(data: bytes) -> tuple[int, dict[bytes, bytes], list[RdbKey], int]:
    """`read_rdb`, and where the RDB ends in `data` (after its checksum): an AOF's RDB
    preamble is followed by commands. Damage is reported with the byte offset it is found at
    and what was being read there; a file cut short, with the offset it ends at."""
    contents = read_rdb_contents(data)
    return contents.version, contents.aux, contents.keys, contents.end


def read_rdb_contents(data: bytes) -> RdbContents:
    """`read_rdb_prefix`, with the function libraries the file carries (what `read_rdb` leaves
    out). A library in the format of Redis 7.0's release candidates (opcode 246) is refused, as
    Redis's loader refuses it. Redis 8.10's hash template registry (opcode 242) is read for
    what its templated hashes need to be skipped."""
    version = rdb_version(data)
    r = Reader(data, 9)
    aux: dict[bytes, bytes] = {}
    keys: list[RdbKey] = []
    libraries: list[RdbLibrary] = []
    templates: dict[int, int] = {}  # hash template id -> its field count (opcode 242)
    db, expire = 0, None
    inside = "the RDB header"
    try:
        while True:
            at = r.pos
            inside = "the next key or opcode (the file has no end-of-RDB marker)"
            op = r.byte()
            if op == 0xFF:
                if version >= 5:
                    if len(data) < r.pos + 8:
                        raise RdbError(f"truncated at byte {len(data)}, inside the checksum "
                                       f"after the end-of-RDB marker at byte {at}")
                    crc = struct.unpack("<Q", data[r.pos:r.pos + 8])[0]
                    if crc and crc64(memoryview(data)[:r.pos]) != crc:  # (no copy)
                        raise RdbError(f"checksum mismatch: the CRC-64 at byte {r.pos} is not "
                                       f"that of bytes 0 to {r.pos - 1}")
                    return RdbContents(version, aux, keys, libraries, r.pos + 8)
                return RdbContents(version, aux, keys, libraries, r.pos)
            inside = f"{_OPCODES.get(op, 'a key')} at byte {at}"
            if op == 0xFE:
                db = r.length()
            elif op == 0xFD:
                expire = struct.unpack("<I", r.take(4))[0] * 1000
            elif op == 0xFC:
                expire = r.millis()
            elif op == 0xFB:
                r.length()
                r.length()
            elif op == 0xFA:
                name = r.string()
                aux[name] = r.string()
            elif op == 0xF9:
                r.byte()
            elif op == 0xF8:
                r.length()
            elif op == RDB_OPCODE_FUNCTION2:
                libraries.append(RdbLibrary(r.string(), at))
            elif op == RDB_OPCODE_FUNCTION_PRE_GA:
                raise RdbError(f"a function library in the format of Redis 7.0's release "
                               f"candidates (opcode 246) at byte {at}: a format Redis's own "
                               f"loader no longer reads either")
            elif op == 0xF7:  # MODULE_AUX: a module's own data, skipped like its values
                r.length()  # the module's id
                if r.length() != _MODULE_OPCODE_UINT:
                    raise RdbError(f"bad module aux data at byte {r.pos}")
                r.length()  # when it was saved (before or after the keys)
                _skip_module_opcodes(r)
            elif op == 0xF4:
                for _ in range(3):
                    r.length()
            elif op == 0xF3 and version in VALKEY_VERSIONS:  # SLOT_IMPORT (Valkey 9)
                inside = f"a slot import at byte {at}"
                _skip_slot_import(r)
            elif op == 0xF3 and version >= 13:  # KEY_META (Redis 8.6): before its key
                inside = f"a key's metadata at byte {at}"
                _skip_key_meta(r)
            elif op == _OPCODE_HASH_TEMPLATE and 15 <= version <= MAX_VERSION:
                inside = f"a hash template of the registry (opcode 242, Redis 8.10) at byte {at}"
                try:
                    _read_hash_template(r, templates)
                except RdbError as err:
                    if str(err) == "truncated":
                        raise
                    raise RdbError(f"a hash template registry (opcode 242, Redis 8.10) that "
                                   f"cannot be read: {err}") from None
            elif op in TYPE_NAMES:
                inside = f"the name of a {TYPE_NAMES[op]} key at byte {at}"
                key = r.string()
                inside = (f"the value of {TYPE_NAMES[op]} key {key_text(key)} (type {op}) at "
                          f"byte {at}")
                start = r.pos
                codec = _CODECS.get(op)
                if codec is not None:
                    codec.skip(r, op)
                else:
                    _skip_value(r, op, valkey=version in VALKEY_VERSIONS, templates=templates)
                keys.append(RdbKey(db, key, op, data[start:r.pos], expire, at))
                expire = None
            else:
                raise RdbError(f"unknown RDB opcode or type {op} at byte {at}")
    except RdbError as err:
        raise RdbError(_located(str(err), r.pos, len(data), inside)) from None
    except (ValueError, IndexError, OverflowError, struct.error) as err:
        raise RdbError(f"damaged at byte {r.pos}, inside {inside} "
                       f"({err.__class__.__name__})") from None


def _skip_key_meta(r: Reader) -> None:
    """Past a key's metadata (opcode 243, RDB 13): a count of classes, then per class its
    4-byte class spec and a module's typed values up to their end marker."""
    for _ in range(r.length()):
        r.take(4)
        _skip_module_opcodes(r)


def _skip_slot_import(r: Reader) -> None:
    """Past Valkey 9's slot import (opcode 243 in a VALKEY080 file): the job's name, a count
    of slot ranges, each a start and an end."""
    r.skip_string()
    for _ in range(r.length()):
        r.length()
        r.length()


def key_text(key: bytes) -> str:
    """A key as a message names it: quoted, invalid UTF-8 and control characters escaped (a key
    may hold a line break; the message stays one line), cut at 60 bytes."""
    more = "..." if len(key) > 60 else ""
    text = key[:60].decode("utf-8", "backslashreplace")
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return f'"{shown}{more}"'


_OPCODES = {0xFE: "a SELECTDB", 0xFD: "an expiry (seconds)", 0xFC: "an expiry (ms)",
            0xFB: "a RESIZEDB", 0xFA: "an AUX field", 0xF9: "a FREQ", 0xF8: "an IDLE",
            0xF5: "a function library", 0xF7: "a module's AUX data", 0xF4: "a slot info"}


def _located(message: str, pos: int, size: int, inside: str) -> str:
    """A reader's error with where it happened: a read past the end is the file cut short
    (at its size); another error, at the reader's position, unless it says where already."""
    if " at byte " in message:
        return message
    if message == "truncated":
        return f"truncated at byte {size}, inside {inside}"
    return f"{message} at byte {pos}, inside {inside}"


def encode_function_record(code: bytes) -> bytes:
    """One library as an RDB file holds it: the opcode, then its code as a raw RDB string (Redis
    LZF-compresses a long one; both read the same)."""
    return bytes((RDB_OPCODE_FUNCTION2,)) + encode_length(len(code)) + code


def payload_from(rdb_type: int, value: bytes, version: int) -> bytes:
    """A DUMP payload around a value read from an RDB file of `version`."""
    # (one copy of the value, not two: a dump.rdb's stream can be its whole file)
    head, tail = bytes((rdb_type,)), struct.pack("<H", version)
    crc = crc64(tail, crc64(value, crc64(head)))
    return b"".join((head, value, tail, struct.pack("<Q", crc)))


def write_rdb(version: int, aux: list[tuple[bytes, bytes]],
              dbs: Iterable[tuple], libraries: Iterable[bytes] = ()) -> Iterator[bytes]:
    """An RDB file of `version`, piece by piece: the header, `aux` fields, each of `libraries`
    (a function library's code, as FUNCTION LOAD takes it) as a function record (opcode 245,
    where Redis's rdbSaveFunctions puts them: after the AUX fields, before the keys; RDB 10 and
    later: RdbError for a library in an older version, which no Redis before 7.0 reads), then
    for each
    `(db, key count, items)` or `(db, key count, TTL count, items)` SELECTDB, RESIZEDB and the
    keys, then EOF and the CRC-64 of everything before it. What redis-server loads (a version it
    knows). An item is `(key, value)` or `(key, value, expire_ms)`: a value is a Stream, a
    string's bytes or a value of another registered codec's class (snapshot.rdb_types
    registers them all); an `expire_ms` that is not None is written before the key as
    EXPIRETIME_MS (0xFC), as Redis writes every TTL. A string is written raw or, when it is a
    strict decimal of at most 32 bits, integer-encoded as Redis does (never LZF-compressed:
    Redis's own writer compresses values over 20 bytes when that saves space; both load the
    same)."""
    if version not in TYPE_STREAM:
        raise RdbError(f"RDB version {version} is not one streamkeep writes (9 to {MAX_VERSION})")
    crc = 0

    def piece(data: bytes) -> bytes:
        nonlocal crc
        crc = crc64(data, crc)
        return data

    yield piece(b"REDIS%04d" % version)
    for name, value in aux:
        yield piece(b"\xfa" + encode_string(name) + encode_string(value))
    for code in libraries:
        if version < FUNCTIONS_VERSION:
            raise RdbError(f"RDB version {version} cannot hold a function library (RDB "
                           f"{FUNCTIONS_VERSION} and later: Redis 7.0)")
        yield piece(encode_function_record(code))
    for entry in dbs:
        db, count, items = entry[0], entry[1], entry[-1]
        with_ttl = entry[2] if len(entry) == 4 else 0
        yield piece(b"\xfe" + encode_length(db) + b"\xfb" + encode_length(count)
                    + encode_length(with_ttl))
        for item in items:
            key, value = item[0], item[1]
            expire_ms = item[2] if len(item) > 2 else None
            head = b"" if expire_ms is None else b"\xfc" + struct.pack("<q", expire_ms)
            rdb_type, body = writer_for(value).write(value, version)
            yield piece(head + bytes((rdb_type,)) + encode_string(key) + body)
    yield piece(b"\xff")
    yield struct.pack("<Q", crc)


def writer_for(value: object) -> ValueCodec:
    """The codec that writes `value` (by its class, or a class it derives from)."""
    codec = _WRITERS.get(type(value))
    if codec is None:
        codec = next((c for kind, c in _WRITERS.items() if isinstance(value, kind)), None)
        if codec is None:
            raise TypeError(f"no RDB codec writes a {type(value).__name__}")
    return codec


def string_value(value: bytes) -> bytes:
    """The string a type-0 key's stored value bytes (`RdbKey.value`) hold, in any encoding
    Redis writes: raw, an 8-, 16- or 32-bit integer, LZF-compressed. RdbError if they are not
    exactly one such string."""
    r = Reader(value)
    out = r.string()
    if r.pos != len(value):
        raise RdbError("data after the string")
    return out


# --- DUMP payloads -------------------------------------------------------------------------------


def dump_payload(s: Stream, version: int) -> bytes:
    """DUMP's reply for a stream: type, value, RDB version (u16 LE), CRC-64 (LE)."""
    body = bytes((TYPE_STREAM[version],)) + write_stream(s, TYPE_STREAM[version]) + \
        struct.pack("<H", version)
    return body + struct.pack("<Q", crc64(body))


def dump_string_payload(value: bytes, version: int) -> bytes:
    """DUMP's reply for a string: the value raw or as an integer, as Redis writes it (Redis
    also LZF-compresses a value over 20 bytes when that saves space: its payload for such a
    value differs from this one, and both load the same)."""
    return payload_from(TYPE_STRING, encode_string(value), version)


def load_string_payload(payload: bytes) -> bytes:
    """The string in a DUMP payload whose footer was checked (RdbError: bad data format)."""
    r = Reader(payload[:-10])
    if r.byte() != TYPE_STRING:
        raise RdbError("not a string")
    value = r.string()
    if r.pos != len(r.data):
        raise RdbError("data after the string")
    return value


def check_payload(payload: bytes, max_version: int) -> None:
    """Redis's verifyDumpPayload: RdbError unless the footer and checksum are right. The
    footer's version is at most `max_version`, or Valkey 9's (80: its types are RDB 11's,
    which a Redis refuses by number alone)."""
    if len(payload) < 10:
        raise RdbError("too short")
    version = struct.unpack("<H", payload[-10:-8])[0]
    crc = struct.unpack("<Q", payload[-8:])[0]
    if version > max_version and version not in VALKEY_VERSIONS:
        raise RdbError("version or checksum")
    if crc == 0 or crc64(memoryview(payload)[:-8]) != crc:
        raise RdbError("version or checksum")


def payload_type(payload: bytes) -> int:
    """The RDB type byte of a DUMP payload (checked: at least 10 bytes)."""
    return payload[0]


def load_payload(payload: bytes, into: Stream | None = None) -> Stream:
    """The stream in a DUMP payload whose footer was checked (RdbError: bad data format)."""
    r = Reader(payload[:-10])
    rdb_type = r.byte()
    if rdb_type not in STREAM_TYPES:
        raise RdbError(f"not a stream (type {rdb_type})")
    try:
        return read_stream(r, rdb_type, into)
    except (ValueError, KeyError, IndexError, OverflowError, struct.error) as err:
        # Whatever a value so broken trips on in the model is a bad payload all the same.
        raise RdbError(f"bad stream value ({err.__class__.__name__})") from None


__all__ = ["MIN_VERSION", "REDIS_LOADING", "RdbError", "RdbKey", "ValueCodec", "payload_from",
           "key_text", "rdb_version", "read_rdb", "check_payload", "crc64", "version_needed",
           "dump_payload", "dump_string_payload", "load_string_payload", "listpack",
           "listpack_items", "load_payload", "lp_element", "string_value", "lzf_decompress",
           "read_rdb_prefix", "read_rdb_contents", "RdbContents", "RdbLibrary",
           "RDB_OPCODE_FUNCTION2", "RDB_OPCODE_FUNCTION_PRE_GA", "FUNCTIONS_VERSION",
           "encode_function_record", "TEMPLATED_HASH_TYPES",
           "TYPE_GCRA", "read_stream", "write_rdb", "write_stream", "register_value_codec",
           "value_codec", "class_codec", "stored_types", "describe_skipped", "writer_for"]
