"""Snapshot helpers: `fingerprint(path)` hashes everything the read API
(streamkeep.snapshot.reader.Snapshot) returns for a snapshot file, so two readers (or a reader in
a child process, which imports it from here) can be compared."""

from __future__ import annotations

import hashlib

from streamkeep.snapshot.reader import Snapshot


def fingerprint(path: str) -> str:
    """Everything the read API returns for a snapshot, hashed."""
    h = hashlib.sha256()
    with Snapshot(path) as snap:
        h.update(repr(snap.meta).encode())
        for info in snap.streams():
            h.update(repr(info).encode())
            ranges = snap.split(info.db, info.key, 3)
            h.update(repr(ranges).encode())
            for lo, hi in ranges:
                for entry in snap.entries(info.db, info.key, lo, hi):
                    h.update(repr(entry).encode())
            for g in snap.groups(info.db, info.key):
                h.update(repr(g).encode())
                h.update(repr(snap.consumers(info.db, info.key, g.name)).encode())
                h.update(repr(list(snap.pending(info.db, info.key, g.name))).encode())
    return h.hexdigest()
