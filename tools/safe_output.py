"""Where a command may write its output, and writing it there whole or not at all.

Owns the rules every command that writes an output follows (`export-rdb --out`, `export --out`,
`restore --out`, `import --out`, `crashbench --json`):

- never inside a streamkeep data directory (the path itself or an ancestor holds a
  `manifest.json` of format streamkeep-manifest, or a `LOCK` or `manifest.json` beside
  `segment-*.aof` files), whichever way the path reaches it (a symlink too), and never onto,
  into or around the source the command reads: a data directory is changed only by the
  commands whose job that is (serve, aof fix), and `--force` never changes that;
- an existing file is never overwritten, nor a non-empty directory written into, unless the
  command was given `--force` (commands that create a new directory have no `--force`: their
  output must not exist, or be an empty directory);
- the output is built under a temporary name beside the final one (`.<name>.tmp-<pid>-<token>`,
  tools.temporaries: its maker's pid, and a lock its maker holds) and renamed into place once
  complete and synced (a file: fsync, rename, fsync the directory; a directory: every file and
  directory in it synced, then renamed), so that an error, Ctrl-C, SIGTERM or SIGHUP leaves
  nothing half-written under the user's name: the temporary is removed on the way out, and
  what a killed run (SIGKILL) left beside an output is swept by the next one made there.

Refusals are `OutputRefused`, one line naming the path; the commands exit with EXIT_REFUSED.
Must not touch: the contents of any data directory (only names and the manifest's format are
read here), the formats the commands write.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from streamkeep.aof.manifest import FORMAT, LOCK_FILE, MANIFEST
from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools import temporaries

EXIT_REFUSED = 3  # the commands' "usage or I/O error" status
_FORMAT_BYTES = f'"{FORMAT}"'.encode()
_MANIFEST_HEAD = 1 << 16  # a streamkeep manifest names its format first; more is never read
_SEGMENTS = "segment-*.aof"


class OutputRefused(StreamkeepError):
    """The output path is not one this command may write (the message names it)."""


# --- data directories --------------------------------------------------------------------------


def is_data_directory(path: str) -> bool:
    """Whether `path` is a streamkeep data directory, by what it holds: a manifest.json of
    streamkeep's format, or a LOCK or a manifest.json (even a damaged one) beside AOF
    segments."""
    try:
        names = os.listdir(path)
    except OSError:  # not a directory, or not one we can list: holds nothing we would harm
        return False
    if MANIFEST in names and _is_streamkeep_manifest(os.path.join(path, MANIFEST)):
        return True
    return (LOCK_FILE in names or MANIFEST in names) and any(
        fnmatch.fnmatchcase(name, _SEGMENTS) for name in names)


def _is_streamkeep_manifest(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return _FORMAT_BYTES in f.read(_MANIFEST_HEAD)
    except OSError:
        return False


def data_directory_of(path: str) -> str | None:
    """The data directory `path` is, or is inside (the nearest one), whether or not `path`
    exists; both its own ancestors and those of what it resolves to (symlinks) count."""
    seen: set[str] = set()
    for start in (os.path.abspath(path), os.path.realpath(path)):
        current = start
        while current not in seen:
            seen.add(current)
            if is_data_directory(current):
                return current
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
    return None


# --- where an output may go --------------------------------------------------------------------


def _within(path: str, other: str) -> bool:
    """Whether `path` is `other` or inside it (both absolute and resolved)."""
    return path == other or path.startswith(other.rstrip(os.sep) + os.sep)


def check_output(path: str, *, directory: bool, force: bool | None,
                 sources: Iterable[str] = ()) -> None:
    """Refuse (OutputRefused) an output `path` this command may not write.

    `directory`: the output is a directory (else a file). `force`: the command's --force
    (None: the command has none, its output must be new or an empty directory). `sources`:
    what the command reads (the output may be none of them, nor inside or around one)."""
    home = data_directory_of(path)
    if home is not None:
        if os.path.realpath(home) == os.path.realpath(path):
            raise OutputRefused(f"{path} is a streamkeep data directory: write the output "
                                "elsewhere")
        raise OutputRefused(f"{path} is inside the streamkeep data directory {home}: write "
                            "the output elsewhere")
    real = os.path.realpath(path)
    for source in sources:
        src = os.path.realpath(source)
        if _within(real, src) or _within(src, real):
            where = "is" if real == src else "is inside" if _within(real, src) else "contains"
            raise OutputRefused(f"{path} {where} the source {source}: write the output "
                                "elsewhere")
    if not os.path.lexists(path):
        if not directory and not os.path.isdir(os.path.dirname(real) or "."):
            raise OutputRefused(f"{path}: its directory {os.path.dirname(real)} does not exist")
        ancestor = os.path.dirname(real)
        while not os.path.lexists(ancestor):
            ancestor = os.path.dirname(ancestor)
        if not os.path.isdir(ancestor):
            raise OutputRefused(f"{path}: {ancestor} is not a directory")
        return
    if not os.path.exists(path):
        raise OutputRefused(f"{path} is a symlink to nothing ({os.readlink(path)}): remove it "
                            "or write the output elsewhere")
    if directory and not os.path.isdir(path):
        raise OutputRefused(f"{path} exists and is not a directory (the output is one)")
    if not directory and os.path.isdir(path):
        raise OutputRefused(f"{path} is a directory (the output is a file)")
    if not os.path.isdir(path) and not os.path.isfile(path):
        raise OutputRefused(f"{path} exists and is not a regular file")
    if directory and not _listdir(path):
        return  # an empty directory: nothing there to lose
    if force is None:
        raise OutputRefused(f"{path} exists and is not an empty directory")
    if not force:
        raise OutputRefused(f"{path} exists (--force overwrites it)")


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError as err:
        raise OutputRefused(f"{path}: cannot list it ({err.strerror})") from None


# --- writing it whole --------------------------------------------------------------------------


def _temp_beside(target: str, what: str) -> str:
    """A fresh temporary's path beside `target`, once what killed runs left there is swept."""
    directory, name = os.path.split(target)
    temporaries.sweep(directory)
    return os.path.join(directory, temporaries.owned_name(f".{name}.{what}"))


