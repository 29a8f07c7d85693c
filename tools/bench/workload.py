"""What every section's workloads share: the value a row's run returns, a row's sizes as data
(:class:`Size`), a workload declared as commands (:class:`Loop`, run by :func:`run_loop`) and the shapes the workloads repeat (a
warm-up then a timed loop; parties or threads taking turns; commands pipelined through
redis-py; a child process timed, or its JSON report; a call timed; a connection to a local
server; a stream read's entries, INFO's fields), the warm-up rule, the key names and
percentiles.
Timing rule: a workload warms up on a separate key first, then times only its loop with
``time.perf_counter``; a row's rate is ops per second and ``us/op`` its inverse.
Must not touch: the registry, the report, any one section's workload.
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools import temporaries
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

BATCH = 100  # XREADGROUP COUNT in the consume loops
KEY, GROUP, CONSUMER = "bench", "g", "c"
CHILD_TIMEOUT = 3600.0
T = TypeVar("T")


def warmup_size(n: int) -> int:
    """Warm-up operations before a timed loop of n: a tenth, between 200 and 20,000."""
    return max(200, min(n // 10, 20_000))


class Skip(StreamkeepError):
    """A row cannot run on this machine (e.g. no redis-server); reported, not fatal."""


@dataclass
class Measurement:
    """One run of a row: its rate, the ops it timed when not the run's N, figures the derived
    figures read (e.g. records per fsync), and notes printed under the tables."""

    rate: float
    count: int | None = None
    figures: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def rate(n: int, seconds: float, **figures: float) -> Measurement:
    return Measurement(n / seconds, count=n, figures=figures)


@dataclass(frozen=True)
class Size:
    """A row's size (or duration) as data: ``full``, or with --quick (a small N too) ``quick``
    when given; with ``per_n`` either is a multiple of N; kept within [least, most]. Called
    with the run's env: a count; :meth:`seconds`: a duration."""

    full: float
    quick: float | None = None
    per_n: bool = False
    least: float = 0
    most: float = math.inf

    def seconds(self, env: BenchEnv) -> float:
        value = self.quick if env.quick and self.quick is not None else self.full
        return min(max(value * env.n if self.per_n else value, self.least), self.most)

    def __call__(self, env: BenchEnv) -> int:
        return int(self.seconds(env))


