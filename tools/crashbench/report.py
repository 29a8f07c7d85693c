"""The crash bench's report: rows per policy x crash mode x fault model, and the violations.

Owns `Row` (what one configuration came to: crash points covered out of those reached,
recoveries by kind, acknowledged operations and how many were lost with the loss window
against the policy's bound, violations per invariant, recovery time against log size, crash
points per second; every point judged, `Point`: where on the workload's timeline it fell and
what its recovery gave; samples of that timeline), `Found` (one violation with the token that
replays it, the point, the operation in flight, what was expected and what recovery gave, and
the history that leads to it), and their rendering: plain text when piped, rich tables on a
terminal, JSON for machines (the HTML report, tools.report.crashbench, is drawn from it).
Must not touch: how crashes are made or judged (powerloss, sigkill, invariants).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import IO, Any

from streamkeep.tools.crashbench.invariants import INVARIANTS, Violation
from streamkeep.tools.text_width import Table

BOUNDS = {"always": 0.0, "everysec": 2.0, "no": None}  # seconds of acknowledged writes a crash may lose


@dataclass
class Found:
    """One violation, with what replays it."""

    invariant: str
    detail: str
    replay: str  # the --replay token
    history: list[str] = field(default_factory=list)  # the operations leading to it (last few)
    history_length: int = 0
    point: int | None = None  # its crash point: an index into the row's `points`
    in_flight: str = ""  # the operation in flight at the crash (its outcome unknown)
    expected: str = ""  # what the recovered state had to be
    recovered: str = ""  # what recovery gave


OUTCOMES = ("clean", "truncated", "restarted", "lost within bound", "refused", "violation")
TIMELINE_SAMPLES = 400  # points of the workload's timeline kept per run


@dataclass
class Point:
    """One crash point judged (under one fault model)."""

    at_s: float  # when it fell: seconds into the workload's run (its recording, or the rounds)
    op: int  # operations acknowledged before it (the one in flight is the next)
    where: str  # which call or moment: "write #12 (call 40)", "round 3 (compaction)"
    outcome: str  # one of OUTCOMES
    recovery_ms: float | None  # None: a disk an earlier point left too, not recovered again
    log_bytes: int
    seed: int = 0


def timeline(times: list[float], samples: int = TIMELINE_SAMPLES) -> list[list[float]]:
    """A run's timeline: [seconds into it, operations acknowledged by then], at most
    `samples` of them (evenly over the operations, the last one always)."""
    if not times:
        return []
    step = max(1, -(-len(times) // samples))
    picked = list(range(0, len(times), step))
    if picked[-1] != len(times) - 1:
        picked.append(len(times) - 1)
    return [[round(times[i], 4), i + 1] for i in picked]


@dataclass
class Row:
    policy: str
    mode: str
    model: str
    target: str = "streamkeep"
    reached: int = 0  # crash points the workload reached
    covered: int = 0  # crash points tried
    recoveries: Counter = field(default_factory=Counter)  # clean | truncated | refused
    acked: int = 0  # operations the recorded runs acknowledged
    lost: int = 0  # the most acknowledged operations one crash lost
    loss_points: int = 0  # crash points that lost acknowledged operations
    loss_window_s: float = 0.0  # the oldest lost acknowledged operation's age at its crash
    violations: Counter = field(default_factory=Counter)  # invariant -> count
    recovery_s: list[float] = field(default_factory=list)
    log_bytes: list[int] = field(default_factory=list)
    seconds: float = 0.0
    found: list[Found] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)
    timelines: dict[str, list[list[float]]] = field(default_factory=dict)  # seed -> samples
    linked: int = 0  # `found` entries before this one belong to earlier points (or none)
    started: float = field(default_factory=time.monotonic)  # (not reported)

    def link_late(self, since: int = 0) -> None:
        """What was found after the last point was added (a replica checked after it) is
        that point's too, if that point is one of those from index `since` on."""
        if len(self.points) <= since or self.linked == len(self.found):
            return
        for f in self.found[self.linked:]:
            f.point = len(self.points) - 1
        self.linked = len(self.found)
        self.points[-1].outcome = "violation"

    def seconds_so_far(self) -> float:
        return time.monotonic() - self.started

    def add(self, recovery: str, acked: int, lost: int, window: float,
            violations: list[Violation], seconds: float, log_bytes: int, *,
            at_s: float | None = None, where: str = "", seed: int = 0,
            cached: bool = False, op: int | None = None) -> None:
        """One crash point judged: its recovery, what it lost, its violations (counted here;
        those found meanwhile by other means are in `found` already). The `found` entries
        not yet linked to a point are this one's."""
        mine = self.found[self.linked:]
        self.linked = len(self.found)
        for f in mine:
            f.point = len(self.points)
        outcome = ("violation" if violations or mine else
                   "refused" if recovery == "refused" else
                   "lost within bound" if lost else recovery)
        self.points.append(Point(round(at_s if at_s is not None else 0.0, 4),
                                 acked if op is None else op, where,
                                 outcome, None if cached else round(1000 * seconds, 3),
                                 log_bytes, seed))
        self.covered += 1
        self.recoveries[recovery] += 1
        self.lost = max(self.lost, lost)
        self.loss_points += lost > 0
        self.loss_window_s = max(self.loss_window_s, window)
        for v in violations:
            self.violations[v.invariant] += 1
        if seconds:
            self.recovery_s.append(seconds)
            self.log_bytes.append(log_bytes)

    @property
    def ok(self) -> bool:
        return not self.violations


