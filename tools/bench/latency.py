"""Delivery latency: :func:`paced`, a producer XADDing ``t=<perf_counter_ns>`` on a fixed schedule
(open loop; late, every message due leaves in one write) and its readers on one selector thread
(raw sockets, the project's RESP codec); latency is receive time minus ``t``, the first 0.5 s
not counted. The server rows' consumers (:class:`Consumer`, a harness process of their own) and
the replication lag's (:class:`XReader`). Must not touch: the servers, engine internals.
"""

from __future__ import annotations

import array
import multiprocessing
import os
import selectors
import time
from collections.abc import Sequence
from typing import Any

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command
from streamkeep.tools import temporaries
from streamkeep.tools.bench.workload import Measurement, Size, connect, tail_figures
from streamkeep.tools.servers import cpu_seconds
from streamkeep.tools.text_width import format_table

LATENCY_RATE = 10_000  # the producer, messages per second
LATENCY_CONSUMERS = 10  # ... and its consumers, one group
LATENCY_KEY, LATENCY_GROUP = "lat", "g"
LATENCY_COUNT = 10  # XREADGROUP COUNT
LATENCY_BLOCK_MS = 1000  # XREADGROUP BLOCK
LATENCY_SECONDS = Size(5.0, 1.0)
WARMUP_S = 0.5  # messages sent before this are not counted
MAX_BATCH = 100  # a late producer sends at most this many due messages per write
LATENCY_BUCKETS_MS = (1, 2, 3, 5, 10)  # histogram edges: 0-1, 1-2, 2-3, 3-5, 5-10, 10+ ms
START_DELAY_S = 0.2  # between the go message and the producer's first send
READY_TIMEOUT = 60.0  # for the harness process to start and connect
DRAIN_TIMEOUT = 30.0  # for the readers to drain once the producer is done


class _Reader:
    """A reader's connection: one read kept in flight, each entry's stamp and latency kept."""

    def __init__(self, port: int, read: list[Any]) -> None:
        self.sock, self.parser, self.read = connect(port, 10), ReplyParser(), read

    def request(self) -> bytes:
        return encode_command(self.read)

    def start(self) -> None:
        self.sock.sendall(self.request())

    def replies(self) -> Any:
        data = self.sock.recv(1 << 20)
        if not data:
            raise AssertionError("the server closed a reader's connection")
        self.parser.feed(data)
        while (reply := self.parser.next()) is not NEED_MORE:
            if isinstance(reply, ReplyError):
                raise AssertionError(f"reader: {reply}")
            yield reply

    @staticmethod
    def record(entries: Any, now: int, sends: array.array, lats: array.array) -> None:
        for _entry_id, fields in entries:
            stamp = int(fields[1])
            sends.append(stamp)
            lats.append(now - stamp)


class Consumer(_Reader):
    """A group consumer: when entries come, their XACK and the next XREADGROUP leave in one
    write; its last BLOCK timing out once the run is over, it stops."""

    def __init__(self, port: int, name: str) -> None:
        super().__init__(port, ["XREADGROUP", "GROUP", LATENCY_GROUP, name, "COUNT",
                                LATENCY_COUNT, "BLOCK", LATENCY_BLOCK_MS, "STREAMS",
                                LATENCY_KEY, ">"])
        self.acks_due = 0  # XACK replies expected before the next XREADGROUP reply
        self._request = encode_command(self.read)

    def request(self) -> bytes:
        return self._request

    def on_readable(self, now: int, sends: array.array, lats: array.array,
                    run_over: bool) -> int:
        reads = 0
        for reply in self.replies():
            if self.acks_due:
                self.acks_due -= 1
            elif not reply:  # BLOCK timed out
                if not run_over:
                    self.start()
            else:
                self.record(reply[0][1], now, sends, lats)
                reads += 1
                self.acks_due += 1
                ids = [entry[0] for entry in reply[0][1]]
                self.sock.sendall(encode_command(["XACK", LATENCY_KEY, LATENCY_GROUP, *ids])
                                  + self._request)
        return reads


class XReader(_Reader):
    """``XREAD BLOCK 0 STREAMS key <last id>`` kept in flight (e.g. on a replica)."""

    def __init__(self, port: int, key: str, after: Any) -> None:
        super().__init__(port, ["XREAD", "BLOCK", 0, "STREAMS", key, after])

    def on_readable(self, now: int, sends: array.array, lats: array.array,
                    run_over: bool) -> int:
        reads = 0
        for reply in self.replies():
            if not reply:
                raise AssertionError(f"XREAD replied {reply!r}")
            self.record(reply[0][1], now, sends, lats)
            self.read[-1] = reply[0][1][-1][0]
            reads += 1
            self.start()
        return reads