def clocked(call: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """``call(*args, **kwargs)`` timed: what it returned, and its seconds."""
    began = time.perf_counter()
    value = call(*args, **kwargs)
    return value, time.perf_counter() - began


def connect(port: int, timeout: float | None = None) -> socket.socket:
    """A TCP connection to a local server (Nagle off: a request leaves when it is written)."""
    sock = socket.create_connection((HOST, port), timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def read_entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREAD(GROUP) reply, RESP2 (list) or RESP3 (dict) shaped."""
    if not reply:
        return []
    return next(iter(reply.values()))[0] if isinstance(reply, dict) else reply[0][1]


def info_fields(reply: Any) -> dict[str, str]:
    """An INFO reply's ``name:value`` lines (bytes or str; a dict redis-py parsed as it is)."""
    if isinstance(reply, dict):
        return {k: str(v) for k, v in reply.items()}
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    return dict(line.split(":", 1) for line in text.splitlines()
                if ":" in line and not line.startswith("#"))


def timed(loop: Callable[[str, int], object], n: int, warm: int | None = None) -> float:
    """``loop("warmup", warm)`` untimed (default :func:`warmup_size`; 0: none), then
    ``loop(KEY, n)`` timed: seconds."""
    if warm is None or warm:
        loop("warmup", warmup_size(n) if warm is None else warm)
    return clocked(loop, KEY, n)[1]


@dataclass(frozen=True)
class Loop:
    """A workload declared as commands (argv tuples, all made before the clock starts):
    ``setup`` run untimed, then ``timed``, then ``check``: a command and the reply it must
    give. Its ops: ``ops``, else one per timed command. :func:`run_loop` interprets it."""

    timed: Sequence[Sequence[Any]]
    setup: Sequence[Sequence[Any]] = ()
    ops: int | None = None
    check: tuple[Sequence[Any], Any] | None = None


def xadds(key: str, n: int) -> list[tuple[str, ...]]:
    """n x ``XADD key * f v`` as argv."""
    return [("XADD", key, "*", "f", "v")] * n


def run_loop(execute: Callable[..., Any], loop: Loop) -> float:
    """``loop`` through an engine's ``execute``: its ops per second of the timed commands;
    AssertionError when its check fails."""
    for argv in loop.setup:
        execute(*argv)
    began = time.perf_counter()
    for argv in loop.timed:
        execute(*argv)
    seconds = time.perf_counter() - began
    if loop.check is not None and (got := execute(*loop.check[0])) != loop.check[1]:
        raise AssertionError(f"{' '.join(map(str, loop.check[0]))} gave {got!r} after the loop, "
                             f"expected {loop.check[1]!r}")
    return (len(loop.timed) if loop.ops is None else loop.ops) / seconds


def fill(execute: Callable[..., Any], key: str, n: int) -> None:
    """n x ``XADD key * f v`` through an engine's ``execute``."""
    for _ in range(n):
        execute("XADD", key, "*", "f", "v")


def consume(execute: Callable[..., Any], key: str, limit: float = math.inf) -> int:
    """XREADGROUP GROUP g c COUNT 100 ``>`` then XACK of the IDs read, until drained (or
    ``limit`` entries); entries consumed."""
    done = 0
    while done < limit:
        reply = execute("XREADGROUP", "GROUP", GROUP, CONSUMER, "COUNT", str(BATCH), "STREAMS",
                        key, ">")
        if not reply or not reply[0][1]:
            break
        execute("XACK", key, GROUP, *[entry[0] for entry in reply[0][1]])
        done += len(reply[0][1])
    return done


def pipelined(client: Any, commands: Iterable[Sequence[Any]], batch: int = 1_000) -> None:
    """Each of ``commands`` (argv) through a redis-py client, ``batch`` to a round trip."""
    pipe, queued = client.pipeline(transaction=False), 0
    for argv in commands:
        pipe.execute_command(*argv)
        queued += 1
        if queued == batch:
            pipe.execute()
            queued = 0
    if queued:
        pipe.execute()


def alternate(rounds: int, parties: dict[str, Callable[[int], T]]) -> list[dict[str, T]]:
    """``rounds`` rounds, each every party's call (with the round, from 1) in turn, so that a
    machine whose speed drifts affects all alike: [{party: what it returned}]."""
    return [{name: call(r) for name, call in parties.items()} for r in range(1, rounds + 1)]


def take_turns(steps: dict[str, Callable[[], bool]]) -> dict[str, float]:
    """Each party's ``step()`` in turn, the order rotating every round (the second to run
    finds the data in the CPU's caches: that advantage goes to each in turn), each call timed,
    until every step has returned False (done): seconds per party."""
    spent, order, live = dict.fromkeys(steps, 0.0), list(steps.items()), set(steps)
    clock = time.perf_counter
    while live:
        order.append(order.pop(0))
        for name, step in order:
            if name in live:
                began = clock()
                more = step()
                spent[name] += clock() - began
                if not more:
                    live.discard(name)
    return spent


def chunks(run: Callable[[int, int], object], n: int, size: int) -> Callable[[], bool]:
    """A :func:`take_turns` step running ``run(lo, hi)`` over [0, n) ``size`` at a time."""
    at = [0]

    def step() -> bool:
        lo, at[0] = at[0], min(n, at[0] + size)
        run(lo, at[0])
        return at[0] < n

    return step


def threads_until(threads: int, seconds: float, make: Callable[[int], Callable[[], object]],
                  limit: int | None = None) -> tuple[int, float]:
    """``threads`` threads, released together, each calling its ``make(i)()`` until ``seconds``
    have passed (or it made ``limit // threads`` calls): (calls, seconds from release to the
    last join). A thread's error is raised here."""
    done, errors, deadline = [0] * threads, [], [0.0]
    gate, per_thread = threading.Barrier(threads + 1), max(1, limit // threads) if limit else math.inf

    def worker(index: int) -> None:
        call, clock, count = make(index), time.perf_counter, 0
        gate.wait()
        try:
            while count < per_thread and clock() < deadline[0]:
                call()
                count += 1
        except BaseException as exc:  # reported by the caller
            errors.append(exc)
        done[index] = count

    workers = [threading.Thread(target=worker, args=(i,), name=f"bench-{i}", daemon=True)
               for i in range(threads)]
    for w in workers:
        w.start()
    began = time.perf_counter()
    deadline[0] = began + seconds
    gate.wait()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return sum(done), time.perf_counter() - began


def run_child(argv: Sequence[str], ok: Sequence[int] = (0,), timeout: float = CHILD_TIMEOUT,
              **kwargs: Any) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run a child process to its end, its output captured: it and the seconds from its start
    to its exit. AssertionError with its output's tail when its exit status is not in ``ok``
    or it overruns ``timeout``."""
    what = " ".join(map(str, argv[:4]))
    try:
        done, seconds = clocked(subprocess.run, list(argv), capture_output=True, text=True,
                                check=False, timeout=timeout, **temporaries.child_options(),
                                **kwargs)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{what} took over {timeout:g} s") from None
    if done.returncode not in ok:
        raise AssertionError(f"{what} exited {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-2000:]}")
    return done, seconds


def child_json(argv: Sequence[str], **kwargs: Any) -> Any:
    """Run a child process (:func:`run_child`); the JSON of its last stdout line."""
    return json.loads(run_child(argv, **kwargs)[0].stdout.strip().splitlines()[-1])


def module_child(module: str, *args: object) -> dict[str, Any]:
    """``python -m <module> ARGS...`` in a fresh process: its JSON line (:func:`child_json`)."""
    return child_json([sys.executable, "-m", module, *map(str, args)])


def percentile_us(ordered: Sequence[int], q: float) -> float:
    """Nearest-rank percentile of sorted nanosecond times, in microseconds."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1000


def tail_figures(ordered: Sequence[int], unit: str = "us") -> dict[str, float]:
    """p50, p99, p99.9 and the max of sorted nanosecond times, in ``unit`` ("us" or "ms"):
    figures ``p50_<unit>``, ``p99_<unit>``, ``p999_<unit>``, ``max_<unit>``."""
    scale = 1 if unit == "us" else 1000
    out = {f"{name}_{unit}": percentile_us(ordered, q) / scale
           for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))}
    out[f"max_{unit}"] = ordered[-1] / 1000 / scale
    return out


def delays_ms(delays: list[float]) -> dict[str, float]:
    """p99 and max of delays in seconds, as ms figures ``p99_ms`` and ``max_ms`` (0 if none)."""
    delays.sort()
    if not delays:
        return {"p99_ms": 0.0, "max_ms": 0.0}
    return {"p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))] * 1000,
            "max_ms": delays[-1] * 1000}
