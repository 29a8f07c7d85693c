"""Run the crash bench's power-loss mode on one configuration and print what it found.

`python -m tests.support.planted_run CONFIG...` (each CONFIG a JSON object: see `run`), run in
a child process whose STREAMKEEP_PLANTED_BUGS names the planted bugs
(streamkeep.tools.crashbench.planted reads it once, at import: that is why this is a child).
Prints one JSON line per config: the distinct invariants violated, their counts, one detail
each, and how many crash points were judged. Must not touch: the bench (it is only driven), the engine.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from typing import Any

try:
    import streamkeep.tools.crashbench.faultfs  # noqa: F401
except ImportError:  # until faultfs moves into the bench, the test support copy serves
    import tests.support.faultfs as _faultfs

    sys.modules["streamkeep.tools.crashbench.faultfs"] = _faultfs

from streamkeep.tools.crashbench import powerloss


def run(config: dict[str, Any]) -> dict[str, Any]:
    """One recorded run, replayed at the chosen crash points. Keys: policy, ops, seed,
    pause_after / pause_s (record's idle pause), kinds (crash point kinds), model (one fault
    model), after_s (only points at least this many seconds into the run), from_op (only points
    during or after that operation), every (only every N-th of the remaining points)."""
    scratch = tempfile.mkdtemp(prefix="planted-", dir="/dev/shm")
    try:
        run = powerloss.record(f"{scratch}/data", config.get("seed", 1), config["ops"],
                               config["policy"], pause_after=config.get("pause_after"),
                               pause_s=config.get("pause_s", 0.0))
        kinds = tuple(config.get("kinds", powerloss.KINDS))
        chosen = [p for p in powerloss.points(run, kinds)
                  if run.calls[p.index].at >= config.get("after_s", 0.0)
                  and run.calls[p.index].op >= config.get("from_op", 0)]
        chosen = chosen[::config.get("every", 1)]
        counts: dict[str, int] = {}
        details: dict[str, str] = {}
        judged = 0
        for outcome in powerloss.replay(run, f"{scratch}/replay", (config["model"],),
                                        {p.index for p in chosen}, config.get("seed", 1)):
            judged += 1
            for v in outcome.violations:
                counts[v.invariant] = counts.get(v.invariant, 0) + 1
                details.setdefault(v.invariant, v.detail[:300])
        return {"invariants": sorted(counts), "counts": counts, "details": details,
                "judged": judged}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str]) -> int:
    for arg in argv:
        print(json.dumps(run(json.loads(arg))), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
