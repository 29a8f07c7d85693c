"""The ``replication`` section: what asynchronous replication costs the primary, and how fast and
how far behind a replica follows, each row on fresh processes (or a fresh embedded engine).

Owns the section's workloads and parameters:

* :func:`bench_xadd_p16`: the server section's ``redis-benchmark -c 50 -P 16`` XADD row against
  a fresh ``streamkeep serve`` primary, without or with one ``streamkeep serve --replicaof``
  replica attached (synced before the run; how long it takes to catch up afterwards is a note);
* :func:`bench_embedded_xadd`: ``Engine.open(dir)`` with a :class:`Server` on a thread of the
  bench process (so a replica can attach), ``engine.execute("XADD", ...)`` (str arguments) in
  the bench thread, without or with one replica child process attached;
* :func:`bench_apply`: a replica's apply rate over a backlog: the replica, attached and caught
  up, is paused (SIGSTOP) while the primary takes N pipelined XADDs, then resumed (SIGCONT)
  and timed until a ``WAIT 1`` on the primary, on the connection that wrote the last record,
  returns (nothing polls the replica meanwhile); then its ``slave_repl_offset`` must reach
  the primary's ``master_repl_offset``; then the replica is stopped and its data directory,
  the same records logged byte for byte, is opened with ``Engine.open``: the replay rate of the
  same records;
* :func:`bench_lag`: a paced producer (:data:`LAG_RATE` XADD/s of ``t=<perf_counter_ns>``,
  the due messages of each pass in one write, open loop) on the primary and a reader on the
  replica keeping one ``XREAD BLOCK 0 STREAMS key <last id>`` in flight; lag is the reader's
  receive time minus ``t`` (one process, one clock), the first :data:`LAG_WARMUP_S` discarded;
* :func:`bench_full_sync`: a stream of :func:`full_sync_entries` entries with a group holding
  a tenth of them pending, built in a data directory by the embedded engine and compacted (a
  snapshot), served by a primary; a fresh replica started and timed until its link is up and
  the offsets are equal;

and the section's header line (:func:`describe`).
Must not touch: the section declarations (rows, figures and targets: .sections), the processes'
start and stop (:mod:`.processes`), replication or engine internals (servers are driven over
RESP, the embedded engine through ``Engine.open``/``execute``/``compact``/``close`` and
``Server``/``run_server``), or any data outside the directories the bench made.
"""

from __future__ import annotations

import array
import gc
import os
import selectors
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING

from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command
from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.latency import stamped_commands
from streamkeep.tools.bench.processes import StreamkeepServer
from streamkeep.tools.bench.server import (
    BENCH_COMMAND,
    BENCH_KEY,
    RedisBenchmark,
    bench_redis_benchmark,
    server_requests,
)
from streamkeep.tools.bench.workload import (
    CONSUMER,
    GROUP,
    KEY,
    Measurement,
    fill,
    percentile_us,
    warmup_size,
)
from streamkeep.tools.servers import HOST, cpu_seconds

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

P16 = 16  # redis-benchmark -P, as the server section's row
POLL_SECONDS = 0.003  # INFO replication polled this often while a replica catches up
SYNC_TIMEOUT = 300.0  # seconds a replica may take to reach the primary's offset
SERVER_START_TIMEOUT = 10.0  # the embedded Server thread
FILL_BATCH = 10_000  # pipelined XADDs per write while filling a primary
LAG_RATE = 10_000  # the lag row's producer, XADD/s
LAG_SECONDS, QUICK_LAG_SECONDS = 5.0, 1.0
LAG_WARMUP_S = 0.5  # messages sent before this are not counted
LAG_MAX_BATCH = 100  # a late producer sends at most this many due messages per write
LAG_DRAIN_TIMEOUT = 30.0  # for the reader to see every message once the producer is done
LAG_KEY = "replication:lag"
FULL_SYNC_ENTRIES_PER_N = 5  # the full-sync stream: 5 x N entries (1,000,000 at full N) ...
FULL_SYNC_PENDING_FRACTION = 10  # ... a tenth of them pending in its group


def lag_seconds(env: BenchEnv) -> float:
    """The lag row's seconds of producing."""
    return QUICK_LAG_SECONDS if env.quick else LAG_SECONDS


