"""A sorted set of integer IDs with O(log n) insert/remove and ordered iteration from any point.

Owns nothing but the container (a list of bounded sorted sublists, the layout sortedcontainers
uses). The PEL keeps one per group and one per consumer. Must not touch: streams or groups.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator

_LOAD = 512


class SortedIDs:
    __slots__ = ("_lists", "_maxes", "_len")

    def __init__(self) -> None:
        self._lists: list[list[int]] = []
        self._maxes: list[int] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def add(self, value: int) -> None:
        """Insert a value known not to be present."""
        lists, maxes = self._lists, self._maxes
        self._len += 1
        if not maxes:
            lists.append([value])
            maxes.append(value)
            return
        if value > maxes[-1]:  # The common case: deliveries arrive in ID order.
            sub = lists[-1]
            sub.append(value)
            maxes[-1] = value
            i = len(lists) - 1
        else:
            i = bisect_left(maxes, value)
            sub = lists[i]
            insort(sub, value)
        if len(sub) > 2 * _LOAD:
            lists.insert(i + 1, sub[_LOAD:])
            del sub[_LOAD:]
            maxes.insert(i, sub[-1])

    def discard(self, value: int) -> None:
        lists, maxes = self._lists, self._maxes
        i = bisect_left(maxes, value)
        if i == len(maxes):
            return
        sub = lists[i]
        j = bisect_left(sub, value)
        if j == len(sub) or sub[j] != value:
            return
        del sub[j]
        self._len -= 1
        if not sub:
            del lists[i]
            del maxes[i]
        elif j == len(sub):
            maxes[i] = sub[-1]

    def first(self) -> int | None:
        return self._lists[0][0] if self._lists else None

    def last(self) -> int | None:
        return self._maxes[-1] if self._maxes else None

    def irange(self, start: int, end: int) -> Iterator[int]:
        """Values with start <= v <= end, ascending."""
        lists, maxes = self._lists, self._maxes
        i = bisect_left(maxes, start)
        if i == len(maxes):
            return
        j = bisect_left(lists[i], start)
        while i < len(lists):
            sub = lists[i]
            for k in range(j, len(sub)):
                v = sub[k]
                if v > end:
                    return
                yield v
            i += 1
            j = 0

    def next_after(self, value: int) -> int | None:
        """Smallest member > value."""
        maxes = self._maxes
        i = bisect_right(maxes, value)
        if i == len(maxes):
            return None
        sub = self._lists[i]
        return sub[bisect_right(sub, value)]

    def __iter__(self) -> Iterator[int]:
        for sub in self._lists:
            yield from sub
