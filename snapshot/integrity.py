"""Checking a snapshot file whole, and saying where it is damaged without reading it in process.

Owns what the loaders and tools do with the checksum a manifest recorded for a snapshot file
(`crc32`): `check_whole` compares the file's bytes with it before LMDB maps the file, and on a
mismatch finds the damage in a child process (`python -m streamkeep.snapshot.integrity FILE`:
the reader's per-value `check`), because a damaged LMDB page can crash the process that follows
it (a page number or a size that points past the file is a SIGBUS, not an exception). The error
then names the file and the first damaged table and key, or says that the damage is in LMDB's
own pages. A segmented snapshot's part files are checked the same way, each against its own
size and checksum in the manifest (`check_parts`). `open_checked` is the tools' way in: the
whole-file checks where the manifest beside the file recorded them, then the reader.
Must not touch: the snapshot format (snapshot.layout, snapshot.snapshot_reader), the manifest's schema.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

from streamkeep.snapshot.snapshot_reader import (
    Snapshot,
    SnapshotError,
    check_file,
    recorded_entry,
)

LOCATE_TIMEOUT = 300.0  # seconds a child may take to walk a damaged file


def check_whole(path: str, crc32: int | None,
                read_chunks: Callable[[], Iterator[bytes]] | None = None) -> None:
    """SnapshotError naming the file and, when the child finds one, the damaged table and key,
    unless the file's bytes (read by `read_chunks` if given) match `crc32` (None: nothing
    recorded, nothing to check)."""
    if crc32 is None:
        return
    try:
        check_file(path, crc32, read_chunks)
    except SnapshotError as err:
        raise SnapshotError(f"{err}; {locate(path)}") from None


def check_parts(directory: str, entry: Any, whole: bool = True) -> None:
    """SnapshotError unless each part file of the manifest's snapshot `entry`
    (aof.manifest.SnapshotEntry) in `directory` has the size the manifest recorded and, with
    `whole`, bytes that match its checksum."""
    for part in entry.parts:
        file = os.path.join(directory, part.file)
        try:
            size = os.stat(file).st_size
        except OSError as err:
            raise SnapshotError(f"{file}: a part of {entry.file}: {err.strerror}") from None
        if size != part.size:
            raise SnapshotError(f"{file}: {size} bytes, the manifest says {part.size} "
                                f"(truncated or replaced)")
        if whole:
            check_whole(file, part.crc32)


def open_checked(path: str) -> Snapshot:
    """`Snapshot(path)` once the whole file, and its part files, matched the checksums the
    manifest beside it recorded (if one names it)."""
    entry = recorded_entry(path)
    if entry is not None:
        check_whole(path, entry.crc32)
        check_parts(os.path.dirname(os.path.abspath(path)), entry)
    return Snapshot(path)


def locate(path: str) -> str:
    """Where the damage is, as found by the reader's `check` in a child process."""
    try:
        done = subprocess.run([sys.executable, "-m", "streamkeep.snapshot.integrity", path],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=LOCATE_TIMEOUT, env=child_env())
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"the damage could not be located ({err})"
    found = done.stdout.strip().removeprefix(f"{path}: ")
    if done.returncode < 0:
        return ("the damage is in LMDB's own pages (reading them crashed a child process with "
                f"signal {-done.returncode})")
    if found:
        return f"first damaged value: {found}" if found.startswith("table ") else found
    return "no value is damaged: the damage is in LMDB's own pages or in unused space"


def child_env() -> dict[str, str]:
    """The environment of a child process that runs one of streamkeep's modules (`python -m
    streamkeep.snapshot...`): it imports the package from where this process found it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(
        sys.modules["streamkeep"].__file__ or "")))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def main(argv: list[str]) -> int:
    """The child: print the first problem `check` finds (nothing if none)."""
    try:
        with Snapshot(argv[1]) as snap:
            problems = snap.check(limit=1)
    except SnapshotError as err:
        problems = [str(err)]
    print(problems[0] if problems else "", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
