"""``streamkeep bench --compare-pure``: the selected sections as child runs (``bench --json``),
compiled and pure Python (``STREAMKEEP_NO_EXTENSIONS=1``) in turns, ``--repeat`` rounds, and
per row both best rates and every round's ratio against :data:`registry.NATIVE_TARGETS`.
Must not touch: what a row measures, the single-run report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import registry
from streamkeep.tools.bench.report import format_rate
from streamkeep.tools.bench.workload import alternate
from streamkeep.tools.text_width import Table

MODES = ("compiled", "pure")


def child_env(mode: str) -> dict[str, str]:
    """The environment of a child run: the compiled kernels required, or none at all."""
    flags = ("STREAMKEEP_NO_EXTENSIONS", "STREAMKEEP_REQUIRE_EXTENSIONS")
    env = {name: value for name, value in os.environ.items() if name not in flags}
    env[flags[0] if mode == "pure" else flags[1]] = "1"
    return env


def run_child(args: Sequence[str], mode: str, progress: Any = None, what: str = ""
              ) -> dict[str, Any]:
    """One ``streamkeep bench ARGS --json --quiet --repeat 1`` in a child process."""
    if progress is not None:
        print(f"compare: {what}, {mode}", file=progress, flush=True)
    argv = [sys.executable, "-m", "streamkeep", "bench", *args, "--json", "--quiet",
            "--repeat", "1"]
    done = subprocess.run(argv, env=child_env(mode), stdout=subprocess.PIPE, text=True,
                          check=False, **temporaries.child_options())
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} run exited {done.returncode}: {' '.join(argv)}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def rounds(args: Sequence[str], repeat: int, progress: Any = None) -> list[dict[str, Any]]:
    """`repeat` rounds, each a compiled run then a pure run (:func:`.workload.alternate`):
    [{"compiled": doc, "pure": doc}]."""
    return alternate(repeat, {mode: lambda r, mode=mode: run_child(  # type: ignore[misc]
        args, mode, progress, f"round {r}/{repeat}") for mode in MODES})


def compare(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per row measured in both modes: best rates, per-round ratios, the target's verdict."""
    rows: dict[str, dict[str, Any]] = {}
    for pair in runs:
        by_mode = {mode: {row["key"]: row for row in pair[mode]["rows"]} for mode in MODES}
        for key, row in by_mode["compiled"].items():
            other = by_mode["pure"].get(key)
            if not (row["rate"] and other and other["rate"]):
                continue
            entry = rows.setdefault(key, {"key": key, "workload": row["workload"],
                                          "compiled": [], "pure": [], "ratios": []})
            entry["compiled"].append(row["rate"])
            entry["pure"].append(other["rate"])
            entry["ratios"].append(row["rate"] / other["rate"])
    for key, entry in rows.items():
        entry["target"] = target = registry.NATIVE_TARGETS.get(key)
        entry["result"] = None if target is None else (
            "PASS" if min(entry["ratios"]) >= target else "FAIL")
    return list(rows.values())


def table(compared: Sequence[dict[str, Any]]) -> Table:
    rows = []
    for e in compared:
        low, high = min(e["ratios"]), max(e["ratios"])
        span = f"{low:.2f}x" if len(e["ratios"]) == 1 else f"{low:.2f}-{high:.2f}x"
        rows.append([e["key"], format_rate(max(e["compiled"])), format_rate(max(e["pure"])),
                     span, f">= {e['target']:g}x" if e["target"] else "",
                     e["result"] or ""])
    return Table(["row", "compiled/s", "pure/s", "compiled/pure", "target", "result"], rows,
                 right={1, 2, 3}, verdict=5)


def main(args: Sequence[str], repeat: int, as_json: bool, quiet: bool,
         html: str | None = None, force: bool = False) -> int:
    """Run, print the table (or JSON), write the --html page; exit 0, or 1 when a child run
    failed (3 when the page could not be written)."""
    try:
        runs = rounds(args, repeat, None if quiet else sys.stderr)
    except RuntimeError as exc:
        print(f"streamkeep bench: {exc}", file=sys.stderr)
        return 1
    compared = compare(runs)
    document = {"rounds": repeat, "rows": compared,
                "runs": [{m: pair[m] for m in MODES} for pair in runs]}
    if as_json:
        print(json.dumps(document, indent=2))
    else:
        print(f"compiled core vs pure Python: {repeat} round(s), each a compiled run then a "
              "pure run (STREAMKEEP_NO_EXTENSIONS=1); ratios per round")
        print()
        print(table(compared).plain())
    if html:
        from streamkeep.tools.report.bench import write

        problem = write(html, document, force, compare=True)
        if problem is not None:
            print(f"streamkeep bench: error: {problem}", file=sys.stderr)
            return 3
    return 0
