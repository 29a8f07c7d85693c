"""``streamkeep bench``: throughput of the engine, with real Redis measured in the same run.

Owns the benchmark registry and its report: reusable workload functions that return messages per
second (``bench_embedded_xadd(n)``, ``bench_embedded_consume(n)``, ``bench_redis_xadd(client, n)``,
``bench_redis_consume(client, n)``, ...), the :data:`SECTIONS` that name and group them (each
benchmark may carry an issue target), the :data:`RATIOS` between sections, the lifetime of the
reference redis-server the bench starts on a free loopback port, and the aligned table it prints.
Later issues add sections here (AOF, snapshot, server) rather than new commands.
Must not touch: engine internals (only ``Engine.execute``) or any data outside its temp dirs.

Timing: every workload runs a warm-up on a separate key first, then times only its loop with
``time.perf_counter``; a row's rate is messages per second and ``us/op`` its inverse.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

FULL_N = 200_000
QUICK_N = 5_000
BATCH = 100  # XREADGROUP COUNT in the consume loops
PIPELINE = 100  # commands per redis-py pipeline round trip

XADD_TARGET = 250_000  # embedded XADD/s, one thread
CONSUME_TARGET = 150_000  # embedded consumed (read + acked) msgs/s

KEY = "bench"
GROUP = "g"
CONSUMER = "c"


def warmup_size(n: int) -> int:
    """Warm-up operations before a timed loop of n: a tenth, between 200 and 20,000."""
    return max(200, min(n // 10, 20_000))


class Skip(Exception):
    """A benchmark cannot run on this machine (e.g. no redis-server); reported, not fatal."""


# --- embedded workloads --------------------------------------------------------------------------


def _new_engine() -> Any:
    from engine import Engine

    return Engine.open()


def _embedded_fill(execute: Callable[..., Any], key: str, n: int) -> None:
    for _ in range(n):
        execute("XADD", key, "*", "f", "v")


def _embedded_consume_loop(execute: Callable[..., Any], key: str, batch: int) -> int:
    """XREADGROUP COUNT batch ``>`` then XACK of the returned IDs until drained; messages seen."""
    count = str(batch)
    consumed = 0
    while True:
        reply = execute("XREADGROUP", "GROUP", GROUP, CONSUMER, "COUNT", count,
                        "STREAMS", key, ">")
        if not reply:
            return consumed
        ids = [entry[0] for entry in reply[0][1]]
        execute("XACK", key, GROUP, *ids)
        consumed += len(ids)


def bench_embedded_xadd(n: int) -> float:
    """XADD bench * f v, n times on one thread through ``Engine.execute``; adds per second."""
    execute = _new_engine().execute
    _embedded_fill(execute, "warmup", warmup_size(n))
    start = time.perf_counter()
    for _ in range(n):
        execute("XADD", KEY, "*", "f", "v")
    return n / (time.perf_counter() - start)


def bench_embedded_consume(n: int, batch: int = BATCH) -> float:
    """n pre-filled entries, one group, XREADGROUP COUNT batch + XACK until drained; msgs/s."""
    execute = _new_engine().execute
    warm = warmup_size(n)
    _embedded_fill(execute, "warmup", warm)
    execute("XGROUP", "CREATE", "warmup", GROUP, "0")
    if _embedded_consume_loop(execute, "warmup", batch) != warm:
        raise AssertionError("embedded warm-up consumed the wrong number of messages")
    _embedded_fill(execute, KEY, n)
    execute("XGROUP", "CREATE", KEY, GROUP, "0")
    start = time.perf_counter()
    consumed = _embedded_consume_loop(execute, KEY, batch)
    elapsed = time.perf_counter() - start
    if consumed != n:
        raise AssertionError(f"embedded consume saw {consumed} messages, expected {n}")
    return consumed / elapsed


# --- redis-py workloads (the reference) ----------------------------------------------------------


def _entries(reply: Any) -> list[Any]:
    """The entries of a one-stream XREADGROUP reply, RESP2 (list) or RESP3 (dict) shaped."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return next(iter(reply.values()))[0]
    return reply[0][1]


