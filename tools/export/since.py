"""Incremental reads: the entries added after an LSN, taken from the AOF records that added them.

Owns what "added after LSN N" means for an export and where those entries come from:

- the records after N are still in the AOF (N at or after the snapshot's LSN): every XADD
  effect of the records N+1 .. E (E: the log's end when the read is planned), as it was added,
  read through `aof.segment_reader` / `aof.codec` and `engine.model.effects.xadd_effect_entry`. An entry
  deleted or trimmed after it was added is still exported: an export is an archive, and
  deletions are not propagated;
- a compaction folded some of those records into the snapshot (N before its LSN S): the
  entries the snapshot still holds above each stream's *position* at N (the last ID the
  stream had generated then, which the previous export's manifest records), then the XADDs of
  the records S+1 .. E. Entries added and removed again between N and S are gone from both,
  and the read says so (`Window.gap`).

A position map, `{(db, key): last ID}`, is what an export records so that the next one can
take the second way: `positions_at` computes it at E from the snapshot's streams and the
records after it. Must not touch: the AOF and snapshot formats (their readers own them), the
engine's state (effects are looked at, never applied), Spark (tools.export.datasource).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from streamkeep.aof.codec import HEADER_SIZE, verify_scan
from streamkeep.aof.fs import RealFS
from streamkeep.aof.segment_reader import SegmentError, SegmentReader
from streamkeep.engine.model.effects import with_dbs, xadd_effect_entry
from streamkeep.engine.model.ids import parse_strict
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.snapshot.reader import StreamInfo
from streamkeep.tools.export.pin import ExportError, LogPin, PinnedSegment

Positions = dict[tuple[int, bytes], int]  # (db, key) -> the last ID the stream had generated


@dataclass(frozen=True, slots=True)
class Window:
    """The records an incremental read takes entries from: since < LSN <= until."""

    since: int
    until: int
    snapshot_lsn: int  # the snapshot under the records (0: none)

    @property
    def gap(self) -> bool:
        """Records since+1 .. snapshot_lsn were compacted: their entries come from the
        snapshot (those still there), by the positions at `since`."""
        return self.since < self.snapshot_lsn

    @property
    def first_from_log(self) -> int:
        return max(self.since, self.snapshot_lsn) + 1


def window(log: LogPin, since: int, until: int | None = None) -> Window:
    """The window of a read planned now; `until` (default: the log's end) may be earlier."""
    if since < 0:
        raise ExportError(f"since LSN {since} is negative")
    end = log_end(log)
    if until is None:
        until = end
    elif until > end:
        raise ExportError(f"until LSN {until} is after the log's end (LSN {end})")
    if since > until:
        raise ExportError(f"since LSN {since} is after the log's end (LSN {until}): was the "
                          "previous export of another data directory?")
    first = log.segments[0].first_lsn if log.segments else log.snapshot_lsn + 1
    if max(since, log.snapshot_lsn) + 1 < first:
        raise ExportError(f"the AOF starts at LSN {first}, after the snapshot's LSN "
                          f"{log.snapshot_lsn}: records are missing")
    return Window(since, until, log.snapshot_lsn)


def log_end(log: LogPin) -> int:
    """The LSN of the pinned log's last good record (the snapshot's, if none follows it):
    counted by the codec's verification scan (CRCs and LSNs, no payload decoded)."""
    return log_tail(log)[0]


def log_tail(log: LogPin) -> tuple[int, int | None]:
    """`log_end`, and the time (ms) of that last record (None: no record follows the
    snapshot): how far a snapshot is behind its directory."""
    for seg in reversed(log.segments):
        result = verify_scan(_reader(seg).data, HEADER_SIZE, seg.first_lsn)
        if result.count:
            return seg.first_lsn + result.count - 1, result.last_time_ms
    return log.snapshot_lsn, None


def _reader(seg: PinnedSegment) -> SegmentReader:
    try:
        return SegmentReader(RealFS(), seg.path, seg.segment, seg.first_lsn)
    except (SegmentError, OSError) as err:
        raise ExportError(f"{seg.path}: cannot read the AOF segment ({err})") from None


def segments_in(log: LogPin, win: Window) -> list[PinnedSegment]:
    """The pinned segments holding records of the window's log part."""
    segs = log.segments
    out = []
    for i, seg in enumerate(segs):
        following = segs[i + 1].first_lsn if i + 1 < len(segs) else None
        if following is not None and following <= win.first_from_log:
            continue  # every record before the window
        if seg.first_lsn > win.until:
            break
        out.append(seg)
    return out


def added(seg: PinnedSegment, win: Window) -> Iterator[tuple[int, bytes, int, Sequence[bytes]]]:
    """(db, key, ID, flat fields) of every XADD effect in the segment's records inside the
    window, in log order."""
    lo, hi = win.first_from_log, win.until
    reader = _reader(seg)
    for batch in reader.batches():
        if batch[-1][0] < lo:
            continue
        for lsn, _time, db, effects in batch:
            if lsn < lo:
                continue
            if lsn > hi:
                return
            for db_now, effect in with_dbs(db, effects):
                if bytes(effect[0]).upper() == b"XADD":
                    key, idb, fields = xadd_effect_entry(effect)
                    yield db_now, bytes(key), parse_strict(bytes(idb)), fields


# --- positions -------------------------------------------------------------------------------

def positions_at(log: LogPin, until: int) -> Positions:
    """Each stream's last generated ID at LSN `until`: the snapshot's, then the records after
    it. What the next incremental export needs if a compaction folds these records."""
    from streamkeep.snapshot.reader import Snapshot, SnapshotError

    positions: Positions = {}
    if log.snapshot is not None:
        try:
            with Snapshot(log.snapshot) as snap:
                for info in snap.streams():
                    positions[(info.db, info.key)] = info.last_id.as_int()
        except SnapshotError as err:
            raise ExportError(str(err)) from None
    win = Window(log.snapshot_lsn, until, log.snapshot_lsn)
    for seg in segments_in(log, win):
        reader = _reader(seg)
        for batch in reader.batches():
            for lsn, _time, db, effects in batch:
                if lsn < win.first_from_log:
                    continue
                if lsn > until:
                    return positions
                for db_now, effect in with_dbs(db, effects):
                    advance(positions, db_now, effect)
    return positions


def advance(positions: Positions, db: int, effect: Sequence[bytes]) -> None:
    """One effect's change to the positions: an XADD raises its stream's; a key removed
    (DEL, FLUSHDB, FLUSHALL) drops it, so a stream made again is exported from its start;
    RENAME carries the position to the new name."""
    name = bytes(effect[0]).upper()
    if name == b"XADD":
        key, idb, _ = xadd_effect_entry(effect)
        sid = parse_strict(bytes(idb))
        if sid > positions.get((db, bytes(key)), -1):
            positions[(db, bytes(key))] = sid
    elif name == b"DEL":
        for key in effect[1:]:
            positions.pop((db, bytes(key)), None)
    elif name == b"RENAME":
        moved = positions.pop((db, bytes(effect[1])), None)
        positions.pop((db, bytes(effect[2])), None)
        if moved is not None:
            positions[(db, bytes(effect[2]))] = moved
    elif name == b"FLUSHDB":
        for k in [k for k in positions if k[0] == db]:
            del positions[k]
    elif name == b"FLUSHALL":
        positions.clear()


def floors(positions: Positions, streams: Iterable[StreamInfo]) -> Positions:
    """The lowest ID to export of each stream of the snapshot when the records since the
    positions were compacted: above its position; from its start if it has none (made since)
    or if its last generated ID went below it (deleted and made again since). A stream renamed
    meanwhile has no position under its new name: it is exported whole. (One made again whose
    IDs do not go below its old position cannot be told from the old one: its entries at or
    below that position are not exported.)"""
    out: Positions = {}
    for info in streams:
        pos = positions.get((info.db, info.key))
        out[(info.db, info.key)] = 0 if pos is None or info.last_id.as_int() < pos else pos + 1
    return out


def positions_to_json(positions: Positions) -> list[dict]:
    from streamkeep.engine.model.ids import format_id

    return [{"db": db, "stream": key.hex(), "last_id": format_id(sid).decode()}
            for (db, key), sid in sorted(positions.items())]


def positions_from_json(doc: object, where: str) -> Positions:
    """The positions an export manifest recorded; ExportError naming `where` if malformed."""
    try:
        assert isinstance(doc, list)
        return {(int(p["db"]), bytes.fromhex(p["stream"])):
                parse_strict(p["last_id"].encode()) for p in doc}
    except (AssertionError, KeyError, TypeError, ValueError, AttributeError,
            ReplyError) as err:
        raise ExportError(f"{where}: malformed stream positions ({err})") from None
