"""The manifest: which files make up a data directory's state, replaced atomically.

Owns `manifest.json` (its schema and its validation) and the atomic replace: write a temp file,
fdatasync it, rename it over the old one, fsync the directory. A missing or malformed manifest,
or one naming a file that is not there, is refused with a clear message: streamkeep never starts
empty over existing data. The snapshot issue adds the snapshot entry. Must not touch: segment
contents, snapshot contents, the engine.

    {"format": "streamkeep-manifest", "version": 1, "repl_id": "<40 hex digits>",
     "repl_id2": "<40 hex digits>", "repl_offset2": 1235,     (both optional: a promotion's)
     "snapshot": {"file": "snapshot-000000001234.mdb", "lsn": 1234, "size": 81920,
                  "created_ms": 1700000000000, "crc32": 3735928559} | null,
     "segments": [{"file": "segment-000007.aof", "segment": 7, "first_lsn": 1235}, ...],
     "checksum": 2838784151}

`crc32` is the snapshot file's CRC-32 (zlib's) as written, checked before the file is trusted
whole (absent in manifests written before it existed). `checksum` is the CRC-32 of the document
itself without it (canonical JSON: sorted keys, no spaces), so a flipped byte in the manifest
is refused rather than read as another value (absent: an older manifest, accepted unchecked).

The state is the snapshot (everything up to its LSN; none: empty) followed by the segments'
records, whose LSNs continue from it without a gap. repl_id names this history for replicas;
repl_id2 the history this one continues since a promotion (REPLICAOF NO ONE), valid for LSNs
before repl_offset2 (Redis's master_replid2 and second_repl_offset).
"""

from __future__ import annotations

import json
import os
import re
import zlib
from dataclasses import dataclass, field

from streamkeep.aof.fs import FileSystem
from streamkeep.engine.wire.errors import StorageError

MANIFEST = "manifest.json"
LOCK_FILE = "LOCK"  # the data directory's lock (aof.fs.lock), held by the process that opens it
MANIFEST_TMP = "manifest.json.tmp"
# Shared mode's files (engine.services.shared): the directory's server's Unix socket, the lock
# that decides who starts that server, the settings it runs with (redis.conf syntax) and its
# log. They hold no data: opening, compaction and verification leave them alone.
SHARED_SOCKET = "shared.sock"
SHARED_LOCK = "shared.lock"
SHARED_CONF = "shared.conf"
SHARED_LOG = "shared.log"
FORMAT = "streamkeep-manifest"
VERSION = 1
_SEGMENT_FILE = re.compile(r"segment-(\d{6,})\.aof")
_SNAPSHOT_FILE = re.compile(r"(?:snapshot|part)-(\d{12,})\.mdb")


class ManifestError(StorageError):
    """The data directory's manifest is missing, malformed or names missing files."""


def segment_file(number: int) -> str:
    return f"segment-{number:06d}.aof"


def is_segment_file(name: str) -> bool:
    return _SEGMENT_FILE.fullmatch(name) is not None


def snapshot_file(lsn: int) -> str:
    return f"snapshot-{lsn:012d}.mdb"


def part_file(lsn: int) -> str:
    """The part file a compaction up to `lsn` writes its new stream nodes to."""
    return f"part-{lsn:012d}.mdb"


def is_shared_file(name: str) -> bool:
    """Shared mode's socket, lock, settings, log, and their temporaries (`shared.*`)."""
    return name.startswith("shared.")


def is_snapshot_file(name: str) -> bool:
    """A snapshot or a snapshot's part file, or the temp file one is built in."""
    return _SNAPSHOT_FILE.fullmatch(name.removesuffix(".tmp")) is not None


NO_REPL_ID = "0" * 40  # Redis's master_replid2 when there is no previous history


def new_repl_id() -> str:
    return os.urandom(20).hex()


