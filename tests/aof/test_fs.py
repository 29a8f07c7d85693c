"""aof.fs: `RealFS`, the operating system's files behind the file-layer seam, on real files in a
temporary directory: appends, whole writes, reads, sizes, truncation, renames, listings, the
exclusive lock naming its holder, read descriptors that outlive an unlink, the mapped
ranges of a file, and a file's tail written through a mapping (`MappedTail`)."""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import tempfile
from pathlib import Path

import pytest

from streamkeep.aof import fs as fs_mod
from streamkeep.aof.fs import (
    MAP_WINDOW,
    MAPPABLE_FILE_SYSTEMS,
    UNSUPPORTED_ERRNOS,
    FileSystem,
    LockedError,
    MappedTail,
    RealFS,
    buffer_address,
    file_identity,
    file_system_type,
    map_start,
    mapped_ranges,
    open_identified,
    resident_file_bytes,
)
from streamkeep.engine.wire.errors import StorageError

fs = RealFS()


def write_new(path: Path, data: bytes) -> None:
    fd = fs.open_write_new(str(path))
    try:
        fs.write(fd, data)
    finally:
        fs.close(fd)


def test_real_fs_has_every_operation_of_the_seam() -> None:
    wanted = {name for name in vars(FileSystem) if not name.startswith("_")}
    assert wanted and wanted <= {name for name in vars(RealFS) if not name.startswith("_")}


def test_open_append_creates_then_appends(tmp_path: Path) -> None:
    path = tmp_path / "log"
    for chunk in (b"one,", b"two,", b"three"):
        fd = fs.open_append(str(path))
        fs.write(fd, chunk)
        fs.fdatasync(fd)
        fs.close(fd)
    assert path.read_bytes() == b"one,two,three"


def test_open_append_without_create_needs_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fs.open_append(str(tmp_path / "missing"), create=False)
    (tmp_path / "there").write_bytes(b"kept")
    fd = fs.open_append(str(tmp_path / "there"), create=False)
    fs.write(fd, b"+more")
    fs.close(fd)
    assert (tmp_path / "there").read_bytes() == b"kept+more"


def test_open_write_new_truncates(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"x" * 100)
    write_new(path, b"short")
    assert path.read_bytes() == b"short"


