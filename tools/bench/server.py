"""``streamkeep bench server``: the network server against a real redis-server, in one run.

Owns the server section's workloads and their processes: a ``streamkeep serve`` child process
(:class:`StreamkeepServer`) and a redis-server persisting with the same policy (``--save ""
--appendonly yes --appendfsync everysec``) on free loopback ports, shared by the section's rows
through ``BenchEnv.shared``; Debian's ``redis-benchmark`` driving XADD with 50 clients
(:func:`bench_redis_benchmark`, ``-P 1`` and ``-P 16``, its ``--csv`` requests/s); the delivery
latency test (:func:`bench_latency`); and the side-by-side summary table (:func:`format_summary`).
The registry entries (rows, figures, targets) live in :mod:`tools.bench`.
Must not touch: engine internals (the server is a child process, driven over RESP only; the
harness borrows only the sans-IO RESP codec) or any
data outside its temp dirs.

The latency test: one harness process (:func:`_latency_main`, a selector loop on one thread, raw
sockets and the project's sans-IO RESP codec, so the clients add as little as a Python client
can) runs the producer and the consumers. The producer XADDs ``t=<time.perf_counter_ns()>`` at
a fixed rate (a monotonic schedule: message k is due at start + k / rate; when late it sends
every message due in one write, so the schedule never drifts; open loop: it never waits for a
reply); 10 consumers in one group, each its own connection, keep one ``XREADGROUP ... COUNT 10
BLOCK 1000 STREAMS lat >`` in flight and send each reply's ``XACK`` together with the next
``XREADGROUP``. A message's latency is its receive time minus its ``t`` (one clock, one
process). Messages sent in the first 0.5 s are discarded. The same harness against redis-server
shows what the clients add.
"""

from __future__ import annotations

