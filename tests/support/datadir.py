"""A data directory as the compaction tests look at it: `listing`, the manifest (`manifest_doc`,
`named_files`, and `data_files`: every file but LOCK, the manifest and the watermark), `fingerprint` (every
file's size and mtime, and the manifest's bytes: "nothing changed"), `assert_tidy` (LOCK, the
manifest and exactly the files it names), `open_dir` (automatic compaction off, small segments,
fsync off, a fake clock) and `reopen_digest` (digest and LSN after a reopen).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from streamkeep import Engine
from streamkeep.aof.manifest import MANIFEST
from streamkeep.aof.watermark import WATERMARK
from tests.support.aof_workload import FakeClock


def listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


def manifest_doc(d: Path) -> dict:
    return json.loads((d / MANIFEST).read_text())


def named_files(doc: dict) -> set[str]:
    names = {s["file"] for s in doc["segments"]}
    if doc["snapshot"] is not None:
        names.add(doc["snapshot"]["file"])
        names.update(part["file"] for part in doc["snapshot"].get("parts", []))
    return names


def data_files(d: Path) -> set[str]:
    return set(listing(d)) - {"LOCK", MANIFEST, WATERMARK}


def fingerprint(d: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Every file's size and mtime (and the manifest's bytes): "nothing changed"."""
    out = {}
    for name in listing(d):
        st = (d / name).stat()
        out[name] = (st.st_size, st.st_mtime_ns,
                     (d / name).read_bytes() if name == MANIFEST else None)
    return out


def assert_tidy(d: Path) -> dict:
    """The directory holds LOCK, the manifest, the watermark and exactly the files the manifest
    names."""
    doc = manifest_doc(d)
    assert data_files(d) == named_files(doc), (listing(d), doc)
    assert not [n for n in listing(d) if n.endswith(".tmp")]
    return doc


def open_dir(d: Path, clock: FakeClock | None = None, **options) -> Engine:
    options.setdefault("auto_aof_rewrite_percentage", 0)
    options.setdefault("aof_segment_max_bytes", 2048)
    options.setdefault("appendfsync", "no")
    return Engine.open(str(d), clock=clock or FakeClock(), **options)


def reopen_digest(d: Path) -> tuple[str, int]:
    with Engine.open(str(d), auto_aof_rewrite_percentage=0) as engine:
        return engine.digest(), engine.journal.lsn