def backlog_records(env: BenchEnv) -> int:
    """XADD records the replica catches up in the apply row: N."""
    return env.n


def full_sync_entries(env: BenchEnv) -> int:
    """Entries of the full-sync row's stream: 5 x N."""
    return env.n * FULL_SYNC_ENTRIES_PER_N


def full_sync_pending(env: BenchEnv) -> int:
    """Entries its group holds pending: a tenth."""
    return full_sync_entries(env) // FULL_SYNC_PENDING_FRACTION


def describe(env: BenchEnv) -> list[str]:
    """The section's header lines: how its rows ran."""
    lines = [
        f"replication: fresh processes for each row: a primary (python -m streamkeep serve "
        f"--appendfsync everysec) and replicas (the same with --replicaof {HOST} <port>); "
        f"redis-benchmark -c 50 -n {server_requests(env.n, P16):,} -P {P16} --csv "
        f"{' '.join(BENCH_COMMAND)}; embedded: Engine.open(dir) (everysec) with a Server on a "
        f"thread (asyncio), {env.n:,} x engine.execute(\"XADD\", ...) in the bench thread; "
        f"catch-up: {backlog_records(env):,} pipelined XADDs while the replica is paused "
        f"(SIGSTOP), timed from SIGCONT to a WAIT 1 on the primary returning, "
        f"then Engine.open of the replica's directory (the same records); lag: {LAG_RATE:,} "
        f"XADD/s for {lag_seconds(env):g} s (the first {LAG_WARMUP_S:g} s not counted), "
        f"XREAD BLOCK 0 on the replica; full sync: a {full_sync_entries(env):,}-entry stream, "
        f"{full_sync_pending(env):,} pending in its group, compacted to a snapshot, then a "
        f"fresh replica"]
    where = env.where()
    if where is not None:
        lines.append(f"replication: {where}")
    return lines


# --- INFO replication ----------------------------------------------------------------------------


def parse_info(text: str | bytes) -> dict[str, str]:
    """An INFO reply's ``name:value`` lines."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    fields = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            name, value = line.split(":", 1)
            fields[name] = value
    return fields


def _server_info(server: StreamkeepServer) -> dict[str, str]:
    client = server.client
    reply = client.execute_command("INFO", "replication")
    if isinstance(reply, dict):  # redis-py parsed it
        return {k: v if isinstance(v, str) else str(v) for k, v in reply.items()}
    return parse_info(reply)


def primary_offset(server: StreamkeepServer) -> int:
    """A primary's ``master_repl_offset`` (its last LSN)."""
    return int(_server_info(server)["master_repl_offset"])


def replica_state(replica: StreamkeepServer) -> tuple[bool, int]:
    """(``master_link_status`` is up, ``slave_repl_offset``) of a replica."""
    info = _server_info(replica)
    return info.get("master_link_status") == "up", int(info.get("slave_repl_offset", -1))


def wait_caught_up(replica: StreamkeepServer, target: int, timeout: float = SYNC_TIMEOUT,
                   poll: float = POLL_SECONDS) -> float:
    """Poll the replica until its link is up and its offset is at least ``target``; the
    perf_counter time it was first seen there. AssertionError after ``timeout``."""
    deadline = time.perf_counter() + timeout
    while True:
        up, offset = replica_state(replica)
        now = time.perf_counter()
        if up and offset >= target:
            return now
        if now > deadline:
            raise AssertionError(f"the replica reached offset {offset} (link "
                                 f"{'up' if up else 'down'}), not {target}, in {timeout:g} s")
        time.sleep(poll)


def start_replica(primary_port: int) -> StreamkeepServer:
    """A fresh ``streamkeep serve --replicaof`` child of the primary at ``primary_port``."""
    return StreamkeepServer(replicaof=primary_port).start()


def _stop(*servers: StreamkeepServer | EmbeddedPrimary | None) -> None:
    for server in servers:
        if server is not None:
            server.stop()


# --- filling a primary ---------------------------------------------------------------------------


