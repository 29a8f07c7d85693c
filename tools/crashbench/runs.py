"""Running the crash bench's power-loss modes: which runs, which crash points, on how many
workers, and their outcomes gathered into report rows.

Owns `Config`, `powerloss_rows` (exhaustive: every crash point of one recorded run; random:
runs of successive seeds, a random sample of each one's points, until a budget of points or
seconds), the replay tokens (`powerloss:<policy>:<seed>:<ops>:<compact_every>:<call>:<model>`)
and `replay_one`, and the checks of every token's fields (`token_number`, `token_choice`: a bad
one is a ValueError, the command's usage error). Points are judged by `jobs` forked workers, each replaying the run's log up
to its share of points (contiguous slices, so no worker replays the whole log for nothing).
Must not touch: the judging itself (powerloss, invariants), rendering (report).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from streamkeep.engine.exec.settings import PARAMS
from streamkeep.tools import temporaries
from streamkeep.tools.crashbench import powerloss
from streamkeep.tools.crashbench.report import Found, Row, timeline

Progress = Callable[[str, int, int], None]  # (what, done, total)
POLICIES: tuple[str, ...] = PARAMS["appendfsync"].choices  # a token's <policy>


@dataclass
class Config:
    policy: str
    mode: str  # exhaustive | random
    models: tuple[str, ...]
    ops: int = 2000
    seed: int = 1
    points: int | None = None  # random mode: crash points to try (per model)
    seconds: float | None = None  # random mode: stop after this long
    jobs: int = 2
    compact_every: int = 0  # 0: ops // 6 (five compactions in a run)
    scratch: str | None = None
    workload: str = "streams"  # workload.WORKLOADS


def mode_label(mode: str, workload: str) -> str:
    """A report row's mode, naming the workload unless it is the streams one."""
    return mode if workload == "streams" else f"{mode} ({workload})"


def workload_of(mode: str) -> str:
    """The workload a row's mode (`mode_label`) names."""
    return mode.partition(" (")[2].rstrip(")") or "streams"


def token_suffix(workload: str) -> str:
    """What a replay token ends with to name its workload (nothing for streams: the tokens
    of the streams workload read as they always have)."""
    return "" if workload == "streams" else f":{workload}"


def scratch_root(asked: str | None) -> str:
    """Where disks are materialised: tmpfs when there is one (recovery fsyncs are free
    there, and the bench measures the engine, not the disk). A temporary of tools.temporaries
    (`streamkeep-crashbench-<pid>-<token>`: a killed bench's is swept by the next one); the
    caller removes it (`temporaries.remove`)."""
    base = asked or ("/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)
                     else None)
    return temporaries.temp_directory_path("crashbench", base)


def powerloss_rows(config: Config, progress: Progress | None = None) -> list[Row]:
    rows = {m: Row(config.policy, mode_label(config.mode, config.workload), m)
            for m in config.models}
    root = scratch_root(config.scratch)
    began = time.monotonic()
    try:
        for seed, run, chosen, reached in _runs(config, root, began):
            for row in rows.values():
                row.reached += reached
                row.acked += run.ops
            total = len(chosen) * len(config.models)
            what = f"{config.policy} {config.mode} seed {seed}"

            def judged(done: int, what: str = what, total: int = total) -> None:
                if progress is not None:
                    progress(what, done, total)

            for done, outcome in enumerate(_judge(run, chosen, config, root, judged), 1):
                _add(rows[outcome.model], outcome, config, seed, run)
                if done % 20 == 0 or done == total:
                    judged(done)
    finally:
        temporaries.remove(root)
    seconds = time.monotonic() - began
    for row in rows.values():  # each model's share: the rows' rates add up to the run's
        row.seconds = seconds / len(rows)
    return list(rows.values())


