"""The ``interop`` section's workloads: ``streamkeep import`` of the run's dump.rdb (one stream
the reference redis-server SAVEd: :func:`dump_rdb`, which the nodes section's import rows read
too), timed whole; a ``streamkeep serve --replicaof`` child of a redis-server driven by
redis-benchmark (its lag on stderr), and the same replica stopped while the benchmark runs,
then timed catching up. Must not touch: the import tool and the follower.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import RedisServer, StreamkeepServer, running
from streamkeep.tools.bench.server import benchmark_tool
from streamkeep.tools.bench.workload import Measurement, Size, clocked, pipelined
from streamkeep.tools.servers import HOST

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

IMPORT_ENTRIES = Size(2.5, per_n=True, least=1_000)  # the dump.rdb's: 500,000 at the default N
APPLY_PER_N = 2  # XADDs redis-benchmark sends the primary: 400,000 at the default N
KEY = "mystream"
LAG_EVERY = 1.0  # seconds between the lag lines on stderr
POLL, CATCHUP_POLL = 0.05, 0.01  # seconds between the checks of the replica
TIMEOUT = 600.0


def _benchmark(env: BenchEnv, port: int) -> list[str]:
    """The run's redis-benchmark: -c 50 -P 16 XADD, N x APPLY_PER_N requests."""
    return [benchmark_tool(env).path, "-h", HOST, "-p", str(port), "-c", "50", "-n",
            str(env.n * APPLY_PER_N), "-P", "16", "-q", "XADD", KEY, "*", "myfield", "myvalue"]


def dump_rdb(env: BenchEnv) -> tuple[str, int]:
    """The run's dump.rdb (made once): IMPORT_ENTRIES x ``XADD mystream * myfield myvalue``
    by the reference redis-server, SAVEd and copied out; (its path, its entries)."""
    def made() -> Iterator[tuple[str, int]]:
        client, entries = env.redis, IMPORT_ENTRIES(env)
        client.delete(KEY)
        pipelined(client, [("XADD", KEY, "*", "myfield", "myvalue")] * entries)
        client.save()
        client.delete(KEY)
        with temporaries.temp_directory("bench-rdb") as root:
            rdb = os.path.join(root, "dump.rdb")
            shutil.copy(os.path.join(str(client.config_get("dir")["dir"]),
                                     str(client.config_get("dbfilename")["dbfilename"])), rdb)
            yield rdb, entries

    return env.shared("dump.rdb", made)  # type: ignore[no-any-return]


def import_rdb(env: BenchEnv) -> Measurement:
    from streamkeep.tools import redisimport

    rdb, n = dump_rdb(env)
    with env.data_dir("interop-import") as out, contextlib.redirect_stdout(io.StringIO()):
        code, seconds = clocked(redisimport.main, argparse.Namespace(source=rdb, out=out,
                                                                     json=True))
    if code != 0:
        raise AssertionError(f"streamkeep import exited {code}")
    return Measurement(n / seconds, count=n, figures={"seconds": seconds,
                                                      "rdb_mb": os.path.getsize(rdb) / 1e6})


def _follow(row: Callable[[Any, Any], Measurement]) -> Measurement:
    """``row(primary, replica)``: a redis-server primary of its own and a streamkeep replica,
    its link up (the primary holding the whole stream for a replica held stopped)."""
    with running(RedisServer()) as primary:
        primary.client.config_set("client-output-buffer-limit", "replica 0 0 0")
        with running(StreamkeepServer(replicaof=primary.port)) as replica:
            deadline = time.monotonic() + 30
            while replica.client.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise AssertionError("the replica did not connect to the redis-server "
                                         "primary")
                time.sleep(0.05)
            return row(primary, replica)


def _lag_line(row: str, began: float, behind: str, done: bool = False) -> None:
    print(f"interop.{row}: {time.perf_counter() - began:5.1f} s, the replica is {behind} behind "
          f"the primary" + (", redis-benchmark done" if done else ""), file=sys.stderr,
          flush=True)


def replica_apply(env: BenchEnv) -> Measurement:
    def row(primary: Any, replica: Any) -> Measurement:
        began = printed = time.perf_counter()
        tool = subprocess.Popen(_benchmark(env, primary.port),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                **temporaries.child_options())
        worst = (0, 0)  # (entries behind, bytes of Redis's offset behind)
        try:
            while True:
                time.sleep(POLL)
                offset = int(primary.client.info("replication")["master_repl_offset"])
                at = int(replica.client.info("replication").get("slave_repl_offset", 0))
                lag = (int(primary.client.xlen(KEY)) - int(replica.client.xlen(KEY)),
                       offset - at)
                worst, done = max(worst, lag), tool.poll() is not None
                if done and lag[1] <= 0:
                    break
                if time.perf_counter() - printed >= LAG_EVERY:
                    printed = time.perf_counter()
                    _lag_line("replica_apply", began, f"{lag[0]:,} entries ({lag[1]:,} bytes)",
                              done)
                if time.perf_counter() - began > TIMEOUT:
                    raise AssertionError(f"the replica was still {lag[0]:,} entries behind")
        finally:
            if tool.returncode is None:  # (interrupted)
                temporaries.kill_group(tool)
            if tool.stderr is not None:
                tool.stderr.close()
        if tool.returncode != 0:
            raise AssertionError(f"redis-benchmark exited {tool.returncode}")
        seconds, applied = time.perf_counter() - began, int(replica.client.xlen(KEY))
        return Measurement(applied / seconds, count=applied,
                           figures={"max_lag_entries": worst[0], "max_lag_bytes": worst[1]})

    return _follow(row)


def replica_catchup(env: BenchEnv) -> Measurement:
    def row(primary: Any, replica: Any) -> Measurement:
        before = int(replica.client.xlen(KEY))  # (nothing is applied while it is stopped)
        os.kill(replica.pid, signal.SIGSTOP)
        try:
            subprocess.run(_benchmark(env, primary.port), check=True,
                           capture_output=True, timeout=TIMEOUT, **temporaries.child_options())
            offset = int(primary.client.info("replication")["master_repl_offset"])
            held = int(primary.client.xlen(KEY))
        finally:
            os.kill(replica.pid, signal.SIGCONT)  # (interrupted too: let it take SIGTERM)
        began = printed = time.perf_counter()
        while int(replica.client.info("replication").get("slave_repl_offset", 0)) < offset:
            time.sleep(CATCHUP_POLL)
            if time.perf_counter() - began > TIMEOUT:
                raise AssertionError("the replica did not catch up with the primary")
            if time.perf_counter() - printed >= LAG_EVERY:
                printed = time.perf_counter()
                _lag_line("replica_catchup", began,
                          f"{held - int(replica.client.xlen(KEY)):,} entries")
        seconds = time.perf_counter() - began
        applied = int(replica.client.xlen(KEY)) - before
        if applied != held - before:
            raise AssertionError(f"the replica holds {before + applied:,} entries, the primary "
                                 f"{held:,}")
        return Measurement(applied / seconds, count=applied,
                           figures={"seconds": seconds, "applied_before_stop": before})

    return _follow(row)
