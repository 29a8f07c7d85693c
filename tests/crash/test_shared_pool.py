"""One data directory, many processes: worker processes (forked and spawned) share one work queue
through `Engine.open(path, shared=True)`, beside a process that only reads the queue's figures,
with the directory's server started by the first of them. Every message is handled at least
once and acknowledged once (an XACK that found it pending: exactly one per message), the poison
message is dead-lettered once. The server SIGKILLed in the middle of the run is replaced by
the workers' next calls and the run still ends with nothing lost. Twenty processes opening
the directory at the same instant start exactly one server."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, StreamQueue
from streamkeep.engine.services.shared_client import ServerLost
from tests.support.pids import wait_gone
from tests.support.serve_process import ROOT
from tests.support.shared_dirs import servers_of

MESSAGES = 300
WORKERS = 4
RUN_LIMIT = 180.0  # seconds: a hang fails the test instead of the suite's timeout
MAX_DELIVERIES = 5
OPENERS = 20


def _work(engine: Any, name: str, log: str, go: Any, stop: Any) -> None:
    """A worker: handles messages (the poison one always fails), noting each handled ID, then
    each acknowledgement with what XACK answered (1: it was pending, 0: it was not)."""
    with open(log, "a", buffering=1) as out:
        out.write(f"server {engine.server_pid}\n")
        go.wait()
        queue = None
        while not stop.is_set():
            try:
                if queue is None:
                    queue = StreamQueue(engine, "jobs", consumer=name, visibility_timeout=1.5,
                                        max_deliveries=MAX_DELIVERIES)
                for msg in queue.get(count=5, block=0.05):
                    if msg.fields.get(b"poison"):
                        msg.nack()  # a handler that always fails
                        continue
                    out.write(f"handled {msg.id.decode()}\n")
                    out.write(f"acked {msg.id.decode()} {queue.ack(msg.id)}\n")
            except ServerLost:
                out.write("lost\n")  # its server was killed: the next call starts another
    engine.close()


def _read_stats(engine: Any, log: str, go: Any, stop: Any) -> None:
    """A process that only reads the queue's figures, as a cron job or a dashboard would; the
    workers start once it has read them a first time."""
    reads = 0
    queue = StreamQueue(engine, "jobs", create=False)
    while not stop.is_set():
        try:
            stats = queue.stats()
        except ServerLost:
            continue
        assert 1 <= stats["length"] <= MESSAGES + 1, stats
        reads += 1
        go.set()
        time.sleep(0.02)
    with open(log, "w") as out:
        out.write(f"{reads}\n")
    engine.close()


def _run_pool(path: Path, context: str, appendfsync: str, kills: int) -> tuple[
        list[str], list[str], int, list[int]]:
    """Put MESSAGES messages and a poison one, run WORKERS workers and a stats reader
    (processes of the `context` start method) until the queue is drained, SIGKILLing the
    server `kills` times along the way: the messages are put in kills + 1 batches, and the
    server is killed while the workers take a batch (once half of it is handed out), before
    the next one is put. The workers' log lines, the CLI's stats, the reader's number of
    reads and the pids of the servers the run saw."""
    ctx = multiprocessing.get_context(context)
    engine = Engine.open(str(path), shared=True, appendfsync=appendfsync)
    q = StreamQueue(engine, "jobs", consumer="producer", max_deliveries=MAX_DELIVERIES)
    batches = [range(b * MESSAGES // (kills + 1), (b + 1) * MESSAGES // (kills + 1))
               for b in range(kills + 1)]

    def put(batch: range) -> None:
        while True:  # idempotency keys: a put retried after its server was killed adds nothing
            try:
                q.put_many([{"n": i} for i in batch], idempotency_keys=[f"m{i}" for i in batch])
                return
            except ServerLost:
                continue

    put(batches[0])
    q.put({"poison": "1"})
    taken = 1  # batches put
    servers = [engine.server_pid]
    go, stop = ctx.Event(), ctx.Event()
    logs = [str(path.parent / f"worker-{i}.log") for i in range(WORKERS)]
    # The engine goes to each process as it is: a forked child inherits it (and makes its own
    # connection), a spawned one receives it pickled (its path: it opens the directory).
    procs = [ctx.Process(target=_work, args=(engine, f"w{i}", logs[i], go, stop))
             for i in range(WORKERS)]
    reader_log = str(path.parent / "reader.log")
    procs.append(ctx.Process(target=_read_stats, args=(engine, reader_log, go, stop)))
    for proc in procs:
        proc.start()
    # From the shell meanwhile: the directory's running server answers it.
    cli = subprocess.Popen([sys.executable, "-m", "streamkeep", "queue", "stats", str(path),
                            "jobs", "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + RUN_LIMIT
    try:
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                stats = q.stats()
            except ServerLost:
                continue
            if taken < len(batches) and stats["lag"] <= len(batches[taken - 1]) // 2:
                old = servers[-1]
                os.kill(old, signal.SIGKILL)
                wait_gone(old, 30)
                while True:  # the producer's next call starts the replacement itself
                    try:
                        engine.execute("PING")
                        break
                    except ServerLost:
                        continue
                servers.append(engine.server_pid)
                put(batches[taken])
                taken += 1
                continue
            if taken == len(batches) and stats["lag"] == 0 and stats["pending"] == 0 \
                    and stats["dead"] == 1:
                break
    finally:
        stop.set()
        go.set()
        for proc in procs:
            proc.join(60)
            if proc.exitcode is None:
                proc.kill()
                proc.join()
        out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err
    assert [proc.exitcode for proc in procs] == [0] * len(procs)
    lines = [line for log in logs for line in Path(log).read_text().splitlines()]
    reads = int(Path(reader_log).read_text())
    engine.close()
    return lines, [out], reads, servers


def _check_run(path: Path, lines: list[str], exactly_once_acks: bool) -> None:
    with Engine.open(str(path), shared=True) as engine:
        q = StreamQueue(engine, "jobs", create=False, max_deliveries=MAX_DELIVERIES)
        stats = q.stats()
        assert stats["lag"] == 0 and stats["pending"] == 0, stats
        ids = [sid for sid, fields in engine.execute("XRANGE", "jobs", "-", "+")
               if fields != [b"poison", b"1"]]
        poison = [sid for sid, fields in engine.execute("XRANGE", "jobs", "-", "+")
                  if fields == [b"poison", b"1"]]
        dead = q.dead()
    assert len(ids) == MESSAGES
    assert [d.source_id for d in dead] == poison  # dead-lettered once
    assert dead[0].deliveries == MAX_DELIVERIES
    handled = {line.split()[1] for line in lines if line.startswith("handled ")}
    assert handled == {sid.decode() for sid in ids}  # each at least once
    acked = Counter(line.split()[1] for line in lines
                    if line.startswith("acked ") and line.endswith(" 1"))
    if exactly_once_acks:
        assert acked == Counter({sid.decode(): 1 for sid in ids})
    else:  # an XACK whose reply died with its server may have run: not counted here
        assert max(acked.values()) == 1


@pytest.mark.timeout(600)
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_worker_processes_share_one_queue(shared_dir: Path, context: str) -> None:
    lines, (cli,), reads, servers = _run_pool(shared_dir, context, "everysec", kills=0)
    _check_run(shared_dir, lines, exactly_once_acks=True)
    # One server for the whole run, the one every process reached.
    assert {int(line.split()[1]) for line in lines if line.startswith("server ")} \
        == set(servers) == set(servers_of(shared_dir))
    assert reads > 0  # the reader read figures beside the workers
    figures = json.loads(cli)
    assert figures["queue"] == "jobs" and figures["length"] == MESSAGES + 1


@pytest.mark.timeout(600)
def test_the_server_killed_in_the_middle_is_replaced(shared_dir: Path) -> None:
    lines, _cli, _reads, servers = _run_pool(shared_dir, "fork", "always", kills=2)
    assert len(set(servers)) == 3  # killed twice, replaced twice
    _check_run(shared_dir, lines, exactly_once_acks=False)
    assert servers_of(shared_dir) == [servers[-1]] or servers_of(shared_dir) == []


def _open_at_once(path: str, barrier: Any, out: Any) -> None:
    barrier.wait()
    with Engine.open(path, shared=True) as engine:
        out.put((engine.server_pid, engine.execute("INCR", "opened")))


@pytest.mark.timeout(600)
def test_twenty_processes_opening_at_once_start_one_server(shared_dir: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(OPENERS), ctx.Queue()
    procs = [ctx.Process(target=_open_at_once, args=(str(shared_dir), barrier, out))
             for _ in range(OPENERS)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=RUN_LIMIT) for _ in procs]
    out.close()
    out.join_thread()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0] * OPENERS
    pids = {pid for pid, _count in results}
    assert len(pids) == 1
    assert sorted(count for _pid, count in results) == list(range(1, OPENERS + 1))
    assert servers_of(shared_dir) == sorted(pids)
    started = (shared_dir / "shared.log").read_text().count(" listening on ")
    assert started == 1
