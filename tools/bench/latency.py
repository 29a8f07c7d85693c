"""The server section's delivery-latency harness: :func:`bench_latency`.

Owns the latency test: one harness process (:func:`_latency_main`, a selector loop on one
thread, raw sockets and the project's sans-IO RESP codec, so the clients add as little as a
Python client can) runs the producer and the consumers. The producer XADDs
``t=<time.perf_counter_ns()>`` at a fixed rate (a monotonic schedule: message k is due at start
+ k / rate; when late it sends every message due in one write, so the schedule never drifts;
open loop: it never waits for a reply); 10 consumers in one group, each its own connection, keep
one ``XREADGROUP ... COUNT 10 BLOCK 1000 STREAMS lat >`` in flight and send each reply's
``XACK`` together with the next ``XREADGROUP``. A message's latency is its receive time minus
its ``t`` (one clock, one process). Messages sent in the first 0.5 s are discarded. The same
harness against redis-server shows what the clients add. Also owns the histogram and the notes
it prints.
Must not touch: the servers' lifetime (the section starts them), engine internals (the server
is driven over RESP only; the harness borrows only the sans-IO RESP codec).
"""

from __future__ import annotations

import array
import multiprocessing
import os
import selectors
import socket
import time
from collections.abc import Sequence
from typing import Any

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command
from streamkeep.tools import temporaries
from streamkeep.tools.bench.tables import format_table
from streamkeep.tools.bench.workload import Measurement, percentile_us
from streamkeep.tools.servers import HOST, cpu_seconds

LATENCY_RATE = 10_000  # the producer, messages per second
LATENCY_CONSUMERS = 10  # ... and its consumers, one group
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


def stamped_commands(head: bytes, count: int, clock: Any = time.perf_counter_ns) -> bytearray:
    """`count` commands, each `head` (a RESP array header and every argument but the last)
    followed by the send time in ns as its last argument: a paced producer's one write."""
    out = bytearray()
    for _ in range(count):
        stamp = b"%d" % clock()
        out += head
        out += b"$%d\r\n%s\r\n" % (len(stamp), stamp)
    return out


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
                    count = min(due - sent, LATENCY_MAX_BATCH)
                    producer.sendall(stamped_commands(head, count, clock))
                    sent += count
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
    temporaries.start_shielded(harness)  # (Ctrl-C is the bench's: it stops the harness)
    try:
        _receive(parent, LATENCY_READY_TIMEOUT, "ready message")
        start_ns = time.perf_counter_ns() + int(LATENCY_START_DELAY_S * 1e9)
        cpu = cpu_seconds(server.pid)
        parent.send(start_ns)
        report = _receive(parent, seconds + LATENCY_START_DELAY_S + LATENCY_DRAIN_TIMEOUT
                          + LATENCY_BLOCK_MS / 1000, "report")
        cpu_after = cpu_seconds(server.pid)
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
    figures = {f"{name}_us": percentile_us(measured, q)
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

