"""Filter push-down for the `streamkeep` data source: which streams or keys and which ID range
to read.

Owns turning Spark's pushed filters into a `Selection`: filters on db, stream and stream_str
(the stream tables) or key and key_str (the key tables), and on ms (entries: a key range per
stream, so only the nodes holding it are read). Every filter it accepts is applied exactly,
not approximately: a column that is a function of the stream or key (db, stream, stream_str,
key, key_str) is tested on the stream or key list before planning (and again on each key
read), and ms is the high half of the ID the ranges are cut on. Anything else goes back to
Spark.
Must not touch: snapshots (datasource reads them), pyspark's planning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from streamkeep.snapshot.layout import MAX_ID

U64 = (1 << 64) - 1
_NAMES = (("stream",), ("stream_str",), ("key",), ("key_str",))  # a table has one pair
_BINARY_NAMES = (("stream",), ("key",))
_COMPARE = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
# the filters a Selection keeps: each has `attribute` and `value`
Kept: TypeAlias = EqualTo | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual | In \
    | StringStartsWith


def text(raw: bytes) -> str:
    """A binary name as the string column shows it (invalid UTF-8 as U+FFFD)."""
    return raw.decode("utf-8", "replace")


@dataclass
class Selection:
    """The conjunction of the filters accepted so far. Plain data: pickled to the tasks."""

    dbs: list[Kept] = field(default_factory=list)
    names: list[Kept] = field(default_factory=list)  # on stream, stream_str, key or key_str
    lo: int = 0  # entries' IDs, inclusive
    hi: int = MAX_ID

    def accept(self, f: Filter, table: str) -> bool:
        """Take `f` if it can be applied exactly for `table`; False: Spark applies it."""
        column = getattr(f, "attribute", None)  # Not(...) has a child instead
        if column == ("db",) and isinstance(f, (*_COMPARE, In)) and _ints(f):
            self.dbs.append(f)
        elif column in _NAMES and isinstance(
                f, (EqualTo, In, StringStartsWith)):
            self.names.append(f)
        elif column == ("ms",) and table == "entries" and isinstance(f, _COMPARE) \
                and isinstance(f.value, int) and not isinstance(f.value, bool):
            self._narrow(f, f.value)
        else:
            return False
        return True

    def _narrow(self, f: Filter, ms: int) -> None:
        if ms < 0:  # ms is a long column; IDs are unsigned: only the bound's side matters
            lo, hi = (0, -1) if isinstance(f, (EqualTo, LessThan, LessThanOrEqual)) \
                else (0, MAX_ID)
        elif ms > U64:
            lo, hi = (MAX_ID + 1, MAX_ID) if isinstance(f, (EqualTo, GreaterThan,
                                                            GreaterThanOrEqual)) else (0, MAX_ID)
        else:
            lo, hi = _ms_bounds(f, ms)
        self.lo, self.hi = max(self.lo, lo), min(self.hi, hi)

    def keeps(self, db: int, key: bytes) -> bool:
        """Whether stream or key (db, key) passes every accepted db and name filter."""
        return all(_test(f, db) for f in self.dbs) and all(
            _test(f, key if f.attribute in _BINARY_NAMES else text(key)) for f in self.names)

    def empty(self) -> bool:
        return self.lo > self.hi


def _ms_bounds(f: Filter, ms: int) -> tuple[int, int]:
    first, last = ms << 64, ms << 64 | U64
    if isinstance(f, EqualTo):
        return first, last
    if isinstance(f, GreaterThan):
        return last + 1, MAX_ID
    if isinstance(f, GreaterThanOrEqual):
        return first, MAX_ID
    if isinstance(f, LessThan):
        return 0, first - 1
    return 0, last  # LessThanOrEqual


def _ints(f: Kept) -> bool:
    value: Any = f.value
    values = value if isinstance(f, In) else (value,)
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _test(f: Kept, value: object) -> bool:
    """`f` on one value, as Spark would evaluate it (a type mismatch never matches)."""
    want: Any = f.value
    if isinstance(f, In):
        return any(_equal(value, v) for v in want)
    if isinstance(f, EqualTo):
        return _equal(value, want)
    if isinstance(f, StringStartsWith):
        return _starts(value, want)
    assert isinstance(value, int) and isinstance(want, int)
    if isinstance(f, GreaterThan):
        return value > want
    if isinstance(f, GreaterThanOrEqual):
        return value >= want
    if isinstance(f, LessThan):
        return value < want
    return value <= want


def _starts(value: object, prefix: object) -> bool:
    if isinstance(value, bytes):
        if isinstance(prefix, str):
            prefix = prefix.encode()
        return isinstance(prefix, (bytes, bytearray)) and value.startswith(prefix)
    return isinstance(value, str) and isinstance(prefix, str) and value.startswith(prefix)


def _equal(value: object, want: object) -> bool:
    if isinstance(value, bytes) and isinstance(want, (bytes, bytearray)):
        return value == bytes(want)
    return type(value) is type(want) and value == want
