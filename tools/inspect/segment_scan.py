"""Checking one segment file's records in bounded memory, whole or in parts, for `aof verify`.

Owns how a segment's bytes reach the codec's checker: windows of the file read with `pread`
(WINDOW bytes, or one record when it is bigger), fed to `aof.codec.verify_scan`, so a clean
scan holds one window whatever the segment's size; the slow path's verdict on damage (which
may look far ahead for valid records) reads the rest of the file. Also the parts a big
segment is cut into for worker processes (`scan_part`, `join_parts`) and running the scans
(`scan_all`). Never writes, never takes a lock: a live server may be appending.
Must not touch: the record format (aof.codec decides what a valid record is), reporting
(tools.inspect.verify turns what is found here into problems).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from streamkeep.tools.inspect import UsageError

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

WINDOW = 4 << 20  # bytes read (and checked) at a time
SPLIT_BYTES = 16 << 20  # a segment this big is checked in parts by several workers
HEADER_BYTES = 32  # aof.codec.HEADER_SIZE (not imported here: this module loads cheaply)


class Scanned(NamedTuple):
    """One segment file's scan (picklable: a worker process returns it with --jobs)."""

    size: int
    missing: bool = False
    header: tuple[int, int] | None = None  # (segment, first_lsn)
    header_error: str | None = None
    end: int = 0
    records: int = 0
    first_time_ms: int | None = None
    last_time_ms: int | None = None
    damage: tuple[int, str, bool] | None = None  # (offset, reason, valid_after)


class _Found(NamedTuple):
    """What `_check_range` found: as codec.VerifyResult, offsets in the file."""

    end: int
    records: int
    first_time_ms: int | None
    last_time_ms: int | None
    damage: tuple[int, str, bool] | None  # (offset, reason, valid_after), as Scanned's


def _check_range(fd: int, size: int, pos: int, expected: int, stop: int | None) -> _Found:
    """verify_scan over the file's records from `pos` (LSN `expected`), a window at a time.
    With `stop`, the records starting before it (a part: a refused frame is damage "refused
    by the fast path"); without, to the end of the file, with the slow path's verdict."""
    from streamkeep.aof.codec import FRAME, FRAME_SIZE, MAX_PAYLOAD, verify_scan

    first_time = last_time = None
    count = 0
    need = WINDOW
    end = size if stop is None else min(size, stop)
    while pos < end:
        data = os.pread(fd, min(size - pos, need), pos)
        if not data:  # the file is shorter now (a live segment's allocated tail was cut off)
            break
        at_eof = pos + len(data) >= size
        if at_eof and stop is None:  # the last window: verify_scan's whole verdict
            found = verify_scan(data, 0, expected)
        else:
            found = verify_scan(data, 0, expected, min(len(data), end - pos))
        if found.count:
            first_time = found.first_time_ms if first_time is None else first_time
            last_time = found.last_time_ms
        count += found.count
        expected += found.count
        damage = found.damage
        if at_eof and stop is None:
            return _Found(pos + found.end, count, first_time, last_time,
                          _shifted(damage, pos))
        if damage is None or found.count:  # all good, or the window cut a record: read on
            pos += found.end
            need = WINDOW
        else:  # refused where the window starts: a record bigger than the window, or damage
            length = FRAME.unpack_from(data)[0] if len(data) >= FRAME_SIZE else 0
            if not at_eof and len(data) < FRAME_SIZE + length <= FRAME_SIZE + MAX_PAYLOAD:
                need = FRAME_SIZE + length
            elif stop is not None:  # a part refuses: the caller rescans the segment whole
                return _Found(pos, count, first_time, last_time, _shifted(damage, pos))
            else:  # damage: the slow path decides, with the rest of the file in hand
                need = size - pos
    return _Found(pos, count, first_time, last_time, None)


def _shifted(damage: Any, base: int) -> tuple[int, str, bool] | None:
    """A codec.Damage found in a window read at `base`, as Scanned holds it."""
    return None if damage is None else (base + damage.offset, damage.reason,
                                        damage.valid_after)


def scan_segment(file: str, deep: bool = False) -> Scanned:
    """Read and check one segment file: its header, then its records (CRC and LSN a window at
    a time, or, with `deep`, the whole file decoded as replay does). A file gone (a live
    compaction deleted it) is `missing`; one that cannot be read is a UsageError."""
    from streamkeep.aof.codec import HEADER_SIZE, FormatError, decode_header

    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return Scanned(0, missing=True)
    except OSError as err:
        raise UsageError(f"{file}: cannot read ({err.strerror})") from None
    try:
        size = os.fstat(fd).st_size
        try:
            header = decode_header(os.pread(fd, HEADER_SIZE, 0))
        except FormatError as err:
            return Scanned(size, header_error=str(err))
        first_lsn = header.first_lsn
        found = (_deep_scan(os.pread(fd, size, 0), first_lsn) if deep
                 else _check_range(fd, size, HEADER_SIZE, first_lsn, None))
    except OSError as err:  # (pread's errors do not say which file)
        raise UsageError(f"{file}: cannot read ({err.strerror})") from None
    finally:
        os.close(fd)
    return Scanned(size, False, (header.segment, first_lsn), None, found.end, found.records,
                   found.first_time_ms, found.last_time_ms, found.damage)


def _deep_scan(data: bytes, first_lsn: int) -> _Found:
    """What _check_range finds, from decoding every record as replay does (`scan_batches`)."""
    from streamkeep.aof.codec import HEADER_SIZE, ScanResult, scan_batches

    scan = ScanResult(end=HEADER_SIZE)
    first_time = last_time = None
    for batch in scan_batches(data, HEADER_SIZE, first_lsn, scan, 4096):
        if first_time is None:
            first_time = batch[0][1]
        last_time = batch[-1][1]
    return _Found(scan.end, scan.count, first_time, last_time, _shifted(scan.damage, 0))


