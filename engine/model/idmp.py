"""Idempotent producers (Redis 8.6's IDMP): a stream's per-producer maps of recent idempotent IDs.

Owns the data structure behind `XADD ... IDMP pid iid` / `IDMPAUTO pid`, `XCFGSET` and
`XIDMPRECORD`: for each producer ID (pid), its idempotent IDs (iids) in the order they were
recorded, each with the stream entry ID it produced and the command time it was recorded at;
retention by duration (seconds, against the *command* time, so replaying the log at another
wall-clock time rebuilds the same maps) and by size per producer (the oldest iid evicted first);
the stream's two settings and its lifetime counters (iids added, duplicates refused); and the
content hash IDMPAUTO derives an iid from. Must not touch: argument parsing, replies, effects
(the stream commands own those), anything outside one stream's IDMP state.

Expiry is lazy and deterministic: `lookup` treats an expired iid as absent without removing it;
`record` (the only writer, run by XADD's effect XIDMPRECORD and by XIDMPRECORD itself) drops the
expired iids at the front of that producer's map before inserting, so the maps after a replay are
the maps before it. Counts reported by XINFO leave expired iids out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence

DEFAULT_DURATION = 100  # seconds (stream-idmp-duration)
DEFAULT_MAXSIZE = 100  # iids per producer (stream-idmp-maxsize)
DURATION_RANGE = (1, 86400)
MAXSIZE_RANGE = (1, 10000)


class Idmp:
    """One stream's IDMP state: settings, per-producer maps and lifetime counters."""

    __slots__ = ("duration", "maxsize", "producers", "added", "duplicates")

    def __init__(self, duration: int = DEFAULT_DURATION, maxsize: int = DEFAULT_MAXSIZE) -> None:
        self.duration = duration  # seconds
        self.maxsize = maxsize
        # pid -> {iid: (entry ID, recorded at ms)}, in recording order (dicts keep it).
        self.producers: dict[bytes, dict[bytes, tuple[int, int]]] = {}
        self.added = 0  # iids recorded, over the stream's life (XINFO iids-added)
        self.duplicates = 0  # XADDs refused as duplicates (XINFO iids-duplicates)

    def lookup(self, pid: bytes, iid: bytes, now: int) -> int | None:
        """The entry ID `pid`/`iid` produced, if recorded and not expired at `now` (ms)."""
        iids = self.producers.get(pid)
        if iids is None:
            return None
        found = iids.get(iid)
        if found is None or found[1] + self.duration * 1000 <= now:
            return None
        return found[0]

    def record(self, pid: bytes, iid: bytes, sid: int, now: int) -> None:
        """Remember that `pid`/`iid` produced entry `sid` at `now` (ms); the caller checked
        `lookup` found nothing live. Drops the producer's expired iids first, then its oldest
        ones beyond `maxsize`."""
        iids = self.producers.get(pid)
        if iids is None:
            iids = self.producers[pid] = {}
        elif iids:
            if next(iter(iids.values()))[1] + self.duration * 1000 <= now:
                self._expire(iids, now)
            if iid in iids:  # expired but not at the front (the clock went back)
                del iids[iid]
        iids[iid] = (sid, now)
        self.added += 1
        if len(iids) > self.maxsize:
            while len(iids) > self.maxsize:
                del iids[next(iter(iids))]

    def _expire(self, iids: dict[bytes, tuple[int, int]], now: int) -> None:
        horizon = now - self.duration * 1000  # recorded at or before: expired
        while iids:
            oldest = next(iter(iids))
            if iids[oldest][1] > horizon:
                return
            del iids[oldest]

    def configure(self, duration: int, maxsize: int) -> None:
        """XCFGSET: new settings; the maps are cleared when either value changes (setting the
        same values again keeps them, as Redis does), the lifetime counters never."""
        if (duration, maxsize) != (self.duration, self.maxsize):
            self.producers.clear()
        self.duration, self.maxsize = duration, maxsize

    def live_counts(self, now: int) -> tuple[int, int]:
        """(producers with a live iid, live iids) at `now`: XINFO's pids-tracked, iids-tracked."""
        horizon = now - self.duration * 1000
        pids = iids = 0
        for recorded in self.producers.values():
            live = sum(1 for _sid, at in recorded.values() if at > horizon)
            if live:
                pids += 1
                iids += live
        return pids, iids

    def entries(self) -> Iterator[tuple[bytes, list[tuple[bytes, int, int]]]]:
        """(pid, [(iid, entry ID, recorded at ms), ...] oldest first) for each producer: what a
        snapshot stores and the digest hashes, in recording order."""
        for pid, iids in self.producers.items():
            yield pid, [(iid, sid, at) for iid, (sid, at) in iids.items()]

    def restore(self, pid: bytes, recorded: Iterable[Sequence]) -> None:
        """Put back a producer's map as `entries` gave it (snapshot load)."""
        self.producers[pid] = {bytes(iid): (sid, at) for iid, sid, at in recorded}


def auto_iid(fields: Sequence[bytes]) -> bytes:
    """IDMPAUTO's iid: a 128-bit hash of the entry's field/value pairs, independent of their
    order (Redis documents that the same content gives the same iid whatever the field order;
    its exact hash function is not documented, so this one is streamkeep's own: BLAKE2b-128
    over the sorted pairs, each length-prefixed so no two contents collide by concatenation)."""
    pairs = sorted(zip(fields[0::2], fields[1::2], strict=True))
    h = hashlib.blake2b(digest_size=16)
    for field, value in pairs:
        h.update(len(field).to_bytes(8, "little"))
        h.update(field)
        h.update(len(value).to_bytes(8, "little"))
        h.update(value)
    return h.digest()