def _redis_fill(client: Any, key: str, n: int) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        for _ in range(min(1000, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def _redis_xadd_loop(client: Any, key: str, n: int, pipeline: int) -> None:
    if pipeline <= 1:
        for _ in range(n):
            client.xadd(key, {"f": "v"})
        return
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, pipeline):
        for _ in range(min(pipeline, n - start)):
            pipe.xadd(key, {"f": "v"})
        pipe.execute()


def _redis_consume_loop(client: Any, key: str, batch: int, pipelined: bool) -> int:
    """Like the embedded loop. ``pipelined`` sends each XACK with the next XREADGROUP in one
    round trip (the reads still wait for the previous reply: the IDs to ack come from it)."""
    consumed = 0
    reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
    pipe = client.pipeline(transaction=False)
    while entries := _entries(reply):
        ids = [entry[0] for entry in entries]
        consumed += len(ids)
        if pipelined:
            pipe.xack(key, GROUP, *ids)
            pipe.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
            _acked, reply = pipe.execute()
        else:
            client.xack(key, GROUP, *ids)
            reply = client.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=batch)
    return consumed


def bench_redis_xadd(client: Any, n: int, pipeline: int = 1) -> float:
    """XADD bench * f v, n times via redis-py (one per round trip, or ``pipeline`` per trip)."""
    client.flushall()
    _redis_xadd_loop(client, "warmup", warmup_size(n), pipeline)
    start = time.perf_counter()
    _redis_xadd_loop(client, KEY, n, pipeline)
    elapsed = time.perf_counter() - start
    client.flushall()
    return n / elapsed


def bench_redis_consume(client: Any, n: int, batch: int = BATCH, pipelined: bool = False) -> float:
    """The embedded consume workload against redis-server via redis-py; msgs/s."""
    client.flushall()
    warm = warmup_size(n)
    _redis_fill(client, "warmup", warm)
    client.xgroup_create("warmup", GROUP, id="0")
    if _redis_consume_loop(client, "warmup", batch, pipelined) != warm:
        raise AssertionError("redis warm-up consumed the wrong number of messages")
    _redis_fill(client, KEY, n)
    client.xgroup_create(KEY, GROUP, id="0")
    start = time.perf_counter()
    consumed = _redis_consume_loop(client, KEY, batch, pipelined)
    elapsed = time.perf_counter() - start
    client.flushall()
    if consumed != n:
        raise AssertionError(f"redis consume saw {consumed} messages, expected {n}")
    return consumed / elapsed


