"""The server sections' harness: the run's ``redis-benchmark`` against a server
(:func:`redis_benchmark`: requests/s, latency, the server's CPU per command), the server
section's XADD and latency rows, and the summary tables (both servers side by side).
Must not touch: the servers' start and stop (:mod:`.processes`), engine internals.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.latency import LATENCY_SECONDS, bench_latency
from streamkeep.tools.bench.workload import Measurement, Skip, run_child
from streamkeep.tools.servers import HOST, cpu_seconds
from streamkeep.tools.text_width import Table

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

SERVER_CLIENTS = 50  # redis-benchmark -c
BENCH_KEY = "mystream"
BENCH_COMMAND = ("XADD", BENCH_KEY, "*", "myfield", "myvalue")  # redis-benchmark 7.0: no -t xadd
BENCH_TIMEOUT = 600.0  # seconds one redis-benchmark run may take


def server_requests(n: int, pipeline: int) -> int:
    """redis-benchmark -n for a run of N: N/2 at -P 1, N pipelined (at least 5,000)."""
    return max(5_000, n // 2 if pipeline <= 1 else n)


class RedisBenchmark:
    """The ``redis-benchmark`` binary; ``describe`` says how the server section runs it."""

    def __init__(self, n: int) -> None:
        path = shutil.which("redis-benchmark")
        if path is None:
            raise Skip("redis-benchmark not found on PATH")
        self.path, self.n = path, n
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True,
                                 timeout=10, **temporaries.child_options()).stdout.split()
        except (OSError, subprocess.SubprocessError):
            out = []
        self.version = out[1] if len(out) > 1 else "?"

    def describe(self) -> list[str]:
        return [f"server: redis-benchmark {self.version} -c {SERVER_CLIENTS} -n "
                f"{server_requests(self.n, 1):,} (-P 1) / {server_requests(self.n, 16):,} "
                f"(-P 16) --csv {' '.join(BENCH_COMMAND)} (one stream, deleted before each "
                f"run); requests/s as redis-benchmark reports them"]


def benchmark_tool(env: BenchEnv) -> RedisBenchmark:
    """The run's ``redis-benchmark`` (Skip when it is not installed)."""
    return env.shared("redis-benchmark", lambda: RedisBenchmark(env.n))  # type: ignore[no-any-return]


def parse_benchmark_csv(text: str) -> dict[str, float]:
    """The one data row of ``redis-benchmark --csv`` output: {"rps": ..., "p50_latency_ms":
    ...}. ValueError when there is none."""
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if row and row[0] == "test":
            header = row
        elif row and header is not None and len(row) == len(header):
            return {name: float(value) for name, value in zip(header[1:], row[1:], strict=True)}
    raise ValueError(f"no data row in redis-benchmark's output: {text.strip()[-300:]!r}")


def redis_benchmark(env: BenchEnv, server: Any, pipeline: int, args: Sequence[str],
                    connection: Sequence[str] | None = None,
                    counted: Callable[[], int] | None = None,
                    scale: int = 1) -> Measurement:
    """``redis-benchmark -c 50 -n <requests> -P pipeline --csv *args`` against ``server``
    (``connection`` instead of ``-h HOST -p <its port>``: another port, --tls, --user): its
    requests/s, figures its p50/p99 latency and the server's CPU per command (``server_cpu_us``,
    over ``counted()`` commands when given, else the requests). ``scale``: that many times the
    run's requests (a run of several seconds, where the rate is read to a quarter second).
    A failed or overlong run is an AssertionError (:func:`.workload.run_child`)."""
    requests = server_requests(env.n, pipeline) * scale
    where = ["-h", HOST, "-p", str(server.port)] if connection is None else list(connection)
    cpu = cpu_seconds(server.pid)
    done, _seconds = run_child([benchmark_tool(env).path, *where, "-c", str(SERVER_CLIENTS),
                                "-n", str(requests), "-P", str(pipeline), "--csv", *args],
                               timeout=BENCH_TIMEOUT)
    cpu_after = cpu_seconds(server.pid)
    row = parse_benchmark_csv(done.stdout)
    commands = counted() if counted is not None else requests
    figures = {"p50_ms": row.get("p50_latency_ms", 0.0), "p99_ms": row.get("p99_latency_ms", 0.0)}
    if cpu is not None and cpu_after is not None and commands:
        figures["server_cpu_us"] = (cpu_after - cpu) / commands * 1e6
    return Measurement(row["rps"], count=requests, figures=figures)


def bench_xadd(env: BenchEnv, server: Any, pipeline: int,
               connection: Sequence[str] | None = None, key: str = BENCH_KEY,
               scale: int = 1) -> Measurement:
    """redis-benchmark ``XADD <key> * myfield myvalue`` against ``server``, the stream
    deleted before and after and its length checked (``connection``: as redis_benchmark's)."""
    client = server.client
    client.delete(key)
    length = [0]

    def counted() -> int:
        length[0] = int(client.xlen(key))
        return length[0]

    m = redis_benchmark(env, server, pipeline, (BENCH_COMMAND[0], key, *BENCH_COMMAND[2:]),
                        connection, counted, scale)
    if length[0] < m.count:  # type: ignore[operator]  # (-P may send a few more than -n)
        raise AssertionError(f"{server.name} holds {length[0]} entries after {m.count} XADDs")
    client.delete(key)
    return m


