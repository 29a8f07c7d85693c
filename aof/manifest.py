"""The manifest: which files make up a data directory's state, replaced atomically.

Owns `manifest.json` (its schema and its validation) and the atomic replace: write a temp file,
fdatasync it, rename it over the old one, fsync the directory. A missing or malformed manifest,
or one naming a file that is not there, is refused with a clear message: streamkeep never starts
empty over existing data. The snapshot issue adds the snapshot entry. Must not touch: segment
contents, the engine.

    {"format": "streamkeep-manifest", "version": 1,
     "segments": [{"file": "segment-000001.aof", "segment": 1, "first_lsn": 1}, ...],
     "snapshot": null}
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from aof.fs import FileSystem

MANIFEST = "manifest.json"
MANIFEST_TMP = "manifest.json.tmp"
FORMAT = "streamkeep-manifest"
VERSION = 1
_SEGMENT_FILE = re.compile(r"segment-(\d{6,})\.aof")


class ManifestError(Exception):
    """The data directory's manifest is missing, malformed or names missing files."""


def segment_file(number: int) -> str:
    return f"segment-{number:06d}.aof"


def is_segment_file(name: str) -> bool:
    return _SEGMENT_FILE.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class SegmentEntry:
    file: str
    segment: int
    first_lsn: int


@dataclass(slots=True)
class Manifest:
    segments: list[SegmentEntry] = field(default_factory=list)
    snapshot: dict | None = None

    def to_json(self) -> bytes:
        doc = {
            "format": FORMAT,
            "version": VERSION,
            "segments": [
                {"file": s.file, "segment": s.segment, "first_lsn": s.first_lsn}
                for s in self.segments
            ],
            "snapshot": self.snapshot,
        }
        return (json.dumps(doc, indent=1) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Manifest:
        try:
            doc = json.loads(data)
        except (ValueError, UnicodeDecodeError) as err:
            raise ManifestError(f"{where}: not valid JSON ({err})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ManifestError(f"{where}: not a streamkeep manifest")
        if doc.get("version") != VERSION:
            raise ManifestError(f"{where}: unsupported manifest version {doc.get('version')!r}")
        raw = doc.get("segments")
        if not isinstance(raw, list) or not raw:
            raise ManifestError(f"{where}: 'segments' must be a non-empty list")
        segments = [_segment_entry(item, where) for item in raw]
        for prev, cur in zip(segments, segments[1:], strict=False):
            if cur.segment <= prev.segment or cur.first_lsn < prev.first_lsn:
                raise ManifestError(f"{where}: segments out of order at {cur.file}")
        snapshot = doc.get("snapshot")
        if snapshot is not None and not isinstance(snapshot, dict):
            raise ManifestError(f"{where}: 'snapshot' must be an object or null")
        return cls(segments, snapshot)


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
    for entry in manifest.segments:
        if not fs.exists(os.path.join(directory, entry.file)):
            raise ManifestError(f"{path}: names {entry.file}, which does not exist")
    return manifest


def store(fs: FileSystem, directory: str, manifest: Manifest) -> None:
    """Replace the manifest atomically and durably."""
    tmp = os.path.join(directory, MANIFEST_TMP)
    fd = fs.open_write_new(tmp)
    try:
        fs.write(fd, manifest.to_json())
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, os.path.join(directory, MANIFEST))
    fs.fsync_dir(directory)
