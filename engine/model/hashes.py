"""The HASH value: fields and values in Redis's encodings, with per-field expiry.

Owns one hash's contents and the rules Redis (t_hash.c) applies to them: which encoding holds
it (`OBJECT ENCODING`: "listpack", "listpackex", "hashtable"), when it converts (one way, never
back), the order HGETALL walks it, HINCRBY/HINCRBYFLOAT arithmetic, HRANDFIELD's sampling rules,
per-field expiry times (Redis 7.4+), a compact versioned serialisation. Must not touch: argument
parsing, replies, effects, the keyspace, the clock (callers pass `now_ms`), keyspace events.

Encodings, as Redis names them:
- "listpack" while the hash has at most `hash-max-listpack-entries` (512) fields and every
  field and value is at most `hash-max-listpack-value` (64) bytes. Held as ONE bytes object, a *pack* (see
  "the packed pairs" below: the count, the lengths, the fields, the values), in insertion
  order (a replaced value keeps its place, as lpReplace keeps it).
- "listpackex": a small hash on which a field-expiry command ran (`prepare_field_expiry`; it
  stays listpackex when its TTLs are gone, as Redis's does). The same bytes, plus a dict of the
  fields' expiry times; the order is Redis's: fields with a TTL first, by expiry time (a new TTL
  goes before the first field whose TTL is >= it), then the others in the order they arrived
  there (a field that loses its TTL, by HSET or HPERSIST, moves to the end).
- "hashtable": past either limit. A bucket table (`PairTable`: engine.model.bucket_table's
  linear hashing on a keyed hash of the field, its seed the table's own, with the fields' TTLs
  beside it): each bucket one pack of a few pairs, split one at a time as the table grows. A
  field costs about a quarter of what a dict of bytes to bytes costs (two 33-byte
  objects and a dict slot per field, ~138 bytes for a 12-byte field and a 10-byte value),
  under half of redis-server's own figure. Its order is the table's, which matches no Redis
  order (HGETALL of a big hash compares as a set).

Field expiry: absolute Unix times in ms. Plain hashes pay nothing: the hashtable's expiry dict
and its min-heap exist only while some field has a TTL. Which fields count as expired is the
caller's comparison: `expired_fields(now_ms)` lists those whose time is <= now_ms (the active
expiry cycle's rule); Redis's lazy check on access treats a field as expired when its time is
< now, so a lazy caller passes `now_ms - 1`.

Bare small hashes: a keyspace keeps a plain listpack hash as its pack alone (a `PackedHash`,
engine.model.packed_hash); `bound_hash` gives the commands a `Hash` that stores each change at
the dict entry it was read from, `as_hash` the generic paths one to read (the end of this
module). That dict entry is the only part of a keyspace this module writes.

Limits are read at every write from the `HashLimits` the hash was given (an engine keeps one
and changes it on CONFIG SET, as Redis reads its globals), so a CONFIG SET reaches existing keys
on their next write, as in Redis.
"""

from __future__ import annotations

import heapq
import random
import sys
from collections.abc import Iterable, Iterator, Sequence
from fractions import Fraction
from itertools import islice
from typing import Any, ClassVar, Final

from streamkeep.engine.model.bucket_table import (
    COLD,
    EMPTY,
    PLACEMENT_BYTES,
    BucketTable,
    build_pack,
)
from streamkeep.engine.model.limits import Limits, Setting
from streamkeep.engine.model.listpack import as_int, int_size, str_size
from streamkeep.engine.model.packed_columns import (
    pack_delete,
    pack_get,
    pack_item,
    pack_put,
    pack_strings,
)
from streamkeep.engine.model.packed_hash import PackedHash
from streamkeep.engine.model.redis_alloc import jemalloc_size, sds_alloc
from streamkeep.engine.model.strings import add_long_double, format_long_double, parse_long_double
from streamkeep.engine.wire.errors import ReplyError

NOT_AN_INTEGER: Final = "ERR hash value is not an integer"
OVERFLOW: Final = "ERR increment or decrement would overflow"
NOT_A_FLOAT: Final = "ERR hash value is not a float"
FLOAT_OVERFLOW: Final = "ERR increment would produce NaN or Infinity"

# Kernels the per-command paths call, bound once: an imported name is looked up in this
# module's globals at each call, a Final one is read from a static (mypyc).
_PACK_GET: Final = pack_get
_PACK_PUT: Final = pack_put
_PACK_DELETE: Final = pack_delete

FORMAT_VERSION: Final = 1  # to_bytes's first byte
_KIND_LISTPACK: Final = 0
_KIND_LISTPACKEX: Final = 1
_KIND_HASHTABLE: Final = 2  # (records written before placements were: read only)
_KIND_PLACED: Final = 3  # a hashtable with its table's placement

_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_SUB_STRATEGY_MUL: Final = 3  # HRANDFIELD: count * 3 > size lists all and drops at random
_HEAP_SLACK: Final = 32  # stale heap entries tolerated beyond twice the live ones


