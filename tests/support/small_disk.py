"""Real small file systems for the disk-full and failing-device tests. Root only (the suite runs
as root here and in CI; `make test` installs what they need); `available()` says whether this
machine can.

    with SmallDisk(tmp_path / "mnt", 24 << 20) as disk:     # a 24 MiB tmpfs
        disk.ballast(12 << 20)                             # 12 MiB of it taken
        ...                                                # the disk fills up
        disk.free_ballast()                                # the operator frees space

    with FailingDevice(tmp_path / "mnt", backing=24 << 20, size=96 << 20) as dev:
        ...   # ext4 on a loop device whose backing store (a 24 MiB tmpfs) is smaller than the
              # device: once the store is full, the device's writes fail (ENOSPC, then EIO), as
              # a thin-provisioned or failing disk's do
        dev.repair()   # a bigger store, the file system checked and mounted again

Everything mounted is unmounted at the end, even after a failure (lazily, if still busy).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import TracebackType


def available() -> str | None:
    """None if small file systems can be mounted here, else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs or a loop device needs root"
    for tool in ("mount", "umount", "losetup", "mkfs.ext4", "e2fsck"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs mount and e2fsprogs)"
    return None


def _sh(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def _umount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


class SmallDisk:
    """A tmpfs of `size` bytes mounted at `path` (made if missing)."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        _sh("mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path))
        self.ballast_file = path / "ballast"

    def ballast(self, size: int) -> None:
        """Take `size` bytes of the disk with a file nothing else uses."""
        with open(self.ballast_file, "wb") as out:
            for _ in range(size >> 20):
                out.write(b"\xa5" * (1 << 20))
            out.write(b"\xa5" * (size & ((1 << 20) - 1)))

    def free_ballast(self) -> None:
        self.ballast_file.unlink()

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def __enter__(self) -> SmallDisk:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _umount(self.path)


class FailingDevice:
    """ext4 on a loop device at `path`, backed by a `size`-byte sparse image on a tmpfs of only
    `backing` bytes: writes to the device fail once the tmpfs is full."""

    def __init__(self, path: Path, backing: int, size: int) -> None:
        self.path = path
        self.store = path.with_name(path.name + "-store")
        self.store.mkdir(parents=True, exist_ok=True)
        path.mkdir(parents=True, exist_ok=True)
        self.loop = ""
        self.mounted = False
        _sh("mount", "-t", "tmpfs", "-o", f"size={backing},mode=0700", "tmpfs", str(self.store))
        try:
            image = self.store / "image"
            with open(image, "wb") as out:
                out.truncate(size)
            _sh("mkfs.ext4", "-q", "-F", "-E", "nodiscard,lazy_itable_init=0", str(image))
            self.loop = _sh("losetup", "-f", "--show", str(image)).strip()
            self.mount()
        except BaseException:
            self.close()
            raise

    def mount(self) -> None:
        _sh("mount", "-o", "errors=remount-ro", self.loop, str(self.path))
        self.mounted = True

    def repair(self, backing: int) -> None:
        """The store grows to `backing` bytes (the device works again), then the file system
        is unmounted, checked and repaired (its journal may have been aborted), and mounted."""
        _sh("mount", "-o", f"remount,size={backing}", str(self.store))
        _umount(self.path)
        self.mounted = False
        # 0: clean, 1: errors corrected (what a failed device leaves); more is a real failure.
        done = subprocess.run(["e2fsck", "-fy", self.loop], capture_output=True, text=True,
                              timeout=120)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"e2fsck {self.loop}: exit {done.returncode}: {done.stdout}")
        self.mount()

    def close(self) -> None:
        if self.mounted:
            _umount(self.path)
            self.mounted = False
        if self.loop:
            subprocess.run(["losetup", "-d", self.loop], capture_output=True)
            self.loop = ""
        _umount(self.store)

    def __enter__(self) -> FailingDevice:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