def test_write_writes_every_byte_when_the_os_writes_less(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def short_write(fd: int, data: bytes) -> int:
        calls.append(len(data))
        return real_write(fd, bytes(data[:7]))

    data = bytes(range(256)) * 4
    fd = fs.open_write_new(str(tmp_path / "file"))
    monkeypatch.setattr(fs_mod.os, "write", short_write)
    try:
        fs.write(fd, data)
    finally:
        monkeypatch.undo()
        fs.close(fd)
    assert (tmp_path / "file").read_bytes() == data
    assert len(calls) == -(-len(data) // 7)


def test_a_closed_descriptor_is_an_os_error(tmp_path: Path) -> None:
    fd = fs.open_write_new(str(tmp_path / "file"))
    fs.close(fd)
    with pytest.raises(OSError) as caught:
        fs.fdatasync(fd)
    assert caught.value.errno == errno.EBADF


def test_read_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    data = os.urandom(300_000)
    path.write_bytes(data)
    assert fs.read_file(str(path)) == data
    (tmp_path / "empty").write_bytes(b"")
    assert fs.read_file(str(tmp_path / "empty")) == b""
    with pytest.raises(FileNotFoundError):
        fs.read_file(str(tmp_path / "missing"))


def test_read_file_takes_one_buffer_of_the_files_size(tmp_path: Path) -> None:
    """A segment read whole is one allocation (the freed pieces of a chunked read stayed in the
    process's heap after a replay): the peak of traced memory is the file's size, not twice."""
    import tracemalloc

    path = tmp_path / "segment"
    data = os.urandom(40 << 20)
    path.write_bytes(data)
    tracemalloc.start()
    try:
        got = fs.read_file(str(path))
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == data
    assert peak < len(data) + (1 << 20)


def test_read_file_reads_what_a_file_grew_by(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "growing"
    path.write_bytes(b"a" * 1000)
    real_fstat = os.fstat

    class Older:  # the size the file had when it was measured: it grew since
        def __init__(self, fd: int) -> None:
            self.st_size = real_fstat(fd).st_size - 400

    monkeypatch.setattr(os, "fstat", Older)
    assert fs.read_file(str(path)) == b"a" * 1000


def test_reading_a_directory_names_it(tmp_path: Path) -> None:
    with pytest.raises(OSError) as caught:
        fs.read_file(str(tmp_path))
    assert caught.value.errno == errno.EISDIR
    assert caught.value.filename == str(tmp_path)


def test_sizes_and_truncation(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"0123456789")
    assert fs.size(str(path)) == 10
    fs.truncate(str(path), 4)
    assert path.read_bytes() == b"0123"
    fd = fs.open_append(str(path), create=False)
    try:
        assert fs.fsize(fd) == 4
        fs.ftruncate(fd, 2)
        assert fs.fsize(fd) == 2
        fs.write(fd, b"!")  # appends at the new end
    finally:
        fs.close(fd)
    assert path.read_bytes() == b"01!"


def test_rename_replaces_and_the_directory_syncs(tmp_path: Path) -> None:
    (tmp_path / "new").write_bytes(b"new")
    (tmp_path / "old").write_bytes(b"old")
    fs.rename(str(tmp_path / "new"), str(tmp_path / "old"))
    fs.fsync_dir(str(tmp_path))
    assert (tmp_path / "old").read_bytes() == b"new"
    assert not fs.exists(str(tmp_path / "new"))
    with pytest.raises(NotADirectoryError):
        fs.fsync_dir(str(tmp_path / "old"))


def test_listing_existence_unlink_and_makedirs(tmp_path: Path) -> None:
    for name in ("b", "c", "a"):
        (tmp_path / name).write_bytes(b"")
    assert fs.listdir(str(tmp_path)) == ["a", "b", "c"]
    assert fs.exists(str(tmp_path / "a")) and not fs.exists(str(tmp_path / "z"))
    fs.unlink(str(tmp_path / "b"))
    assert fs.listdir(str(tmp_path)) == ["a", "c"]
    with pytest.raises(FileNotFoundError):
        fs.unlink(str(tmp_path / "b"))
    nested = tmp_path / "x" / "y"
    fs.makedirs(str(nested))
    fs.makedirs(str(nested))  # already there: fine
    assert nested.is_dir()


def test_the_lock_is_exclusive_and_names_its_holder(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    fd = fs.lock(str(path))
    assert path.read_text() == f"{os.getpid()}\n"
    with pytest.raises(LockedError) as caught:
        fs.lock(str(path))  # another open file: flock refuses it even in this process
    assert str(caught.value) == \
        f"data directory is in use: {path} is locked by process {os.getpid()}"
    assert isinstance(caught.value, StorageError)
    fs.unlock(fd)
    again = fs.lock(str(path))
    fs.unlock(again)


def test_a_lock_file_left_by_a_dead_holder_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "LOCK"
    path.write_text("999999999\n")  # not locked: only the flock counts
    fd = fs.lock(str(path))
    try:
        assert path.read_text() == f"{os.getpid()}\n"
    finally:
        fs.unlock(fd)


def test_a_read_descriptor_outlives_an_unlink(tmp_path: Path) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"abcdefghij")
    fd = fs.open_read(str(path))
    try:
        fs.unlink(str(path))
        assert fs.pread(fd, 4, 3) == b"defg"
        assert fs.pread(fd, 100, 8) == b"ij"
        assert fs.pread(fd, 4, 10) == b""
        assert fs.fsize(fd) == 10
    finally:
        fs.close(fd)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux /proc only")
def test_mapped_ranges_find_where_the_file_is_mapped(tmp_path: Path) -> None:
    path = tmp_path / "mapped"
    path.write_bytes(b"\0" * mmap.PAGESIZE * 4)
    assert mapped_ranges(str(path)) == []
    with open(path, "r+b") as f:
        mapping = mmap.mmap(f.fileno(), 0)
    first_byte = ctypes.c_char.from_buffer(mapping)
    address = ctypes.addressof(first_byte)
    del first_byte  # (an exported buffer would keep the mapping from closing)
    identity = file_identity(str(path))
    try:
        ranges = mapped_ranges(str(path))
        path.unlink()  # by its identity, an unlinked file's map is found still
        assert mapped_ranges(str(path), identity) == ranges
    finally:
        mapping.close()
    assert any(low <= address < high for low, high in ranges), (hex(address), ranges)
    assert sum(high - low for low, high in ranges) >= 4 * mmap.PAGESIZE
    assert mapped_ranges(str(path), identity) == []


def test_a_view_into_a_map_tells_its_offset_in_the_file(tmp_path: Path) -> None:
    """buffer_address and map_start: where a view of a file's map is in the file, without
    reading it (how a cold table run's chunk is found for a pread); open_identified opens that
    same file only."""
    path = tmp_path / "mapped"
    path.write_bytes(bytes(range(256)) * (mmap.PAGESIZE // 16))
    identity = file_identity(str(path))
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        view = memoryview(mapping)[5000:5100]
        offset = buffer_address(view) - map_start(identity)
        del view
        assert offset == 5000
        fd = open_identified(str(path), identity)
        assert fd is not None
        try:
            assert os.pread(fd, 100, offset) == mapping[5000:5100]
        finally:
            os.close(fd)
    finally:
        mapping.close()
    assert buffer_address(memoryview(b"")) != 0
    path.rename(tmp_path / "moved")
    path.write_bytes(b"another file")
    assert open_identified(str(path), identity) is None  # (not the file the identity names)
    assert open_identified(str(tmp_path / "missing"), identity) is None
    assert map_start(identity) == -1  # (no longer mapped)
    assert resident_file_bytes() > 0  # (this interpreter's own code is file-backed)


def test_reserve_allocates_past_the_end_without_growing_the_file(tmp_path: Path) -> None:
    path = tmp_path / "log"
    fd = fs.open_append(str(path))
    try:
        fs.write(fd, b"x" * 100)
        before = os.fstat(fd).st_blocks
        try:
            fs.reserve(fd, 100, 1 << 20)
        except OSError as err:  # a file system that cannot: the journal then allocates nothing
            assert err.errno in UNSUPPORTED_ERRNOS
            return
        assert os.fstat(fd).st_size == 100  # a reader sees nothing
        assert os.fstat(fd).st_blocks * 512 >= before * 512 + (1 << 20) - 4096
        fs.write(fd, b"y" * 10)  # appends land at the end, as before
        assert path.read_bytes() == b"x" * 100 + b"y" * 10
        fs.ftruncate(fd, 110)  # truncating to the size gives the space back
        assert os.fstat(fd).st_blocks <= before + 8
    finally:
        fs.close(fd)


# --- MappedTail: a file's tail written through a mapping --------------------------------------------------------------------------------

@pytest.mark.skipif(file_system_type(tempfile.gettempdir()) not in MAPPABLE_FILE_SYSTEMS,
                    reason="a file system that does not take mapped writes")
def test_a_mapped_tail_writes_across_windows_and_cuts_back(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"head")
    tail = MappedTail(str(path), 4)
    tail.extend(4, 3 * MAP_WINDOW)
    assert path.stat().st_size == 4 + 3 * MAP_WINDOW  # allocated: the file runs on in zeros
    chunks, offset = [], 4
    reader = os.open(path, os.O_RDONLY)
    try:
        for k in range(700):  # ~2.6 windows of records of 1,000+ bytes
            data = bytes([k % 251 + 1]) * (1000 + k % 37)
            assert tail.write(offset, data)
            # In the page cache at once, as a write(2)'s bytes are: no fsync, no unmap.
            assert os.pread(reader, len(data), offset) == data
            chunks.append(data)
            offset += len(data)
        assert not tail.write(4 + 3 * MAP_WINDOW - 10, b"x" * 11), "past the allocated end"
    finally:
        os.close(reader)
    tail.close(offset)
    assert path.read_bytes() == b"head" + b"".join(chunks)


def test_a_mapped_tail_cannot_extend_where_there_is_no_room(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"")
    tail = MappedTail(str(path), 0)
    try:
        with pytest.raises(OSError):
            tail.extend(0, 1 << 62)  # EFBIG or ENOSPC: an error, never a mapping of nothing
    finally:
        tail.close(0)
    assert path.stat().st_size == 0




def test_the_file_system_type_of_a_path() -> None:
    assert file_system_type("/proc/self") == "proc"
    assert file_system_type("/") is not None