class HashLimits(Limits):
    """hash-max-listpack-entries and hash-max-listpack-value; shared by the hashes of one engine
    and changed in place on CONFIG SET (engine.model.limits). The defaults are redis-server's
    (config.c: 512 entries, not the 128 of the sets' and sorted sets' listpacks; 64 bytes)."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting("hash-max-listpack-entries", "max_listpack_entries", "int", 512,
                "fields a hash holds in its compact (listpack) encoding at most",
                alias="hash-max-ziplist-entries"),
        Setting("hash-max-listpack-value", "max_listpack_value", "memory", 64,
                "bytes of the longest field or value a listpack-encoded hash holds",
                alias="hash-max-ziplist-value"),
    )

    def __init__(self, max_listpack_entries: int = 512, max_listpack_value: int = 64) -> None:
        self.max_listpack_entries = max_listpack_entries
        self.max_listpack_value = max_listpack_value


DEFAULT_LIMITS: Final = HashLimits()


# ---- the packed pairs ----------------------------------------------------------------------
# A pack is one bytes object: a width byte w (1, or 4 when the count or some length is >= 255),
# the count (w bytes), the fields' lengths (w bytes each), the values' lengths, the fields, the
# values. Columns, not alternating records: a lookup walks the fields' lengths and compares
# only the fields of the needle's length, and the reads go through the packed columns' kernel
# (engine.model.packed_columns), which checks the pack, so no Python loop walks the pairs.

_EMPTY: Final = EMPTY


def _count(blob: bytes) -> int:
    return blob[1] if blob[0] == 1 else int.from_bytes(blob[1:5], "little")


def _pack(fields: Sequence[bytes], values: Sequence[bytes]) -> bytes:
    return build_pack([fields, values])


def _columns(blob: bytes) -> tuple[list[bytes], list[bytes]]:
    strings = pack_strings(blob, 2)
    n = len(strings) >> 1
    return strings[:n], strings[n:]


def _pairs(blob: bytes) -> list[tuple[bytes, bytes]]:
    strings = pack_strings(blob, 2)
    n = len(strings) >> 1
    return list(zip(strings[:n], strings[n:], strict=True))


def _lp_get(blob: bytes, field: bytes) -> bytes | None:
    return _PACK_GET(blob, 2, field, 1)


def _nth_pair(blob: bytes, i: int) -> tuple[bytes, bytes]:
    return pack_item(blob, 2, 0, i), pack_item(blob, 2, 1, i)


def _lp_set(blob: bytes, field: bytes, value: bytes) -> tuple[bytes, bool]:
    """(the pack with field set to value, whether the field is new). A new field goes last, an
    existing one keeps its place."""
    new, old = _PACK_PUT(blob, 2, field, value)
    return new, old is None


def _lp_remove(blob: bytes, field: bytes) -> tuple[bytes, bytes] | None:
    """(the pack without field, its value), or None when absent."""
    return _PACK_DELETE(blob, 2, field)


def _lp_insert(blob: bytes, field: bytes, value: bytes, before: int) -> bytes:
    """The pack with the pair inserted before pair number `before` (or last)."""
    fields, values = _columns(blob)
    fields.insert(before, field)
    values.insert(before, value)
    return _pack(fields, values)


# ---- Redis's allocations, for MEMORY USAGE ---------------------------------------------------
# redis-server 7.0's layout (the oracle's): a 16-byte object header, a 56-byte dict, 24-byte
# dict entries, sds strings with a 1-byte header under 32 bytes; jemalloc's classes (8, then
# 16-byte steps to 128, then four a doubling): the 1M-field hash measured at 72.5 bytes a
# field is a 32-byte entry, two 16-byte strings and a bucket.

_OBJECT: Final = 16
_DICT: Final = 56
_DICT_ENTRY: Final = 24  # as objectComputeSize counts it (jemalloc serves it 32)
_LISTPACKEX_HEADER: Final = 32  # its expiry metadata, key and listpack pointers


# ---- the two larger forms -----------------------------------------------------------------

class _ListpackEx:
    """A listpackex hash: the packed pairs in Redis's order and the fields' expiry times."""

    __slots__ = ("blob", "ttl")

    def __init__(self, blob: bytes, ttl: dict[bytes, int]) -> None:
        self.blob = blob
        self.ttl = ttl

    def place(self, field: bytes, value: bytes, when: int | None) -> None:
        """Insert a pair absent from the blob where Redis's listpackex puts it: with a TTL,
        before the first field whose TTL is >= it; without, last."""
        if when is None:
            self.blob = _lp_insert(self.blob, field, value, _count(self.blob))
            self.ttl.pop(field, None)
            return
        before = 0
        ttl = self.ttl
        for f in self.ordered_ttl_fields():
            if ttl[f] >= when:
                break
            before += 1
        self.blob = _lp_insert(self.blob, field, value, before)
        ttl[field] = when

    def ordered_ttl_fields(self) -> list[bytes]:
        """The fields with a TTL, soonest first (the blob's first len(ttl) fields)."""
        if not self.ttl:
            return []
        return _columns(self.blob)[0][:len(self.ttl)]


class PairTable(BucketTable):
    """The hashtable form: a bucket table (engine.model.bucket_table) of (field, value)
    records, with the fields' TTLs beside it: `ttl`/`heap`, the fields' expiry times and a
    min-heap of (time, field) with stale entries dropped lazily; both None while no field has
    a TTL. (A big sorted set's member index is one too, without TTLs.)"""

    __slots__ = ("ttl", "heap")

    def __init__(self, capacity: int) -> None:
        super().__init__(2, capacity)
        self.ttl: dict[bytes, int] | None = None
        self.heap: list[tuple[int, bytes]] | None = None

    def set(self, field: bytes, value: bytes) -> bool:
        return self.put(field, value) is None

    def delete(self, field: bytes) -> bool:
        return self.pop(field) is not None

    def pop(self, field: bytes) -> bytes | None:
        """Delete a field (its TTL with it) and return its value; None when absent."""
        value = super().pop(field)
        if value is not None and self.ttl is not None and self.ttl.pop(field, None) is not None:
            self.drop_ttl_state_if_empty()
        return value

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for strings in self.bucket_strings():
            n = len(strings) >> 1
            yield from zip(strings[:n], strings[n:], strict=True)

    def random_pair(self, rng: random.Random) -> tuple[bytes, bytes]:
        """A uniformly random record."""
        b, r = self.random_slot(rng)
        return _nth_pair(b, r)

    def copy(self) -> PairTable:
        t = PairTable(0)
        self.copy_into(t)
        if self.ttl is not None:
            t.ttl = dict(self.ttl)
            t.heap = [(w, f) for f, w in t.ttl.items()]
            heapq.heapify(t.heap)
        return t

    # -- expiry
    def set_ttl(self, field: bytes, when: int) -> None:
        if self.ttl is None or self.heap is None:
            self.ttl, self.heap = {}, []
        self.ttl[field] = when
        heapq.heappush(self.heap, (when, field))
        if len(self.heap) > 2 * len(self.ttl) + _HEAP_SLACK:
            self.heap = [(w, f) for f, w in self.ttl.items()]
            heapq.heapify(self.heap)

    def drop_ttl_state_if_empty(self) -> None:
        if self.ttl is not None and not self.ttl:
            self.ttl = None
            self.heap = None

    def min_ttl(self) -> int | None:
        ttl, heap = self.ttl, self.heap
        if ttl is None or heap is None:
            return None
        while heap and ttl.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def expired(self, now_ms: int, limit: int) -> list[bytes]:
        """Up to `limit` fields whose time is <= now_ms, soonest first (the heap unchanged
        but for stale entries)."""
        ttl, heap = self.ttl, self.heap
        if ttl is None or heap is None:
            return []
        self.min_ttl()  # drops stale entries at the top
        out: list[bytes] = []
        popped: list[tuple[int, bytes]] = []
        while heap and heap[0][0] <= now_ms and len(out) < limit:
            entry = heapq.heappop(heap)
            if ttl.get(entry[1]) == entry[0]:
                out.append(entry[1])
                popped.append(entry)
        for entry in popped:
            heapq.heappush(heap, entry)
        return out


# ---- the hash -----------------------------------------------------------------------------

class Hash:
    """One HASH value. `_data` is the listpack bytes, a `_ListpackEx` or a `PairTable`.
    `_home`/`_key`: for a plain listpack hash a command reads (`bound_hash`), the dict and
    key it lives at, where every change is stored (see "Bare small hashes" below), and `_src`
    the value found there (the bare pack it wraps, or the hash itself): a change is stored only
    while that value is still the key's, so a binding left behind by a value that moved since
    (RENAME, MOVE) can never write over another key; None when unbound."""

    __slots__ = ("_data", "_lim", "_home", "_key", "_src")

    def __init__(self, limits: HashLimits | None = None) -> None:
        self._data: bytes | _ListpackEx | PairTable = _EMPTY
        self._lim = DEFAULT_LIMITS if limits is None else limits
        self._home: dict[bytes, Any] | None = None
        self._key = b""
        self._src: object = None

    def _stored(self) -> None:
        """A hash read from a bare pack changed: the keyspace gets its new pack, or, once it
        is no longer a plain listpack (a hashtable, a listpackex), the hash itself, which it
        keeps from then on (nothing converts back). Nothing is stored for a key that went
        meanwhile (an emptied hash's key is deleted by its command)."""
        home, key = self._home, self._key
        if home is None or home.get(key) is not self._src:
            self._home = self._src = None
            return
        d = self._data
        if type(d) is bytes:
            home[key] = self._src = PackedHash(d)
        else:
            home[key] = self
            self._home = self._src = None

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[bytes, bytes]],
                   limits: HashLimits | None = None) -> Hash:
        """A new hash holding `pairs` as HSET would set them on a new key (the last value of a
        field repeated wins)."""
        h = cls(limits)
        h.set_many(pairs)
        return h

    # -- encoding
    @property
    def encoding(self) -> str:
        """OBJECT ENCODING's name."""
        d = self._data
        if type(d) is bytes:
            return "listpack"
        return "listpackex" if type(d) is _ListpackEx else "hashtable"

    @property
    def limits(self) -> HashLimits:
        return self._lim

    @limits.setter
    def limits(self, limits: HashLimits) -> None:
        """Read `limits` from the next write on (a value loaded or restored joins its engine's
        shared limits; nothing converts now)."""
        self._lim = limits

    def _to_table(self, capacity: int = 0) -> PairTable:
        d = self._data
        if isinstance(d, PairTable):
            return d
        blob = d.blob if isinstance(d, _ListpackEx) else d
        table = PairTable(max(capacity, _count(blob)))
        table.load(_pairs(blob))
        if isinstance(d, _ListpackEx) and d.ttl:
            for f, w in d.ttl.items():
                table.set_ttl(f, w)
        self._data = table
        return table

    def _fits(self, field: bytes, value: bytes) -> bool:
        limit = self._lim.max_listpack_value
        return len(field) <= limit and len(value) <= limit

    def prepare_field_expiry(self) -> None:
        """What Redis does to a hash before a field-expiry command touches its fields
        (HEXPIRE and the like, whether or not a TTL ends up set): a listpack becomes a
        listpackex."""
        d = self._data
        if type(d) is bytes:
            self._data = _ListpackEx(d, {})
            if self._home is not None:
                self._stored()

    # -- reads
    def __len__(self) -> int:
        d = self._data
        if type(d) is bytes:
            return _count(d)
        if isinstance(d, _ListpackEx):
            return _count(d.blob)
        assert isinstance(d, PairTable)
        return d.count

    def get(self, field: bytes) -> bytes | None:
        d = self._data
        if type(d) is bytes:
            return _lp_get(d, field)
        if isinstance(d, PairTable):
            return d.get(field)
        assert isinstance(d, _ListpackEx)
        return _lp_get(d.blob, field)

    def __contains__(self, field: object) -> bool:
        return isinstance(field, bytes) and self.get(field) is not None

    def strlen(self, field: bytes) -> int:
        """HSTRLEN: the value's length, 0 for an absent field."""
        value = self.get(field)
        return 0 if value is None else len(value)

    def items(self) -> list[tuple[bytes, bytes]]:
        """(field, value) pairs in the encoding's order (see the module's docstring)."""
        d = self._data
        if type(d) is bytes:
            return _pairs(d)
        if isinstance(d, _ListpackEx):
            return _pairs(d.blob)
        assert isinstance(d, PairTable)
        return list(d.items())

    def keys(self) -> list[bytes]:
        return [f for f, _ in self.items()]

    def values(self) -> list[bytes]:
        return [v for _, v in self.items()]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.keys())

    def scan(self, cursor: int, count: int = 10) -> tuple[int, list[tuple[bytes, bytes]]]:
        """HSCAN's step: (next cursor, pairs). A listpack(ex) returns everything and cursor 0,
        as Redis does; a hashtable walks buckets from `cursor` until `count` pairs, and a field
        present for a whole scan is returned at least once (buckets only split upwards)."""
        d = self._data
        if not isinstance(d, PairTable):
            return 0, self.items()
        out: list[tuple[bytes, bytes]] = []
        i = max(cursor, 0)
        buckets = d.buckets
        while i < len(buckets) and len(out) < count:
            b = buckets[i]
            if b is COLD:
                b = d.peek(i)
            if len(b) > 2:
                out.extend(_pairs(b))
            i += 1
        return (i if i < len(buckets) else 0), out

    # -- writes
    def set(self, field: bytes, value: bytes, keep_ttl: bool = False) -> bool:
        """HSET of one field: True when the field is new. The field's TTL goes, as HSET's
        does, unless keep_ttl (HINCRBY, HINCRBYFLOAT keep it)."""
        new = self._set(field, value, keep_ttl)
        if self._home is not None:
            self._stored()
        return new

    def _set(self, field: bytes, value: bytes, keep_ttl: bool) -> bool:
        d = self._data
        if type(d) is bytes:
            if not self._fits(field, value):
                return self._to_table().set(field, value)
            blob, new = _lp_set(d, field, value)
            self._data = blob
            if new and _count(blob) > self._lim.max_listpack_entries:
                self._to_table()
            return new
        if isinstance(d, _ListpackEx):
            if not self._fits(field, value):
                return self._set_table(self._to_table(), field, value, keep_ttl)
            return self._set_listpackex(d, field, value, keep_ttl)
        assert isinstance(d, PairTable)
        return self._set_table(d, field, value, keep_ttl)

    def _set_listpackex(self, d: _ListpackEx, field: bytes, value: bytes,
                        keep_ttl: bool) -> bool:
        if field in d.ttl and not keep_ttl:  # HSET clears the TTL: the pair moves last
            removed = _lp_remove(d.blob, field)
            assert removed is not None
            d.blob = removed[0]
            d.place(field, value, None)
            return False
        d.blob, new = _lp_set(d.blob, field, value)
        if new and _count(d.blob) > self._lim.max_listpack_entries:
            self._to_table()
        return new

    @staticmethod
    def _set_table(t: PairTable, field: bytes, value: bytes, keep_ttl: bool) -> bool:
        new = t.set(field, value)
        if not new and not keep_ttl and t.ttl is not None and t.ttl.pop(field, None) is not None:
            t.drop_ttl_state_if_empty()
        return new

    def set_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> int:
        """HSET/HMSET of several pairs: the number of new fields. As Redis does before
        setting, a small hash converts at once when more pairs than the entry limit come in
        (duplicates or not) or any field or value is too long."""
        created = self._set_many(pairs)
        if self._home is not None:
            self._stored()
        return created

    def _set_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> int:
        if not isinstance(self._data, PairTable):
            if len(pairs) > self._lim.max_listpack_entries:
                self._to_table(len(pairs))
            elif not all(self._fits(f, v) for f, v in pairs):
                self._to_table()
        d = self._data
        if type(d) is bytes and len(pairs) > 1:
            # A plain listpack updates in place and appends new fields last: a dict's own
            # rules, so the pairs merge at C speed and the pack is written once. The count
            # only grows, so past the limit at the end is past it after some pair, as Redis
            # converts it.
            fields, values = _columns(d)
            merged = dict(zip(fields, values, strict=True))
            merged.update(pairs)
            if len(merged) > self._lim.max_listpack_entries:
                table = PairTable(len(merged))
                table.load(merged.items())
                self._data = table
            else:
                self._data = _pack(list(merged), list(merged.values()))
            return len(merged) - len(fields)
        created = 0
        for f, v in pairs:
            created += self._set(f, v, False)
        return created

    def setnx(self, field: bytes, value: bytes) -> bool:
        """HSETNX: set only a field absent; True when set."""
        if self.get(field) is not None:
            return False
        self.set(field, value)
        return True

    def delete(self, field: bytes) -> bool:
        """HDEL of one field (its TTL goes with it): True when it was there."""
        d = self._data
        if type(d) is bytes:
            removed = _lp_remove(d, field)
            if removed is None:
                return False
            self._data = removed[0]
            if self._home is not None:
                self._stored()
            return True
        if isinstance(d, _ListpackEx):
            removed = _lp_remove(d.blob, field)
            if removed is None:
                return False
            d.blob = removed[0]
            d.ttl.pop(field, None)
            return True
        assert isinstance(d, PairTable)
        return d.delete(field)

    def incr_by(self, field: bytes, increment: int) -> int:
        """HINCRBY: the new value (the field's TTL kept). Raises ReplyError with Redis's line
        when the value is not an integer or the sum leaves int64."""
        current = self.get(field)
        old = 0
        if current is not None:
            parsed = as_int(current)
            if parsed is None:
                raise ReplyError(NOT_AN_INTEGER)
            old = parsed
        total = old + increment
        if not _I64_MIN <= total <= _I64_MAX:
            raise ReplyError(OVERFLOW)
        self.set(field, b"%d" % total, keep_ttl=True)
        return total

    def incr_by_float(self, field: bytes, increment: Fraction) -> bytes:
        """HINCRBYFLOAT: the new value's text, as Redis prints it (long double arithmetic,
        engine.model.strings), stored with the field's TTL kept. The command parses the
        increment with `strings.parse_long_double` (so it is already rounded to a long
        double) and refuses an infinite one first ("ERR value is NaN or Infinity");
        raises ReplyError when the value is not a float or the sum is not finite."""
        current = self.get(field)
        old = Fraction(0)
        if current is not None:
            parsed = parse_long_double(current)
            if parsed is None:
                raise ReplyError(NOT_A_FLOAT)
            old = parsed
        total = add_long_double(old, increment)
        if total is None:
            raise ReplyError(FLOAT_OVERFLOW)
        text = format_long_double(total)
        self.set(field, text, keep_ttl=True)
        return text

    # -- random fields (HRANDFIELD)
    def random_fields(self, count: int, with_values: bool, rng: random.Random) -> list[bytes]:
        """HRANDFIELD key count [WITHVALUES]: fields (flat field, value, ... with_values), by
        Redis's rules: count 0 gives none; a negative count |count| independent picks (repeats
        allowed), as does count 1; count >= len the whole hash in its order; otherwise count
        distinct fields, in the listpack's order for a small hash. The caller bounds |count|
        (the reply is that long). One field without a count: `random_fields(1, ...)`."""
        size = len(self)
        if count == 0 or size == 0:
            return []
        if count < 0 or count == 1:
            picks = self._random_picks(-count if count < 0 else 1, rng)
        elif count >= size:
            picks = self.items()
        elif not isinstance(self._data, PairTable):
            everything = self.items()
            picks = [everything[i] for i in sorted(rng.sample(range(size), count))]
        elif count * _SUB_STRATEGY_MUL > size:
            picks = self.items()
            n = size
            while n > count:  # drop random ones, moving the last into the hole (Redis's way)
                i = rng.randrange(n)
                n -= 1
                picks[i] = picks[n]
            del picks[count:]
        else:
            table = self._data
            assert isinstance(table, PairTable)
            chosen: dict[bytes, bytes] = {}
            while len(chosen) < count:
                f, v = table.random_pair(rng)
                chosen.setdefault(f, v)
            picks = list(chosen.items())
        if with_values:
            return [x for pair in picks for x in pair]
        return [f for f, _ in picks]

    def _random_picks(self, n: int, rng: random.Random) -> list[tuple[bytes, bytes]]:
        d = self._data
        if isinstance(d, PairTable) and n * 8 < d.count:
            return [d.random_pair(rng) for _ in range(n)]
        everything = self.items()
        return rng.choices(everything, k=n)

    # -- field expiry
    def set_field_expiry(self, field: bytes, when_ms: int) -> bool:
        """Give an existing field an absolute expiry time (ms): False when the field is
        absent. A listpack becomes a listpackex; the pair moves to its place by time. The
        command decides the NX/XX/GT/LT conditions and deletes a field whose time is past."""
        self.prepare_field_expiry()
        d = self._data
        if isinstance(d, _ListpackEx):
            removed = _lp_remove(d.blob, field)
            if removed is None:
                return False
            d.blob = removed[0]
            d.ttl.pop(field, None)
            d.place(field, removed[1], when_ms)
            return True
        assert isinstance(d, PairTable)
        if d.get(field) is None:
            return False
        d.set_ttl(field, when_ms)
        return True

    def field_expiry(self, field: bytes) -> int | None:
        """The field's expiry time (ms), None when it has none or is absent."""
        d = self._data
        if isinstance(d, (_ListpackEx, PairTable)) and d.ttl is not None:
            return d.ttl.get(field)
        return None

    def persist_field(self, field: bytes) -> bool:
        """HPERSIST of one field: True when it had a TTL (now gone; in a listpackex the pair
        moves last, as Redis re-inserts it)."""
        d = self._data
        if isinstance(d, _ListpackEx):
            if field not in d.ttl:
                return False
            removed = _lp_remove(d.blob, field)
            assert removed is not None
            d.blob = removed[0]
            d.place(field, removed[1], None)
            return True
        if isinstance(d, PairTable) and d.ttl is not None and field in d.ttl:
            del d.ttl[field]
            d.drop_ttl_state_if_empty()
            return True
        return False

    def has_field_expiry(self) -> bool:
        """Whether some field has a TTL."""
        d = self._data
        return isinstance(d, (_ListpackEx, PairTable)) and bool(d.ttl)

    def fields_with_expiry(self) -> list[tuple[bytes, int]]:
        """(field, expiry ms) of every field with a TTL, soonest first."""
        d = self._data
        if isinstance(d, _ListpackEx):
            return [(f, d.ttl[f]) for f in d.ordered_ttl_fields()]
        if isinstance(d, PairTable) and d.ttl is not None:
            return sorted(d.ttl.items(), key=lambda fw: (fw[1], fw[0]))
        return []

    def min_field_expiry(self) -> int | None:
        """The soonest expiry time of any field, None when no field has one."""
        d = self._data
        if isinstance(d, _ListpackEx):
            return min(d.ttl.values()) if d.ttl else None
        if isinstance(d, PairTable):
            return d.min_ttl()
        return None

    def expired_fields(self, now_ms: int, limit: int = 1 << 62) -> list[bytes]:
        """Up to `limit` fields whose expiry time is <= now_ms, soonest first; nothing
        changes (the caller deletes them and propagates each deletion)."""
        d = self._data
        if isinstance(d, _ListpackEx):
            out: list[bytes] = []
            for f in d.ordered_ttl_fields():
                if d.ttl[f] > now_ms or len(out) >= limit:
                    break
                out.append(f)
            return out
        if isinstance(d, PairTable):
            return d.expired(now_ms, limit)
        return []

    def delete_expired(self, now_ms: int, limit: int = 1 << 62) -> list[bytes]:
        """Delete what `expired_fields` lists; returns the fields deleted."""
        fields = self.expired_fields(now_ms, limit)
        for f in fields:
            self.delete(f)
        return fields

    # -- copies, size, serialisation
    def copy(self) -> Hash:
        """An independent copy of the same encoding (COPY)."""
        h = Hash(self._lim)
        d = self._data
        if isinstance(d, _ListpackEx):
            h._data = _ListpackEx(d.blob, dict(d.ttl))
        elif isinstance(d, PairTable):
            h._data = d.copy()
        else:
            h._data = d  # immutable bytes: shared
        return h

    def memory_usage(self, samples: int = 5) -> int:
        """MEMORY USAGE's estimate of the value as redis-server holds it (the key and its
        entry apart): the object header and the listpack's allocation (with each field's TTL
        entry and the listpackex header); or the dict, its buckets and, per field, its entry
        and two sds strings, averaged over the first `samples` fields (all for 0), as
        objectComputeSize samples them. Allocations in jemalloc's size classes."""
        d = self._data
        if not isinstance(d, PairTable):
            pairs = self.items()
            size = 7 + sum(str_size(f) + str_size(v) for f, v in pairs)
            if isinstance(d, _ListpackEx):
                size += sum(int_size(d.ttl.get(f, 0)) for f, _ in pairs)
                return _OBJECT + _LISTPACKEX_HEADER + jemalloc_size(size)
            return _OBJECT + jemalloc_size(size)
        count = d.count
        buckets = 1 << max(2, (count - 1).bit_length()) if count else 0
        fixed = _OBJECT + _DICT + 8 * buckets
        sampled = list(islice(d.items(), count if samples <= 0 else min(samples, count)))
        if not sampled:
            return fixed
        per = sum(_DICT_ENTRY + sds_alloc(len(f)) + sds_alloc(len(v)) for f, v in sampled)
        return fixed + per * count // len(sampled)

    def footprint(self) -> int:
        """Bytes this value holds in this process (objects' sizes as CPython allocates them,
        without allocator rounding); O(1) but for the expiry dict of a listpackex."""
        size = sys.getsizeof(self)
        d = self._data
        if type(d) is bytes:
            return size + sys.getsizeof(d)
        if isinstance(d, _ListpackEx):
            return (size + sys.getsizeof(d) + sys.getsizeof(d.blob) + sys.getsizeof(d.ttl)
                    + sum(len(f) + 33 + 32 for f in d.ttl))
        assert isinstance(d, PairTable)
        size += sys.getsizeof(d) + sys.getsizeof(d.buckets) + 33 * len(d.buckets) + d.nbytes
        if d.ttl is not None and d.heap is not None:
            size += (sys.getsizeof(d.ttl) + sys.getsizeof(d.heap)
                     + len(d.ttl) * 32 + len(d.heap) * 56)
        return size

    def to_bytes(self) -> bytes:
        """Version byte, encoding byte, for a hashtable its table's placement (24 bytes:
        BucketTable.placement), the number of packs (4 bytes), each pack's length (4 bytes)
        and bytes (the pairs, in the encoding's order: a listpack is one pack, a hashtable its
        buckets, every one, which a load adopts as they are), then the TTLs: their count (4
        bytes), each field's length (4 bytes), the field and its time (8 bytes, signed).
        Integers little-endian. (Encoding byte 2, a hashtable's non-empty buckets with no
        placement, is what records held before: read, and its pairs placed again.)"""
        d = self._data
        placement = b""
        if type(d) is bytes:
            head, packs, ttls = _KIND_LISTPACK, [d], []
        elif isinstance(d, _ListpackEx):
            head, packs = _KIND_LISTPACKEX, [d.blob]
            ttls = [(f, d.ttl[f]) for f in d.ordered_ttl_fields()]
        else:
            assert isinstance(d, PairTable)
            head, packs, placement = _KIND_PLACED, d.resident_buckets(), d.placement()
            ttls = list(d.ttl.items()) if d.ttl is not None else []
        parts = [bytes((FORMAT_VERSION, head)), placement, len(packs).to_bytes(4, "little")]
        for p in packs:
            parts.append(len(p).to_bytes(4, "little"))
            parts.append(p)
        parts.append(len(ttls).to_bytes(4, "little"))
        for f, w in ttls:
            parts.append(len(f).to_bytes(4, "little"))
            parts.append(f)
            parts.append(w.to_bytes(8, "little", signed=True))
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, limits: HashLimits | None = None) -> Hash:
        """The hash `to_bytes` wrote, in the encoding it had; a small form that the current
        limits no longer allow converts, as Redis's load converts it. Raises ValueError on
        bytes that are not such a record."""
        if len(data) < 6 or data[0] != FORMAT_VERSION or data[1] > _KIND_PLACED:
            raise ValueError("not a hash record")
        kind = data[1]
        at = 2 + PLACEMENT_BYTES if kind == _KIND_PLACED else 2  # (the number of packs)
        packs: list[bytes] = []
        ttls: list[tuple[bytes, int]] = []
        pos = at + 4
        count = int.from_bytes(data[at:pos], "little")
        if 4 * count > len(data) - pos:  # (each pack's length takes 4 bytes)
            raise ValueError("truncated hash record")
        try:
            for _ in range(count):
                size = int.from_bytes(data[pos:pos + 4], "little")
                packs.append(data[pos + 4:pos + 4 + size])
                pos += 4 + size
            nttl = int.from_bytes(data[pos:pos + 4], "little")
            pos += 4
            for _ in range(nttl):
                size = int.from_bytes(data[pos:pos + 4], "little")
                field = data[pos + 4:pos + 4 + size]
                pos += 4 + size
                ttls.append((field, int.from_bytes(data[pos:pos + 8], "little", signed=True)))
                pos += 8
            pairs = [] if kind == _KIND_PLACED else [pair for p in packs for pair in _pairs(p)]
        except (IndexError, ValueError):
            raise ValueError("truncated hash record") from None
        if pos != len(data):
            raise ValueError("hash record has trailing or missing bytes")
        h = cls(limits)
        if kind == _KIND_PLACED:
            table = PairTable(0)
            table.adopt_placed(data[2:at], packs)
            for f, w in ttls:
                table.set_ttl(f, w)
            h._data = table
        elif kind == _KIND_HASHTABLE or len(pairs) > h._lim.max_listpack_entries or not all(
                h._fits(f, v) for f, v in pairs):
            table = PairTable(len(pairs))
            table.load(pairs)
            for f, w in ttls:
                table.set_ttl(f, w)
            h._data = table
        elif kind == _KIND_LISTPACKEX:
            h._data = _ListpackEx(packs[0] if packs else _EMPTY, dict(ttls))
        else:
            h._data = packs[0] if packs else _EMPTY
        return h

    def __repr__(self) -> str:
        return f"<Hash {self.encoding} len={len(self)}>"

    def table(self) -> PairTable | None:
        """The hashtable form's bucket table (a snapshot stores its buckets as they are), None
        for a listpack."""
        d = self._data
        return d if type(d) is PairTable else None

    @classmethod
    def from_table(cls, table: PairTable, limits: HashLimits | None = None) -> Hash:
        """A hash in the hashtable form holding `table` (a snapshot's buckets, adopted; TTLs
        are the caller's: set_field_expiry)."""
        h = cls(limits)
        h._data = table
        return h

    @classmethod
    def from_chunks(cls, count: int, pairs: Iterable[tuple[bytes, bytes]],
                    limits: HashLimits | None = None) -> Hash:
        """A hash of `count` fields (none twice) from its pairs, read as they come (a
        snapshot's chunked value): a hashtable filled at once when the count is past the
        listpack limit, else set as HSET sets them. TTLs are the caller's (set_field_expiry)."""
        h = cls(limits)
        if count > h._lim.max_listpack_entries:
            table = PairTable(count)
            table.load(pairs)
            h._data = table
        else:
            h.set_many(list(pairs))
        return h


