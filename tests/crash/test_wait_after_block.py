"""WAIT and WAITAOF after a blocked XREADGROUP that another client's XADD served: the delivery's
record (the PEL entry, last-delivered-id, the consumer) is the connection's last write, so WAIT
counts only the replicas that acknowledged it. Redis counts the record of the read's first,
blocking run instead, and reports a replica that never received the delivery. Tested at the
session level, and end to end with a replica stopped by SIGSTOP, as a partition would stop it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.runtime.core import Session
from tests.support.serve_process import ServeProcess


def test_the_served_reads_record_is_its_sessions_last_write(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "d")) as engine:
        engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        consumer = Session()
        waiter, _lsn = engine.submit(consumer, (b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK",
                                                b"0", b"STREAMS", b"s", b">"))
        blocked_at = consumer.write_lsn  # (its first run logged the new consumer)
        engine.execute("XADD", "s", "*", "f", "v")
        xadd = engine.journal.lsn - 1  # the XADD's record, then the served read's
        assert waiter.done and waiter.result
        assert consumer.write_lsn == waiter.lsn == engine.journal.lsn > xadd > blocked_at


def _stopped(pid: int) -> bool:
    """Every thread of process `pid` stopped (state T in /proc)."""
    tasks = Path(f"/proc/{pid}/task")
    for task in tasks.iterdir():
        stat = (task / "stat").read_text()
        if stat[stat.rindex(")") + 2] not in "Tt":
            return False
    return True


CLAIM_IDLE_MS = 2000  # long enough for the fence and the stop to come first


def _until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.parametrize("claim", [False, True])
def test_wait_does_not_count_a_replica_that_missed_the_delivery(
        spawn: Callable[..., ServeProcess], tmp_path: Path, claim: bool) -> None:
    """The read blocks (its first run's record, a consumer's seen time, reaches the replica),
    then the replica stops, then the read is served: by an XADD, or (CLAIM) by the pending
    entry it waits for becoming idle enough."""
    # A password: WAIT counts the replicas of this primary, and in a parallel suite another
    # test's replica, whose primary's port this one was given, would follow it too.
    secret = f"wait-{os.getpid()}-{time.monotonic_ns()}"
    primary = spawn(tmp_path / "p", "--requirepass", secret)
    replica = spawn(tmp_path / "r", "--replicaof", "127.0.0.1", str(primary.port),
                    "--masterauth", secret)
    p, fence = (primary.client(password=secret) for _ in range(2))
    # One connection for the consumer, never a pool's: WAIT must run on the connection the
    # read ran on (a pool may hand out a reconnected one, a new client whose last write is
    # none, which every replica has acknowledged).
    consumer = primary.client(password=secret, single_connection_client=True)
    consumer_id = consumer.client_id()
    p.xgroup_create("s", "g", "$", mkstream=True)
    if claim:  # an entry delivered to c1, which the blocked CLAIM read takes once it is idle
        p.xadd("s", {"f": "old"})
        p.xreadgroup("g", "c1", {"s": ">"})
    got: list = []
    argv = ["XREADGROUP", "GROUP", "g", "c2", "BLOCK", "20000",
            *(["CLAIM", str(CLAIM_IDLE_MS)] if claim else []), "STREAMS", "s", ">"]
    reader = threading.Thread(target=lambda: got.append(consumer.execute_command(*argv)))
    reader.start()
    _until(lambda: int(p.info("clients")["blocked_clients"]) == 1, "the read never blocked")
    fence.set("fence", "1")  # after the read's first run: acknowledged, so is that run
    assert fence.execute_command("WAIT", 1, 10_000) == 1
    assert p.info("replication")["connected_slaves"] == 1
    os.kill(replica.proc.pid, signal.SIGSTOP)
    # kill() returns before every thread has stopped: a busy machine may let the replica run
    # on long enough to receive and acknowledge the delivery below.
    _until(lambda: _stopped(replica.proc.pid), "the replica never stopped")
    try:
        if not claim:
            p.xadd("s", {"f": "new"})  # serves the blocked read
        reader.join(20)
        assert got and got[0], got
        assert consumer.client_id() == consumer_id, "the consumer's connection was replaced"
        # The delivery is on the primary only: the stopped replica has not acknowledged it.
        assert consumer.execute_command("WAIT", 1, 300) == 0
        assert consumer.execute_command("WAITAOF", 0, 1, 300)[1] == 0
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    assert consumer.execute_command("WAIT", 1, 10_000) == 1
    assert consumer.execute_command("WAITAOF", 0, 1, 10_000)[1] == 1
    r = replica.client()
    _until(lambda: r.xpending("s", "g")["pending"] == p.xpending("s", "g")["pending"],
           "the replica never caught up")
    assert b"c2" in {c["name"] for c in r.xinfo_consumers("s", "g")}
