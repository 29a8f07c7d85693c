"""The crash bench's seeded workload: producers and consumer groups on a few streams.

Owns which commands run and with which arguments. `Workload(seed)` hands out one command at a
time (`next_argv`) and learns from each acknowledged reply (`observe`): the IDs `XADD *`
returned and the entries `XREADGROUP` delivered, which later XACK / XCLAIM / XDEL pick from.
With the same seed and the same replies it yields the same commands, so an in-process run on a
fake clock is exactly reproducible (the exhaustive mode relies on it).

Every XADD carries its operation number and a checksum of its payload (`op`, `sum`, `data`
fields): a recovered entry whose bytes changed, or that no operation wrote, is recognisable.
Must not touch: how commands reach a target (history), what is checked (invariants).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

KEYS = (b"cb:s0", b"cb:s1")
# (key, group): the groups the workload creates and reads with.
GROUPS = ((b"cb:s0", b"g1"), (b"cb:s0", b"g2"), (b"cb:s1", b"g1"))
CONSUMERS = (b"c1", b"c2", b"c3")
TRIM_TO = (40, 80)  # XTRIM MAXLEN picks a length in this range (exact trimming)

# Relative weights of the operation kinds after the groups exist.
MIX = (("xadd", 50), ("xreadgroup", 16), ("xack", 12), ("xclaim", 5), ("xautoclaim", 5),
       ("xdel", 6), ("xtrim", 3), ("xadd_trim", 3))


def payload_sum(op: int, data: bytes) -> bytes:
    """The checksum an XADD of operation `op` carries for its data."""
    return b"%08x" % zlib.crc32(b"%d:" % op + data)


def payload_ok(fields: Sequence[bytes]) -> int | None:
    """The operation number of an entry's fields when they are an intact workload payload,
    else None."""
    if len(fields) != 6 or fields[0] != b"op" or fields[2] != b"sum" or fields[4] != b"data":
        return None
    try:
        op = int(fields[1])
    except ValueError:
        return None
    return op if payload_sum(op, fields[5]) == fields[3] else None


@dataclass
class Workload:
    """The command stream of one seed (see the module docstring)."""

    seed: int
    index: int = 0  # the next operation's number
    rng: random.Random = field(init=False)
    added: dict[bytes, list[bytes]] = field(default_factory=dict)  # key -> IDs XADD returned
    delivered: dict[tuple[bytes, bytes], list[bytes]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"crashbench:{self.seed}")
        self._kinds = [k for k, _w in MIX]
        self._weights = [w for _k, w in MIX]

    def next_argv(self) -> list[bytes]:
        """The next operation's command (its number is `index`; `observe` advances it)."""
        if self.index < len(GROUPS):
            key, group = GROUPS[self.index]
            return [b"XGROUP", b"CREATE", key, group, b"0", b"MKSTREAM"]
        kind = self.rng.choices(self._kinds, self._weights)[0]
        return getattr(self, f"_{kind}")()

    def observe(self, argv: Sequence[bytes], reply: Any) -> None:
        """Learn from operation `index`'s reply (None when it failed or its outcome is
        unknown), then move on to the next operation."""
        name = argv[0].upper()
        if name == b"XADD" and isinstance(reply, bytes):
            self.added.setdefault(argv[1], []).append(reply)
        elif name == b"XREADGROUP" and isinstance(reply, list):
            group = argv[2]
            for key, entries in reply:
                ids = self.delivered.setdefault((key, group), [])
                ids.extend(entry[0] for entry in entries)
                del ids[:-200]  # keep the choice among recent deliveries
        self.index += 1

    # --- the operation kinds -------------------------------------------------------------------

    def _data(self) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, 48)).hex().encode()

    def _xadd(self, trim: bool = False) -> list[bytes]:
        key = self.rng.choice(KEYS)
        data = self._data()
        argv = [b"XADD", key]
        if trim:
            argv += [b"MAXLEN", b"%d" % self.rng.randint(*TRIM_TO)]
        return argv + [b"*", b"op", b"%d" % self.index, b"sum", payload_sum(self.index, data),
                       b"data", data]

    def _xadd_trim(self) -> list[bytes]:
        return self._xadd(trim=True)

    def _group(self) -> tuple[bytes, bytes]:
        return self.rng.choice(GROUPS)

    def _xreadgroup(self) -> list[bytes]:
        key, group = self._group()
        return [b"XREADGROUP", b"GROUP", group, self.rng.choice(CONSUMERS), b"COUNT",
                b"%d" % self.rng.randint(1, 5), b"STREAMS", key, b">"]

    def _some_delivered(self, key: bytes, group: bytes, most: int) -> list[bytes]:
        ids = self.delivered.get((key, group)) or [b"0-1"]
        return sorted(set(self.rng.choices(ids, k=self.rng.randint(1, most))))

    def _xack(self) -> list[bytes]:
        key, group = self._group()
        return [b"XACK", key, group, *self._some_delivered(key, group, 3)]

    def _xclaim(self) -> list[bytes]:
        key, group = self._group()
        return [b"XCLAIM", key, group, self.rng.choice(CONSUMERS), b"0",
                *self._some_delivered(key, group, 2)]

    def _xautoclaim(self) -> list[bytes]:
        key, group = self._group()
        return [b"XAUTOCLAIM", key, group, self.rng.choice(CONSUMERS), b"0", b"0-0", b"COUNT",
                b"%d" % self.rng.randint(1, 4)]

    def _xdel(self) -> list[bytes]:
        key = self.rng.choice(KEYS)
        ids = self.added.get(key) or [b"0-1"]
        return [b"XDEL", key, self.rng.choice(ids[-100:])]

    def _xtrim(self) -> list[bytes]:
        return [b"XTRIM", self.rng.choice(KEYS), b"MAXLEN", b"%d" % self.rng.randint(*TRIM_TO)]
