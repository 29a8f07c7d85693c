"""The SET value: members in Redis's encodings.

Owns one set's members and the rules Redis (t_set.c, 7.2+) applies to them: which encoding holds
it (`OBJECT ENCODING`: "intset", "listpack", "hashtable"), when it converts, the order SMEMBERS
walks it, SPOP's and SRANDMEMBER's sampling rules, the encoding a new set starts in (SADD on a
new key, SMOVE, SUNIONSTORE/SDIFFSTORE, SINTERSTORE), a compact versioned serialisation. Must
not touch: argument parsing, replies, effects, the keyspace, keyspace events.

Encodings, as Redis names them:
- "intset" while every member is an integer Redis's string2ll takes (no '+', no leading zeros,
  no "-0", int64) and there are at most `set-max-intset-entries`: a sorted array('q'), so
  iteration is ascending, as Redis's intset is.
- "listpack" while there are at most `set-max-listpack-entries` members of at most
  `set-max-listpack-value` bytes: ONE bytes object (a width byte, the count, the members'
  lengths, the members), in insertion order.
- "hashtable" beyond: linear hashing over buckets that are each such a bytes object (a
  one-column `BucketTable` of engine.model.bucket_table: about a fifth of a Python set's
  memory per member, under half of redis-server's). Its order is the table's, which matches no Redis order.
Conversions, as setTypeAdd makes them: intset -> listpack (a non-integer arrives while the intset
is small enough and its integers short enough) or -> hashtable; listpack -> hashtable; never
back, except that SPOP, when it keeps the few members left in a new set, and SINTERSTORE build a
new value (see `pop_random` and `intersection_result`).

Limits are read at every write from the `SetLimits` the set was given (an engine keeps one and
changes it on CONFIG SET, as Redis reads its globals).
"""

from __future__ import annotations

import random
import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
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
from streamkeep.engine.model.listpack import as_int, str_size
from streamkeep.engine.model.packed_columns import (
    pack_add,
    pack_delete,
    pack_index,
    pack_item,
    pack_strings,
)
from streamkeep.engine.model.redis_alloc import jemalloc_size, sds_alloc

FORMAT_VERSION: Final = 1  # to_bytes's first byte
_KIND_INTSET: Final = 0
_KIND_LISTPACK: Final = 1
_KIND_HASHTABLE: Final = 2  # (records written before placements were: read only)
_KIND_PLACED: Final = 3  # a hashtable with its table's placement

_EMPTY: Final = EMPTY
_INTSET_HARD_MAX: Final = 1 << 30  # Redis caps an intset there whatever the setting
_SPOP_MOVE_STRATEGY_MUL: Final = 5
_SRANDMEMBER_SUB_STRATEGY_MUL: Final = 3


# Redis's allocations, for MEMORY USAGE: redis-server 7.0's layout, as engine.model.hashes
# describes it (the 1M-member set measured at 56.5 bytes a member is a 32-byte entry, a
# 16-byte string and a bucket).
_OBJECT: Final = 16
_DICT: Final = 56
_DICT_ENTRY: Final = 24  # as objectComputeSize counts it (jemalloc serves it 32)

# Kernels the per-command paths call, bound once: an imported name is looked up in this
# module's globals at each call, a Final one is read from a static (mypyc).
_PACK_ADD: Final = pack_add
_PACK_DELETE: Final = pack_delete
_PACK_INDEX: Final = pack_index


class SetLimits(Limits):
    """set-max-intset-entries, set-max-listpack-entries, set-max-listpack-value; shared by the
    sets of one engine and changed in place on CONFIG SET (engine.model.limits)."""

    SETTINGS: ClassVar[tuple[Setting, ...]] = (
        Setting("set-max-intset-entries", "max_intset_entries", "int", 512,
                "integers a set holds in its compact (intset) encoding at most"),
        Setting("set-max-listpack-entries", "max_listpack_entries", "int", 128,
                "members a set holds in its compact (listpack) encoding at most"),
        Setting("set-max-listpack-value", "max_listpack_value", "memory", 64,
                "bytes of the longest member a listpack-encoded set holds"),
    )

    def __init__(self, max_intset_entries: int = 512, max_listpack_entries: int = 128,
                 max_listpack_value: int = 64) -> None:
        self.max_intset_entries = max_intset_entries
        self.max_listpack_entries = max_listpack_entries
        self.max_listpack_value = max_listpack_value

    def intset_max(self) -> int:
        return min(self.max_intset_entries, _INTSET_HARD_MAX)


