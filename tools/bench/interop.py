"""The ``interop`` section: a Redis's dump.rdb imported, and a redis-server primary followed.

Owns its workloads and how they are measured:
- ``interop.import_rdb``: the run's reference redis-server filled with IMPORT_PER_N x N
  entries (redis-benchmark XADD, one stream), SAVEd; ``streamkeep import`` of that dump.rdb
  run in process and timed whole (reading, restoring, the final compaction): entries/s.
- ``interop.replica_apply``: a redis-server primary of its own and a ``streamkeep serve
  --replicaof`` child following it; redis-benchmark (-c 50 -P 16, APPLY_PER_N x N XADDs)
  drives the primary while the replica's lag (entries behind, and bytes of Redis's offset) is
  printed on stderr every LAG_EVERY seconds; the rate is the XADDs the replica applied per
  second, from the benchmark's start to the replica holding the primary's offset. On a machine
  of few cores this rate is bounded by redis-benchmark and the primary themselves: they hold
  the CPU while the benchmark runs, so a replica applies little until it ends.
- ``interop.replica_catchup``: the same primary, replica and benchmark, with the replica
  stopped (SIGSTOP) while redis-benchmark runs, so the primary holds the whole stream for it;
  continued (SIGCONT), the rate is the XADDs it applied per second until it holds the
  primary's offset: what its apply loop sustains, the load generator's CPU out of the figure.
Must not touch: the import tool and the follower (it only measures them), the registry.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import RedisServer, StreamkeepServer
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

IMPORT_PER_N = 2.5  # entries in the imported dump.rdb: 500,000 at the default N
APPLY_PER_N = 2  # XADDs redis-benchmark sends the primary: 400,000 at the default N
KEY = "mystream"
LAG_EVERY = 1.0  # seconds between the lag lines on stderr
POLL = 0.05  # seconds between the lag checks
CATCHUP_POLL = 0.01  # seconds between the checks of a catching-up replica's offset
TIMEOUT = 600.0


def import_entries(env: BenchEnv) -> int:
    return int(env.n * IMPORT_PER_N)


def apply_requests(env: BenchEnv) -> int:
    return env.n * APPLY_PER_N


def describe(env: BenchEnv) -> list[str]:
    return [f"interop: import of a redis-server dump.rdb of {import_entries(env):,} entries "
            f"(one stream, `XADD {KEY} * myfield myvalue`); a `streamkeep serve --replicaof` "
            f"child of a redis-server driven by redis-benchmark -c 50 -P 16 -n "
            f"{apply_requests(env):,} XADD (its lag on stderr every {LAG_EVERY:g} s), then "
            f"the same with the replica stopped until the benchmark ends (its catch-up)"]


def _benchmark(port: int, requests: int) -> list[str]:
    import shutil

    path = shutil.which("redis-benchmark")
    if path is None:
        raise Skip("redis-benchmark not found on PATH")
    return [path, "-h", HOST, "-p", str(port), "-c", "50", "-n", str(requests), "-P", "16",
            "-q", "XADD", KEY, "*", "myfield", "myvalue"]


def bench_import_rdb(env: BenchEnv) -> Measurement:
    from streamkeep.tools import redisimport

    client = env.redis
    n = import_entries(env)
    client.delete(KEY)
    subprocess.run(_benchmark(env.server.port, n), check=True,  # type: ignore[union-attr]
                   capture_output=True, timeout=TIMEOUT, **temporaries.child_options())
    n = int(client.xlen(KEY))  # (-P may send a few more than -n)
    client.save()
    client.delete(KEY)
    rdb = os.path.join(str(client.config_get("dir")["dir"]),
                       str(client.config_get("dbfilename")["dbfilename"]))
    with env.data_dir("interop-import") as out:
        args = argparse.Namespace(source=rdb, out=out, json=True)
        began = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            code = redisimport.main(args)
        seconds = time.perf_counter() - began
    if code != 0:
        raise AssertionError(f"streamkeep import exited {code}")
    size = os.path.getsize(rdb)
    return Measurement(n / seconds, count=n, figures={"seconds": seconds},
                       notes=[f"interop.import_rdb: {n:,} entries ({size / 1e6:.1f} MB RDB) in "
                              f"{seconds:.2f} s, the final compaction included"])


def _lag(primary: RedisServer, replica: StreamkeepServer) -> tuple[int, int]:
    """(entries behind, bytes of Redis's offset behind)."""
    offset = int(primary.client.info("replication")["master_repl_offset"])
    info = replica.client.info("replication")
    behind = offset - int(info.get("slave_repl_offset", 0))
    return int(primary.client.xlen(KEY)) - int(replica.client.xlen(KEY)), behind


def _follower(primary: RedisServer) -> StreamkeepServer:
    """A streamkeep replica of ``primary``, its link up."""
    # a replica held stopped must not be cut off for the stream the primary holds for it
    primary.client.config_set("client-output-buffer-limit", "replica 0 0 0")
    replica = StreamkeepServer(replicaof=primary.port).start()
    _wait(lambda: replica.client.info("replication").get("master_link_status") == "up")
    return replica


def bench_replica_apply(env: BenchEnv) -> Measurement:
    primary = RedisServer()
    primary.start()
    replica: StreamkeepServer | None = None
    tool: subprocess.Popen | None = None
    try:
        replica = _follower(primary)
        requests = apply_requests(env)
        began = time.perf_counter()
        tool = subprocess.Popen(_benchmark(primary.port, requests), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, **temporaries.child_options())
        worst = (0, 0)
        printed = began
        while True:
            time.sleep(POLL)
            entries, behind = _lag(primary, replica)
            worst = max(worst, (entries, behind))
            done = tool.poll() is not None
            if done and behind <= 0:
                break
            if time.perf_counter() - printed >= LAG_EVERY:
                printed = time.perf_counter()
                print(f"interop.replica_apply: {printed - began:5.1f} s, the replica is "
                      f"{entries:,} entries ({behind:,} bytes) behind the primary"
                      + (", redis-benchmark done" if done else ""), file=sys.stderr,
                      flush=True)
            if time.perf_counter() - began > TIMEOUT:
                raise AssertionError(f"the replica was still {entries:,} entries behind")
        if tool.returncode != 0:
            raise AssertionError(f"redis-benchmark exited {tool.returncode}")
        seconds = time.perf_counter() - began
        applied = int(replica.client.xlen(KEY))
    finally:
        if tool is not None and tool.returncode is None:  # (interrupted)
            temporaries.kill_group(tool)
        if replica is not None:
            replica.stop()
        primary.stop()
    return Measurement(applied / seconds, count=applied,
                       figures={"max_lag_entries": worst[0], "max_lag_bytes": worst[1]},
                       notes=[f"interop.replica_apply: {applied:,} XADDs applied in "
                              f"{seconds:.1f} s; the lag peaked at {worst[0]:,} entries "
                              f"({worst[1]:,} bytes of Redis's offset)"])


def bench_replica_catchup(env: BenchEnv) -> Measurement:
    primary = RedisServer()
    primary.start()
    replica: StreamkeepServer | None = None
    stopped = False
    try:
        replica = _follower(primary)
        pid = replica.pid
        assert pid is not None
        before = int(replica.client.xlen(KEY))  # (nothing is applied while it is stopped)
        os.kill(pid, signal.SIGSTOP)
        stopped = True
        subprocess.run(_benchmark(primary.port, apply_requests(env)), check=True,
                       capture_output=True, timeout=TIMEOUT, **temporaries.child_options())
        offset = int(primary.client.info("replication")["master_repl_offset"])
        held = int(primary.client.xlen(KEY))
        os.kill(pid, signal.SIGCONT)
        stopped = False
        began = printed = time.perf_counter()
        while int(replica.client.info("replication").get("slave_repl_offset", 0)) < offset:
            time.sleep(CATCHUP_POLL)
            now = time.perf_counter()
            if now - began > TIMEOUT:
                raise AssertionError("the replica did not catch up with the primary")
            if now - printed >= LAG_EVERY:
                printed = now
                behind = held - int(replica.client.xlen(KEY))
                print(f"interop.replica_catchup: {now - began:5.1f} s, the replica is "
                      f"{behind:,} entries behind the primary", file=sys.stderr, flush=True)
        seconds = time.perf_counter() - began
        applied = int(replica.client.xlen(KEY)) - before
    finally:
        if replica is not None:
            if stopped and replica.pid is not None:
                os.kill(replica.pid, signal.SIGCONT)  # (interrupted: let it take SIGTERM)
            replica.stop()
        primary.stop()
    if applied != held - before:
        raise AssertionError(f"the replica holds {before + applied:,} entries, the primary "
                             f"{held:,}")
    return Measurement(applied / seconds, count=applied, figures={"seconds": seconds},
                       notes=[f"interop.replica_catchup: {applied:,} XADDs applied in "
                              f"{seconds:.2f} s after the replica was continued "
                              f"({before:,} were applied before it stopped)"])


def _wait(ready: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("the replica did not connect to the redis-server primary")
        time.sleep(0.05)