# ---- bare small hashes ----------------------------------------------------------------------
# A plain listpack hash (no field TTLs) is kept in the keyspace as its pack alone, a
# `PackedHash` (engine.model.packed_hash): no object around the bytes, the most common hash
# costing about the pack and its key. The functions below are the one place that knows it: a
# command reads a key's value through `bound_hash` (a `Hash` that stores each change back), a
# generic path (the value type's functions: MEMORY USAGE, DUMP, the snapshot) through
# `as_hash`; what a keyspace keeps for a hash is `stored`'s, and COPY's copy `copy_value`'s.


def as_hash(value: Hash | PackedHash, limits: HashLimits | None = None) -> Hash:
    """A keyspace's hash value as a `Hash` to read (a bare pack wrapped, changes to the wrapper
    stored nowhere; a `Hash` as it is)."""
    if isinstance(value, Hash):
        return value
    h = Hash(limits)
    h._data = bytes(value)
    return h


def bound_hash(value: Hash | PackedHash, home: dict[bytes, Any], key: bytes,
               limits: HashLimits) -> Hash:
    """The hash `home[key]` holds (`value`), as the `Hash` a command reads and changes: a
    bare pack is wrapped in one that stores each change back at `home[key]` (its new pack, or
    itself once it converts); a `Hash` is the value itself (one in the listpack encoding,
    as a load or RESTORE makes it, is kept bare from its next change on)."""
    if isinstance(value, Hash):
        if type(value._data) is bytes:  # bound afresh: the value may have moved since
            value._home, value._key, value._src = home, key, value
        return value
    h = Hash(limits)
    h._data = bytes(value)
    h._home, h._key, h._src = home, key, value
    return h