@contextlib.contextmanager
def _beside(path: str) -> Iterator[None]:
    """Making a temporary beside the output `path` failed: say so of `path`, the user's name,
    not of the temporary's."""
    try:
        yield
    except OSError as err:
        raise OutputRefused(f"{path}: cannot write there ({err.strerror or err})") from None


def fsync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_tree(path: str) -> None:
    """Every file and directory under `path` (itself included) made durable."""
    for root, dirs, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                _fsync_file(full)
        for name in dirs:
            full = os.path.join(root, name)
            if not os.path.islink(full):
                fsync_directory(full)
    fsync_directory(path)


@contextlib.contextmanager
def staged_file(path: str, *, force: bool) -> Iterator[BinaryIO]:
    """A file object to write `path`'s bytes to: a temporary beside it, renamed onto `path`
    (through a symlink: onto what it names) once the block ends without error, then synced.
    Without `force` an existing file is never replaced, even one made meanwhile."""
    target = os.path.realpath(path)
    tmp = _temp_beside(target, "tmp")
    with _beside(path):
        f = temporaries.open_file(tmp)
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        _publish_file(tmp, target, path, force)
    finally:
        temporaries.remove(tmp)  # (published by a link or a rename: the name alone, if any)
    fsync_directory(os.path.dirname(target))


def _publish_file(tmp: str, target: str, path: str, force: bool) -> None:
    if force:
        os.replace(tmp, target)
        return
    try:
        os.link(tmp, target)  # fails if `target` exists: never replaces one made meanwhile
    except FileExistsError:
        raise OutputRefused(f"{path} exists (--force overwrites it)") from None
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(target):  # a file system without hard links: check, then rename
            raise OutputRefused(f"{path} exists (--force overwrites it)") from None
        os.replace(tmp, target)


def write_file(path: str, pieces: Iterable[bytes], *, force: bool) -> int:
    """`pieces` written as `path` (see staged_file); returns the bytes written."""
    size = 0
    with staged_file(path, force=force) as f:
        for piece in pieces:
            f.write(piece)
            size += len(piece)
    return size


@contextlib.contextmanager
def staged_directory(path: str, *, merge: bool = False) -> Iterator[str]:
    """A temporary directory beside `path` to build the output in; once the block ends
    without error, everything in it is synced and it becomes `path`: renamed into place where
    `path` does not exist or is an empty directory; with `merge` (a command's --force) and a
    non-empty `path`, each entry replaces its namesake in `path` whole, the others are left.
    The temporary is removed on the way out, whatever happens."""
    target = os.path.realpath(path)
    parent = os.path.dirname(target)
    with _beside(path):
        os.makedirs(parent, exist_ok=True)
        stage = temporaries.make_directory(_temp_beside(target, "tmp"))
    try:
        yield stage
        sync_tree(stage)
        _publish_whole(stage, target, path, merge)
    finally:
        temporaries.remove(stage)  # (renamed into place: nothing there any more)


def _publish_whole(stage: str, target: str, path: str, merge: bool) -> None:
    """`_publish_directory`, then the parent's fsync, with signals held (exits.uninterrupted).
    An interrupt that came meanwhile takes a fresh output back out before it is raised
    (renamed back to the stage, removed with it; an empty directory it replaced made again),
    so that an interrupted command leaves nothing, however late its signal came; an output
    merged into an existing directory stays, whole."""
    from streamkeep.tools.exits import uninterrupted

    existed = os.path.isdir(target)
    fresh = not existed or not _listdir(target)
    try:
        with uninterrupted():
            _publish_directory(stage, target, path, merge)
            fsync_directory(os.path.dirname(target))
    except KeyboardInterrupt:  # (exits.Interrupted is one)
        if fresh and os.path.isdir(target) and not os.path.lexists(stage):
            os.rename(target, stage)
            if existed:
                os.mkdir(target)
        raise


def _publish_directory(stage: str, target: str, path: str, merge: bool) -> None:
    try:
        os.rename(stage, target)  # replaces an empty directory, never a non-empty one
        return
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        if not merge:  # filled since it was checked: someone else's now
            raise OutputRefused(f"{path} exists and is not empty: not replaced") from None
    for name in sorted(os.listdir(stage)):
        there = os.path.join(target, name)
        if os.path.lexists(there):  # moved aside into the stage: removed with it
            os.rename(there, os.path.join(stage, f".replaced-{name}"))
        os.rename(os.path.join(stage, name), there)
    fsync_directory(target)


@contextlib.contextmanager
def scratch_directory(near: str, what: str) -> Iterator[str]:
    """A private working directory beside `near` (the same file system: renames and hard
    links work), removed with everything in it on the way out."""
    target = os.path.realpath(near)
    parent = os.path.dirname(target)
    with _beside(near):
        os.makedirs(parent, exist_ok=True)
        scratch = temporaries.make_directory(_temp_beside(target, what))
    try:
        yield scratch
    finally:
        temporaries.remove(scratch)