def scan_all(files: list[str], deep: bool, jobs: int) -> Iterator[Scanned]:
    """scan_segment over files, in order; with jobs > 1 in that many worker processes, each
    reading its own files. A segment of SPLIT_BYTES or more is cut into `jobs` parts checked
    at once (`scan_part`), joined here."""
    if jobs <= 1:
        for file in files:
            yield scan_segment(file, deep)
        return
    import multiprocessing

    # fork when this process has no other thread (the CLI's usual case: workers start at once,
    # with the modules already imported); forkserver otherwise (a progress bar's refresh thread,
    # a caller's threads), which is safe with threads.
    import threading
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if threading.active_count() == 1 else "forkserver"
    # What the workers run, imported before they fork: each would import it again otherwise.
    import streamkeep.aof.codec  # noqa: F401
    from streamkeep.tools.temporaries import init_worker, shielded_starts

    context = multiprocessing.get_context(method)
    # Ctrl-C reaches the workers too (one process group): the main process reports it, and
    # gives up the segments not checked yet rather than waiting for them. The workers start
    # (on submit) shielded from it: one that came while a worker started would otherwise
    # interrupt its initializer, with a traceback.
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=init_worker)
    try:
        tasks: list[Future | list[Future]] = []
        with shielded_starts(forkserver=method == "forkserver"):
            for file in files:
                tasks.append(_submit(pool, file, deep, jobs))
        for file, task in zip(files, tasks, strict=True):
            if isinstance(task, list):
                joined = join_parts([part.result() for part in task])
                yield joined if joined is not None else scan_segment(file, deep)
            else:
                yield task.result()
    except BaseException:
        # Interrupted (or the reader stopped): the workers' segments are not wanted any more.
        # They ignore SIGINT, so they are stopped here instead of being waited for.
        # The pool's manager thread is then waited for: one still closing its wake-up pipe when
        # the interpreter exits races the interpreter's own wake-up of it ("Exception ignored
        # ... Bad file descriptor" on stderr). (shutdown(wait=False) would forget the thread.)
        workers = list((getattr(pool, "_processes", None) or {}).values())
        for worker in workers:
            worker.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown()


def _submit(pool: ProcessPoolExecutor, file: str, deep: bool,
            jobs: int) -> Future | list[Future]:
    """The task checking `file`: one future, or `jobs` (its parts) for a big segment."""
    size = _size(file)
    if deep or size < SPLIT_BYTES:
        return pool.submit(scan_segment, file, deep)
    bounds = [HEADER_BYTES + (size - HEADER_BYTES) * k // jobs for k in range(jobs)]
    stops: list[int | None] = [*bounds[1:], None]
    return [pool.submit(scan_part, file, start, stop, k == 0)
            for k, (start, stop) in enumerate(zip(bounds, stops, strict=True))]


def _size(file: str) -> int:
    try:
        return os.path.getsize(file)
    except OSError:
        return 0


class Part(NamedTuple):
    """One part of a segment checked by `scan_part`: where its first record starts and that
    record's LSN, then what it found (damage only in the last part, which runs to the end of
    the file with the slow path's verdict; `refused`: a bad frame before its stop)."""

    start: int
    first_lsn: int
    scanned: Scanned
    refused: bool


def scan_part(file: str, start: int, stop: int | None, first: bool) -> Part | None:
    """Check the records of `file` that start in [start, stop) (to the end when stop is
    None). The first part starts after the header; another finds its first record by the
    codec's resync (the first CRC-valid record in the window at `start`): the join checks that
    it is where the previous part ended, with the next LSN. None: the part cannot be checked
    alone (the caller checks the segment whole)."""
    from streamkeep.aof.codec import HEADER_SIZE, FormatError, decode_header, next_valid_record

    try:
        fd = os.open(file, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        header = decode_header(os.pread(fd, HEADER_SIZE, 0))
        if first:
            pos, lsn = HEADER_SIZE, header.first_lsn
        else:
            found = next_valid_record(os.pread(fd, WINDOW, start), -1, 0)
            if found is None:
                return None
            pos, lsn = start + found[0], found[1]
        result = _check_range(fd, size, pos, lsn, stop)
    except (OSError, FormatError):
        return None
    finally:
        os.close(fd)
    refused = stop is not None and result.damage is not None
    return Part(pos, lsn, Scanned(
        size, False, (header.segment, header.first_lsn), None, result.end, result.records,
        result.first_time_ms, result.last_time_ms, None if refused else result.damage),
        refused)


def join_parts(parts: list[Part | None]) -> Scanned | None:
    """One segment's Scanned from its parts, or None (the caller rescans it whole) if a part
    could not be checked, refused a frame, or does not start where the previous one ended with
    the next LSN."""
    if any(p is None or p.refused for p in parts):
        return None
    checked = [p for p in parts if p is not None]
    for prev, cur in zip(checked, checked[1:], strict=False):
        if cur.start != prev.scanned.end or cur.first_lsn != prev.first_lsn + prev.scanned.records:
            return None
    first, last = checked[0].scanned, checked[-1].scanned
    return first._replace(
        end=last.end, records=sum(p.scanned.records for p in checked),
        first_time_ms=next((p.scanned.first_time_ms for p in checked
                            if p.scanned.first_time_ms is not None), None),
        last_time_ms=next((p.scanned.last_time_ms for p in reversed(checked)
                           if p.scanned.last_time_ms is not None), None),
        damage=last.damage)
