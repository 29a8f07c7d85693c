"""The ``server`` section: the network server against a real redis-server, in one run.

Owns the section's workloads and how its rows reach their processes: a ``streamkeep serve``
child process and a redis-server persisting alike (AOF, appendfsync everysec) on free loopback
ports, shared by the section's rows through ``BenchEnv.shared`` (:func:`streamkeep`,
:func:`redis_aof`; under another policy, e.g. the ``always`` pair of the lists section's
durable-broker rows, another pair alike); Debian's ``redis-benchmark`` driving XADD with 50
clients (:func:`xadd`, :func:`bench_redis_benchmark`, ``-P 1`` and ``-P 16``, its ``--csv``
requests/s); the delivery
latency rows (:func:`latency`, the harness in :mod:`.latency`); and the side-by-side summary
table the report prints (:func:`summary`).
Must not touch: the section declarations (rows, figures and targets: .sections), the processes'
start and stop (:mod:`.processes`), engine internals (the server is a child process, driven
over RESP only), or any data outside its temp dirs.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.latency import (
    LATENCY_SECONDS,
    QUICK_LATENCY_SECONDS,
    bench_latency,
)
from streamkeep.tools.bench.processes import RedisAofServer, StreamkeepServer
from streamkeep.tools.bench.tables import Table
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST, cpu_seconds

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

SERVER_CLIENTS = 50  # redis-benchmark -c
BENCH_KEY = "mystream"
BENCH_COMMAND = ("XADD", BENCH_KEY, "*", "myfield", "myvalue")  # redis-benchmark 7.0: no -t xadd
BENCH_TIMEOUT = 600.0  # seconds one redis-benchmark run may take


def server_requests(n: int, pipeline: int) -> int:
    """redis-benchmark -n for a run of N: N/2 at -P 1, N pipelined (at least 5,000)."""
    return max(5_000, n // 2 if pipeline <= 1 else n)


def latency_seconds(env: BenchEnv) -> float:
    """The latency rows' seconds of producing."""
    return QUICK_LATENCY_SECONDS if env.quick else LATENCY_SECONDS


# --- the rows' processes, shared by the run ------------------------------------------------------


def streamkeep(env: BenchEnv, appendfsync: str = "everysec") -> StreamkeepServer:
    """The run's ``streamkeep serve`` child process under that policy."""
    server: StreamkeepServer = env.shared(f"streamkeep serve --appendfsync {appendfsync}",
                                          lambda: StreamkeepServer(appendfsync).start())
    return server


def redis_aof(env: BenchEnv, appendfsync: str = "everysec") -> RedisAofServer:
    """The section's reference: redis-server with an everysec AOF (or under that policy)."""
    if not env.use_redis:
        raise Skip("disabled (--no-redis)")
    name = "redis-server --appendonly yes" + (
        "" if appendfsync == "everysec" else f" --appendfsync {appendfsync}")
    server: RedisAofServer = env.shared(name, lambda: RedisAofServer(appendfsync).start())
    return server


def benchmark_tool(env: BenchEnv) -> RedisBenchmark:
    """The run's ``redis-benchmark`` (Skip when it is not installed), shared by the sections
    that drive a server with it."""
    tool: RedisBenchmark = env.shared("redis-benchmark", lambda: RedisBenchmark(env.n))
    return tool


def xadd(env: BenchEnv, server: Any, pipeline: int) -> Measurement:
    """The redis-benchmark XADD row against ``server`` at ``-P pipeline``."""
    return bench_redis_benchmark(server, benchmark_tool(env), server_requests(env.n, pipeline),
                                 pipeline)


def latency(env: BenchEnv, server: Any) -> Measurement:
    """The delivery-latency row against ``server``."""
    return bench_latency(server, latency_seconds(env))


# --- redis-benchmark -----------------------------------------------------------------------------


class RedisBenchmark:
    """The ``redis-benchmark`` binary; ``describe`` says how the section runs it."""

    def __init__(self, n: int) -> None:
        path = shutil.which("redis-benchmark")
        if path is None:
            raise Skip("redis-benchmark not found on PATH")
        self.path = path
        self.n = n
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

    def stop(self) -> None:
        pass


def parse_benchmark_csv(text: str) -> dict[str, float]:
    """The one data row of ``redis-benchmark --csv`` output: {"rps": ..., "p50_latency_ms":
    ...}. ValueError when there is none."""
    header: list[str] | None = None
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "test":
            header = row
            continue
        if header is not None and len(row) == len(header):
            return {name: float(value) for name, value in zip(header[1:], row[1:], strict=True)}
    raise ValueError(f"no data row in redis-benchmark's output: {text.strip()[-300:]!r}")


def run_redis_benchmark(server: Any, tool: RedisBenchmark, requests: int, pipeline: int,
                        args: Sequence[str], connection: Sequence[str] | None = None
                        ) -> tuple[dict[str, float], float | None]:
    """``redis-benchmark -c 50 -n requests -P pipeline --csv *args`` against ``server`` (``args``
    a command, or options such as ``-t set -r 100000``; ``connection`` instead of ``-h HOST
    -p <its port>``: another port, --tls and its files, --user): its CSV row and the server's
    CPU seconds meanwhile (None when unknown). A failed or overlong run is an AssertionError."""
    where = ["-h", HOST, "-p", str(server.port)] if connection is None else list(connection)
    cmd = [tool.path, *where, "-c", str(SERVER_CLIENTS),
           "-n", str(requests), "-P", str(pipeline), "--csv", *args]
    cpu = cpu_seconds(server.pid)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BENCH_TIMEOUT,
                              **temporaries.child_options())
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"redis-benchmark against {server.name} took over "
                             f"{BENCH_TIMEOUT:g} s") from exc
    cpu_after = cpu_seconds(server.pid)
    if done.returncode != 0:
        raise AssertionError(f"redis-benchmark against {server.name} exited {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")
    used = cpu_after - cpu if cpu is not None and cpu_after is not None else None
    return parse_benchmark_csv(done.stdout), used