DEFAULT_LIMITS: Final = SetLimits()


# ---- packed members: width byte, count, lengths, members ----------------------------------

def _count(blob: bytes) -> int:
    return blob[1] if blob[0] == 1 else int.from_bytes(blob[1:5], "little")


def _pack(members: Sequence[bytes]) -> bytes:
    return build_pack([members])


def _members(blob: bytes) -> list[bytes]:
    return pack_strings(blob, 1)


def _lp_contains(blob: bytes, member: bytes) -> bool:
    return _PACK_INDEX(blob, 1, member) >= 0


def _lp_add(blob: bytes, member: bytes) -> bytes | None:
    """The pack with member appended, None when it is there already."""
    return _PACK_ADD(blob, 1, member)


def _lp_remove(blob: bytes, member: bytes) -> bytes | None:
    """The pack without member, None when absent."""
    removed = _PACK_DELETE(blob, 1, member)
    return None if removed is None else removed[0]


def _nth(blob: bytes, i: int) -> bytes:
    return pack_item(blob, 1, 0, i)


def _digits(v: int) -> int:
    """sdigits10: the characters of v's decimal text, '-' included."""
    return len(b"%d" % v)


class RSet:
    """One SET value. `_data` is an array('q') (intset), bytes (listpack) or a
    `BucketTable` (hashtable)."""

    __slots__ = ("_data", "_lim")

    def __init__(self, limits: SetLimits | None = None) -> None:
        """An empty intset, as Redis's createIntsetObject (SUNIONSTORE's start)."""
        self._data: array[int] | bytes | BucketTable = array("q")
        self._lim = DEFAULT_LIMITS if limits is None else limits

    # -- new values
    @classmethod
    def for_new_key(cls, first: bytes, size_hint: int,
                    limits: SetLimits | None = None) -> RSet:
        """setTypeCreate: the empty set SADD (size_hint = the members given) or SMOVE
        (size_hint 1) creates for a new key, chosen by the first member and the hint."""
        s = cls(limits)
        lim = s._lim
        if as_int(first) is not None and size_hint <= lim.max_intset_entries:
            return s
        if size_hint <= lim.max_listpack_entries:
            s._data = _EMPTY
        else:
            s._data = BucketTable(1, size_hint)
        return s

    @classmethod
    def from_members(cls, members: Iterable[bytes], limits: SetLimits | None = None) -> RSet:
        """SUNIONSTORE's and SDIFFSTORE's result: an empty intset, each member added in turn."""
        s = cls(limits)
        for m in members:
            s.add(m)
        return s

    @classmethod
    def intersection_result(cls, members: Iterable[bytes], first_encoding: str,
                            limits: SetLimits | None = None) -> RSet:
        """SINTERSTORE's result: an intset when the smallest set (`first_encoding`, the one
        it walks) is one, else a listpack; each member added in turn; then an intset when
        every member is an integer and they fit one."""
        s = cls(limits)
        if first_encoding != "intset":
            s._data = _EMPTY
        for m in members:
            s.add(m)
        s.maybe_to_intset()
        return s

    # -- encoding
    @property
    def encoding(self) -> str:
        d = self._data
        if type(d) is bytes:
            return "listpack"
        # (the native class first: a test against `array` is a generic one, on every SADD)
        return "hashtable" if isinstance(d, BucketTable) else "intset"

    @property
    def limits(self) -> SetLimits:
        return self._lim

    @limits.setter
    def limits(self, limits: SetLimits) -> None:
        """Read `limits` from the next write on (a value loaded or restored joins its engine's
        shared limits; nothing converts now)."""
        self._lim = limits

    def _to_table(self, capacity: int = 0) -> BucketTable:
        d = self._data
        if isinstance(d, BucketTable):
            return d
        members = self.members()
        table = BucketTable(1, max(capacity, len(members)))
        table.load(members)
        self._data = table
        return table

    def maybe_convert(self, size_hint: int) -> None:
        """setTypeMaybeConvert: before SADD adds `size_hint` members, a listpack or an intset
        that many would overflow becomes a hashtable at once (duplicates or not)."""
        d = self._data
        if type(d) is BucketTable:
            return
        lim = self._lim
        if (type(d) is bytes and size_hint > lim.max_listpack_entries) or (
                isinstance(d, array) and size_hint > lim.max_intset_entries):
            self._to_table(size_hint)

    def maybe_to_intset(self) -> None:
        """maybeConvertToIntset: a listpack or hashtable whose members are all integers and
        few enough for an intset becomes one (SINTERSTORE's last step)."""
        d = self._data
        if isinstance(d, array) or len(self) > self._lim.intset_max():
            return
        values: list[int] = []
        for m in self:
            v = as_int(m)
            if v is None:
                return
            values.append(v)
        self._data = array("q", sorted(values))

    # -- reads
    def __len__(self) -> int:
        d = self._data
        if isinstance(d, array):
            return len(d)
        if type(d) is bytes:
            return _count(d)
        assert isinstance(d, BucketTable)
        return d.count

    def __contains__(self, member: object) -> bool:
        if not isinstance(member, bytes):
            return False
        d = self._data
        if isinstance(d, array):
            v = as_int(member)
            if v is None:
                return False
            i = bisect_left(d, v)
            return i < len(d) and d[i] == v
        if type(d) is bytes:
            return _lp_contains(d, member)
        assert isinstance(d, BucketTable)
        return member in d

    def __iter__(self) -> Iterator[bytes]:
        d = self._data
        if isinstance(d, array):
            return (b"%d" % v for v in d)
        if type(d) is bytes:
            return iter(_members(d))
        assert isinstance(d, BucketTable)
        return d.keys()

    def members(self) -> list[bytes]:
        """Every member in the encoding's order (an intset's ascending)."""
        d = self._data
        if isinstance(d, array):
            return [b"%d" % v for v in d]
        if type(d) is bytes:
            return _members(d)
        return list(self)

    def scan(self, cursor: int, count: int = 10) -> tuple[int, list[bytes]]:
        """SSCAN's step: (next cursor, members). An intset or listpack returns everything and
        cursor 0, as Redis does; a hashtable walks buckets from `cursor` (a member present
        for the whole scan is returned at least once)."""
        d = self._data
        if not isinstance(d, BucketTable):
            return 0, self.members()
        out: list[bytes] = []
        i = max(cursor, 0)
        buckets = d.buckets
        while i < len(buckets) and len(out) < count:
            b = buckets[i]
            if b is COLD:
                b = d.peek(i)
            if len(b) > 2:
                out.extend(_members(b))
            i += 1
        return (i if i < len(buckets) else 0), out

    # -- writes
    def add(self, member: bytes) -> bool:
        """SADD of one member: True when it is new. Converts as setTypeAdd does."""
        d = self._data
        if type(d) is BucketTable:  # (a big set's, first: no global looked up for it)
            return d.add(member)
        if isinstance(d, array):
            v = as_int(member)
            if v is not None:
                return self._add_int(d, v)
            self._leave_intset(d, member)
            return True
        if type(d) is bytes:
            new = _lp_add(d, member)
            if new is None:
                return False
            lim = self._lim
            if _count(d) < lim.max_listpack_entries and len(member) <= lim.max_listpack_value:
                self._data = new
            else:
                self._to_table(_count(d) + 1).add(member)
            return True
        assert isinstance(d, BucketTable)
        return d.add(member)

    def _add_int(self, d: array[int], v: int) -> bool:
        i = bisect_left(d, v)
        if i < len(d) and d[i] == v:
            return False
        d.insert(i, v)
        if len(d) > self._lim.intset_max():
            self._to_table()
        return True

    def _leave_intset(self, d: array[int], member: bytes) -> None:
        """A non-integer comes into an intset: a listpack when the intset is small and its
        integers short enough (their longest text, '-' counted), else a hashtable."""
        lim = self._lim
        longest = max(_digits(d[0]), _digits(d[-1])) if d else 0
        if (len(d) < lim.max_listpack_entries and len(member) <= lim.max_listpack_value
                and longest <= lim.max_listpack_value):
            self._data = _pack([*(b"%d" % v for v in d), member])
        else:
            self._to_table(len(d) + 1).add(member)

    def add_many(self, members: Sequence[bytes]) -> int:
        """SADD: the number of members new; the set first converts as `maybe_convert` says
        for len(members)."""
        self.maybe_convert(len(members))
        d = self._data
        if len(members) > 1 and not isinstance(d, BucketTable):
            bulk = self._add_bulk(d, members)
            if bulk >= 0:
                return bulk
        added = 0
        for m in members:
            added += self.add(m)
        return added

    def _add_bulk(self, d: array[int] | bytes, members: Sequence[bytes]) -> int:
        """Several members at once, written once, where the result is the one adding them in
        turn gives: integers into an intset (sorted; a hashtable once past the limit), any
        members into a listpack (new ones last, in order; a hashtable if one is too long or
        they are too many). -1 when it does not apply (a non-integer for an intset)."""
        lim = self._lim
        if isinstance(d, array):
            values = [as_int(m) for m in members]
            if None in values:
                return -1
            merged = set(d)
            merged.update(v for v in values if v is not None)
            added = len(merged) - len(d)
            self._data = array("q", sorted(merged))
            if len(merged) > lim.intset_max():
                self._to_table()
            return added
        existing = _members(d)
        merged_members = dict.fromkeys(existing)
        merged_members.update(dict.fromkeys(members))
        added = len(merged_members) - len(existing)
        new = list(merged_members)
        if len(new) > lim.max_listpack_entries or any(
                len(m) > lim.max_listpack_value for m in new[len(existing):]):
            table = BucketTable(1, len(new))
            table.load(new)
            self._data = table
        else:
            self._data = _pack(new)
        return added

    def remove(self, member: bytes) -> bool:
        """SREM of one member: True when it was there (no encoding changes)."""
        d = self._data
        if isinstance(d, array):
            v = as_int(member)
            if v is None:
                return False
            i = bisect_left(d, v)
            if i < len(d) and d[i] == v:
                del d[i]
                return True
            return False
        if type(d) is bytes:
            new = _lp_remove(d, member)
            if new is None:
                return False
            self._data = new
            return True
        assert isinstance(d, BucketTable)
        return d.pop(member) is not None

    # -- random members
    def random_member(self, rng: random.Random) -> bytes:
        """One uniformly random member of a non-empty set (SRANDMEMBER, SPOP without count)."""
        d = self._data
        if isinstance(d, array):
            return b"%d" % d[rng.randrange(len(d))]
        if type(d) is bytes:
            return _nth(d, rng.randrange(_count(d)))
        assert isinstance(d, BucketTable)
        return _nth(*d.random_slot(rng))

    def random_members(self, count: int, rng: random.Random) -> list[bytes]:
        """SRANDMEMBER key count, by Redis's rules: 0 gives none; a negative count |count|
        independent picks (repeats allowed), as does 1; count >= len every member in the
        encoding's order; otherwise count distinct members (a listpack's in its order). The
        caller bounds |count| (the reply is that long)."""
        size = len(self)
        if count == 0 or size == 0:
            return []
        if count < 0 or count == 1:
            n = -count if count < 0 else 1
            d = self._data
            if isinstance(d, BucketTable) and n * 8 < d.count:
                return [_nth(*d.random_slot(rng)) for _ in range(n)]
            return rng.choices(self.members(), k=n)
        if count >= size:
            return self.members()
        if type(self._data) is bytes:
            everything = self.members()
            return [everything[i] for i in sorted(rng.sample(range(size), count))]
        if count * _SRANDMEMBER_SUB_STRATEGY_MUL > size:
            kept = dict.fromkeys(self.members())
            pool = list(kept)
            while len(kept) > count:  # drop random ones until count are left
                i = rng.randrange(len(pool))
                pool[i], pool[-1] = pool[-1], pool[i]
                del kept[pool.pop()]
            return list(kept)
        chosen: dict[bytes, None] = {}
        while len(chosen) < count:
            chosen[self.random_member(rng)] = None
        return list(chosen)

    def pop_random(self, count: int, rng: random.Random) -> list[bytes]:
        """SPOP key count (count >= 0): the members removed, by Redis's cases. count >= len
        empties the set and returns every member; few left compared with count taken
        (left * 5 <= count): the members to keep are drawn into a new set (the set's value is
        replaced; a hashtable's survivors go into a new listpack, an intset's into a new intset,
        converting as they are added, as Redis's SPOP does) and the others are returned in
        the old set's order; else members are drawn one at a time (a listpack's come back in
        its order). SPOP without a count is `pop_random(1, rng)`."""
        size = len(self)
        if count <= 0 or size == 0:
            return []
        if count >= size:
            out = self.members()
            self._data = array("q")
            return out
        remaining = size - count
        d = self._data
        if remaining * _SPOP_MOVE_STRATEGY_MUL > count:
            if type(d) is bytes:
                members = _members(d)
                picked = set(rng.sample(range(size), count))
                self._data = _pack([m for i, m in enumerate(members) if i not in picked])
                return [m for i, m in enumerate(members) if i in picked]
            out = []
            for _ in range(count):
                m = self.random_member(rng)
                self.remove(m)
                out.append(m)
            return out
        return self._pop_keeping(remaining, rng)

    def _pop_keeping(self, remaining: int, rng: random.Random) -> list[bytes]:
        d = self._data
        members = self.members()
        if type(d) is bytes:
            kept_at = sorted(rng.sample(range(len(members)), remaining))
            kept = [members[i] for i in kept_at]
            keep = set(kept_at)
            self._data = _pack(kept)
            return [m for i, m in enumerate(members) if i not in keep]
        new = RSet(self._lim)
        if not isinstance(d, array):
            new._data = _EMPTY  # a hashtable's members come as strings: a listpack to start
        survivors = rng.sample(members, remaining)
        for m in survivors:
            new.add(m)
        gone = set(survivors)
        self._data = new._data
        return [m for m in members if m not in gone]

    # -- copies, size, serialisation
    def copy(self) -> RSet:
        """An independent copy of the same encoding (COPY)."""
        s = RSet(self._lim)
        d = self._data
        if isinstance(d, array):
            s._data = array("q", d)
        elif isinstance(d, BucketTable):
            s._data = d.copy()
        else:
            s._data = d
        return s

    def memory_usage(self, samples: int = 5) -> int:
        """MEMORY USAGE's estimate of the value as redis-server holds it (the key and its
        entry apart): the object header and the intset's (2, 4 or 8 bytes a member, as its
        widest member needs) or the listpack's allocation; or the dict, its buckets and, per
        member, its entry and sds string, averaged over the first `samples` members (all for
        0), as objectComputeSize samples them. Allocations in jemalloc's size classes."""
        d = self._data
        if isinstance(d, array):
            widest = max(-d[0] - 1 if d else 0, d[-1] if d else 0)
            width = 2 if widest < 1 << 15 else 4 if widest < 1 << 31 else 8
            return _OBJECT + jemalloc_size(8 + width * len(d))
        if type(d) is bytes:
            return _OBJECT + jemalloc_size(7 + sum(str_size(m) for m in _members(d)))
        assert isinstance(d, BucketTable)
        count = d.count
        buckets = 1 << max(2, (count - 1).bit_length()) if count else 0
        fixed = _OBJECT + _DICT + 8 * buckets
        sampled = list(islice(iter(self), count if samples <= 0 else min(samples, count)))
        if not sampled:
            return fixed
        per = sum(_DICT_ENTRY + sds_alloc(len(m)) for m in sampled)
        return fixed + per * count // len(sampled)

    def footprint(self) -> int:
        """Bytes this value holds in this process (objects' sizes as CPython allocates them,
        without allocator rounding); O(1)."""
        size = sys.getsizeof(self)
        d = self._data
        if isinstance(d, BucketTable):
            return (size + sys.getsizeof(d) + sys.getsizeof(d.buckets) + 33 * len(d.buckets)
                    + d.nbytes)
        return size + sys.getsizeof(d)

    def to_bytes(self) -> bytes:
        """Version byte, encoding byte, then: an intset's count (4 bytes) and values (8 bytes
        each, signed); a listpack's or hashtable's number of packs (4 bytes) and each pack's
        length (4 bytes) and bytes (width byte, count, lengths, members), a hashtable's packs
        its buckets, every one, after its table's placement (24 bytes:
        BucketTable.placement), so that a load adopts them as they are. Little-endian.
        (Encoding byte 2, a hashtable's non-empty buckets with no placement, is what records
        held before: read, and its members placed again.)"""
        d = self._data
        if isinstance(d, array):
            return b"".join((bytes((FORMAT_VERSION, _KIND_INTSET)),
                             len(d).to_bytes(4, "little"),
                             b"".join(v.to_bytes(8, "little", signed=True) for v in d)))
        placement = b""
        if type(d) is bytes:
            kind, packs = _KIND_LISTPACK, [d]
        else:
            assert isinstance(d, BucketTable)
            kind, packs, placement = _KIND_PLACED, d.resident_buckets(), d.placement()
        parts = [bytes((FORMAT_VERSION, kind)), placement, len(packs).to_bytes(4, "little")]
        for p in packs:
            parts.append(len(p).to_bytes(4, "little"))
            parts.append(p)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes, limits: SetLimits | None = None) -> RSet:
        """The set `to_bytes` wrote, in the encoding it had; a small form the current limits
        no longer allow converts, as Redis's load converts it. Raises ValueError on bytes
        that are not such a record."""
        if len(data) < 6 or data[0] != FORMAT_VERSION or data[1] > _KIND_PLACED:
            raise ValueError("not a set record")
        kind = data[1]
        at = 2 + PLACEMENT_BYTES if kind == _KIND_PLACED else 2  # (the number of packs)
        n = int.from_bytes(data[at:at + 4], "little")
        s = cls(limits)
        lim = s._lim
        if kind == _KIND_INTSET:
            if len(data) != 6 + 8 * n:
                raise ValueError("set record has trailing or missing bytes")
            values = array("q", (int.from_bytes(data[i:i + 8], "little", signed=True)
                                 for i in range(6, 6 + 8 * n, 8)))
            s._data = values
            if n > lim.intset_max():
                s._to_table()
            return s
        packs: list[bytes] = []
        pos = at + 4
        if 4 * n > len(data) - pos:  # (each pack's length takes 4 bytes)
            raise ValueError("truncated set record")
        try:
            for _ in range(n):
                size = int.from_bytes(data[pos:pos + 4], "little")
                packs.append(data[pos + 4:pos + 4 + size])
                pos += 4 + size
            members = [] if kind == _KIND_PLACED else [m for p in packs for m in _members(p)]
        except (IndexError, ValueError):
            raise ValueError("truncated set record") from None
        if pos != len(data):
            raise ValueError("set record has trailing or missing bytes")
        if kind == _KIND_PLACED:
            table = BucketTable(1, 0)
            table.adopt_placed(data[2:at], packs)
            s._data = table
        elif (kind == _KIND_HASHTABLE or len(members) > lim.max_listpack_entries
                or any(len(m) > lim.max_listpack_value for m in members)):
            table = BucketTable(1, len(members))
            table.load(members)
            s._data = table
        else:
            s._data = packs[0] if packs else _EMPTY
        return s

    def __repr__(self) -> str:
        return f"<RSet {self.encoding} len={len(self)}>"

    def table(self) -> BucketTable | None:
        """The hashtable form's bucket table (a snapshot stores its buckets as they are), None
        for an intset or a listpack."""
        d = self._data
        return d if type(d) is BucketTable else None

    @classmethod
    def from_table(cls, table: BucketTable, limits: SetLimits | None = None) -> RSet:
        """A set in the hashtable form holding `table` (a snapshot's buckets, adopted)."""
        s = cls(limits)
        s._data = table
        return s

    @classmethod
    def from_chunks(cls, count: int, members: Iterable[bytes],
                    limits: SetLimits | None = None) -> RSet:
        """A set of `count` members (none twice), read as they come (a snapshot's chunked
        value): a hashtable filled at once when the count is past both small encodings'
        limits, else added as SADD adds them."""
        s = cls(limits)
        lim = s._lim
        if count > max(lim.intset_max(), lim.max_listpack_entries):
            table = BucketTable(1, count)
            table.load(members)
            s._data = table
        else:
            s.add_many(list(members))
        return s


# --- the type as the registry sees it (engine.model.value_types: TypeModel) ---------------------

VALUE_CLASS: Final = RSet
STORED_AS: Final[tuple[type, ...]] = ()
LIMITS: Final = SetLimits
min_subexpiry: Final = None  # (a set's members have no TTLs)
NODES: Final = None  # (no nodes that go cold)


def table_of(value: Any) -> BucketTable | None:
    """The value's bucket table, whose runs may go cold (a `backlog-memory` budget), if it has
    one."""
    return value.table() if isinstance(value, VALUE_CLASS) else None


def encoding(value: RSet) -> str:
    return value.encoding


def memory_usage(value: RSet) -> int:
    return value.memory_usage()


def to_bytes(value: RSet) -> bytes:
    return value.to_bytes()


def from_bytes(data: bytes) -> RSet:
    return RSet.from_bytes(data)


def copy_value(value: RSet) -> RSet:
    return value.copy()


def digest(value: RSet) -> list[bytes]:
    """The members, sorted (a big set's order is its hash table's)."""
    return sorted(value)


def opened(value: RSet) -> RSet:
    return value