def stamped_commands(head: bytes, count: int, clock: Any = time.perf_counter_ns) -> bytearray:
    """`count` commands, each `head` (every argument but the last) then the send time in ns."""
    out = bytearray()
    for _ in range(count):
        stamp = b"%d" % clock()
        out += head
        out += b"$%d\r\n%s\r\n" % (len(stamp), stamp)
    return out


def paced(port: int, key: str, readers: Sequence[Any], rate: int, seconds: float,
          start_ns: int, idle_s: float) -> dict[str, Any]:
    """The producer (XADD ``key`` on ``port`` from ``start_ns``) and the ``readers``, until
    every message is seen and acknowledged: their stamps and latencies (ns), the counts, the
    worst lateness, the sending's ns and this process's CPU."""
    producer = connect(port, 10)
    selector = selectors.DefaultSelector()
    selector.register(producer, selectors.EVENT_READ, None)
    for reader in readers:
        selector.register(reader.sock, selectors.EVENT_READ, reader)
        reader.start()
    acks, clock = ReplyParser(), time.perf_counter_ns
    head = b"*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$1\r\nt\r\n" % (len(key), key.encode())
    interval, total = 1e9 / rate, int(rate * seconds)
    sent = writes = worst_late = acked = reads = elapsed = 0
    sends, lats = array.array("q"), array.array("q")
    cpu = time.process_time()
    deadline = time.monotonic() + seconds + DRAIN_TIMEOUT + max(0, start_ns - clock()) / 1e9
    try:
        while len(lats) < total or acked < sent:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(lats)} of {total} messages received, {acked} XADDs "
                                     f"acknowledged, when the time ran out")
            now, timeout = clock(), idle_s
            if sent < total:
                due = min(total, int((now - start_ns) // interval) + 1) if now >= start_ns else 0
                if due > sent:
                    worst_late = max(worst_late, now - int(start_ns + sent * interval))
                    count = min(due - sent, MAX_BATCH)
                    producer.sendall(stamped_commands(head, count, clock))
                    sent, writes = sent + count, writes + 1
                    if sent == total:
                        elapsed = clock() - start_ns
                    continue
                timeout = (start_ns + sent * interval - now) / 1e9
            for event, _mask in selector.select(timeout):
                if event.data is not None:
                    reads += event.data.on_readable(clock(), sends, lats, sent >= total)
                    continue
                data = producer.recv(1 << 16)
                if not data:
                    raise AssertionError("the server closed the producer's connection")
                acks.feed(data)
                while (reply := acks.next()) is not NEED_MORE:
                    if isinstance(reply, ReplyError):
                        raise AssertionError(f"producer: XADD failed: {reply}")
                    acked += 1
    finally:
        for sock in (producer, *(reader.sock for reader in readers)):
            sock.close()
    return {"sends": sends, "lats": lats, "sent": sent, "writes": writes, "reads": reads,
            "worst_late_ns": worst_late, "elapsed_ns": elapsed,
            "cpu_s": time.process_time() - cpu}


def measured(run: dict[str, Any], start_ns: int) -> list[int]:
    """The latencies after the warm-up, sorted; every message checked seen once."""
    sends, lats = run["sends"], run["lats"]
    if len(lats) != run["sent"] or len(set(sends)) != len(lats):
        raise AssertionError(f"{run['sent']} sent, {len(lats)} received "
                             f"({len(lats) - len(set(sends))} twice)")
    skip_before = start_ns + int(WARMUP_S * 1e9)
    out = sorted(lat for stamp, lat in zip(sends, lats, strict=True) if stamp >= skip_before)
    if not out:
        raise AssertionError("no message after the warm-up")
    return out


def _harness(port: int, rate: int, seconds: float, consumers: int, conn: Any) -> None:
    """The latency row's harness process: its consumers and the producer (:func:`paced`)."""
    try:
        readers = [Consumer(port, f"c{i}") for i in range(consumers)]
        conn.send(("ready", os.getpid()))
        run = paced(port, LATENCY_KEY, readers, rate, seconds, conn.recv(),
                    LATENCY_BLOCK_MS / 1000)
        conn.send(("done", {**run, "sends": run["sends"].tobytes(),
                            "lats": run["lats"].tobytes()}))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", f"latency harness: {exc!r}"))


def _receive(conn: Any, timeout: float, what: str) -> Any:
    if not conn.poll(timeout):
        raise AssertionError(f"latency test: no {what} within {timeout:g} s")
    try:
        kind, payload = conn.recv()
    except EOFError:
        raise AssertionError(f"latency test: the harness exited before its {what}") from None
    if kind == "error":
        raise AssertionError(f"latency test: {payload}")
    return payload


def latency_histogram(lats_ns: Sequence[int]) -> list[tuple[str, int]]:
    """Counts per LATENCY_BUCKETS_MS bucket: [("0-1 ms", n), ..., ("10+ ms", n)]."""
    edges = [0, *LATENCY_BUCKETS_MS]
    counts = [0] * len(edges)
    for lat in lats_ns:
        counts[sum(lat >= ms * 1_000_000 for ms in LATENCY_BUCKETS_MS)] += 1
    labels = [f"{lo}-{hi} ms" for lo, hi in zip(edges, LATENCY_BUCKETS_MS, strict=False)]
    return list(zip([*labels, f"{LATENCY_BUCKETS_MS[-1]}+ ms"], counts, strict=True))


def _p50_by_second(sends: Sequence[int], lats: Sequence[int], start_ns: int) -> str:
    """The median latency (ms) of the messages sent in each second from ``start_ns``."""
    seconds: dict[int, list[int]] = {}
    for stamp, lat in zip(sends, lats, strict=True):
        if stamp >= start_ns:
            seconds.setdefault((stamp - start_ns) // 1_000_000_000, []).append(lat)
    return " ".join(f"{sorted(v)[len(v) // 2] / 1e6:.2f}" for _s, v in sorted(seconds.items()))


def bench_latency(server: Any, seconds: float, rate: int = LATENCY_RATE,
                  consumers: int = LATENCY_CONSUMERS) -> Measurement:
    """The server section's delivery latency against ``server``: messages measured per second
    of the window; figures p50_us ... max_us, server_cpu; notes the histogram and figures."""
    client = server.client
    client.delete(LATENCY_KEY)
    client.xgroup_create(LATENCY_KEY, LATENCY_GROUP, id="$", mkstream=True)
    ctx = multiprocessing.get_context("spawn")  # no fork of a threaded bench process
    parent, child = ctx.Pipe()
    harness = ctx.Process(target=_harness, args=(server.port, rate, seconds, consumers, child),
                          daemon=True)
    temporaries.start_shielded(harness)  # (Ctrl-C is the bench's: it stops the harness)
    try:
        _receive(parent, READY_TIMEOUT, "ready message")
        start_ns = time.perf_counter_ns() + int(START_DELAY_S * 1e9)
        cpu = cpu_seconds(server.pid)
        parent.send(start_ns)
        run = _receive(parent, seconds + START_DELAY_S + DRAIN_TIMEOUT + LATENCY_BLOCK_MS / 1000,
                       "report")
        cpu_after = cpu_seconds(server.pid)
    finally:
        harness.join(timeout=5)
        if harness.is_alive():
            harness.kill()
            harness.join(timeout=5)
        client.delete(LATENCY_KEY)
    for name in ("sends", "lats"):
        run[name] = array.array("q", run[name])
    got = measured(run, start_ns)
    figures = tail_figures(got)
    elapsed_s = run["elapsed_ns"] / 1e9
    rows = [[server.name, label, f"{count:,}", f"{100 * count / len(got):.2f}%"]
            for label, count in latency_histogram(got)]
    table = format_table(["latency of", f"XADD -> XREADGROUP reply, {len(got):,} messages",
                          "count", "share"], rows, right={2, 3})
    trend = _p50_by_second(run["sends"], run["lats"], start_ns + int(WARMUP_S * 1e9))
    figures |= {"sent_per_s": run["sent"] / elapsed_s, "writes": run["writes"],
                "worst_late_ms": run["worst_late_ns"] / 1e6,
                "per_reply": len(run["lats"]) / max(run["reads"], 1),
                "harness_cpu": run["cpu_s"] / elapsed_s}  # (CPU: of one core)
    if cpu is not None and cpu_after is not None:
        figures["server_cpu"] = (cpu_after - cpu) / elapsed_s
    return Measurement(len(got) / (elapsed_s - WARMUP_S), count=len(got), figures=figures,
                       notes=[table, f"latency, {server.name}: p50 by second of the run: "
                                     f"{trend} ms"])