@dataclass(frozen=True, slots=True)
class PartEntry:
    """A file holding stream nodes of a segmented snapshot (the snapshot's own file names
    it too, with the runs of nodes it holds)."""

    file: str
    size: int
    crc32: int


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    file: str
    lsn: int
    size: int
    created_ms: int
    crc32: int | None = None  # of the whole file (None: recorded by an older version)
    parts: tuple[PartEntry, ...] = ()  # a segmented snapshot's part files

    @property
    def total_size(self) -> int:
        """Bytes of the snapshot's own file and its parts."""
        return self.size + sum(part.size for part in self.parts)

    @property
    def files(self) -> list[str]:
        """Every file the snapshot is: its own, then its parts."""
        return [self.file, *(part.file for part in self.parts)]


@dataclass(frozen=True, slots=True)
class SegmentEntry:
    file: str
    segment: int
    first_lsn: int


@dataclass(slots=True)
class Manifest:
    segments: list[SegmentEntry] = field(default_factory=list)
    snapshot: SnapshotEntry | None = None
    repl_id: str = field(default_factory=new_repl_id)
    repl_id2: str = NO_REPL_ID
    repl_offset2: int = -1  # LSNs below it belong to repl_id2's history too (-1: none)

    def to_json(self) -> bytes:
        snap = self.snapshot
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "repl_id": self.repl_id,
            "repl_id2": self.repl_id2,
            "repl_offset2": self.repl_offset2,
            "snapshot": None if snap is None else {
                "file": snap.file, "lsn": snap.lsn, "size": snap.size,
                "created_ms": snap.created_ms, **({} if snap.crc32 is None else
                                                  {"crc32": snap.crc32}),
                **({} if not snap.parts else {"parts": [
                    {"file": p.file, "size": p.size, "crc32": p.crc32} for p in snap.parts]})},
            "segments": [
                {"file": s.file, "segment": s.segment, "first_lsn": s.first_lsn}
                for s in self.segments
            ],
        }
        return encode_doc(doc)

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as err:
            raise ManifestError(f"{where}: not valid JSON ({err})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ManifestError(f"{where}: not a streamkeep manifest")
        checksum = doc.pop("checksum", None)
        if checksum is not None and checksum != _checksum(doc):
            raise ManifestError(f"{where}: damaged: its checksum does not match its contents "
                                f"(a changed byte); refusing to guess what it said")
        if doc.get("version") != VERSION:
            raise ManifestError(f"{where}: unsupported manifest version {doc.get('version')!r}")
        raw = doc.get("segments")
        if not isinstance(raw, list) or not raw:
            raise ManifestError(f"{where}: 'segments' must be a non-empty list")
        segments = [_segment_entry(item, where) for item in raw]
        for prev, cur in zip(segments, segments[1:], strict=False):
            if cur.segment <= prev.segment or cur.first_lsn < prev.first_lsn:
                raise ManifestError(f"{where}: segments out of order at {cur.file}")
        snapshot = _snapshot_entry(doc.get("snapshot"), where)
        covered = snapshot.lsn if snapshot is not None else 0
        if segments[0].first_lsn != covered + 1:
            start = f"snapshot covers up to LSN {covered}" if snapshot else "log starts at 1"
            raise ManifestError(f"{where}: the first segment starts at LSN "
                                f"{segments[0].first_lsn}, but the {start}")
        repl_id = doc.get("repl_id")
        if repl_id is None:
            repl_id = new_repl_id()  # written by an earlier build: name the history now
        elif not (isinstance(repl_id, str) and re.fullmatch(r"[0-9a-f]{40}", repl_id)):
            raise ManifestError(f"{where}: 'repl_id' must be 40 hex digits")
        repl_id2 = doc.get("repl_id2", NO_REPL_ID)
        repl_offset2 = doc.get("repl_offset2", -1)
        if not (isinstance(repl_id2, str) and re.fullmatch(r"[0-9a-f]{40}", repl_id2)
                and isinstance(repl_offset2, int)):
            raise ManifestError(f"{where}: 'repl_id2' must be 40 hex digits and "
                                f"'repl_offset2' an integer")
        return cls(segments, snapshot, repl_id, repl_id2, repl_offset2)


def encode_doc(doc: dict) -> bytes:
    """A manifest document as the file holds it, its `checksum` computed over the rest."""
    doc = {name: value for name, value in doc.items() if name != "checksum"}
    doc["checksum"] = _checksum(doc)
    return (json.dumps(doc, indent=1) + "\n").encode()


def _checksum(doc: dict) -> int:
    return zlib.crc32(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def _snapshot_entry(item: object, where: str) -> SnapshotEntry | None:
    if item is None:
        return None
    if not isinstance(item, dict):
        raise ManifestError(f"{where}: 'snapshot' must be an object or null")
    name, lsn, size, created = (item.get(k) for k in ("file", "lsn", "size", "created_ms"))
    if not (isinstance(name, str) and isinstance(lsn, int) and isinstance(size, int)
            and isinstance(created, int)):
        raise ManifestError(f"{where}: snapshot entry {item!r} lacks file/lsn/size/created_ms")
    if name != snapshot_file(lsn) or lsn < 1:
        raise ManifestError(f"{where}: inconsistent snapshot entry {item!r}")
    crc = item.get("crc32")
    if crc is not None and not _is_crc(crc):
        raise ManifestError(f"{where}: snapshot entry {item!r}: 'crc32' is not a CRC-32")
    parts = item.get("parts", [])
    if not isinstance(parts, list):
        raise ManifestError(f"{where}: snapshot entry {item!r}: 'parts' must be a list")
    return SnapshotEntry(name, lsn, size, created, crc,
                         tuple(_part_entry(part, name, where) for part in parts))


def _is_crc(value: object) -> bool:
    return isinstance(value, int) and 0 <= value < 1 << 32


def _part_entry(item: object, snapshot: str, where: str) -> PartEntry:
    if not isinstance(item, dict):
        raise ManifestError(f"{where}: part entries must be objects")
    name, size, crc = item.get("file"), item.get("size"), item.get("crc32")
    if not (isinstance(name, str) and is_snapshot_file(name) and not name.endswith(".tmp")
            and name != snapshot and isinstance(size, int) and _is_crc(crc)):
        raise ManifestError(f"{where}: inconsistent part entry {item!r}")
    assert isinstance(crc, int)
    return PartEntry(name, size, crc)


def _segment_entry(item: object, where: str) -> SegmentEntry:
    if not isinstance(item, dict):
        raise ManifestError(f"{where}: segment entries must be objects")
    name, number, first = item.get("file"), item.get("segment"), item.get("first_lsn")
    if not (isinstance(name, str) and isinstance(number, int) and isinstance(first, int)):
        raise ManifestError(f"{where}: segment entry {item!r} lacks file/segment/first_lsn")
    if name != segment_file(number) or first < 1:
        raise ManifestError(f"{where}: inconsistent segment entry {item!r}")
    return SegmentEntry(name, number, first)


def load(fs: FileSystem, directory: str) -> Manifest:
    path = os.path.join(directory, MANIFEST)
    if not fs.exists(path):
        raise ManifestError(f"{path}: manifest is missing")
    manifest = Manifest.from_json(fs.read_file(path), path)
    named = [entry.file for entry in manifest.segments]
    if manifest.snapshot is not None:
        named += manifest.snapshot.files
    for name in named:
        if not fs.exists(os.path.join(directory, name)):
            raise ManifestError(f"{path}: names {name}, which does not exist")
    return manifest


class ManifestUnchanged(OSError, StorageError):
    """`store` failed before its rename: the manifest in place is still the previous one, so
    the caller may carry on with it (e.g. retry after EMFILE) instead of refusing writes."""


def store(fs: FileSystem, directory: str, manifest: Manifest) -> None:
    """Replace the manifest atomically and durably. An OSError before the rename is raised as
    ManifestUnchanged (same errno)."""
    tmp = os.path.join(directory, MANIFEST_TMP)
    try:
        fd = fs.open_write_new(tmp)
        try:
            fs.write(fd, manifest.to_json())
            fs.fdatasync(fd)
        finally:
            fs.close(fd)
    except ManifestUnchanged:
        raise
    except OSError as err:
        raise ManifestUnchanged(err.errno, err.strerror, tmp) from err
    fs.rename(tmp, os.path.join(directory, MANIFEST))
    fs.fsync_dir(directory)
