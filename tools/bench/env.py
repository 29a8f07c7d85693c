"""What the benchmarks of one run share: :class:`BenchEnv`.

Owns the run's N and quick flag, the other checkouts given to compare with, the temp dir under which data directories are made (and
removed), the redis-py section's reference redis-server (started on first use), the resources
benchmarks share through :meth:`BenchEnv.shared` (servers, tools; stopped at close), and the
header lines about them.
Must not touch: a section's own parameters (each section module derives them from ``n`` and
``quick``) or what a benchmark measures.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import RedisServer
from streamkeep.tools.bench.workload import Skip
from streamkeep.tools.servers import HOST


def _filesystem(path: str) -> str:
    """``<type> on <device>`` of the mount holding path (Linux /proc/mounts), else ``?``."""
    best, found = "", "?"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                device, mount, fstype = line.split()[:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, found = mount, f"{fstype} on {device}"
    except OSError:
        pass
    return found


class BenchEnv:
    """What benchmarks share in one run: N and resources started on first use, stopped by close.

    ``env.redis`` starts the reference server the first time a benchmark asks for it; if that
    fails every later redis benchmark is skipped with the same reason.
    """

    def __init__(self, n: int, use_redis: bool = True, quick: bool = False,
                 others: dict[str, str] | None = None) -> None:
        self.n = n
        # Other checkouts a section compares with, by label (e.g. "base": a worktree path).
        self.others: dict[str, str] = dict(others or {})
        self.quick = quick  # short duration-bound loops and fewer fsyncs
        self.use_redis = use_redis
        self.server: RedisServer | None = None
        self._redis_error: str | None = None if use_redis else "disabled (--no-redis)"
        self.tmp_root: str | None = None  # the data directories' parent, made on first use
        self.resources: dict[str, Any] = {}  # shared(): started once, stopped by close()
        self._resource_errors: dict[str, str] = {}

    @contextlib.contextmanager
    def data_dir(self, name: str) -> Iterator[str]:
        """A path for a new data directory (not yet created), removed when the block ends."""
        if self.tmp_root is None:
            self.tmp_root = temporaries.temp_directory_path("bench-aof")
        parent = tempfile.mkdtemp(prefix=f"{name}-", dir=self.tmp_root)
        try:
            yield os.path.join(parent, "data")
        finally:
            shutil.rmtree(parent, ignore_errors=True)

    def in_dir(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(path, *args) with a fresh data directory path, removed afterwards."""
        with self.data_dir(name) as path:
            return fn(path, *args)

    def where(self) -> str | None:
        """Where the data directories were made, for a section's header line; None: nowhere."""
        if self.tmp_root is None:
            return None
        return (f"data dirs under {self.tmp_root} ({_filesystem(self.tmp_root)}), removed "
                f"after the run")

    def shared(self, name: str, start: Callable[[], Any]) -> Any:
        """A resource the benchmarks of a run share (a server process, a tool): ``start()``
        the first time ``name`` is asked for, its ``stop()`` at close, its ``describe()`` lines
        in the header. A Skip from ``start()`` is remembered and raised again."""
        if name in self._resource_errors:
            raise Skip(self._resource_errors[name])
        if name not in self.resources:
            try:
                self.resources[name] = start()
            except Skip as exc:
                self._resource_errors[name] = str(exc)
                raise
        return self.resources[name]

    @property
    def redis(self) -> Any:
        """A redis-py client of the reference redis-server (no persistence)."""
        if self._redis_error is not None:
            raise Skip(self._redis_error)
        if self.server is None:
            self.server = RedisServer()
            try:
                self.server.start()
            except Skip as exc:
                self._redis_error = str(exc)
                raise
        return self.server.client

    def describe(self) -> list[str]:
        """Header lines about the reference server and the shared resources that were used."""
        lines = []
        if self.server is not None and self.server.client is not None:
            import redis

            lines.append(f"reference: redis-server {self.server.version()} on {HOST}:"
                         f"{self.server.port} (started by this bench, no persistence), "
                         f"redis-py {redis.__version__}")
        elif self._redis_error is not None:
            lines.append(f"reference: none ({self._redis_error})")
        for resource in self.resources.values():
            lines.extend(resource.describe())
        for name, error in self._resource_errors.items():
            lines.append(f"{name}: none ({error})")
        return lines

    def close(self) -> None:
        for resource in reversed(list(self.resources.values())):
            resource.stop()
        self.resources.clear()
        if self.server is not None:
            self.server.stop()
        if self.tmp_root is not None:
            temporaries.remove(self.tmp_root)

    def __enter__(self) -> BenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