def latency(env: BenchEnv, server: Any) -> Measurement:
    """The delivery-latency row against ``server``."""
    return bench_latency(server, LATENCY_SECONDS.seconds(env))


def _by_key(results: Sequence[Any]) -> dict[str, Any]:
    return {r.bench.key: r for r in results}


def _met(figures: Sequence[Any], found: Callable[[Any], bool],
         target: Callable[[Any], str]) -> tuple[str, str]:
    """The target and verdict ("met"/"not met") of the figure ``found`` picks, else blanks."""
    for fr in figures:
        if found(fr.figure) and fr.figure.target is not None:
            return target(fr.figure), {"PASS": "met", "FAIL": "not met"}.get(fr.verdict,
                                                                             fr.verdict)
    return "", ""


# (workload, streamkeep row, redis-server row, what: "rate" or a figure)
SUMMARY_ROWS: tuple[tuple[str, str, str | None, str], ...] = (
    (f"XADD, {SERVER_CLIENTS} clients, -P 1", "server.xadd_p1", "server.redis_xadd_p1", "rate"),
    (f"XADD, {SERVER_CLIENTS} clients, -P 16", "server.xadd_p16", "server.redis_xadd_p16",
     "rate"),
    (f"XADD, {SERVER_CLIENTS} clients, -P 16, streamkeep appendfsync always",
     "server.xadd_p16_always", None, "rate"),
    *((f"latency {name}", "server.latency", "server.redis_latency", f"{key}_us")
      for name, key in (("p50", "p50"), ("p99", "p99"), ("p99.9", "p999"), ("max", "max"))),
)


def summary(results: Sequence[Any], figures: Sequence[Any]) -> Table | None:
    """The server section, streamkeep against redis-server row by row: ops/s or latency, the
    ratio, the target (of the figure on the same rows) met or not; None when it did not run."""
    by_key = _by_key(results)
    if not any(key in by_key for _w, key, _r, _what in SUMMARY_ROWS):
        return None

    def value(key: str | None, what: str) -> float | None:
        r = by_key.get(key) if key else None
        if r is None or r.rate is None:
            return None
        return r.rate if what == "rate" else r.figures.get(what)

    def cell(v: float | None, what: str) -> str:
        return "-" if v is None else f"{v:,.0f}/s" if what == "rate" else f"{v / 1000:.3f} ms"

    rows = []
    for workload, sk, ref, what in SUMMARY_ROWS:
        if sk not in by_key and (ref is None or ref not in by_key):
            continue
        mine, theirs = value(sk, what), value(ref, what)
        target, verdict = _met(figures, lambda f, sk=sk, ref=ref, what=what: (  # type: ignore[misc]
            f.numerator == sk and (f.denominator == ref if what == "rate" else f.extra == what)),
            lambda f: f"{'<=' if f.at_most else '>='} " + (
                f"{f.target:g}x" if f.unit == "x" else f"{f.target / 1000:g} ms"))
        rows.append([workload, cell(mine, what), cell(theirs, what),
                     f"{mine / theirs:.2f}x" if mine and theirs else "", target, verdict])
    return Table(["server: workload", "streamkeep", "redis-server", "ratio", "target", "met"],
                 rows, right={1, 2, 3}, verdict=5)


def ratio_range(mine: Sequence[float], theirs: Sequence[float]) -> tuple[float, float] | None:
    """The lowest and highest ratio of the repeats, run i against run i; None without runs."""
    ratios = [a / b for a, b in zip(mine, theirs, strict=False) if b]
    return (min(ratios), max(ratios)) if ratios else None


def section_summary(results: Sequence[Any], figures: Sequence[Any],
                    section: str) -> Table | None:
    """A section whose rows come in pairs (``<section>.X`` and ``<section>.redis_X``), row by
    row: the best rates, their ratio, the ratios' range over the repeats (run i of one
    against run i of the other), the target met or not; None when the section did not run."""
    by_key, own, ref = _by_key(results), f"{section}.", f"{section}.redis_"
    rows = []
    for mine in results:
        key = mine.bench.key
        theirs = by_key.get(ref + key[len(own):])
        if not key.startswith(own) or key.startswith(ref) or theirs is None:
            continue
        span = ratio_range(mine.runs, theirs.runs)
        target, verdict = _met(figures, lambda f, key=key: f.numerator == key,  # type: ignore[misc]
                               lambda f: f">= {f.target:g}x")
        rows.append([mine.bench.workload.rsplit(": ", 1)[0],
                     f"{mine.rate:,.0f}/s" if mine.rate else "-",
                     f"{theirs.rate:,.0f}/s" if theirs.rate else "-",
                     f"{mine.rate / theirs.rate:.2f}x" if mine.rate and theirs.rate else "-",
                     f"{span[0]:.2f}-{span[1]:.2f}x" if span else "-", target, verdict])
    if not rows:
        return None
    return Table([f"{section}: workload", "streamkeep", "redis-server", "ratio",
                  "repeats' range", "target", "met"], rows, right={1, 2, 3, 4}, verdict=6)
