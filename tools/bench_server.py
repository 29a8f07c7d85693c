"""``streamkeep bench server``: the network server against a real redis-server, in one run.

Owns the server section's workloads and their processes: a ``streamkeep serve`` child process
(:class:`StreamkeepServer`) and a redis-server persisting with the same policy (``--save ""
--appendonly yes --appendfsync everysec``) on free loopback ports, shared by the section's rows
through ``BenchEnv.shared``; Debian's ``redis-benchmark`` driving XADD with 50 clients
(:func:`bench_redis_benchmark`, ``-P 1`` and ``-P 16``, its ``--csv`` requests/s); the delivery
latency test (:func:`bench_latency`); and the side-by-side summary table (:func:`format_summary`).
The registry entries (rows, figures, targets) live in :mod:`tools.bench`.
Must not touch: engine internals (the server is a child process, driven over RESP only) or any
data outside its temp dirs.

The latency test: one producer process XADDs ``t=<time.perf_counter_ns()>`` at a fixed rate (a
monotonic schedule: message k is due at start + k / rate; when late it sends every message due
in one write, so the schedule never drifts; open loop: it never waits for a reply), 10 consumers in one group (2 processes x 5
threads, each thread its own redis-py connection) loop on ``XREADGROUP ... COUNT 10 BLOCK 1000
STREAMS lat >`` + ``XACK``; a message's latency is its receive time minus its ``t`` (the same
CLOCK_MONOTONIC across processes on Linux). Messages sent in the first 0.5 s are discarded. The
client side is Python too: the same harness against redis-server shows what it adds.
"""

from __future__ import annotations

import array
import csv
import io
import math
import multiprocessing
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from tools.bench import (
    LATENCY_CONSUMERS,
    LATENCY_RATE,
    SERVER_CLIENTS,
    Measurement,
    RedisServer,
    Skip,
    _entries,
    _free_port,
    format_table,
)

HOST = "127.0.0.1"
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BENCH_KEY = "mystream"
BENCH_COMMAND = ("XADD", BENCH_KEY, "*", "myfield", "myvalue")  # redis-benchmark 7.0: no -t xadd
BENCH_TIMEOUT = 600.0  # seconds one redis-benchmark run may take

LATENCY_KEY = "lat"
LATENCY_GROUP = "g"
LATENCY_PROCESSES = 2  # the consumers' processes (threads spread evenly)
LATENCY_COUNT = 10  # XREADGROUP COUNT
LATENCY_BLOCK_MS = 1000  # XREADGROUP BLOCK
LATENCY_SECONDS, QUICK_LATENCY_SECONDS = 5.0, 1.0
LATENCY_WARMUP_S = 0.5  # messages sent before this are not counted
LATENCY_MAX_BATCH = 100  # a late producer sends at most this many due messages per write
LATENCY_BUCKETS_MS = (1, 2, 3, 5, 10)  # histogram edges: 0-1, 1-2, 2-3, 3-5, 5-10, 10+ ms
LATENCY_START_DELAY_S = 0.2  # between the go message and the producer's first send
LATENCY_READY_TIMEOUT = 60.0  # for the client processes to start and connect
LATENCY_DRAIN_TIMEOUT = 30.0  # for the consumers to drain once the producer is done