def _runs(config: Config, root: str, began: float
          ) -> Iterator[tuple[int, powerloss.RecordedRun, list[int], int]]:
    """(seed, recorded run, chosen call indices, points reached) per run of the mode."""
    compact_every = config.compact_every or max(1, config.ops // 6)
    seed = config.seed
    budget = config.points
    while True:
        directory = os.path.join(root, f"run-{seed}")
        run = powerloss.record(directory, seed, config.ops, config.policy, compact_every,
                               workload=config.workload)
        indices = [p.index for p in powerloss.distinct_points(run)]
        if config.mode == "exhaustive":
            yield seed, run, indices, len(indices)
            return
        rng = random.Random(f"crashbench-random:{seed}")
        take = min(len(indices), 50 if budget is None else min(50, budget))
        chosen = sorted(rng.sample(indices, take))
        yield seed, run, chosen, len(indices)
        shutil.rmtree(directory, ignore_errors=True)
        if budget is not None:
            budget -= take
            if budget <= 0:
                return
        if config.seconds is not None and time.monotonic() - began >= config.seconds:
            return
        if budget is None and config.seconds is None:
            return
        seed += 1


_SHARED: dict[str, Any] = {}  # what forked workers judge (set before the fork)
TICK_S = 1.0  # while a slice runs, the points the workers judged are reported this often


def _judge(run: powerloss.RecordedRun, chosen: list[int], config: Config, root: str,
           judged: Callable[[int], None] | None = None) -> Iterator[powerloss.Outcome]:
    """Each chosen point's outcomes. With workers, a slice's outcomes come back when the slice
    is done; meanwhile `judged` hears how many outcomes the workers have counted so far."""
    run.checker.hash_all()  # once, before the fork: every worker needs them
    slices = _slices(chosen, max(1, config.jobs) * 8)
    if config.jobs <= 1 or len(slices) <= 1:
        for part in slices:
            yield from _judge_slice(run, part, config, root)
        return
    import multiprocessing

    context = multiprocessing.get_context("fork")
    counted = context.Value("q", 0)
    _SHARED.update(run=run, config=config, root=root, counted=counted)
    # Ctrl-C reaches the workers too (one process group): the main process reports it, and
    # leaving the block terminates them. They start shielded from it (the pool's own thread,
    # made in that block, starts any replacement the same way).
    with temporaries.shielded_starts():
        pool = context.Pool(config.jobs, initializer=temporaries.init_worker)
    with pool:
        results = pool.imap_unordered(_worker, slices)
        while True:
            try:
                outcomes = results.next(timeout=TICK_S)
            except StopIteration:
                return
            except multiprocessing.TimeoutError:
                if judged is not None:
                    judged(counted.value)
                continue
            yield from outcomes


def _worker(part: list[int]) -> list[powerloss.Outcome]:
    counted = _SHARED["counted"]
    outcomes = []
    for outcome in _judge_slice(_SHARED["run"], part, _SHARED["config"], _SHARED["root"]):
        outcomes.append(outcome)
        with counted.get_lock():
            counted.value += 1
    return outcomes


def _judge_slice(run: powerloss.RecordedRun, part: list[int], config: Config, root: str
                 ) -> Iterator[powerloss.Outcome]:
    scratch = tempfile.mkdtemp(dir=root)
    try:
        yield from powerloss.replay(run, scratch, config.models, set(part), run.seed,
                                    recovery_cut_every=10, reopen_every=10)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _slices(chosen: list[int], n: int) -> list[list[int]]:
    size = max(1, -(-len(chosen) // n))
    return [chosen[i:i + size] for i in range(0, len(chosen), size)]


def _add(row: Row, outcome: powerloss.Outcome, config: Config, seed: int,
         run: powerloss.RecordedRun) -> None:
    compact_every = config.compact_every or max(1, config.ops // 6)
    k = outcome.acked
    point = outcome.point
    where = f"{point.kind} #{point.ordinal} (call {point.index} of {len(run.calls)})"
    lineage = run.checker.lineage
    in_flight = _render(lineage[k].argv) if k < len(lineage) else ""
    for v in outcome.violations:
        row.found.append(Found(
            v.invariant,
            f"power loss at {point.kind} #{point.ordinal} (during op {k}), "
            f"model {outcome.model}: {v.detail}",
            # The shortest run that reaches the point: the same seed cut after op k (the
            # calls before the point are the same in a shorter run of the same workload).
            f"powerloss:{config.policy}:{seed}:{min(config.ops, k + 1)}:{compact_every}:"
            f"{point.index}:{outcome.model}{token_suffix(config.workload)}",
            [_render(op.argv) for op in lineage[max(0, k - 5):k + 1]], k + 1,
            in_flight=in_flight, expected=expected(config.policy, k),
            recovered=_recovered(outcome)))
    row.add(outcome.recovery, outcome.acked, outcome.lost_acked, outcome.loss_window_s,
            outcome.violations, 0.0 if outcome.cached else outcome.recovery_s,
            outcome.log_bytes, at_s=run.calls[point.index].at, where=where, seed=seed,
            cached=outcome.cached)
    if str(seed) not in row.timelines:
        row.timelines[str(seed)] = timeline([op.acked_at or 0.0 for op in lineage[:run.ops]])


def expected(policy: str, acked: int) -> str:
    """What a recovered state had to be, in words, after a crash with `acked` operations
    acknowledged (the next one in flight)."""
    if policy == "always":
        return (f"the state after the {acked} acknowledged operations, or after {acked + 1} "
                f"(the one in flight applied)")
    if policy == "everysec":
        return (f"the state after a prefix of the history: every operation acknowledged more "
                f"than 2 s before the crash kept (of {acked} acknowledged), nothing after the "
                f"one in flight")
    return f"the state after any prefix of the history (up to {acked + 1} operations)"


def _recovered(outcome: powerloss.Outcome) -> str:
    if outcome.recovery == "refused":
        return "no state: the directory was refused at open"
    if outcome.prefix is None:
        return (f"recovery {outcome.recovery}: a state that is no prefix of the history "
                f"(the violation says how it differs)")
    return (f"recovery {outcome.recovery}: the state after {outcome.prefix} operations"
            + (f", {outcome.lost_acked} acknowledged one(s) lost" if outcome.lost_acked else ""))


def _render(argv: list[bytes]) -> str:
    text = " ".join(a.decode(errors="replace") for a in argv)
    return text if len(text) <= 120 else text[:117] + "..."


def token_number(token: str, name: str, text: str, least: int | None = None) -> int:
    """A replay token's integer field `name`, at least `least`; ValueError naming the token,
    the field and what it must be (a usage error, never a traceback)."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or (least is not None and value < least):
        must = "an integer" if least is None else f"an integer of at least {least}"
        raise ValueError(f"--replay {token}: <{name}> must be {must}, not {text!r}")
    return value


def token_choice(token: str, name: str, text: str, choices: tuple[str, ...]) -> str:
    """A replay token's field `name`, one of `choices`; ValueError otherwise."""
    if text not in choices:
        raise ValueError(f"--replay {token}: <{name}> must be one of {', '.join(choices)}, "
                         f"not {text!r}")
    return text


def replay_one(token: str) -> tuple[Row, list[str]]:
    """Run the one power-loss crash point a token names; its row and what it found, in
    words (cli dispatches the sigkill and ioerror tokens to their modes). The run is
    recorded again, and `<call>` may name any call of it: a write, fsync, rename or directory
    fsync as the report's tokens do, or another call (a crash just before it). The engine's
    once-a-second thread runs on the wall clock, so the new recording's calls may be shifted
    by one of its fsyncs against the first's: the lines name the call cut. ValueError for a
    token that is not one (a usage error)."""
    from streamkeep.tools.crashbench.faultfs import MODELS
    from streamkeep.tools.crashbench.workloads import WORKLOADS

    parts = token.split(":")
    if len(parts) not in (7, 8) or parts[0] != "powerloss":
        raise ValueError(f"--replay {token}: not a replay token (powerloss:<policy>:<seed>:"
                         f"<ops>:<compact_every>:<call>:<model>[:<workload>], ioerror:..., "
                         f"sigkill:...)")
    policy = token_choice(token, "policy", parts[1], POLICIES)
    seed = token_number(token, "seed", parts[2])
    ops = token_number(token, "ops", parts[3], least=1)
    compact_every = token_number(token, "compact_every", parts[4], least=0)
    index = token_number(token, "call", parts[5], least=0)
    model = token_choice(token, "model", parts[6], MODELS)
    workload = token_choice(token, "workload", parts[7], WORKLOADS) if len(parts) == 8 \
        else "streams"
    config = Config(policy, "replay", (model,), ops=ops, seed=seed, jobs=1,
                    compact_every=compact_every, workload=workload)
    root = scratch_root(None)
    row = Row(policy, mode_label("replay", workload), model, reached=1)
    lines = []
    try:
        run = powerloss.record(os.path.join(root, "run"), seed, ops, policy, compact_every,
                               workload=workload)
        if index >= len(run.calls):
            raise ValueError(f"--replay {token}: <call> {index} is past the run's last: its "
                             f"{ops} operations made {len(run.calls)} file calls (0 to "
                             f"{len(run.calls) - 1})")
        for outcome in _judge_slice(run, [index], config, root):
            _add(row, outcome, config, seed, run)
            lines.append(f"crash point: {outcome.point.kind} #{outcome.point.ordinal} (call "
                         f"{outcome.point.index} of {len(run.calls)}), during op "
                         f"{outcome.acked}; recovery: {outcome.recovery}; prefix "
                         f"{outcome.prefix}")
    finally:
        temporaries.remove(root)
    return row, lines
