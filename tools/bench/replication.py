"""The ``replication`` section's workloads, each on fresh processes (:func:`.processes.running`)
or a fresh embedded engine: redis-benchmark XADD against a primary without and with a replica,
an embedded engine serving on a thread, a replica's catch-up (paused by SIGSTOP) against the
replay of its directory, the lag to ``XREAD BLOCK`` on a replica (the paced loop of
:mod:`.latency`), a full sync. Must not touch: replication or engine internals.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
from typing import TYPE_CHECKING, Any

import redis

from streamkeep.tools.bench import datasets
from streamkeep.tools.bench.latency import XReader, measured, paced
from streamkeep.tools.bench.processes import StreamkeepServer, running
from streamkeep.tools.bench.server import BENCH_KEY, bench_xadd
from streamkeep.tools.bench.workload import (
    CONSUMER,
    GROUP,
    KEY,
    Measurement,
    Size,
    clocked,
    fill,
    info_fields,
    pipelined,
    tail_figures,
    warmup_size,
)
from streamkeep.tools.servers import HOST, ThreadServer, cpu_seconds

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

P16 = 16  # redis-benchmark -P, as the server section's row
POLL_SECONDS = 0.003  # INFO replication polled this often while a replica catches up
SYNC_TIMEOUT = 300.0  # seconds a replica may take to reach the primary's offset
FILL_BATCH = 10_000  # pipelined XADDs per write while filling a primary
LAG_RATE = 10_000  # the lag row's producer, XADD/s
LAG_SECONDS = Size(5.0, 1.0)
LAG_KEY = "replication:lag"
FULL_SYNC_ENTRIES = Size(5, per_n=True)  # the full-sync stream: 1,000,000 entries at full N ...
FULL_SYNC_PENDING_FRACTION = 10  # ... a tenth of them pending in its group


def info(server: Any) -> dict[str, str]:
    """INFO replication's fields, through the server's own client (a poll opens no
    connection) or the embedded engine."""
    return info_fields((server.engine.execute if isinstance(server, ThreadServer)
                        else server.client.execute_command)("INFO", "replication"))


def offset(server: Any) -> int:
    """A primary's ``master_repl_offset`` (its last LSN)."""
    return int(info(server)["master_repl_offset"])


def wait_caught_up(replica: StreamkeepServer, target: int) -> float:
    """Poll the replica until its link is up and its offset is at least ``target``; the
    perf_counter time it was first seen there. AssertionError after SYNC_TIMEOUT."""
    deadline = time.perf_counter() + SYNC_TIMEOUT
    while True:
        fields = info(replica)
        up = fields.get("master_link_status") == "up"
        at = int(fields.get("slave_repl_offset", -1))
        now = time.perf_counter()
        if up and at >= target:
            return now
        if now > deadline:
            raise AssertionError(f"the replica reached offset {at} (link "
                                 f"{'up' if up else 'down'}), not {target}, in {SYNC_TIMEOUT:g} s")
        time.sleep(POLL_SECONDS)


def replica_of(primary: Any) -> StreamkeepServer:
    """A fresh ``streamkeep serve --replicaof`` of ``primary`` (to start: :func:`running`)."""
    return StreamkeepServer(replicaof=primary.port)


def xadd_p16(env: BenchEnv, replicas: int) -> Measurement:
    """redis-benchmark -P 16 XADD against a fresh primary with ``replicas`` (0 or 1) replicas
    attached and caught up first; requests/s. With a replica: its CPU per XADD and how long
    after the last reply it had every record (figure ``catchup_ms``)."""
    with running(StreamkeepServer()) as primary:
        primary.name = "streamkeep primary" + (f", {replicas} replica" if replicas else "")
        if not replicas:
            return bench_xadd(env, primary, P16)
        with running(replica_of(primary)) as replica:
            wait_caught_up(replica, offset(primary))
            cpu = cpu_seconds(replica.pid)
            m = bench_xadd(env, primary, P16)
            done, target = time.perf_counter(), offset(primary)
            m.figures["catchup_ms"] = (wait_caught_up(replica, target) - done) * 1000
            cpu_after = cpu_seconds(replica.pid)  # (the polls' INFO replies included)
    line = (f"XADD -P {P16} with a replica: it had every record {m.figures['catchup_ms']:,.1f} "
            f"ms after the benchmark's last reply (offset {target:,})")
    if cpu is not None and cpu_after is not None and m.count:
        m.figures["replica_cpu_us"] = (cpu_after - cpu) / m.count * 1e6
        line += f"; replica CPU {m.figures['replica_cpu_us']:.1f} us per XADD"
    m.notes.append(line)
    return m