def bare_field(value: PackedHash, field: bytes) -> bytes | None:
    """A bare pack's value of `field` (None when absent), read in place: a bare pack has no
    TTLs, so nothing of it is due or hidden, and a read needs no `Hash` around it."""
    return _PACK_GET(value, 2, field, 1)


def bare_columns(value: Hash | PackedHash) -> list[bytes] | None:
    """A bare pack's fields then their values, in order (one list, as HGETALL's reply can be
    written from it: `RespMap.of_columns`); None for a `Hash` (which may hold field TTLs).
    A bare pack has no TTLs: nothing of it is due or hidden."""
    if type(value) is PackedHash:
        return pack_strings(value, 2)
    return None


def stored(h: Hash) -> Hash | PackedHash:
    """What a keyspace keeps for `h`: its pack alone while it is a plain listpack, else `h`.
    (`h` keeps no tie to the keyspace: place a hash before changing it through a command's
    `bound_hash`.)"""
    d = h._data
    return PackedHash(d) if type(d) is bytes else h


def copy_value(value: Hash | PackedHash) -> Hash | PackedHash:
    """COPY's copy of a keyspace's hash value, as the keyspace keeps it (a bare pack is
    immutable: it is its own copy)."""
    if isinstance(value, Hash):
        return stored(value.copy())
    return value