def server_requests(n: int, pipeline: int) -> int:
    """redis-benchmark -n for a run of N: N/2 at -P 1, N pipelined (at least 5,000)."""
    return max(5_000, n // 2 if pipeline <= 1 else n)


def _cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds a process's threads have run so far (Linux: the nanosecond schedstat of
    each thread, else the tick-granular user + system time), None if unknown."""
    if pid is None:
        return None
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _log_tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


# --- the servers ---------------------------------------------------------------------------------


class StreamkeepServer(RedisServer):
    """``python -m tools.cli serve`` as a child process on a free 127.0.0.1 port, with a data
    directory in a temp dir (removed at stop); started, it answers PING. Stopping it is
    RedisServer's (SIGTERM, then its final fsync is given longer)."""

    STARTUP_TIMEOUT = 30.0
    STOP_TIMEOUT = 15.0
    ATTEMPTS = 3
    name = "streamkeep"

    def __init__(self, appendfsync: str = "everysec") -> None:
        super().__init__()
        self.appendfsync = appendfsync
        self.banner = ""  # its "listening on" line

    def command(self, data: str) -> list[str]:
        return [sys.executable, "-m", "tools.cli", "serve", "--dir", data, "--port",
                str(self.port), "--bind", HOST, "--appendfsync", self.appendfsync,
                "--loglevel", "warning"]

    def start(self) -> StreamkeepServer:
        try:
            import redis
        except ImportError as exc:
            raise Skip("redis-py not installed") from exc
        self.dir = tempfile.mkdtemp(prefix=f"streamkeep-bench-serve-{self.appendfsync}-")
        log = os.path.join(self.dir, "serve.log")
        for attempt in range(self.ATTEMPTS):  # a free port can be taken before it binds
            self.port = _free_port()
            data = os.path.join(self.dir, f"data{attempt}")
            with open(log, "ab") as out:
                self.proc = subprocess.Popen(self.command(data), cwd=PROJECT_ROOT,
                                             stdin=subprocess.DEVNULL, stdout=out, stderr=out)
            client = redis.Redis(host=HOST, port=self.port, socket_connect_timeout=1)
            if self._wait(client):
                self.client = client
                self.banner = next((ln for ln in _log_tail(log, 50).splitlines()
                                    if " listening on " in ln), "")
                return self
            client.close()
            self._stop_process()
        tail = _log_tail(log)
        self.stop()
        raise Skip(f"streamkeep serve did not start: {tail or 'no log'}")

    def version(self) -> str:
        words = self.banner.split()
        return words[1] if len(words) > 1 and words[0] == "streamkeep" else "?"

    def describe(self) -> list[str]:
        loop = "uvloop" if "(uvloop)" in self.banner else "asyncio" if self.banner else "?"
        return [f"server: streamkeep {self.version()} on {HOST}:{self.port}, a child process "
                f"({os.path.basename(sys.executable)} -m tools.cli serve --appendfsync "
                f"{self.appendfsync}; {loop}), data dir under {self.dir}, removed after the run"]


REDIS_AOF_ARGS = ("--appendonly", "yes", "--appendfsync", "everysec")


class RedisAofServer(RedisServer):
    """The reference for the server section: redis-server with ``--save "" --appendonly yes
    --appendfsync everysec`` (the AOF in its temp dir), so both servers persist alike."""

    name = "redis-server"

    def __init__(self) -> None:
        super().__init__(persistence=REDIS_AOF_ARGS)

    def start(self) -> RedisAofServer:  # type: ignore[override]
        super().start()
        return self

    def describe(self) -> list[str]:
        return [f"server: redis-server {self.version()} on {HOST}:{self.port} (started by this "
                f"bench: --save \"\" {' '.join(REDIS_AOF_ARGS)}, AOF in its temp dir)"]


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
                                 timeout=10).stdout.split()
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


# --- redis-benchmark -----------------------------------------------------------------------------


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


def bench_redis_benchmark(server: Any, tool: RedisBenchmark, requests: int,
                          pipeline: int) -> Measurement:
    """``redis-benchmark -c 50 -n requests -P pipeline --csv XADD mystream * myfield myvalue``
    against ``server``; its requests/s, with its p50/p99 latency, the server's CPU per XADD
    (figure ``server_cpu_us``) and the stream's length afterwards checked."""
    client = server.client
    client.delete(BENCH_KEY)
    cmd = [tool.path, "-h", HOST, "-p", str(server.port), "-c", str(SERVER_CLIENTS),
           "-n", str(requests), "-P", str(pipeline), "--csv", *BENCH_COMMAND]
    cpu = _cpu_seconds(server.pid)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BENCH_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"redis-benchmark against {server.name} took over "
                             f"{BENCH_TIMEOUT:g} s") from exc
    cpu_after = _cpu_seconds(server.pid)
    if done.returncode != 0:
        raise AssertionError(f"redis-benchmark against {server.name} exited {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()[-300:]}")
    row = parse_benchmark_csv(done.stdout)
    length = int(client.xlen(BENCH_KEY))
    if length < requests:  # with -P it may send a few more than -n
        raise AssertionError(f"{server.name} holds {length} entries after {requests} XADDs")
    client.delete(BENCH_KEY)
    figures = {"p50_ms": row.get("p50_latency_ms", 0.0), "p99_ms": row.get("p99_latency_ms", 0.0)}
    notes = []
    if cpu is not None and cpu_after is not None and length:
        figures["server_cpu_us"] = (cpu_after - cpu) / length * 1e6
        notes.append(f"XADD -P {pipeline}, {server.name}: server CPU "
                     f"{figures['server_cpu_us']:.1f} us per XADD; redis-benchmark latency p50 "
                     f"{figures['p50_ms']:.3f} ms, p99 {figures['p99_ms']:.3f} ms")
    return Measurement(row["rps"], count=requests, figures=figures, notes=notes)