def embedded_xadd(env: BenchEnv, replicas: int) -> Measurement:
    """N x ``engine.execute("XADD", KEY, "*", "f", "v")`` on an engine serving on a thread,
    with ``replicas`` (0 or 1) replica children attached and caught up (after the warm-up
    too) before the timed loop; adds/s. With a replica: how long after the loop it had every
    record (``catchup_ms``)."""
    with env.engine("embedded-primary") as engine:
        primary = ThreadServer.start(engine)
        try:
            with running(*([replica_of(primary)] if replicas else [])) as replica:
                if replicas:
                    wait_caught_up(replica, offset(primary))
                fill(primary.engine.execute, "warmup", warmup_size(env.n))
                if replicas:
                    wait_caught_up(replica, offset(primary))
                began = time.perf_counter()
                fill(primary.engine.execute, KEY, env.n)
                elapsed = time.perf_counter() - began
                m = Measurement(env.n / elapsed, count=env.n)
                if replicas:
                    caught_up = wait_caught_up(replica, offset(primary))
                    m.figures["catchup_ms"] = (caught_up - began - elapsed) * 1000
        finally:
            primary.stop(30)
    return m


def _time_replay(path: str, records: int, key: str) -> float:
    """Seconds ``Engine.open(path)`` takes; the stream ``key`` checked to hold ``records``."""
    from streamkeep import Engine

    engine, elapsed = clocked(Engine.open, path)
    try:
        if (length := engine.execute("XLEN", key)) != records:
            raise AssertionError(f"the replica's directory replayed {length} entries of {key}, "
                                 f"expected {records}")
    finally:
        engine.close()
    return elapsed


def apply(env: BenchEnv) -> Measurement:
    """A replica's apply rate over a backlog of N XADD records (see the module docstring);
    records/s, with the replay of the same records at ``Engine.open`` (``replay_per_s``) and
    apply / replay (``apply_over_replay``)."""
    from streamkeep import Engine

    records = env.n
    with running(StreamkeepServer()) as primary, running(replica_of(primary)) as replica:
        base = offset(primary)
        wait_caught_up(replica, base)
        os.kill(replica.pid, signal.SIGSTOP)
        # The last record through a connection of its own: its WAIT then returns once the
        # replica has acknowledged everything, timed from the primary's side, so that nothing
        # polls the replica (its clients share its GIL with the apply) while it catches up.
        with contextlib.closing(redis.Redis(host=HOST, port=primary.port,
                                            socket_timeout=SYNC_TIMEOUT)) as waiter:
            try:
                pipelined(primary.client, [("XADD", BENCH_KEY, "*", "myfield", "myvalue")]
                          * (records - 1), FILL_BATCH)
                waiter.execute_command("XADD", BENCH_KEY, "*", "myfield", "myvalue")
                target = offset(primary)
            finally:
                resumed = time.perf_counter()
                os.kill(replica.pid, signal.SIGCONT)
            acked = waiter.execute_command("WAIT", 1, int(SYNC_TIMEOUT * 1000))
            caught_up = time.perf_counter()
        if acked != 1:
            raise AssertionError(f"WAIT 1 after the catch-up answered {acked!r}")
        wait_caught_up(replica, target)  # its offset says the same
        applied = target - base
        apply_rate = applied / (caught_up - resumed)
        replica.stop_process()  # a clean shutdown: its log holds every record
        with env.data_dir("replay-warmup") as warm:  # the replay's code paths loaded, warm
            with Engine.open(warm) as engine:
                fill(engine.execute, KEY, 1000)
            Engine.open(warm).close()
        gc.collect()
        replay_s = _time_replay(replica.data_dir, records, BENCH_KEY)
    replay_rate = target / replay_s  # the replica's log: LSN 1..target after an empty snapshot
    return Measurement(apply_rate, count=applied, figures={
        "replay_per_s": replay_rate, "apply_over_replay": apply_rate / replay_rate,
        "apply_s": caught_up - resumed, "replay_s": replay_s, "replayed_records": target})