def _recovery_cell(row: Row) -> str:
    if not row.recovery_s:
        return "-"
    mean_ms = 1000 * sum(row.recovery_s) / len(row.recovery_s)
    worst = max(range(len(row.recovery_s)), key=row.recovery_s.__getitem__)
    return (f"{mean_ms:.0f} ms mean at {sum(row.log_bytes) / len(row.log_bytes) / 1024:.0f} KB; "
            f"max {1000 * row.recovery_s[worst]:.0f} ms at {row.log_bytes[worst] / 1024:.0f} KB")


def _loss_cell(row: Row) -> str:
    bound = BOUNDS.get(row.policy)
    if not row.lost:
        return "0"
    limit = "no bound" if bound is None else f"bound {bound:g} s"
    return (f"{row.loss_points} crash(es) lost up to {row.lost} (oldest "
            f"{row.loss_window_s:.2f} s; {limit})")


def table(rows: list[Row]) -> Table:
    headers = ["target", "policy", "mode", "model", "points", "recoveries", "acked", "lost",
               "violations", "recovery time", "points/s", "result"]
    cells = []
    for row in rows:
        rec = ", ".join(f"{n} {kind}" for kind, n in sorted(row.recoveries.items()))
        viol = ", ".join(f"{n} {inv}" for inv, n in sorted(row.violations.items())) or "0"
        rate = f"{row.covered / row.seconds:.1f}" if row.seconds else "-"
        cells.append([row.target, row.policy, row.mode, row.model,
                      f"{row.covered}/{row.reached}", rec or "-", str(row.acked),
                      _loss_cell(row), viol, _recovery_cell(row), rate,
                      "PASS" if row.ok else "FAIL"])
    return Table(headers, cells, right={4, 6, 10}, verdict=11)


def invariants_table(rows: list[Row]) -> Table:
    """Which invariants held, over every row."""
    total: Counter = Counter()
    for row in rows:
        total.update(row.violations)
    return Table(["invariant", "violations", "result"],
                 [[inv, str(total[inv]), "PASS" if not total[inv] else "FAIL"]
                  for inv in INVARIANTS], right={1}, verdict=2)


def found_text(rows: list[Row], limit: int = 10) -> str | None:
    found = [f for row in rows for f in row.found]
    if not found:
        return None
    lines = [f"{len(found)} violation(s); the first {min(limit, len(found))}:"]
    for f in found[:limit]:
        lines.append(f"- {f.invariant}: {f.detail}")
        lines.append(f"  replay: streamkeep crashbench --replay {f.replay}")
        if f.history:
            lines.append(f"  history: {f.history_length} operations; the last "
                         f"{len(f.history)}:")
            lines.extend(f"    {op}" for op in f.history)
    return "\n".join(lines)


def print_report(rows: list[Row], file: IO[str], notes: list[str]) -> None:
    """The report at the width `file` takes (COLUMNS, the terminal's, or 80 when piped): a
    table that does not fit is printed a row per block, text is wrapped; nothing is cut."""
    from streamkeep.tools import text_width

    columns = text_width.width(file)
    blocks: list[Table | str] = [table(rows), invariants_table(rows)]
    text = found_text(rows)
    if text:
        blocks.append(text)
    if notes:
        blocks.append("\n".join(notes))
    blocks = [b if isinstance(b, str) else
              b if _fits(b, columns) else text_width.plain(b.headers, b.rows, b.right, columns)
              for b in blocks]
    blocks = [b if isinstance(b, Table) else text_width.wrap(b, columns, "    ") for b in blocks]
    if getattr(file, "isatty", lambda: False)():
        text_width.print_blocks(blocks, file)
        return
    print("\n\n".join(b.plain() if isinstance(b, Table) else b for b in blocks), file=file)


def _fits(block: Table, columns: int) -> bool:
    # (rich, on a terminal, puts three spaces between columns where the plain text has two)
    widest = max(len(line) for line in block.plain().splitlines())
    return widest + len(block.headers) - 1 <= columns


def to_json(rows: list[Row], notes: list[str]) -> dict[str, Any]:
    out = []
    for row in rows:
        doc = asdict(row)
        doc.pop("linked")
        doc.pop("started")
        doc["recoveries"] = dict(row.recoveries)
        doc["violations"] = dict(row.violations)
        doc["recovery_ms_mean"] = (1000 * sum(row.recovery_s) / len(row.recovery_s)
                                   if row.recovery_s else None)
        doc["points_per_second"] = row.covered / row.seconds if row.seconds else None
        doc["result"] = "PASS" if row.ok else "FAIL"
        out.append(doc)
    return {"rows": out, "ok": all(r.ok for r in rows), "notes": notes}