def benchmark_measurement(server: Any, name: str, row: dict[str, float], cpu: float | None,
                          requests: int, pipeline: int, done: int | None = None) -> Measurement:
    """A redis-benchmark row as a Measurement: its requests/s, p50/p99 latency and the server's
    CPU per command (figure ``server_cpu_us``; over ``done`` commands when the server counted
    them, else ``requests``), with a note naming them."""
    figures = {"p50_ms": row.get("p50_latency_ms", 0.0), "p99_ms": row.get("p99_latency_ms", 0.0)}
    notes = []
    done = requests if done is None else done
    if cpu is not None and done:
        figures["server_cpu_us"] = cpu / done * 1e6
        notes.append(f"{name} -P {pipeline}, {server.name}: server CPU "
                     f"{figures['server_cpu_us']:.1f} us per {name}; redis-benchmark latency "
                     f"p50 {figures['p50_ms']:.3f} ms, p99 {figures['p99_ms']:.3f} ms")
    return Measurement(row["rps"], count=requests, figures=figures, notes=notes)


def bench_redis_benchmark(server: Any, tool: RedisBenchmark, requests: int,
                          pipeline: int, connection: Sequence[str] | None = None,
                          key: str = BENCH_KEY) -> Measurement:
    """``redis-benchmark -c 50 -n requests -P pipeline --csv XADD mystream * myfield myvalue``
    against ``server`` (``connection``: as run_redis_benchmark's; ``key`` another stream);
    its requests/s, with its p50/p99 latency, the server's CPU per XADD (figure
    ``server_cpu_us``) and the stream's length afterwards checked."""
    client = server.client
    client.delete(key)
    command = (BENCH_COMMAND[0], key, *BENCH_COMMAND[2:])
    row, cpu = run_redis_benchmark(server, tool, requests, pipeline, command, connection)
    length = int(client.xlen(key))
    if length < requests:  # with -P it may send a few more than -n
        raise AssertionError(f"{server.name} holds {length} entries after {requests} XADDs")
    client.delete(key)
    return benchmark_measurement(server, "XADD", row, cpu, requests, pipeline, length)


# --- the section's summary -----------------------------------------------------------------------


# (workload, streamkeep row, redis-server row, what: "rate" or a figure, the ratio's Figure key)
SUMMARY_ROWS: tuple[tuple[str, str, str | None, str], ...] = (
    (f"XADD, {SERVER_CLIENTS} clients, -P 1", "server.xadd_p1", "server.redis_xadd_p1", "rate"),
    (f"XADD, {SERVER_CLIENTS} clients, -P 16", "server.xadd_p16", "server.redis_xadd_p16",
     "rate"),
    (f"XADD, {SERVER_CLIENTS} clients, -P 16, streamkeep appendfsync always",
     "server.xadd_p16_always", None, "rate"),
    ("latency p50", "server.latency", "server.redis_latency", "p50_us"),
    ("latency p99", "server.latency", "server.redis_latency", "p99_us"),
    ("latency p99.9", "server.latency", "server.redis_latency", "p999_us"),
    ("latency max", "server.latency", "server.redis_latency", "max_us"),
)


def summary(results: Sequence[Any], figures: Sequence[Any]) -> Table | None:
    """streamkeep against redis-server, row by row: ops/s or latency, the ratio, the target
    (from the FIGURES on the same rows) met or not; None when no server row ran. ``results``
    and ``figures`` are the runner's Result and FigureResult lists."""
    by_key = {r.bench.key: r for r in results}
    if not any(key in by_key for _w, key, _r, _what in SUMMARY_ROWS):
        return None

    def value(key: str | None, what: str) -> float | None:
        r = by_key.get(key) if key else None
        if r is None or r.rate is None:
            return None
        return r.rate if what == "rate" else r.figures.get(what)

    def cell(v: float | None, what: str) -> str:
        if v is None:
            return "-"
        return f"{v:,.0f}/s" if what == "rate" else f"{v / 1000:.3f} ms"

    rows = []
    for workload, sk, ref, what in SUMMARY_ROWS:
        if sk not in by_key and (ref is None or ref not in by_key):
            continue
        mine, theirs = value(sk, what), value(ref, what)
        ratio = f"{mine / theirs:.2f}x" if mine and theirs else ""
        target = verdict = ""
        for fr in figures:
            f = fr.figure
            same = f.numerator == sk and (f.denominator == ref if what == "rate"
                                          else f.extra == what)
            if same and f.target is not None:
                target = (f"{'<=' if f.at_most else '>='} "
                          + (f"{f.target:g}x" if f.unit == "x" else f"{f.target / 1000:g} ms"))
                verdict = {"PASS": "met", "FAIL": "not met"}.get(fr.verdict, fr.verdict)
        rows.append([workload, cell(mine, what), cell(theirs, what), ratio, target, verdict])
    return Table(["server: workload", "streamkeep", "redis-server", "ratio", "target", "met"],
                 rows, right={1, 2, 3}, verdict=5)

