"""What the rows of one run share: :class:`BenchEnv` (N, the quick flag, the other checkouts,
the data directories, the reference redis-server, the shared resources, the rows done so far,
the header lines). Must not touch: a section's own parameters or what a row measures.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.workload import Skip
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.runner import Result


def _filesystem(path: str) -> str:
    """``<type> on <device>`` of the mount holding path, else ``?``."""
    best, found = "", "?"
    with contextlib.suppress(OSError), open("/proc/mounts") as f:
        for line in f:
            device, mount, fstype = line.split()[:3]
            inside = path == mount or path.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best):
                best, found = mount, f"{fstype} on {device}"
    return found


class BenchEnv:
    """What rows share in one run: N, and resources started on first use, ended by close.
    ``env.redis`` starts the reference server the first time a row asks for it; if that fails
    every later row that needs it is skipped with the same reason."""

    def __init__(self, n: int, use_redis: bool = True, quick: bool = False,
                 others: dict[str, str] | None = None) -> None:
        self.n = n
        self.others: dict[str, str] = dict(others or {})  # label -> another checkout
        self.quick = quick  # short duration-bound loops and fewer fsyncs
        self.use_redis = use_redis
        self.tmp_root: str | None = None  # the data directories' parent, made on first use
        self.resources: dict[str, Any] = {}  # shared(): made once, ended by close()
        self.results: dict[str, Result] = {}  # the rows finished so far (the runner's)
        self._errors: dict[str, str] = {}
        self._ends = contextlib.ExitStack()

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

    @contextlib.contextmanager
    def engine(self, name: str | None = None, **settings: Any) -> Iterator[Any]:
        """An Engine in memory, or on a fresh data directory (``name``), with ``settings``;
        closed, its directory removed, when the block ends."""
        from streamkeep import Engine

        with contextlib.ExitStack() as stack:
            path = None if name is None else stack.enter_context(self.data_dir(name))
            engine = Engine.open(path, **settings)
            stack.callback(engine.close)
            yield engine

    def shared(self, name: str, make: Callable[[], Any]) -> Any:
        """A resource the rows of a run share, made the first time ``name`` is asked for:
        ``make()``'s value (its ``stop()`` run at close, its ``describe()`` lines in the
        header), or, ``make`` a generator function, what it yields (the rest of it run at
        close). A Skip from ``make`` is remembered and raised again."""
        if name in self._errors:
            raise Skip(self._errors[name])
        if name not in self.resources:
            try:
                made = make()
                if inspect.isgenerator(made):
                    value = next(made)
                    self._ends.callback(next, made, None)
                else:
                    value = made
                    if hasattr(value, "stop"):
                        self._ends.callback(value.stop)
            except Skip as exc:
                self._errors[name] = str(exc)
                raise
            self.resources[name] = value
        return self.resources[name]

    @property
    def redis(self) -> Any:
        """A redis-py client of the reference redis-server (no persistence)."""
        return self.redis_server.client

    @property
    def redis_server(self) -> Any:
        """The reference redis-server, started on first use (Skip with --no-redis)."""
        if not self.use_redis:
            raise Skip("disabled (--no-redis)")
        from streamkeep.tools.bench.processes import RedisServer

        return self.shared("reference", lambda: RedisServer().start())

    def describe(self) -> list[str]:
        """Header lines about the data directories, the reference server and the shared
        resources that were used."""
        lines = [] if self.tmp_root is None else [
            f"data: data dirs under {self.tmp_root} ({_filesystem(self.tmp_root)}), removed "
            f"after the run"]
        reference = self.resources.get("reference")
        if reference is not None:
            import redis

            lines.append(f"reference: redis-server {reference.version()} on {HOST}:"
                         f"{reference.port} (started by this bench, no persistence), "
                         f"redis-py {redis.__version__}")
        elif not self.use_redis or "reference" in self._errors:
            lines.append(f"reference: none ({self._errors.get('reference', 'disabled (--no-redis)')})")
        for name, resource in self.resources.items():
            if name != "reference" and hasattr(resource, "describe"):
                lines.extend(resource.describe())
        lines += [f"{name}: none ({error})" for name, error in self._errors.items()
                  if name != "reference"]
        return lines

    def close(self) -> None:
        self._ends.close()
        self.resources.clear()
        if self.tmp_root is not None:
            temporaries.remove(self.tmp_root)

    def __enter__(self) -> BenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
