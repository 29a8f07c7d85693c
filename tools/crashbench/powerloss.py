"""The crash bench's power-loss mode: every crash point of one recorded run, judged.

Owns the SQLite-style loop without its quadratic cost. The workload runs once, in process, on
a `RecordingFS` (the real files, every call at the file-layer seam logged with the operation
then in flight). The log is then replayed, one call at a time, into a `faultfs.TrackingFS`
over a scratch directory: before each fdatasync, rename and directory fsync, and after each
write (a cut write has reached the page cache), the disk a power loss would leave is
materialised under each fault model and opened by a fresh Engine; the recovered state is
judged by `invariants.Checker` against the run's acknowledged prefix. The workload is not run
again per crash point and no file is copied whole per point: the replay moves forward once,
and only the materialised disk (durable bytes plus the model's tail) is written. Identical
disks (most points leave nothing volatile) are recovered once.

Some crash points also cut the power again during recovery (at a random file operation of the
recovering open), then recover once more: the same verdict must hold. Every engine here is
opened by `planted.open_engine`, the way planted bugs come in (Engine.open when none is).
Must not touch: the engine's internals (it is driven through commands and Engine.open), the
workload, the checks.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from streamkeep.aof.fs import RealFS
from streamkeep.tools.crashbench.faultfs import BITROT
from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker, Violation
from streamkeep.tools.crashbench.model import EngineTarget, read_state, state_hash
from streamkeep.tools.crashbench.planted import open_engine
from streamkeep.tools.crashbench.workload import KEYS
from streamkeep.tools.crashbench.workloads import new_workload

KINDS = ("write", "fsync", "rename", "dirfsync")  # the calls a crash point can cut
SEGMENT_MAX_BYTES = 16 << 10  # small segments: rotations happen every few dozen operations
BASE_TIME = 1_700_000_000_000


@dataclass
class Call:
    """One logged call at the file-layer seam."""

    kind: str  # write | fsync | rename | dirfsync | other
    method: str
    args: tuple
    op: int  # the workload operation in flight (or next) when it was made
    at: float  # seconds since the run started
    result: Any = None  # a descriptor a call returned


class RecordingFS(RealFS):
    """RealFS that logs every mutating call (see the module docstring). Files another process
    wrote (the compaction child's snapshot) are logged with their bytes when first touched."""

    def __init__(self, op: Callable[[], int]) -> None:
        self.calls: list[Call] = []
        self.op = op
        self.started = time.monotonic()
        self.known: set[str] = set()

    def _log(self, kind: str, method: str, *args: Any, result: Any = None) -> None:
        self.calls.append(Call(kind, method, args, self.op(), time.monotonic() - self.started,
                               result))

    def _adopt(self, path: str) -> None:
        if path not in self.known:
            self.known.add(path)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    self._log("other", "adopt", path, f.read())

    def open_append(self, path: str, create: bool = True) -> int:
        self._adopt(path)
        fd = super().open_append(path, create)
        self._log("other", "open_append", path, create, result=fd)
        return fd

    def open_write_new(self, path: str) -> int:
        self._adopt(path)
        fd = super().open_write_new(path)
        self._log("other", "open_write_new", path, result=fd)
        return fd

    def write(self, fd: int, data: bytes) -> None:
        super().write(fd, data)
        self._log("write", "write", fd, bytes(data))

    # No real fsyncs: what is durable is decided by the replay (as TrackingFS does), and the
    # recorded run then costs what the engine costs, not what the disk does.
    def fdatasync(self, fd: int) -> None:
        self._log("fsync", "fdatasync", fd)

    def close(self, fd: int) -> None:
        super().close(fd)
        self._log("other", "close", fd)

    def truncate(self, path: str, size: int) -> None:
        self._adopt(path)
        super().truncate(path, size)
        self._log("other", "truncate", path, size)

    def ftruncate(self, fd: int, size: int) -> None:
        super().ftruncate(fd, size)
        self._log("other", "ftruncate", fd, size)

    def rename(self, src: str, dst: str) -> None:
        self._adopt(src)
        self._adopt(dst)
        super().rename(src, dst)
        self._log("rename", "rename", src, dst)
        self.known.add(dst)

    def fsync_dir(self, path: str) -> None:
        self._log("dirfsync", "fsync_dir", path)

    def unlink(self, path: str) -> None:
        self._adopt(path)
        super().unlink(path)
        self._log("other", "unlink", path)

    def lock(self, path: str) -> int:
        self._adopt(path)
        fd = super().lock(path)
        self._log("other", "lock", path, result=fd)
        return fd

    def unlock(self, fd: int) -> None:
        super().unlock(fd)
        self._log("other", "unlock", fd)


@dataclass
class RecordedRun:
    directory: str
    calls: list[Call]
    checker: Checker  # every operation acknowledged, in order
    ops: int
    seed: int


def record(directory: str, seed: int, ops: int, policy: str, compact_every: int = 0,
           pause_after: int | None = None, pause_s: float = 0.0, workload: str = "streams"
           ) -> RecordedRun:
    """Run `ops` operations of the seed's workload on a fresh directory, logging the file
    calls; every `compact_every` operations (0: never) the engine compacts, waiting; after
    operation `pause_after` the workload idles `pause_s` seconds (what an everysec policy
    must still sync within its bound). `workload` names the seeded workload (WORKLOADS)."""

    commands = new_workload(workload, seed)
    fs = RecordingFS(lambda: commands.index)
    clock = _Clock()
    checker = Checker(policy, workload=workload)
    engine = open_engine(directory, fs, appendfsync=policy,
                         aof_segment_max_bytes=SEGMENT_MAX_BYTES, auto_aof_rewrite_percentage=0,
                         clock=clock)
    target = EngineTarget(engine)
    try:
        for i in range(ops):
            clock.now = BASE_TIME + i
            step(target, commands, checker, time.monotonic() - fs.started)
            if compact_every and (i + 1) % compact_every == 0:
                engine.compact(wait=True)
            if pause_after is not None and i == pause_after:
                time.sleep(pause_s)
    finally:
        engine.close()
    return RecordedRun(directory, fs.calls, checker, ops, seed)


class _Clock:
    """The engine's millisecond clock, set by the driver: IDs are the same in every run."""

    def __init__(self, now: int = BASE_TIME) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@dataclass
class Point:
    """One crash point: the index of the cut call in the log, its kind (point_kind) and
    ordinal."""

    index: int
    kind: str
    ordinal: int  # the N of "the N-th write"


def point_kind(call: Call) -> str:
    """What a crash point at `call` is named by: its kind (write, fsync, rename, dirfsync), or
    for another call its method (close, unlink, adopt...). A replay token may name any call of
    the log: a crash just before one of those is the disk the calls before it left."""
    return call.kind if call.kind in KINDS else call.method


def points(run: RecordedRun, kinds: tuple[str, ...] = KINDS) -> list[Point]:
    counts = dict.fromkeys(KINDS, 0)
    out = []
    for i, call in enumerate(run.calls):
        if call.kind in counts:
            counts[call.kind] += 1
            if call.kind in kinds:
                out.append(Point(i, call.kind, counts[call.kind]))
    return out


# Calls that leave every file and directory entry as they were: a crash just after one is the
# crash just before it.
UNCHANGING = ("close", "lock", "unlock")


def distinct_points(run: RecordedRun) -> list[Point]:
    """Every crash point of the run that leaves a disk no earlier point left. A power cut just
    after a write (a write point) and one just before the fdatasync that follows it (an fsync
    point) leave the same files with the same unsynced bytes: the fsync point is the same
    crash, and is left out (its process-crash twin, the bit-rot model's, differs from the
    write point's by the unsynced record alone)."""
    out: list[Point] = []
    for point in points(run):
        if point.kind != "write" and out and out[-1].kind == "write" and all(
                c.method in UNCHANGING for c in run.calls[out[-1].index + 1:point.index]):
            continue
        out.append(point)
    return out


@dataclass
class Outcome:
    """One crash point under one fault model."""

    point: Point
    model: str
    recovery: str  # clean | truncated | refused
    acked: int
    prefix: int | None
    lost_acked: int
    loss_window_s: float
    violations: list[Violation] = field(default_factory=list)
    recovery_s: float = 0.0
    log_bytes: int = 0
    cached: bool = False


def replay(run: RecordedRun, scratch: str, models: tuple[str, ...], chosen: set[int],
           seed: int, recovery_cut_every: int = 0, reopen_every: int = 1) -> Iterator[Outcome]:
    """Replay the log into a TrackingFS over `scratch`; at each chosen crash point (indices
    into the log) materialise and judge the disk under each model. Every
    `recovery_cut_every`-th disk (0: none) is first recovered with a power cut in the middle;
    every `reopen_every`-th (0: none) is opened a second time, which must find the same
    state."""
    from streamkeep.tools.crashbench.faultfs import TrackingFS

    image = os.path.join(scratch, "image")
    os.makedirs(image)
    fs = TrackingFS()
    fds: dict[int, int] = {}
    last = max(chosen, default=-1)
    src = run.directory.rstrip("/")
    cache: dict[str, tuple[str, Any, float, int]] = {}
    run.checker.hash_all()
    counts: dict[str, int] = {}  # calls so far by point_kind: the ordinals of points

    def path(p: str) -> str:
        return image + p[len(src):] if p.startswith(src) else p

    before = tuple(m for m in models if m == BITROT)
    after = tuple(m for m in models if m != BITROT)

    def judge_all(i: int, call: Call, at: tuple[str, ...]) -> Iterator[Outcome]:
        for model in at:
            # One generator per point and model: a point replays alone (--replay) with the
            # same torn bytes as in the whole run.
            rng = random.Random(f"crashbench-powerloss:{seed}:{i}:{model}")
            kind = point_kind(call)
            yield _judge(run, fs, image, scratch, Point(i, kind, counts[kind]), model, rng,
                         cache, _every(i, recovery_cut_every), _every(i, reopen_every))

    for i, call in enumerate(run.calls):
        if i > last:
            break
        kind = point_kind(call)
        counts[kind] = counts.get(kind, 0) + 1
        # A power cut at a write leaves it in the page cache; under bit rot (a process crash,
        # then damage at rest) and at any other call, the cut call did not happen.
        if i in chosen:
            yield from judge_all(i, call, before if call.kind == "write" else models)
        _apply(fs, call, fds, path)
        if i in chosen and call.kind == "write":
            yield from judge_all(i, call, after)
    fs.abandon()
    fs.release()


def _every(n: int, period: int) -> bool:
    return period > 0 and n % period == 0


def _apply(fs: Any, call: Call, fds: dict[int, int], path: Callable[[str], str]) -> None:
    m, a = call.method, call.args
    if m == "adopt":
        p = path(a[0])
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:  # written by another process: durable as it is found
            f.write(a[1])
    elif m in ("open_append", "open_write_new", "lock"):
        fds[call.result] = getattr(fs, m)(path(a[0]), *a[1:])
    elif m in ("write", "fdatasync", "close", "ftruncate", "unlock"):
        getattr(fs, m)(fds[a[0]], *a[1:])
        if m in ("close", "unlock"):
            del fds[a[0]]
    elif m in ("truncate", "unlink", "fsync_dir"):
        getattr(fs, m)(path(a[0]), *a[1:])
    elif m == "rename":
        fs.rename(path(a[0]), path(a[1]))
    else:  # pragma: no cover - every logged method is handled above
        raise AssertionError(m)


def _judge(run: RecordedRun, fs: Any, image: str, scratch: str, point: Point, model: str,
           rng: random.Random, cache: dict, cut_recovery: bool, reopen: bool) -> Outcome:
    call = run.calls[point.index]
    dst = os.path.join(scratch, "after")
    shutil.rmtree(dst, ignore_errors=True)
    damage = fs.materialise(image, dst, rng, model).get(BITROT)
    k = call.op
    key = _disk_key(dst)
    cached = key in cache
    if not cached:
        cache[key] = _recover(dst, scratch, rng, cut_recovery, reopen,
                              _Clock(BASE_TIME + k), run.checker.workload)
    found: Recovered = cache[key]
    recovery, state, seconds, log_bytes = found.kind, found.state, found.seconds, \
        found.log_bytes
    outcome = Outcome(point, model, recovery, k, None, 0, 0.0, recovery_s=seconds,
                      log_bytes=log_bytes, cached=cached)
    if recovery == "refused":
        if damage is not None:  # detected: the refusal must name the damaged file
            if damage.partition(":")[0] not in state:
                outcome.violations.append(Violation(
                    "bitrot", f"a flipped bit at {damage} was refused without naming the "
                    f"file: {state}"))
            return outcome
        outcome.violations.append(Violation(
            "recovery", f"the directory does not open after a power loss at {point.kind} "
            f"#{point.ordinal} ({model}): {state}"))
        return outcome
    if isinstance(state, Violation):
        outcome.violations.append(state)
        return outcome
    next_hash = run.checker.hash_at(k + 1) if k < run.ops else None
    verdict = run.checker.judge(state, call.at, acked=k, next_hash=next_hash)
    outcome.prefix, outcome.lost_acked = verdict.prefix, verdict.lost_acked
    outcome.loss_window_s = verdict.loss_window_s
    outcome.violations.extend(verdict.violations)
    # The next `XADD *` IDs, with the clock where it stood at this crash: asked for when the
    # disk was first recovered, and again (a cheap open of the same disk) at every 7th point
    # that lost acknowledged operations, whose IDs must not come back.
    next_ids = found.next_ids if not cached else (
        _next_ids(dst, _Clock(BASE_TIME + k)) if verdict.lost_acked and _every(point.index, 7)
        and run.checker.workload == "streams" else ())
    for stream, new_id in zip(KEYS, next_ids, strict=False):
        first = run.checker.ids.get((stream, new_id))
        if first is not None and first < k:  # acknowledged before the crash
            outcome.violations.append(Violation(
                "ids-reused", f"after recovery, XADD {stream.decode()} * returned "
                f"{new_id.decode()}, the ID op {first} was acknowledged with"))
    return outcome


def _disk_key(directory: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name in sorted(os.listdir(directory)):
        if name == "LOCK":
            continue
        h.update(name.encode() + b"\0")
        with open(os.path.join(directory, name), "rb") as f:
            h.update(f.read())
        h.update(b"\0\0")
    return h.hexdigest()


def _recover(dst: str, scratch: str, rng: random.Random, cut_recovery: bool, reopen: bool,
             clock: Callable[[], int], workload: str = "streams") -> Recovered:
    """Open `dst` (after a power cut during a first recovery, with `cut_recovery`), read its
    state, open it again with `reopen` (the same state must come back), and (the streams
    workload) ask each stream for the ID of its next `XADD *` with the clock where it stood at
    the crash."""
    from streamkeep.engine.wire.errors import StreamkeepError

    log_bytes = sum(os.path.getsize(os.path.join(dst, n)) for n in os.listdir(dst)
                    if n.endswith(".aof"))
    before = {n: os.path.getsize(os.path.join(dst, n)) for n in os.listdir(dst)}
    if cut_recovery:
        dst = _cut_during_recovery(dst, scratch, rng)
    began = time.perf_counter()
    seconds, problem = 0.0, None
    next_ids: tuple = ()
    try:
        for attempt in range(2 if reopen else 1):
            with open_engine(dst, auto_aof_rewrite_percentage=0, clock=clock) as engine:
                if attempt == 0:
                    seconds = time.perf_counter() - began
                    state = read_state(EngineTarget(engine), workload)
                elif state_hash(read_state(EngineTarget(engine), workload)) != state_hash(state):
                    problem = Violation("recovery", "recovering twice gave two states")
                if attempt == (1 if reopen else 0) and workload == "streams":
                    next_ids = tuple(engine.execute("XADD", key, "*", "op", "-1")
                                     for key in KEYS)
    except (StreamkeepError, OSError) as err:
        if seconds == 0.0:
            return Recovered("refused", str(err), time.perf_counter() - began, log_bytes, ())
        return Recovered("clean", Violation("recovery", f"a second open refused: {err}"),
                         seconds, log_bytes, ())
    after = {n: os.path.getsize(os.path.join(dst, n)) for n in os.listdir(dst)}
    truncated = any(n in after and after[n] < size for n, size in before.items()
                    if n.endswith(".aof"))
    return Recovered("truncated" if truncated else "clean", problem or state, seconds,
                     log_bytes, next_ids)


def _next_ids(dst: str, clock: Callable[[], int]) -> tuple:
    from streamkeep.engine.wire.errors import StreamkeepError

    try:
        with open_engine(dst, auto_aof_rewrite_percentage=0, clock=clock) as engine:
            return tuple(engine.execute("XADD", key, "*", "op", "-1") for key in KEYS)
    except (StreamkeepError, OSError):
        return ()  # the first open's verdict stands


@dataclass
class Recovered:
    """What opening a crashed disk found (shared by identical disks)."""

    kind: str  # clean | truncated | refused
    state: Any  # the State, the refusal's message, or a recovery Violation
    seconds: float  # the first open's time
    log_bytes: int
    next_ids: tuple  # per stream, the ID an XADD * got afterwards


def _cut_during_recovery(dst: str, scratch: str, rng: random.Random) -> str:
    """Open `dst` on a TrackingFS that cuts the power at a random file operation of the
    recovery; return the directory the second power loss leaves."""
    from streamkeep.engine.wire.errors import StreamkeepError
    from streamkeep.tools.crashbench.faultfs import PowerCut, TrackingFS, stop_threads

    fs = TrackingFS(cut_at=rng.randint(1, 12))
    engine = None
    try:
        engine = open_engine(dst, fs, auto_aof_rewrite_percentage=0)
        engine.close()
    except PowerCut:
        pass
    except (StreamkeepError, OSError):
        pass  # the real open afterwards reports the refusal
    fs.abandon()
    stop_threads(engine)
    again = os.path.join(scratch, "after-recovery-cut")
    shutil.rmtree(again, ignore_errors=True)
    fs.materialise(dst, again, rng, "none")
    fs.release()
    return again