def lag(env: BenchEnv) -> Measurement:
    """Write-to-visible lag at LAG_RATE XADD/s (see the module docstring): the rate is the
    messages measured per second of the window; figures p50_ms, p99_ms, p999_ms, max_ms."""
    with running(StreamkeepServer()) as primary, running(replica_of(primary)) as replica:
        seed = primary.client.xadd(LAG_KEY, {"t": "0"})
        wait_caught_up(replica, offset(primary))
        enabled = gc.isenabled()
        gc.disable()  # no collector pass inside the loop's timings
        try:
            start_ns = time.perf_counter_ns()
            run = paced(primary.port, LAG_KEY, [XReader(replica.port, LAG_KEY, seed)], LAG_RATE,
                        LAG_SECONDS.seconds(env), start_ns, 0.1)
        finally:
            if enabled:
                gc.enable()
    got = measured(run, start_ns)
    figures = tail_figures(got, "ms")
    elapsed_s = run["elapsed_ns"] / 1e9
    note = (f"lag: {run['sent']:,} XADDs sent at {run['sent'] / max(elapsed_s, 1e-9):,.0f}/s "
            f"(target {LAG_RATE:,}/s, in {run['writes']:,} writes), all seen on the replica, "
            f"{len(run['lats']) / max(run['reads'], 1):.1f} per XREAD reply; of the "
            f"{len(got):,} after the warm-up: p50 {figures['p50_ms']:.3f} ms, p99 "
            f"{figures['p99_ms']:.3f} ms, p99.9 {figures['p999_ms']:.3f} ms, max "
            f"{figures['max_ms']:.3f} ms")
    return Measurement(len(got) / max(elapsed_s - 0.5, 1e-3), count=len(got), figures=figures,
                       notes=[note])


def _check_stream(server: Any, entries: int, pending: int) -> None:
    length, found = int(server.client.xlen(KEY)), int(server.client.xpending(KEY, GROUP)["pending"])
    if (length, found) != (entries, pending):
        raise AssertionError(f"{server.name} holds {length} entries, {found} pending; "
                             f"expected {entries}, {pending}")


def full_sync(env: BenchEnv) -> Measurement:
    """A fresh replica's full sync of 5 x N entries, a tenth pending (see the module
    docstring): entries per second from the replica's start to its link up with the offsets
    equal (figure ``seconds``; ``answering_s``: until it answered PING; ``snapshot_mb``)."""
    entries = FULL_SYNC_ENTRIES(env)
    pending = entries // FULL_SYNC_PENDING_FRACTION
    with env.data_dir("full-sync") as path:
        datasets.build(path, datasets.DataSet(entries, KEY, group=GROUP, consumers=(CONSUMER,),
                                              read=pending))
        gc.collect()
        with running(StreamkeepServer(data=path)) as primary:
            primary.name = "streamkeep primary"
            _check_stream(primary, entries, pending)
            target = offset(primary)
            snapshot_mb = int(primary.client.info("persistence")["aof_base_size"]) / 1e6
            began = time.perf_counter()
            with running(replica_of(primary)) as replica:
                answering = time.perf_counter()
                done = wait_caught_up(replica, target)
                _check_stream(replica, entries, pending)
    seconds = done - began
    return Measurement(entries / seconds, count=entries,
                       figures={"seconds": seconds, "answering_s": answering - began,
                                "snapshot_mb": snapshot_mb, "snapshot_lsn": target})