# --- the type as the registry sees it (engine.model.value_types: TypeModel) ---------------------

VALUE_CLASS: Final = Hash
STORED_AS: Final[tuple[type, ...]] = (PackedHash,)  # a small plain hash, kept bare
LIMITS: Final = HashLimits
opened: Final = as_hash
NODES: Final = None  # (no nodes that go cold)


def table_of(value: Any) -> BucketTable | None:
    """The value's bucket table, whose runs may go cold (a `backlog-memory` budget), if it has
    one."""
    return value.table() if isinstance(value, VALUE_CLASS) else None


def encoding(value: Hash | PackedHash) -> str:
    return as_hash(value).encoding


def memory_usage(value: Hash | PackedHash) -> int:
    return as_hash(value).memory_usage()


def to_bytes(value: Hash | PackedHash) -> bytes:
    return as_hash(value).to_bytes()


def from_bytes(data: bytes) -> Hash | PackedHash:
    return stored(Hash.from_bytes(data))


def digest(value: Hash | PackedHash) -> list[object]:
    """The pairs and the fields' expiry times, sorted (a big hash's order is its table's)."""
    h = as_hash(value)
    return [sorted(h.items()), sorted(h.fields_with_expiry())]


def min_subexpiry(value: Hash | PackedHash) -> int | None:
    """The earliest of the hash's fields' expiry times (None: no field has one; a bare pack
    has none)."""
    return value.min_field_expiry() if isinstance(value, Hash) else None
