"""The sorted set's RDB codec: RDB types 3 (scores as text), 5 (binary doubles), 12 (ziplist) and
17 (listpack), read from RDB 1 to 15 files and DUMP payloads, written as the chosen version
expects; registered with `snapshot.rdb`'s codec registry on import.

Owns, byte-compatibly with Redis's rdb.c: what each type holds and what loading makes of it (a
zset of types 3 and 5 becomes a listpack when its size and longest member allow, as
zsetConvertToListpackIfNeeded decides; one of types 12 and 17 stays a listpack unless it has
more members than `zset-max-listpack-entries`), and what saving writes: a listpack set as
type 17 (RDB 10 and later; a ziplist, type 12, for RDB 9), a skiplist set as type 5, members
from the highest to the lowest as Redis writes them. A listpack's score is an integer entry when
the double is one (double2ll), else d2string's text, as zzlInsertAt stores it.

Refused (RdbError, never another exception): a NaN score, a duplicate member, an empty set
(Redis's "empty keys" are not values), a score that is not a number, malformed blobs.

Also owns the sorted set's other formats (`FORMATS`, snapshot.value_formats' shape): its
snapshot chunks (snapshot.values: [members, scores as little-endian doubles], ascending by
(score, member) across the chunks too) and its export table (`zset_members`: member, score).

Must not touch: the RDB container, files, sockets, the keyspace (DUMP/RESTORE call these
functions).
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from streamkeep.engine.model.scores import format_score, parse_score
from streamkeep.engine.model.zset import DEFAULT_LIMITS, LISTPACK, SKIPLIST, ZSet, ZSetLimits
from streamkeep.snapshot.rdb import (
    RdbError,
    Reader,
    encode_length,
    encode_string,
    listpack,
    listpack_items,
    register_value_codec,
)
from streamkeep.snapshot.rdb_packed import as_bytes, groups, ziplist, ziplist_items
from streamkeep.snapshot.value_formats import (
    Body,
    Chunk,
    ChunkCodec,
    Column,
    Cut,
    OnNodes,
    TypeFormats,
    ValueTable,
    cut_columns,
    packb,
    unpack,
)

TYPE_ZSET = 3
TYPE_ZSET_2 = 5
TYPE_ZSET_ZIPLIST = 12
TYPE_ZSET_LISTPACK = 17
ZSET_TYPES = (TYPE_ZSET, TYPE_ZSET_2, TYPE_ZSET_ZIPLIST, TYPE_ZSET_LISTPACK)
_DOUBLE = struct.Struct("<d")
_LLONG_HALF = float(((1 << 63) - 1) // 2)  # double2ll's range
# rdbLoadDoubleValue's special lengths
_TEXT_SCORES = {253: float("nan"), 254: float("inf"), 255: float("-inf")}


# --- reading -------------------------------------------------------------------------------------


def read_zset(r: Reader, rdb_type: int, limits: ZSetLimits = DEFAULT_LIMITS) -> ZSet:
    """The sorted set of `rdb_type` at the reader's position, in the encoding Redis's loading
    gives it under `limits`."""
    if rdb_type in (TYPE_ZSET, TYPE_ZSET_2):
        return _read_pairs(r, rdb_type, limits)
    if rdb_type == TYPE_ZSET_ZIPLIST:
        items = ziplist_items(r.string())
    elif rdb_type == TYPE_ZSET_LISTPACK:
        items = listpack_items(r.string())
    else:
        raise RdbError(f"not a sorted set type: {rdb_type}")
    scores: dict[bytes, float] = {}
    for member, score in groups(items, 2, "a sorted set"):
        _add(scores, as_bytes(member), _packed_score(score))
    z = _built(scores, limits)
    # A packed set stays packed unless it has too many members (its members' lengths are not
    # looked at: Redis's loader skips that scan).
    z.convert(SKIPLIST if len(z) > limits.max_listpack_entries else LISTPACK)
    return z


def _read_pairs(r: Reader, rdb_type: int, limits: ZSetLimits) -> ZSet:
    scores: dict[bytes, float] = {}
    for _ in range(r.length()):
        member = r.string()
        score = _DOUBLE.unpack(r.take(8))[0] if rdb_type == TYPE_ZSET_2 else _text_score(r)
        _add(scores, member, score)
    return _built(scores, limits)


def _text_score(r: Reader) -> float:
    """rdbLoadDoubleValue: a length byte (253 to 255: NaN and the infinities), then the text."""
    n = r.byte()
    if n in _TEXT_SCORES:
        return _TEXT_SCORES[n]
    score = parse_score(r.take(n))
    if score is None:
        raise RdbError("a sorted set score is not a number")
    return score


def _packed_score(item: bytes | int) -> float:
    if isinstance(item, int):
        return float(item)
    score = parse_score(item)
    if score is None:
        raise RdbError("a sorted set score is not a number")
    return score


def _add(scores: dict[bytes, float], member: bytes, score: float) -> None:
    if score != score:
        raise RdbError("a sorted set score is NaN")
    if member in scores:
        raise RdbError("a sorted set member twice")
    scores[member] = score


def _built(scores: dict[bytes, float], limits: ZSetLimits) -> ZSet:
    if not scores:
        raise RdbError("an empty sorted set")
    return ZSet.from_items(scores.items(), limits)


def skip_zset(r: Reader, rdb_type: int) -> None:
    """Past a sorted set value, its structure followed, nothing decoded or checked."""
    if rdb_type in (TYPE_ZSET_ZIPLIST, TYPE_ZSET_LISTPACK):
        r.skip_string()
        return
    if rdb_type not in (TYPE_ZSET, TYPE_ZSET_2):
        raise RdbError(f"not a sorted set type: {rdb_type}")
    for _ in range(r.length()):
        r.skip_string()
        if rdb_type == TYPE_ZSET_2:
            r.take(8)
        else:
            n = r.byte()
            if n not in _TEXT_SCORES:
                r.take(n)


# --- writing -------------------------------------------------------------------------------------


def zset_type(z: ZSet, version: int) -> int:
    """The RDB type Redis writes `z` as in an RDB of `version`."""
    if z.encoding == SKIPLIST:
        return TYPE_ZSET_2
    return TYPE_ZSET_LISTPACK if version >= 10 else TYPE_ZSET_ZIPLIST


def write_zset(z: ZSet, version: int) -> tuple[int, bytes]:
    """(the RDB type, the value's bytes) for `z` in an RDB of `version` (9 to 15)."""
    rdb_type = zset_type(z, version)
    if rdb_type == TYPE_ZSET_2:
        # (highest first, as rdbSaveObject walks the skiplist from its tail)
        pairs = list(z.items())
        out = [encode_length(len(pairs))]
        for member, score in reversed(pairs):
            out += [encode_string(member), _DOUBLE.pack(score)]
        return rdb_type, b"".join(out)
    if rdb_type == TYPE_ZSET_LISTPACK:
        blob = listpack([x for member, score in z.items() for x in (member, _lp_score(score))])
    else:
        blob = ziplist([x for member, score in z.items() for x in (member, _zl_score(score))])
    return rdb_type, encode_length(len(blob)) + blob


def _lp_score(score: float) -> bytes | int:
    """A score as zzlInsertAt stores it: an integer entry when double2ll takes the double
    (-0.0 included: it becomes 0), else d2string's text."""
    if -_LLONG_HALF <= score <= _LLONG_HALF and score == int(score):
        return int(score)
    return format_score(score)


def _zl_score(score: float) -> bytes:
    value = _lp_score(score)
    return b"%d" % value if isinstance(value, int) else value


register_value_codec(ZSET_TYPES, read_zset, write_zset, name="zset", kind=ZSet, skip=skip_zset)


# --- the snapshot's chunks -----------------------------------------------------------------------

_BIG_ENDIAN = sys.byteorder == "big"


def _chunks(z: ZSet, cut: Cut) -> Iterator[Chunk]:
    """The sorted set's chunks, its members taken as columns `cut.elements` at a time (the
    per-member work stays in C: a 1M-member set is cut in about the time its iteration takes),
    each batch cut at `cut.size` bytes (a member's bytes and its score's 8)."""
    for first in range(0, len(z), cut.elements):
        members, scores = z.columns(first, first + cut.elements)
        for columns in cut_columns((members, scores), [n + 8 for n in map(len, members)],
                                   cut.size):
            yield _body(columns[0], columns[1]), len(columns[0]), None


def _body(members: list[bytes], scores: list[float]) -> bytes:
    packed = array("d", scores)
    if _BIG_ENDIAN:
        packed.byteswap()
    return packb([members, packed.tobytes()])


def _columns(body: Body) -> tuple[list[bytes], list[float]]:
    members, packed = unpack(body)
    scores = array("d")
    scores.frombytes(packed)
    if _BIG_ENDIAN:
        scores.byteswap()
    if len(scores) != len(members) or not all(isinstance(m, bytes) for m in members):
        raise ValueError("a sorted set chunk's members and scores differ in number")
    return members, scores.tolist()


def _elements(body: Body, _at: int | None, _check: bool) -> list[tuple]:
    members, scores = _columns(body)
    return list(zip(members, scores, strict=True))


def _build(count: int, bodies: Iterable[Body], _indexed: bool, _on_nodes: OnNodes | None
           ) -> tuple[ZSet, int]:
    seen = [0]

    def counted(members: list[bytes]) -> list[bytes]:
        seen[0] += len(members)
        return members

    value = ZSet.from_chunks(count, ((counted(m), s) for m, s in map(_columns, bodies)))
    return value, seen[0]


def _score_text(score: Any) -> str:
    """A score as Redis replies it (ZSCORE's text)."""
    return format_score(score).decode("ascii")


def _rows(z: ZSet) -> Iterable[tuple]:
    return z.items()


FORMATS: TypeFormats = TypeFormats(
    "zset", "sorted sets", ChunkCodec(_chunks, _elements, _build, len),
    ValueTable("zset", "zset_members",
               (Column("member", "binary"), Column("score", "double", _score_text)), _rows))

__all__ = ["FORMATS", "TYPE_ZSET", "TYPE_ZSET_2", "TYPE_ZSET_LISTPACK", "TYPE_ZSET_ZIPLIST",
           "ZSET_TYPES", "read_zset", "skip_zset", "write_zset", "zset_type"]