# --- the reference server ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A throw-away ``redis-server`` on a free 127.0.0.1 port: no RDB, no AOF, temp dir."""

    STARTUP_TIMEOUT = 10.0
    ATTEMPTS = 5

    def __init__(self, binary: str = "redis-server") -> None:
        self.binary = binary
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: str | None = None
        self.client: Any = None

    def start(self) -> Any:
        """Start the server and return a connected redis-py client; raises Skip if impossible."""
        try:
            import redis
        except ImportError as exc:
            raise Skip("redis-py not installed") from exc
        path = shutil.which(self.binary)
        if path is None:
            raise Skip(f"{self.binary} not found on PATH")
        self.dir = tempfile.mkdtemp(prefix="streamkeep-bench-")
        log = os.path.join(self.dir, "redis.log")
        for _ in range(self.ATTEMPTS):  # a free port can be taken before redis binds it
            self.port = _free_port()
            self.proc = subprocess.Popen(
                [path, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", self.dir, "--logfile", log],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
            if self._wait(client):
                self.client = client
                return client
            client.close()
            self._stop_process()
        tail = ""
        try:
            with open(log, errors="replace") as f:
                tail = "".join(f.readlines()[-5:]).strip()
        except OSError:
            pass
        self.stop()
        raise Skip(f"redis-server did not start: {tail or 'no log'}")

    def _wait(self, client: Any) -> bool:
        import redis

        deadline = time.monotonic() + self.STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False  # exited, e.g. the port was taken
            try:
                if client.ping():
                    return True
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(0.02)
        return False

    def version(self) -> str:
        return str(self.client.info("server").get("redis_version", "?")) if self.client else "?"

    def _stop_process(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        self._stop_process()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


class BenchEnv:
    """What benchmarks share in one run: N and resources started on first use, stopped by close.

    ``env.redis`` starts the reference server the first time a benchmark asks for it; if that
    fails every later redis benchmark is skipped with the same reason.
    """

    def __init__(self, n: int, use_redis: bool = True) -> None:
        self.n = n
        self.use_redis = use_redis
        self.server: RedisServer | None = None
        self._redis_error: str | None = None if use_redis else "disabled (--no-redis)"

    @property
    def redis(self) -> Any:
        if self._redis_error is not None:
            raise Skip(self._redis_error)
        if self.server is None:
            self.server = RedisServer()
            try:
                self.server.start()
            except Skip as exc:
                self._redis_error = str(exc)
                raise
        return self.server.client

    def describe(self) -> list[str]:
        """Header lines about the resources that were used."""
        if self.server is not None and self.server.client is not None:
            import redis

            return [f"reference: redis-server {self.server.version()} on 127.0.0.1:"
                    f"{self.server.port} (started by this bench, no persistence), "
                    f"redis-py {redis.__version__}"]
        if self._redis_error is not None:
            return [f"reference: none ({self._redis_error})"]
        return []

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> BenchEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- registry ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    key: str  # stable id, "section.name"; ratios refer to it
    workload: str  # the row label
    run: Callable[[BenchEnv], float]  # messages per second
    target: float | None = None  # the minimum, printed with PASS/FAIL


@dataclass(frozen=True)
class Section:
    name: str
    benchmarks: tuple[Benchmark, ...]


@dataclass(frozen=True)
class Ratio:
    workload: str
    reference: str  # what it is compared with
    numerator: str  # Benchmark.key
    denominator: str


SECTIONS: tuple[Section, ...] = (
    Section("embedded", (
        Benchmark("embedded.xadd", "XADD, 1 thread",
                  lambda env: bench_embedded_xadd(env.n), target=XADD_TARGET),
        Benchmark("embedded.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
                  lambda env: bench_embedded_consume(env.n), target=CONSUME_TARGET),
    )),
    Section("redis-py", (
        Benchmark("redis.xadd", "XADD, one at a time",
                  lambda env: bench_redis_xadd(env.redis, env.n)),
        Benchmark("redis.xadd_pipe", f"XADD, pipeline of {PIPELINE}",
                  lambda env: bench_redis_xadd(env.redis, env.n, pipeline=PIPELINE)),
        Benchmark("redis.consume", f"consume: XREADGROUP COUNT {BATCH} + XACK",
                  lambda env: bench_redis_consume(env.redis, env.n)),
        Benchmark("redis.consume_pipe", "consume: XACK + next XREADGROUP pipelined",
                  lambda env: bench_redis_consume(env.redis, env.n, pipelined=True)),
    )),
)

RATIOS: tuple[Ratio, ...] = (
    Ratio("XADD", "redis-py XADD, one at a time", "embedded.xadd", "redis.xadd"),
    Ratio("XADD", f"redis-py XADD, pipeline of {PIPELINE}", "embedded.xadd", "redis.xadd_pipe"),
    Ratio("consume", "redis-py XREADGROUP + XACK", "embedded.consume", "redis.consume"),
    Ratio("consume", "redis-py XACK + next XREADGROUP pipelined", "embedded.consume",
          "redis.consume_pipe"),
)


@dataclass
class Result:
    section: str
    bench: Benchmark
    rate: float | None = None  # best msgs/s over the repeats
    skipped: str | None = None

    @property
    def verdict(self) -> str:
        if self.bench.target is None:
            return ""
        if self.rate is None:
            return "n/a"
        return "PASS" if self.rate >= self.bench.target else "FAIL"


def run_benchmarks(env: BenchEnv, sections: Sequence[Section] | None = None, repeat: int = 1,
                   progress: Callable[[str], None] | None = None) -> list[Result]:
    """Run every benchmark of ``sections`` (default :data:`SECTIONS`), best of ``repeat``;
    skipped ones carry the reason."""
    results = []
    for section in SECTIONS if sections is None else sections:
        for bench in section.benchmarks:
            result = Result(section.name, bench)
            if progress:
                progress(f"{section.name}: {bench.workload}")
            try:
                result.rate = max(bench.run(env) for _ in range(max(1, repeat)))
            except Skip as exc:
                result.skipped = str(exc)
            results.append(result)
    return results


# --- report --------------------------------------------------------------------------------------


def _fmt_rate(rate: float) -> str:
    return f"{rate:,.0f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    """Aligned plain-text table; columns listed in ``right`` are right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w)
               for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def format_results(results: Sequence[Result], n: int) -> str:
    rows = []
    for r in results:
        target = f">= {_fmt_rate(r.bench.target)}" if r.bench.target is not None else ""
        if r.rate is None:
            rows.append([r.section, r.bench.workload, f"{n:,}", "skipped", "", target, r.verdict])
            continue
        rows.append([r.section, r.bench.workload, f"{n:,}", _fmt_rate(r.rate),
                     f"{1e6 / r.rate:.2f}", target, r.verdict])
    table = format_table(["section", "workload", "msgs", "msgs/s", "us/op", "target", "result"],
                         rows, right={2, 3, 4})
    by_key = {r.bench.key: r.rate for r in results}
    ratio_rows = []
    for ratio in RATIOS:
        num, den = by_key.get(ratio.numerator), by_key.get(ratio.denominator)
        if num and den:  # both measured (not skipped, not absent)
            ratio_rows.append([ratio.workload, ratio.reference, f"{num / den:.2f}x"])
    parts = [table]
    if ratio_rows:
        parts.append(format_table(["embedded", "/ reference", "ratio"], ratio_rows, right={2}))
    targeted = [r for r in results if r.bench.target is not None]
    if targeted:
        passed = sum(r.verdict == "PASS" for r in targeted)
        parts.append(f"targets: {passed}/{len(targeted)} PASS")
    skipped = sorted({r.skipped for r in results if r.skipped})
    if skipped:
        parts.append("skipped: " + "; ".join(skipped))
    return "\n\n".join(parts)


def _header(n: int, repeat: int) -> str:
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    python = f"Python {platform.python_version()} ({platform.python_implementation()})"
    load = ""
    if hasattr(os, "getloadavg"):  # other work on the machine skews every figure
        load = "; load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    return "\n".join([
        f"streamkeep bench: {n:,} messages per workload, warm-up {warmup_size(n):,}, "
        f"best of {repeat}; consume batch {BATCH}",
        f"machine: {cores} cores ({usable} usable), {platform.machine()} {platform.system()} "
        f"{platform.release()}; {python}{load}",
    ])


def _parse(args: argparse.Namespace | Sequence[str] | None) -> argparse.Namespace:
    if isinstance(args, argparse.Namespace):
        return args
    from tools.cli import build_parser

    return build_parser().parse_args(["bench", *(args or [])])


def main(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """Run the suite and print the table. 1 only with ``--strict`` and a FAILed target."""
    opts = _parse(args)
    quick = getattr(opts, "quick", False)
    n = getattr(opts, "n", None) or (QUICK_N if quick else FULL_N)
    repeat = max(1, getattr(opts, "repeat", 1) or 1)
    use_redis = not getattr(opts, "no_redis", False)

    print(_header(n, repeat), flush=True)

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            print(f"  running {msg} ...", file=sys.stderr, flush=True)

    with BenchEnv(n, use_redis=use_redis) as env:
        results = run_benchmarks(env, repeat=repeat, progress=progress)
        described = env.describe()
    for line in described:
        print(line)
    print()
    print(format_results(results, n))
    failed = any(r.verdict == "FAIL" for r in results)
    return 1 if failed and getattr(opts, "strict", False) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