def _request(sock: socket.socket, argv: list[str]) -> object:
    """One command's reply on a blocking socket (the project's RESP codec)."""
    sock.sendall(encode_command(argv))
    parser = ReplyParser()
    while (reply := parser.next()) is NEED_MORE:
        data = sock.recv(1 << 16)
        if not data:
            raise AssertionError("the primary closed the connection")
        parser.feed(data)
    if isinstance(reply, ReplyError):
        raise AssertionError(f"{argv[0]}: {reply}")
    return reply


def fill_pipelined(port: int, key: str, n: int) -> None:
    """n x ``XADD key * myfield myvalue`` pipelined (FILL_BATCH per write, each batch's
    replies read to a closing PING), as redis-benchmark's records."""
    one = encode_command(["XADD", key, "*", "myfield", "myvalue"])
    ping = encode_command(["PING"])
    parser = ReplyParser()
    with socket.create_connection((HOST, port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, n, FILL_BATCH):
            size = min(FILL_BATCH, n - start)
            sock.sendall(one * size + ping)
            replies = 0
            while replies <= size:
                data = sock.recv(1 << 20)
                if not data:
                    raise AssertionError("the primary closed the connection while filling")
                parser.feed(data)
                while (reply := parser.next()) is not NEED_MORE:
                    if isinstance(reply, ReplyError):
                        raise AssertionError(f"XADD while filling: {reply}")
                    replies += 1


# --- 1. the primary's XADD -P 16, with and without a replica -------------------------------------


def bench_xadd_p16(env: BenchEnv, replicas: int) -> Measurement:
    """redis-benchmark -P 16 XADD against a fresh primary with ``replicas`` (0 or 1) replicas
    attached and caught up first; requests/s. With a replica: the replica's CPU per XADD and
    how long after the last reply it had every record (figure ``catchup_ms``)."""
    tool = RedisBenchmark(env.n)  # (this section's header line says how it runs)
    primary = StreamkeepServer().start()
    primary.name = "streamkeep primary" + (f", {replicas} replica" if replicas else "")
    replica = None
    try:
        if replicas:
            replica = start_replica(primary.port)
            wait_caught_up(replica, primary_offset(primary))
        cpu = cpu_seconds(replica.pid) if replica is not None else None
        m = bench_redis_benchmark(primary, tool, server_requests(env.n, P16), P16)
        if replica is not None:
            done = time.perf_counter()
            target = primary_offset(primary)
            caught_up = wait_caught_up(replica, target)
            cpu_after = cpu_seconds(replica.pid)  # (the polls' INFO replies included)
            m.figures["catchup_ms"] = (caught_up - done) * 1000
            line = (f"XADD -P {P16} with a replica: it had every record "
                    f"{m.figures['catchup_ms']:,.1f} ms after the benchmark's last reply "
                    f"(offset {target:,})")
            if cpu is not None and cpu_after is not None and m.count:
                m.figures["replica_cpu_us"] = (cpu_after - cpu) / m.count * 1e6
                line += f"; replica CPU {m.figures['replica_cpu_us']:.1f} us per XADD"
            m.notes.append(line)
    finally:
        _stop(replica, primary)
    return m


# --- 2. embedded: an Engine with a Server thread, with and without a replica ---------------------


class EmbeddedPrimary:
    """``Engine.open(path)`` in this process with a :class:`Server` on a loopback port in a
    daemon thread (``run_server``), so replicas can attach; ``stop`` shuts the server down,
    which closes the engine."""

    name = "embedded primary"

    def __init__(self, path: str) -> None:
        from streamkeep import Engine
        from streamkeep.engine.server.network import Server, run_server

        self.engine = Engine.open(path)
        self.server = Server(self.engine, HOST, 0)
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                run_server(self.server, lambda _srv: ready.set())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                ready.set()

        self.thread = threading.Thread(target=run, name="bench-embedded-server", daemon=True)
        self.thread.start()
        if not ready.wait(SERVER_START_TIMEOUT) or failure:
            self.engine.close()
            raise AssertionError(f"the embedded server did not start: {failure!r}")
        self.port = int(self.server.port)

    def offset(self) -> int:
        return int(parse_info(self.engine.execute("INFO", "replication"))["master_repl_offset"])

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.loop.call_soon_threadsafe(self.server.request_shutdown)
            self.thread.join(30)
        self.engine.close()


def bench_embedded_xadd(path: str, n: int, replicas: int) -> Measurement:
    """n x ``engine.execute("XADD", KEY, "*", "f", "v")`` on an engine serving on a thread,
    with ``replicas`` (0 or 1) replica child processes attached and caught up (after the
    warm-up too) before the timed loop; adds/s. With a replica: how long after the loop it
    had every record (``catchup_ms``)."""
    primary = EmbeddedPrimary(path)
    replica = None
    try:
        execute = primary.engine.execute
        if replicas:
            replica = start_replica(primary.port)
            wait_caught_up(replica, primary.offset())
        fill(execute, "warmup", warmup_size(n))
        if replica is not None:
            wait_caught_up(replica, primary.offset())
        start = time.perf_counter()
        for _ in range(n):
            execute("XADD", KEY, "*", "f", "v")
        elapsed = time.perf_counter() - start
        m = Measurement(n / elapsed, count=n)
        if replica is not None:
            caught_up = wait_caught_up(replica, primary.offset())
            m.figures["catchup_ms"] = (caught_up - start - elapsed) * 1000
            m.notes.append(f"embedded XADD with a replica: it had every record "
                           f"{m.figures['catchup_ms']:,.1f} ms after the loop's last XADD")
    finally:
        _stop(replica, primary)
    return m


# --- 3. a replica catching up a backlog, and the replay of the same records ----------------------


def _time_replay(path: str, records: int, key: str) -> float:
    """Seconds ``Engine.open(path)`` takes; the stream ``key`` checked to hold ``records``."""
    from streamkeep import Engine

    start = time.perf_counter()
    engine = Engine.open(path)
    elapsed = time.perf_counter() - start
    try:
        length = engine.execute("XLEN", key)
        if length != records:
            raise AssertionError(f"the replica's directory replayed {length} entries of {key}, "
                                 f"expected {records}")
    finally:
        engine.close()
    return elapsed


def _warm_replay(path: str) -> None:
    """Open, write and reopen a small directory: the replay's code paths loaded and warm."""
    from streamkeep import Engine

    with Engine.open(path) as engine:
        fill(engine.execute, KEY, 1000)
    Engine.open(path).close()


def bench_apply(env: BenchEnv) -> Measurement:
    """A replica's apply rate over a backlog of :func:`backlog_records` XADD records (see the
    module docstring); records/s, with the replay of the same records at ``Engine.open``
    (``replay_per_s``) and apply / replay (``apply_over_replay``)."""
    records = backlog_records(env)
    primary = StreamkeepServer().start()
    replica: StreamkeepServer | None = None
    try:
        replica = start_replica(primary.port)
        base = primary_offset(primary)
        wait_caught_up(replica, base)
        pid = replica.pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        # The last record through a connection of its own: its WAIT then returns once the
        # replica has acknowledged everything, timed from the primary's side, so that nothing
        # polls the replica (its clients share its GIL with the apply) while it catches up.
        waiter = socket.create_connection((HOST, primary.port), timeout=SYNC_TIMEOUT)
        try:
            try:
                fill_pipelined(primary.port, BENCH_KEY, records - 1)
                _request(waiter, ["XADD", BENCH_KEY, "*", "myfield", "myvalue"])
                target = primary_offset(primary)
            finally:
                resumed = time.perf_counter()
                os.kill(pid, signal.SIGCONT)
            acked = _request(waiter, ["WAIT", "1", str(int(SYNC_TIMEOUT * 1000))])
            caught_up = time.perf_counter()
        finally:
            waiter.close()
        if acked != 1:
            raise AssertionError(f"WAIT 1 after the catch-up answered {acked!r}")
        wait_caught_up(replica, target)  # its offset says the same
        applied = target - base
        apply_rate = applied / (caught_up - resumed)
        replica.stop_process()  # a clean shutdown: its log holds every record
        with env.data_dir("replay-warmup") as warm:
            _warm_replay(warm)
        gc.collect()
        replay_s = _time_replay(replica.data_dir, records, BENCH_KEY)
    finally:
        _stop(replica, primary)
    replay_rate = target / replay_s  # the replica's log: LSN 1..target after an empty snapshot
    return Measurement(apply_rate, count=applied,
                       figures={"replay_per_s": replay_rate,
                                "apply_over_replay": apply_rate / replay_rate},
                       notes=[f"catch-up: the replica applied {applied:,} records in "
                              f"{caught_up - resumed:.3f} s after SIGCONT ({apply_rate:,.0f}/s); "
                              f"Engine.open replayed its directory ({target:,} records) in "
                              f"{replay_s:.3f} s ({replay_rate:,.0f}/s)"])


# --- 4. lag at LAG_RATE XADD/s -------------------------------------------------------------------


def _lag_loop(primary_port: int, replica_port: int, after_id: bytes, rate: int,
              seconds: float) -> tuple[array.array[int], array.array[int], dict[str, float]]:
    """The producer on the primary and the reader on the replica, on this thread (a selector
    loop, raw sockets, the project's RESP codec): (send stamps, lags) in nanoseconds, and the
    run's counts (sent, writes, replies read, start and end of sending)."""
    producer = socket.create_connection((HOST, primary_port), timeout=10)
    reader = socket.create_connection((HOST, replica_port), timeout=10)
    try:
        for sock in (producer, reader):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        selector = selectors.DefaultSelector()
        selector.register(producer, selectors.EVENT_READ, "producer")
        selector.register(reader, selectors.EVENT_READ, "reader")
        acks, reads = ReplyParser(), ReplyParser()
        last_id = after_id
        reader.sendall(encode_command(["XREAD", "BLOCK", 0, "STREAMS", LAG_KEY, last_id]))
        head = encode_command(["XADD", LAG_KEY, "*", "t"])
        head = b"*5" + head[2:]  # one more argument: the stamp
        clock = time.perf_counter_ns
        interval = 1e9 / rate
        total = int(rate * seconds)
        sent = writes = acked = replies = 0
        sends, lags = array.array("q"), array.array("q")
        start_ns = clock()
        end_ns = start_ns
        deadline = time.monotonic() + seconds + LAG_DRAIN_TIMEOUT
        while len(lags) < total or acked < sent:
            if time.monotonic() > deadline:
                raise AssertionError(f"lag: {len(lags)} of {total} messages seen on the "
                                     f"replica, {acked} XADDs acknowledged, when the time ran "
                                     f"out")
            now = clock()
            timeout = 0.1
            if sent < total:
                due = min(total, int((now - start_ns) // interval) + 1)
                if due > sent:
                    count = min(due - sent, LAG_MAX_BATCH)
                    producer.sendall(stamped_commands(head, count, clock))
                    sent += count
                    writes += 1
                    if sent == total:
                        end_ns = clock()
                    continue
                timeout = (start_ns + sent * interval - now) / 1e9
            for key, _events in selector.select(timeout):
                if key.data == "producer":
                    data = producer.recv(1 << 16)
                    if not data:
                        raise AssertionError("lag: the primary closed the producer's connection")
                    acks.feed(data)
                    while (reply := acks.next()) is not NEED_MORE:
                        if isinstance(reply, ReplyError):
                            raise AssertionError(f"lag: XADD failed: {reply}")
                        acked += 1
                    continue
                received = clock()
                data = reader.recv(1 << 20)
                if not data:
                    raise AssertionError("lag: the replica closed the reader's connection")
                reads.feed(data)
                while (reply := reads.next()) is not NEED_MORE:
                    if isinstance(reply, ReplyError) or not reply:
                        raise AssertionError(f"lag: XREAD on the replica replied {reply!r}")
                    for entry_id, fields in reply[0][1]:
                        stamp = int(fields[1])
                        sends.append(stamp)
                        lags.append(received - stamp)
                        last_id = entry_id
                    replies += 1
                    reader.sendall(encode_command(["XREAD", "BLOCK", 0, "STREAMS", LAG_KEY,
                                                   last_id]))
        return sends, lags, {"sent": sent, "writes": writes, "replies": replies,
                             "start_ns": start_ns, "end_ns": end_ns}
    finally:
        producer.close()
        reader.close()


def bench_lag(env: BenchEnv) -> Measurement:
    """Write-to-visible lag at LAG_RATE XADD/s (see the module docstring): the row's rate is
    the messages measured per second of the window; figures p50_ms, p99_ms, p999_ms, max_ms."""
    seconds = lag_seconds(env)
    primary = StreamkeepServer().start()
    replica = None
    try:
        replica = start_replica(primary.port)
        seed = primary.client.xadd(LAG_KEY, {"t": "0"})
        wait_caught_up(replica, primary_offset(primary))
        enabled = gc.isenabled()
        gc.disable()  # no collector pass inside the loop's timings
        try:
            sends, lags, run = _lag_loop(primary.port, replica.port, seed, LAG_RATE, seconds)
        finally:
            if enabled:
                gc.enable()
    finally:
        _stop(replica, primary)
    if len(lags) != run["sent"] or len(set(sends)) != len(lags):
        raise AssertionError(f"lag: {run['sent']} sent, {len(lags)} seen on the replica "
                             f"({len(lags) - len(set(sends))} twice)")
    skip_before = run["start_ns"] + int(LAG_WARMUP_S * 1e9)
    measured = sorted(lag for stamp, lag in zip(sends, lags, strict=True) if stamp >= skip_before)
    if not measured:
        raise AssertionError("lag: no message after the warm-up")
    figures = {f"{name}_ms": percentile_us(measured, q) / 1000
               for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999))}
    figures["max_ms"] = measured[-1] / 1e6
    elapsed_s = (run["end_ns"] - run["start_ns"]) / 1e9
    window_s = max(elapsed_s - LAG_WARMUP_S, 1e-3)
    note = (f"lag: {run['sent']:,} XADDs sent at {run['sent'] / max(elapsed_s, 1e-9):,.0f}/s "
            f"(target {LAG_RATE:,}/s, in {run['writes']:,} writes), all seen on the replica, "
            f"{len(lags) / max(run['replies'], 1):.1f} per XREAD reply; of the "
            f"{len(measured):,} after the warm-up: p50 {figures['p50_ms']:.3f} ms, p99 "
            f"{figures['p99_ms']:.3f} ms, p99.9 {figures['p999_ms']:.3f} ms, max "
            f"{figures['max_ms']:.3f} ms")
    return Measurement(len(measured) / window_s, count=len(measured), figures=figures,
                       notes=[note])


# --- 5. full sync of a big stream with a group ---------------------------------------------------


def _check_stream(server: StreamkeepServer, entries: int, pending: int) -> None:
    client = server.client
    length = int(client.xlen(KEY))
    found = int(client.xpending(KEY, GROUP)["pending"])
    if (length, found) != (entries, pending):
        raise AssertionError(f"{server.name} holds {length} entries, {found} pending; "
                             f"expected {entries}, {pending}")


def bench_full_sync(path: str, env: BenchEnv) -> Measurement:
    """A fresh replica's full sync of :func:`full_sync_entries` entries with
    :func:`full_sync_pending` pending (see the module docstring): the row's rate is entries per
    second of the sync, from the replica's start to its link up with the offsets equal
    (figure ``seconds``; ``answering_s``: until the replica process answered PING;
    ``snapshot_mb``: the snapshot sent)."""
    entries, pending = full_sync_entries(env), full_sync_pending(env)
    datasets.build(path, datasets.DataSet(entries, KEY, group=GROUP, consumers=(CONSUMER,),
                                          read=pending))
    gc.collect()
    primary = StreamkeepServer(data=path).start()
    primary.name = "streamkeep primary"
    replica = None
    try:
        _check_stream(primary, entries, pending)
        target = primary_offset(primary)
        snapshot_mb = int(primary.client.info("persistence")["aof_base_size"]) / 1e6
        start = time.perf_counter()
        replica = start_replica(primary.port)
        answering = time.perf_counter()
        done = wait_caught_up(replica, target)
        _check_stream(replica, entries, pending)
    finally:
        _stop(replica, primary)
    seconds = done - start
    return Measurement(entries / seconds, count=entries,
                       figures={"seconds": seconds, "answering_s": answering - start,
                                "snapshot_mb": snapshot_mb},
                       notes=[f"full sync: {entries:,} entries, {pending:,} pending, a "
                              f"{snapshot_mb:,.1f} MB snapshot at LSN {target:,}: the replica "
                              f"answered PING {answering - start:.3f} s after its start, had "
                              f"its link up and the primary's offset after {seconds:.3f} s"])

