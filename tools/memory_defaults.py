"""What `streamkeep serve` bounds its memory by when its settings do not say: `maxmemory` and
`backlog-memory` from the machine's memory.

The machine's memory is the smaller of the physical memory and the cgroup's limit (a
container's `memory.max`, v2, or `memory.limit_in_bytes`, v1). `maxmemory` defaults to half
of it: the other half is the compaction's build child, the pages LMDB's snapshot maps, the
allocators' fragmentation above what used_memory counts, and the rest of the machine. Past
it the default policy, noeviction, refuses writes that may grow memory with Redis's OOM
error, where an unbounded server would grow until the kernel killed it (and the AOF would
replay it into the same death at the next start). `backlog-memory` defaults to a quarter of
`maxmemory`: the stream and list nodes a snapshot holds go cold past it, long before writes
are refused. A setting given in the config file or on the command line (0 included: no
limit) is kept. Must not touch: the engine (it hands settings to Engine.open).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Final

from streamkeep.engine.model.heap import physical_memory

MAXMEMORY_SHARE: Final = 2  # maxmemory: the machine's memory / 2
BACKLOG_SHARE: Final = 4  # backlog-memory: maxmemory / 4
_CGROUP_FILES: Final = ("/sys/fs/cgroup/memory.max",
                        "/sys/fs/cgroup/memory/memory.limit_in_bytes")
_NO_LIMIT: Final = 1 << 60  # (cgroup v1's "unlimited" is a huge number)


def cgroup_limit() -> int | None:
    """The memory limit of the process's cgroup, None without one."""
    for path in _CGROUP_FILES:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text and text != "max" and text.isdigit() and int(text) < _NO_LIMIT:
            return int(text)
    return None


def machine_memory() -> tuple[int, str]:
    """(bytes, where they come from): the smaller of the physical memory and the cgroup's."""
    physical = physical_memory()
    limit = cgroup_limit()
    if limit is not None and (not physical or limit < physical):
        return limit, "the cgroup's memory limit"
    return physical, "the machine's memory"


def apply_memory_defaults(settings: MutableMapping[str, Any]) -> str | None:
    """Set maxmemory and backlog-memory where `settings` leave them out; what to say of them
    on the listening line (None when both were given, or the machine's memory is unknown)."""
    if "maxmemory" in settings and "backlog-memory" in settings:
        return None
    total, source = machine_memory()
    if not total:
        return None
    said = []
    if "maxmemory" not in settings:
        settings["maxmemory"] = total // MAXMEMORY_SHARE
        said.append(f"maxmemory {_human(settings['maxmemory'])} (half of {source}, "
                    f"{_human(total)})")
    if "backlog-memory" not in settings:
        from streamkeep.engine.exec.settings import parse_setting

        bound = int(parse_setting("maxmemory", settings["maxmemory"])) or total // 2
        settings["backlog-memory"] = bound // BACKLOG_SHARE
        said.append(f"backlog-memory {_human(settings['backlog-memory'])} (a quarter of "
                    f"{'maxmemory' if settings['maxmemory'] else 'half of ' + source})")
    return "by default " + ", ".join(said)


def _human(n: int) -> str:
    for unit, size in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f}{unit}"
    return f"{n}b"


__all__ = ["BACKLOG_SHARE", "MAXMEMORY_SHARE", "apply_memory_defaults", "cgroup_limit",
           "machine_memory", "physical_memory"]
