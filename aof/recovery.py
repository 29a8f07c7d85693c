"""What a data directory's AOF files mean when it opens, judged without the engine.

Owns the log's own part of recovery: the first files of a new directory (and refusing a
directory whose manifest is missing while data is there), the files a crash left that the
manifest does not name (removed, each with its reason), opening a named segment for replay, and
what damage found while replaying it means. Damage is judged against the synced watermark
(aof.watermark): a torn tail of the last segment, past what an fsync had covered, is saved to
`<segment>.cut-<offset>`, logged as a warning with the records and LSNs it held, and cut at the
last good record (when aof-load-truncated is on); damage inside fsynced bytes, fsynced bytes
missing, damage followed by valid records, or damage in any other segment refuses to open,
naming the file, byte offset and LSNs and the `aof fix` option that gets past it. Zeros from a
segment's last record to its end are space the writer allocated ahead (a mapped tail: see
aof.fs.MappedTail) or an extension a power loss left unwritten, never damage: they are cut.
That judgement of a segment's end is one function, `judge_end`: the offline tools (`aof
verify`, `aof stats`, `aof dump`) name what they find with it, so they say what opening does.
Must not touch: the engine (replaying records through it, loading the snapshot, wiring the
journal are engine.services.datadir's), command semantics, the record format.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from streamkeep.aof import manifest as manifest_mod
from streamkeep.aof import watermark as watermark_mod
from streamkeep.aof.codec import HEADER_SIZE, frames_in_tail
from streamkeep.aof.fs import FileSystem
from streamkeep.aof.journal import create_segment
from streamkeep.aof.manifest import Manifest, SegmentEntry, SnapshotEntry
from streamkeep.aof.segment_reader import SegmentDamage, SegmentError, SegmentReader
from streamkeep.aof.watermark import Synced
from streamkeep.engine.wire.errors import StorageError

log = logging.getLogger("streamkeep.aof")

LOCK_FILE = manifest_mod.LOCK_FILE


class AOFCorruptError(StorageError):
    """The AOF cannot be loaded without losing data that may have been acknowledged."""


def initialise(fs: FileSystem, path: str) -> tuple[Manifest, int]:
    """The first segment and manifest of a new directory (after an interrupted first open, its
    empty first segment is made again); (the manifest, the open segment's descriptor). Refuses
    a directory that holds data but no manifest."""
    data = [n for n in fs.listdir(path) if n not in (LOCK_FILE, manifest_mod.MANIFEST_TMP)
            and not manifest_mod.is_shared_file(n)]
    first = manifest_mod.segment_file(1)
    if data == [first] and fs.size(os.path.join(path, first)) <= HEADER_SIZE:
        # An interrupted first open: the first segment was created but no manifest ever named
        # it, and it holds no record, so nothing in it was ever acknowledged.
        log.warning("%s: re-initialising after an interrupted first open", path)
        fs.unlink(os.path.join(path, first))
        data = []
    if data:
        raise manifest_mod.ManifestError(
            f"{os.path.join(path, manifest_mod.MANIFEST)}: manifest is missing but the "
            f"directory holds {', '.join(data[:5])}; refusing to start empty over existing data"
        )
    entry = SegmentEntry(manifest_mod.segment_file(1), 1, 1)
    fd = create_segment(fs, path, entry)
    manifest = Manifest([entry])
    try:
        manifest_mod.store(fs, path, manifest)
    except BaseException:
        fs.close(fd)
        raise
    return manifest, fd


def initialise_with_snapshot(fs: FileSystem, path: str, snapshot: SnapshotEntry,
                             repl_id: str) -> None:
    """A new directory around the snapshot file already in it (a tool that builds a whole
    directory, synced and published once complete): the first segment, whose records follow
    the snapshot's LSN, and the manifest naming both under the history `repl_id`."""
    entry = SegmentEntry(manifest_mod.segment_file(1), 1, snapshot.lsn + 1)
    fs.close(create_segment(fs, path, entry))
    manifest_mod.store(fs, path, Manifest([entry], snapshot, repl_id))


def remove_orphans(fs: FileSystem, path: str, manifest: Manifest) -> None:
    """Files a crash left behind that the manifest does not name, none of them needed:
    a segment newer than the newest named one (an interrupted rotation: nothing in it was
    acknowledged, the manifest switches before a segment receives records); segments older
    than the first named one and snapshots other than the named one (a compaction that switched
    the manifest but did not finish removing, or that never switched); temp files."""
    named = {s.file for s in manifest.segments}
    if manifest.snapshot is not None:
        named.update(manifest.snapshot.files)
    first, newest = manifest.segments[0].segment, manifest.segments[-1].segment
    for name in fs.listdir(path):
        if name in named:
            continue
        if name in (manifest_mod.MANIFEST_TMP, watermark_mod.WATERMARK_TMP):
            why = "left by an interrupted replace"
        elif manifest_mod.is_segment_file(name) and int(name[8:-4]) > newest:
            why = "left by an interrupted rotation"
        elif manifest_mod.is_segment_file(name) and int(name[8:-4]) < first \
                and manifest.snapshot is not None:
            why = "already compacted into " + manifest.snapshot.file
        elif manifest_mod.is_snapshot_file(name):
            why = "left by a compaction the manifest does not name"
        else:
            continue
        log.warning("removing %s, %s", name, why)
        fs.unlink(os.path.join(path, name))


def open_segment(fs: FileSystem, path: str, entry: SegmentEntry, expected: int) -> SegmentReader:
    """A reader of the named segment, which must start at LSN `expected` (where the previous
    one ended)."""
    file = os.path.join(path, entry.file)
    try:
        reader = SegmentReader(fs, file, entry.segment, entry.first_lsn)
    except SegmentError as err:
        raise AOFCorruptError(str(err)) from None
    if entry.first_lsn != expected:
        raise AOFCorruptError(
            f"{file}: starts at LSN {entry.first_lsn} but the previous segment ends at "
            f"{expected - 1}"
        )
    return reader


# What the end of a segment's good records can be (judge_end's kinds; `aof verify` reports
# them by these names).
TORN_TAIL = "torn-tail"  # an incomplete or damaged end, nothing valid after it
DAMAGE_IN_SYNCED = "damage-in-synced"  # damage inside fsynced bytes, or fsynced bytes missing
DAMAGE_BEFORE_VALID = "damage-before-valid"  # a bad record followed by valid ones


@dataclass(frozen=True, slots=True)
class EndJudgement:
    """What the end of a segment's good records means (`judge_end`): its `kind` (TORN_TAIL,
    DAMAGE_IN_SYNCED, DAMAGE_BEFORE_VALID), whether opening the directory cuts it (`cut`: a
    torn tail of the last segment, past what was fsynced) or refuses, and `why` in words
    (after the damage's own description)."""

    kind: str
    cut: bool
    why: str

    def describe(self) -> str:
        """`kind: why`, for one line naming the damage (`aof stats`, `aof dump`)."""
        return f"{self.kind}: {self.why}"


def judge_end(end: int, damage: tuple[int, bool] | None, durable: Synced | None) -> \
        EndJudgement | None:
    """The one judgement of where a segment's good records end, which recovery acts on and the
    offline tools report: None when the segment is whole. `end`: the offset just past its
    last good record; `damage`: (offset, valid records follow) of what stopped the scan, None
    if it reached the end of the file (a zero-filled tail included: space allocated ahead,
    never damage); `durable`: what the synced watermark says of it if it is the last segment,
    None for the others. Damage where the watermark says the bytes were fsynced, or fsynced
    bytes missing, is damage to synced data, never a torn tail: bytes an fsync covered were on
    disk whole."""
    if damage is None:
        if durable is not None and durable.offset is not None and end < durable.offset:
            return EndJudgement(DAMAGE_IN_SYNCED, False,
                                f"the file ends at byte {end}, but bytes up to "
                                f"{durable.offset} (LSN {durable.lsn}) were fsynced")
        return None
    offset, valid_after = damage
    if valid_after:
        return EndJudgement(DAMAGE_BEFORE_VALID, False, "followed by valid records")
    if durable is None:
        return EndJudgement(TORN_TAIL, False, "a torn tail, but in a segment before the last, "
                                              "so records may be missing")
    if durable.offset is not None and offset < durable.offset:
        return EndJudgement(DAMAGE_IN_SYNCED, False,
                            f"inside bytes already fsynced, up to byte {durable.offset} (LSN "
                            f"{durable.lsn}): not a torn tail")
    if durable.damaged:
        return EndJudgement(DAMAGE_IN_SYNCED, False,
                            f"{durable.why}: whether it was fsynced cannot be told")
    if durable.offset is None:
        return EndJudgement(TORN_TAIL, True, f"taken for a torn tail: {durable.why}")
    return EndJudgement(TORN_TAIL, True, f"a torn tail, past the bytes fsynced (up to byte "
                                         f"{durable.offset}, LSN {durable.lsn})")


def judge_segment(fs: FileSystem, path: str, entry: SegmentEntry, reader: SegmentReader,
                  durable: Synced | None, load_truncated: bool) -> None:
    """After a segment's records were replayed (the reader's scan stopped at its end or at
    damage): refuse, or cut a torn tail (saved first), as `judge_end` judges it; see the
    module's docstring. `durable` is what the watermark says of it if it is the last segment
    (None for the others)."""
    damage = reader.damage
    next_lsn = entry.first_lsn + reader.count
    fix = f"`streamkeep aof fix --force-skip-damaged {path}`"
    judged = judge_end(reader.end, None if damage is None
                       else (damage.offset, damage.valid_after), durable)
    if damage is None:
        if judged is not None:
            assert durable is not None and durable.offset is not None
            raise AOFCorruptError(
                f"{reader.file}: ends at byte offset {reader.end} (LSN {next_lsn - 1}), but "
                f"bytes up to {durable.offset} (LSN {durable.lsn}) were fsynced: "
                f"{_lsns(next_lsn, durable.lsn)} missing; refusing to load ({fix} accepts the "
                f"loss)")
        if reader.zero_tail:
            _cut_zero_tail(fs, reader)
    else:
        assert judged is not None
        _judge_damage(fs, reader, damage, judged, next_lsn, durable, load_truncated, fix)


def _judge_damage(fs: FileSystem, reader: SegmentReader, damage: SegmentDamage,
                  judged: EndJudgement, next_lsn: int, durable: Synced | None,
                  load_truncated: bool, fix: str) -> None:
    """Refuse, or cut a torn tail (saved first), as `judged`: see the module's docstring."""
    where = str(damage)
    if durable is None:
        raise AOFCorruptError(f"{where} (LSN {next_lsn}), in a segment before the last; "
                              f"refusing to load ({fix} drops the damaged records, saving them)")
    if judged.kind == DAMAGE_BEFORE_VALID:
        raise AOFCorruptError(f"{where} (LSN {next_lsn}), followed by valid records; refusing "
                              f"to load ({fix} drops the damaged records and keeps the valid "
                              f"ones after them, saving what it cuts)")
    if judged.kind == DAMAGE_IN_SYNCED and durable.damaged:
        raise AOFCorruptError(f"{where} (LSN {next_lsn}), and {durable.why}: whether these "
                              f"bytes were fsynced cannot be told; refusing to load ({fix} "
                              f"cuts them, saving them)")
    if judged.kind == DAMAGE_IN_SYNCED:
        raise AOFCorruptError(
            f"{where}: inside data already fsynced (up to byte {durable.offset}, LSN "
            f"{durable.lsn}), so not a torn tail: {_lsns(next_lsn, durable.lsn)} damaged; "
            f"refusing to load ({fix} drops them, saving them)")
    if not load_truncated:
        raise AOFCorruptError(f"{where} (torn tail) and aof-load-truncated is no")
    _cut_tail(fs, reader, damage, next_lsn, durable)


def _cut_zero_tail(fs: FileSystem, reader: SegmentReader) -> None:
    """Cut the zeros after a segment's last record (nothing was written there: nothing to
    save), so that appends follow the record."""
    log.info("%s: cut %d bytes of zeros after the last record at byte offset %d (space "
             "allocated ahead of the log, never written)", reader.file, reader.zero_tail,
             reader.end)
    fs.truncate(reader.file, reader.end)
    fd = fs.open_append(reader.file, create=False)
    try:
        fs.fdatasync(fd)
    finally:
        fs.close(fd)


def _lsns(first: int, last: int) -> str:
    return f"LSN {first} is" if first >= last else f"LSNs {first}..{last} are"


def _cut_tail(fs: FileSystem, reader: SegmentReader, damage: SegmentDamage, next_lsn: int,
              durable: Synced) -> None:
    """Save the torn tail beside the segment, then cut the segment at its last good record."""
    file, data = reader.file, reader.data
    records = frames_in_tail(data, damage.offset)
    side = _save_cut(fs, file, damage.offset, data[damage.offset:])
    held = (f"{records} record(s) not yet fsynced, LSN {next_lsn}"
            + (f"..{next_lsn + records - 1}" if records > 1 else "")) if records \
        else "no whole record header"
    log.warning("%s: torn tail after the last fsync (%s): cut %d bytes holding %s, saved to %s",
                damage, durable.describe(), len(data) - damage.offset, held, side)
    fs.truncate(file, reader.end)
    fd = fs.open_append(file, create=False)
    try:
        fs.fdatasync(fd)
    finally:
        fs.close(fd)


def _save_cut(fs: FileSystem, file: str, offset: int, data: bytes) -> str:
    """Write `data` to `<file>.cut-<offset>` (or `.cut-<offset>.N`, never over an earlier
    one), durably; returns its path."""
    side = f"{file}.cut-{offset}"
    number = 0
    while fs.exists(side):
        number += 1
        side = f"{file}.cut-{offset}.{number}"
    fd = fs.open_write_new(side)
    try:
        fs.write(fd, data)
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.fsync_dir(os.path.dirname(file) or ".")
    return side
