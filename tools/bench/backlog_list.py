"""The ``backlog`` section's list rows: a queue on a list bigger than its memory budget.

Owns its data set and how it is measured. The data set is a data directory holding one list of
ELEMENTS_PER_N x N elements (`job:<8 digits>:payload-...`, 2M at the default N), pushed with
RPUSH (1,000 a command) and compacted, so its snapshot holds the list in chunks with the index
of their nodes. Each mode runs in a fresh child process on its own copy (``python -m
streamkeep.tools.bench.backlog_list MODE PATH``, one JSON line):

- ``backlog.list_cold``: `backlog-memory` BUDGET; ``backlog.list_resident``: no budget. Each:
  restart to serving (open + LLEN), the RSS then, the element at the middle (LINDEX), the
  elements cold after the restart (INFO memory's `list_elements_cold`), and a scan of the whole
  list by LRANGE pages of PAGE elements (the row's rate: elements/s), which reads each cold
  chunk once and leaves its nodes cold.
Must not touch: the engine's storage (it only measures it), the registry.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from typing import TYPE_CHECKING

from streamkeep.tools.bench.backlog import SharedDataSet, proc_status, run_child
from streamkeep.tools.bench.workload import Measurement

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

KEY = "queue"
BUDGET = 8 << 20  # backlog-memory of the cold mode: 8mb
ELEMENTS_PER_N = 10  # 2,000,000 at the default N
PUSH_BATCH = 1_000
PAGE = 1_000  # elements an LRANGE of the scan returns


def elements(env: BenchEnv) -> int:
    return max(env.n * (1 if env.quick else ELEMENTS_PER_N), 50_000)


def describe(env: BenchEnv) -> list[str]:
    return [f"backlog lists: one list of {elements(env):,} elements `job:<8 digits>:payload-"
            f"xxxxxxxxxx`, RPUSHed {PUSH_BATCH:,} a command and compacted; each mode in a "
            f"fresh child process on its own copy: list_cold = backlog-memory "
            f"{BUDGET >> 20}mb, list_resident = no budget; restart = open + LLEN; RSS = the "
            f"child's after the restart (VmRSS); scan = LRANGE pages of {PAGE:,}"]


def build(path: str, count: int) -> None:
    """A data directory at `path` holding the data set (see the module docstring)."""
    from streamkeep import Engine

    with Engine.open(path, appendfsync="no") as engine:
        for first in range(0, count, PUSH_BATCH):
            engine.execute("RPUSH", KEY, *(b"job:%08d:payload-xxxxxxxxxx" % i
                                           for i in range(first, min(first + PUSH_BATCH,
                                                                     count))))
        engine.compact(wait=True)


# --- the child: one mode ---------------------------------------------------------------------


def child(mode: str, path: str) -> dict[str, float]:
    """Open the copy in `path` in this process and measure it (see the module docstring)."""
    from streamkeep import Engine

    began = time.perf_counter()
    engine = Engine.open(path, backlog_memory=BUDGET if mode == "list_cold" else 0)
    try:
        count = int(engine.execute("LLEN", KEY))
        restart = time.perf_counter() - began
        rss = proc_status("VmRSS")
        middle = engine.execute("LINDEX", KEY, count // 2)
        assert middle == b"job:%08d:payload-xxxxxxxxxx" % (count // 2), middle
        info = engine.execute("INFO", "memory").decode()
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        cold = int(fields.get("list_elements_cold", "0"))
        began = time.perf_counter()
        seen = 0
        for start in range(0, count, PAGE):
            seen += len(engine.execute("LRANGE", KEY, start, start + PAGE - 1))
        scan = time.perf_counter() - began
        assert seen == count, (seen, count)
    finally:
        engine.close()
    return {"restart_s": restart, "open_rss": rss, "cold_elements": cold,
            "elements": count, "scan_s": scan}


def bench_mode(env: BenchEnv, mode: str) -> Measurement:
    source = env.shared("backlog-list-data", lambda: SharedDataSet(
        env, "backlog-list-source-", lambda path: build(path, elements(env)))).path
    with env.data_dir(f"backlog-{mode}") as path:
        shutil.copytree(source, path)
        got = run_child("streamkeep.tools.bench.backlog_list", mode, path)
    count = int(got["elements"])
    mb = 1 << 20
    figures = {"restart_s": got["restart_s"], "open_rss_mb": got["open_rss"] / mb,
               "cold_elements": got["cold_elements"]}
    notes = [f"backlog.{mode}: {count:,} elements, restart {got['restart_s']:.3f} s, RSS then "
             f"{figures['open_rss_mb']:.0f} MB, {got['cold_elements']:,.0f} elements cold, "
             f"a scan by LRANGE pages {got['scan_s']:.3f} s"]
    return Measurement(count / got["scan_s"], count=count, figures=figures, notes=notes)


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], sys.argv[2])), flush=True)