import array
import csv
import io
import math
import multiprocessing
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.resp import NEED_MORE, ReplyParser, encode_command
from streamkeep.tools.bench import (
    LATENCY_CONSUMERS,
    LATENCY_RATE,
    SERVER_CLIENTS,
    Measurement,
    RedisServer,
    Skip,
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
        return [sys.executable, "-m", "streamkeep", "serve", "--dir", data, "--port",
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


class _Consumer:
    """One consumer's connection in the latency harness: it keeps one XREADGROUP BLOCK in
    flight, and when entries come, sends their XACK and the next XREADGROUP in one write (no
    round trip between them)."""

    def __init__(self, port: int, name: str) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.parser = ReplyParser()
        self.read = encode_command(
            ["XREADGROUP", "GROUP", LATENCY_GROUP, name, "COUNT", LATENCY_COUNT, "BLOCK",
             LATENCY_BLOCK_MS, "STREAMS", LATENCY_KEY, ">"])
        self.ack_head = ["XACK", LATENCY_KEY, LATENCY_GROUP]
        self.acks_due = 0  # XACK replies expected before the next XREADGROUP reply
        self.idle = False  # its last XREADGROUP timed out and the run is over: not re-sent

    def start(self) -> None:
        self.sock.sendall(self.read)

    def on_readable(self, now: int, sends: array.array, lats: array.array,
                    run_over: bool) -> int:
        """Parse what arrived; record each entry's send stamp and latency (receive time
        ``now``); ack and re-read. Returns the XREADGROUP replies that carried entries."""
        data = self.sock.recv(1 << 16)
        if not data:
            raise RuntimeError("the server closed a consumer's connection")
        parser = self.parser
        parser.feed(data)
        reads = 0
        while (reply := parser.next()) is not NEED_MORE:
            if isinstance(reply, ReplyError):
                raise RuntimeError(f"consumer: {reply}")
            if self.acks_due:
                self.acks_due -= 1
                continue
            if not reply:  # BLOCK timed out
                if run_over:
                    self.idle = True
                else:
                    self.sock.sendall(self.read)
                continue
            ids = []
            for entry_id, fields in reply[0][1]:
                stamp = int(fields[1])
                sends.append(stamp)
                lats.append(now - stamp)
                ids.append(entry_id)
            reads += 1
            self.acks_due += 1
            self.sock.sendall(encode_command([*self.ack_head, *ids]) + self.read)
        return reads


def _latency_main(port: int, rate: int, seconds: float, consumers: int, conn: Any) -> None:
    """The harness process: the producer and every consumer on one thread (a selector loop,
    raw sockets, the project's sans-IO RESP codec), so the clients add as little as a Python
    client can. The producer XADDs ``t=<perf_counter_ns>`` on the schedule start + k / rate
    (open loop: every message due when the loop comes round leaves in one write, each
    stamped as it is encoded; replies are only counted). Reports the send stamps and
    latencies, messages sent, writes, the worst lateness and the process's CPU."""
    try:
        producer = socket.create_connection((HOST, port), timeout=10)
        producer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        readers = [_Consumer(port, f"c{i}") for i in range(consumers)]
        selector = selectors.DefaultSelector()
        selector.register(producer, selectors.EVENT_READ, None)
        for reader in readers:
            selector.register(reader.sock, selectors.EVENT_READ, reader)
            reader.start()
        replies = ReplyParser()
        conn.send(("ready", os.getpid()))
        start_ns = conn.recv()
        clock = time.perf_counter_ns
        head = b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$1\r\nt\r\n" % (
            len(LATENCY_KEY), LATENCY_KEY.encode())
        interval = 1e9 / rate
        total = int(rate * seconds)
        sent = writes = worst_late = acked = reads = 0
        sends, lats = array.array("q"), array.array("q")
        cpu = time.process_time()
        deadline = time.monotonic() + seconds + LATENCY_DRAIN_TIMEOUT + LATENCY_START_DELAY_S
        elapsed = 0
        while len(lats) < total or acked < sent:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(lats)} of {total} messages received, {acked} XADDs "
                                   f"acknowledged, when the time ran out")
            now = clock()
            timeout = LATENCY_BLOCK_MS / 1000
            if sent < total:
                due = min(total, int((now - start_ns) // interval) + 1) if now >= start_ns else 0
                if due > sent:
                    worst_late = max(worst_late, now - int(start_ns + sent * interval))
                    out = bytearray()
                    for _ in range(min(due - sent, LATENCY_MAX_BATCH)):
                        stamp = b"%d" % clock()
                        out += head
                        out += b"$%d\r\n%s\r\n" % (len(stamp), stamp)
                        sent += 1
                    producer.sendall(out)
                    writes += 1
                    if sent == total:
                        elapsed = clock() - start_ns
                    continue
                timeout = (start_ns + sent * interval - now) / 1e9
            for key, _events in selector.select(timeout):
                reader = key.data
                if reader is None:
                    data = producer.recv(1 << 16)
                    if not data:
                        raise RuntimeError("the server closed the producer's connection")
                    replies.feed(data)
                    while (reply := replies.next()) is not NEED_MORE:
                        if isinstance(reply, ReplyError):
                            raise RuntimeError(f"producer: XADD failed: {reply}")
                        acked += 1
                else:
                    reads += reader.on_readable(clock(), sends, lats, sent >= total)
        cpu = time.process_time() - cpu
        for reader in readers:
            reader.sock.close()
        producer.close()
        conn.send(("done", {"sent": sent, "elapsed_ns": elapsed, "writes": writes,
                            "worst_late_ns": worst_late, "cpu_s": cpu, "reads": reads,
                            "sends": sends.tobytes(), "lats": lats.tobytes()}))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"latency harness: {exc!r}"))


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
                  consumers: int = LATENCY_CONSUMERS) -> Measurement:
    """The delivery latency test against ``server`` (see the module docstring); the row's
    rate is the messages measured per second of the window, figures p50_us, p99_us, p999_us,
    max_us, notes the histogram and the harness's own figures."""
    client = server.client
    client.delete(LATENCY_KEY)
    client.xgroup_create(LATENCY_KEY, LATENCY_GROUP, id="$", mkstream=True)
    ctx = multiprocessing.get_context("spawn")  # no fork of a threaded bench process
    parent, child = ctx.Pipe()
    harness = ctx.Process(target=_latency_main, args=(server.port, rate, seconds, consumers,
                                                      child), daemon=True)
    harness.start()
    try:
        _receive(parent, LATENCY_READY_TIMEOUT, "ready message")
        start_ns = time.perf_counter_ns() + int(LATENCY_START_DELAY_S * 1e9)
        cpu = _cpu_seconds(server.pid)
        parent.send(start_ns)
        report = _receive(parent, seconds + LATENCY_START_DELAY_S + LATENCY_DRAIN_TIMEOUT
                          + LATENCY_BLOCK_MS / 1000, "report")
        cpu_after = _cpu_seconds(server.pid)
    finally:
        harness.join(timeout=5)
        if harness.is_alive():
            harness.kill()
            harness.join(timeout=5)
        client.delete(LATENCY_KEY)
    sends, lats = array.array("q"), array.array("q")
    sends.frombytes(report["sends"])
    lats.frombytes(report["lats"])
    received = len(lats)
    if received != report["sent"] or len(set(sends)) != received:
        raise AssertionError(f"latency test: {report['sent']} sent, {received} received "
                             f"({received - len(set(sends))} twice)")
    skip_before = start_ns + int(LATENCY_WARMUP_S * 1e9)
    measured = sorted(lat for stamp, lat in zip(sends, lats, strict=True) if stamp >= skip_before)
    if not measured:
        raise AssertionError("latency test: no message after the warm-up")
    window_s = report["elapsed_ns"] / 1e9 - LATENCY_WARMUP_S
    figures = {f"{name}_us": _percentile_us(measured, q)
               for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))}
    figures["max_us"] = measured[-1] / 1000
    trend = _p50_by_second(sends, lats, skip_before)
    elapsed_s = report["elapsed_ns"] / 1e9
    rows = [[server.name, label, f"{count:,}", f"{100 * count / len(measured):.2f}%"]
            for label, count in latency_histogram(measured)]
    table = format_table(
        ["latency of", f"XADD -> XREADGROUP reply, {len(measured):,} messages", "count",
         "share"], rows, right={2, 3})
    line = (f"latency, {server.name}: {report['sent']:,} sent at "
            f"{report['sent'] / elapsed_s:,.0f}/s (target {rate:,}/s, in {report['writes']:,} "
            f"writes, at worst {report['worst_late_ns'] / 1e6:.1f} ms late), all received; p50 "
            f"{figures['p50_us'] / 1000:.3f} ms, p99 {figures['p99_us'] / 1000:.3f} ms, p99.9 "
            f"{figures['p999_us'] / 1000:.3f} ms, max {figures['max_us'] / 1000:.3f} ms; "
            f"{received / max(report['reads'], 1):.1f} messages per XREADGROUP reply; p50 by "
            f"second of the run: {trend} ms; CPU: the harness {report['cpu_s'] / elapsed_s:.0%} "
            f"of a core")
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