# --- the latency test ----------------------------------------------------------------------------


class _ReplyCounter(threading.Thread):
    """Reads a producer connection's replies (XADD: bulk strings or errors) as they come:
    counts them, keeps the first error. The producer never waits for them (open loop)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(name="latency-replies", daemon=True)
        self.sock = sock
        self.replies = 0
        self.error: str | None = None
        self.closed = False

    def run(self) -> None:
        buf = b""
        pos = 0
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                self.closed = True
                return
            buf = buf[pos:] + data
            pos = 0
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                kind = buf[pos:pos + 1]
                if kind == b"$":
                    size = int(buf[pos + 1:eol])
                    end = eol + 2 + max(size, 0) + (2 if size >= 0 else 0)
                    if end > len(buf):
                        break
                    pos = end
                else:  # "-ERR ..." (or any other one-line reply)
                    if kind == b"-" and self.error is None:
                        self.error = buf[pos + 1:eol].decode("utf-8", "replace")
                    pos = eol + 2
                self.replies += 1


def _producer_main(port: int, rate: int, seconds: float, conn: Any) -> None:
    """The producer process: XADD lat * t <perf_counter_ns> on the schedule start + k / rate,
    k < rate x seconds, start being the go message; open loop on a plain socket (it sends each
    message when due, a thread counts the replies), so a slow reply never delays the next
    send. Every message due when it wakes leaves in one write, each stamped as it is encoded.
    Reports messages sent, writes, its worst lateness and CPU."""
    try:
        sock = socket.create_connection((HOST, port), timeout=10)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        replies = _ReplyCounter(sock)
        replies.start()
        conn.send(("ready", os.getpid()))
        start_ns = conn.recv()
        clock = time.perf_counter_ns
        head = b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$1\r\nt\r\n" % (
            len(LATENCY_KEY), LATENCY_KEY.encode())
        interval = 1e9 / rate
        total = int(rate * seconds)
        sent = writes = worst_late = 0
        cpu = time.process_time()
        while sent < total:
            now = clock()
            due = min(total, int((now - start_ns) // interval) + 1) if now >= start_ns else 0
            if due <= sent:
                time.sleep((start_ns + sent * interval - now) / 1e9)
                continue
            worst_late = max(worst_late, now - int(start_ns + sent * interval))
            out = bytearray()
            for _ in range(min(due - sent, LATENCY_MAX_BATCH)):
                stamp = b"%d" % clock()
                out += head
                out += b"$%d\r\n%s\r\n" % (len(stamp), stamp)
                sent += 1
            sock.sendall(out)
            writes += 1
        elapsed = clock() - start_ns
        cpu = time.process_time() - cpu
        deadline = time.monotonic() + LATENCY_DRAIN_TIMEOUT
        while replies.replies < sent and not replies.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        if replies.error is not None or replies.replies < sent:
            raise RuntimeError(f"{replies.replies} replies to {sent} XADDs"
                               + (f", the first error: {replies.error}" if replies.error else ""))
        conn.send(("done", {"sent": sent, "elapsed_ns": elapsed, "writes": writes,
                            "worst_late_ns": worst_late, "cpu_s": cpu}))
        sock.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"producer: {exc!r}"))


def _consumers_main(port: int, names: Sequence[str], stop: Any, deadline: float,
                    conn: Any) -> None:
    """A consumer process: a thread per name, each its own connection, XREADGROUP BLOCK + XACK
    until ``stop`` is set and a read comes back empty (or ``deadline``, time.monotonic()).
    Sends (send stamps, latencies) as int64 arrays, its CPU seconds and errors."""
    try:
        import redis

        clients = [redis.Redis(host=HOST, port=port) for _ in names]
        for client in clients:
            client.ping()
        sends, lats = array.array("q"), array.array("q")
        reads = [0]  # replies with entries
        errors: list[str] = []
        lock = threading.Lock()
        gate = threading.Barrier(len(names) + 1)

        def consume(client: Any, name: str) -> None:
            my_sends, my_lats = array.array("q"), array.array("q")
            my_reads = 0
            clock, run = time.perf_counter_ns, client.execute_command
            read = ("XREADGROUP", "GROUP", LATENCY_GROUP, name, "COUNT", str(LATENCY_COUNT),
                    "BLOCK", str(LATENCY_BLOCK_MS), "STREAMS", LATENCY_KEY, ">")
            gate.wait()
            try:
                while time.monotonic() < deadline:
                    reply = run(*read)
                    now = clock()
                    entries = _entries(reply)
                    if not entries:
                        if stop.is_set():
                            break
                        continue
                    my_reads += 1
                    ids = []
                    for entry_id, fields in entries:
                        stamp = int(fields[b"t"] if isinstance(fields, dict) else fields[1])
                        my_sends.append(stamp)
                        my_lats.append(now - stamp)
                        ids.append(entry_id)
                    run("XACK", LATENCY_KEY, LATENCY_GROUP, *ids)
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                errors.append(f"consumer {name}: {exc!r}")
            with lock:
                sends.extend(my_sends)
                lats.extend(my_lats)
                reads[0] += my_reads

        threads = [threading.Thread(target=consume, args=(c, n), daemon=True)
                   for c, n in zip(clients, names, strict=True)]
        for t in threads:
            t.start()
        cpu = time.process_time()
        gate.wait()
        conn.send(("ready", os.getpid()))
        for t in threads:
            t.join()
        conn.send(("done", {"sends": sends.tobytes(), "lats": lats.tobytes(),
                            "reads": reads[0], "cpu_s": time.process_time() - cpu,
                            "errors": errors}))
        for client in clients:
            client.close()
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"consumers {','.join(names)}: {exc!r}"))


def _receive(conn: Any, timeout: float, what: str) -> Any:
    if not conn.poll(timeout):
        raise AssertionError(f"latency test: no {what} within {timeout:g} s")
    try:
        kind, payload = conn.recv()
    except EOFError:
        raise AssertionError(f"latency test: a client process exited before its {what}") from None
    if kind == "error":
        raise AssertionError(f"latency test: {payload}")
    return payload


def latency_histogram(lats_ns: Sequence[int]) -> list[tuple[str, int]]:
    """Counts per LATENCY_BUCKETS_MS bucket: [("0-1 ms", n), ..., ("10+ ms", n)]."""
    edges = [0, *LATENCY_BUCKETS_MS]
    counts = [0] * len(edges)
    limits = [ms * 1_000_000 for ms in LATENCY_BUCKETS_MS]
    for lat in lats_ns:
        i = 0
        while i < len(limits) and lat >= limits[i]:
            i += 1
        counts[i] += 1
    labels = [f"{lo}-{hi} ms" for lo, hi in zip(edges, LATENCY_BUCKETS_MS, strict=False)]
    labels.append(f"{LATENCY_BUCKETS_MS[-1]}+ ms")
    return list(zip(labels, counts, strict=True))


def _percentile_us(ordered: Sequence[int], q: float) -> float:
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] / 1000


def _p50_by_second(sends: Sequence[int], lats: Sequence[int], start_ns: int) -> str:
    """The median latency (ms) of the messages sent in each second from ``start_ns``."""
    seconds: dict[int, list[int]] = {}
    for stamp, lat in zip(sends, lats, strict=True):
        if stamp >= start_ns:
            seconds.setdefault((stamp - start_ns) // 1_000_000_000, []).append(lat)
    medians = []
    for second in sorted(seconds):
        ordered = sorted(seconds[second])
        medians.append(f"{ordered[len(ordered) // 2] / 1e6:.2f}")
    return " ".join(medians)


def bench_latency(server: Any, seconds: float, rate: int = LATENCY_RATE,
                  consumers: int = LATENCY_CONSUMERS,
                  processes: int = LATENCY_PROCESSES) -> Measurement:
    """The delivery latency test against ``server`` (see the module docstring); the row's
    rate is the messages measured per second of the window, figures p50_us, p99_us, p999_us,
    max_us, notes the histogram and the harness's own figures."""
    client = server.client
    client.delete(LATENCY_KEY)
    client.xgroup_create(LATENCY_KEY, LATENCY_GROUP, id="$", mkstream=True)
    ctx = multiprocessing.get_context("spawn")  # no fork of a threaded bench process
    stop = ctx.Event()
    deadline = time.monotonic() + LATENCY_READY_TIMEOUT + seconds + LATENCY_DRAIN_TIMEOUT
    names = [f"c{i}" for i in range(consumers)]
    groups = [names[i::processes] for i in range(processes) if names[i::processes]]
    procs: list[Any] = []
    consumer_conns = []
    try:
        for group in groups:
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_consumers_main, args=(server.port, group, stop, deadline,
                                                          child), daemon=True)
            p.start()
            procs.append(p)
            consumer_conns.append(parent)
        producer_conn, child = ctx.Pipe()
        producer = ctx.Process(target=_producer_main, args=(server.port, rate, seconds, child),
                               daemon=True)
        producer.start()
        procs.append(producer)
        for conn in [*consumer_conns, producer_conn]:
            _receive(conn, LATENCY_READY_TIMEOUT, "ready message")
        start_ns = time.perf_counter_ns() + int(LATENCY_START_DELAY_S * 1e9)
        cpu = _cpu_seconds(server.pid)
        producer_conn.send(start_ns)
        sent = _receive(producer_conn, seconds + LATENCY_READY_TIMEOUT, "producer report")
        cpu_after = _cpu_seconds(server.pid)
        stop.set()
        parts = [_receive(conn, LATENCY_DRAIN_TIMEOUT + LATENCY_BLOCK_MS / 1000,
                          "consumer report") for conn in consumer_conns]
    finally:
        stop.set()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        client.delete(LATENCY_KEY)
    errors = [e for part in parts for e in part["errors"]]
    if errors:
        raise AssertionError("latency test: " + "; ".join(errors[:3]))
    sends, lats = array.array("q"), array.array("q")
    for part in parts:
        sends.frombytes(part["sends"])
        lats.frombytes(part["lats"])
    received = len(lats)
    if received != sent["sent"] or len(set(sends)) != received:
        raise AssertionError(f"latency test: {sent['sent']} sent, {received} received "
                             f"({received - len(set(sends))} twice)")
    skip_before = start_ns + int(LATENCY_WARMUP_S * 1e9)
    measured = sorted(lat for stamp, lat in zip(sends, lats, strict=True) if stamp >= skip_before)
    if not measured:
        raise AssertionError("latency test: no message after the warm-up")
    window_s = sent["elapsed_ns"] / 1e9 - LATENCY_WARMUP_S
    figures = {f"{name}_us": _percentile_us(measured, q)
               for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))}
    figures["max_us"] = measured[-1] / 1000
    client_cpu = sent["cpu_s"] + sum(part["cpu_s"] for part in parts)
    reads = sum(part["reads"] for part in parts)
    trend = _p50_by_second(sends, lats, skip_before)
    elapsed_s = sent["elapsed_ns"] / 1e9
    rows = [[server.name, label, f"{count:,}", f"{100 * count / len(measured):.2f}%"]
            for label, count in latency_histogram(measured)]
    table = format_table(
        ["latency of", f"XADD -> XREADGROUP reply, {len(measured):,} messages", "count",
         "share"], rows, right={2, 3})
    line = (f"latency, {server.name}: {sent['sent']:,} sent at {sent['sent'] / elapsed_s:,.0f}"
            f"/s (target {rate:,}/s, in {sent['writes']:,} writes, at worst "
            f"{sent['worst_late_ns'] / 1e6:.1f} ms late), all received; p50 "
            f"{figures['p50_us'] / 1000:.3f} ms, p99 {figures['p99_us'] / 1000:.3f} ms, p99.9 "
            f"{figures['p999_us'] / 1000:.3f} ms, max {figures['max_us'] / 1000:.3f} ms; "
            f"{received / reads:.1f} messages per XREADGROUP reply; p50 by second of the run: "
            f"{trend} ms; CPU: clients {client_cpu / elapsed_s:.0%} of a core")
    if cpu is not None and cpu_after is not None:
        figures["server_cpu"] = (cpu_after - cpu) / elapsed_s
        line += f", server {figures['server_cpu']:.0%}"
    return Measurement(len(measured) / window_s, count=len(measured), figures=figures,
                       notes=[table, line])


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


def format_summary(results: Sequence[Any], figures: Sequence[Any]) -> str | None:
    """streamkeep against redis-server, row by row: ops/s or latency, the ratio, the target
    (from the FIGURES on the same rows) met or not."""
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
    return format_table(["server: workload", "streamkeep", "redis-server", "ratio", "target",
                         "met"], rows, right={1, 2, 3})


__all__ = [
    "RedisAofServer", "RedisBenchmark", "StreamkeepServer", "bench_latency",
    "bench_redis_benchmark", "format_summary", "latency_histogram", "parse_benchmark_csv",
    "server_requests",
]
