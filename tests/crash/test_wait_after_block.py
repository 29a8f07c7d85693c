"""WAIT and WAITAOF after a blocked XREADGROUP that another client's XADD served: the delivery's
record (the PEL entry, last-delivered-id, the consumer) is the connection's last write, so WAIT
counts only the replicas that acknowledged it. Redis counts the record of the read's first,
blocking run instead, and reports a replica that never received the delivery. Tested at the
session level, and end to end with a replica stopped by SIGSTOP, as a partition would stop it.

The stop is complete before the delivery: kill() returns while the replica's threads still run
(tests.support.pids.stop waits until every one has stopped; checked here with a process whose
signalled thread is held while another runs on). Without that wait the replica's link thread,
running on under load, received and acknowledged the delivery, and WAIT 1 counted it (the
primary took the ACK of the delivery's LSN on the replica's one connection after kill() had
returned)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.runtime.core import Session
from tests.support.pids import stop, stopped
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


CLAIM_IDLE_MS = 2000  # long enough for the fence and the stop to come first


def _until(check: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _replicas_seen(primary: Any) -> str:
    """What WAIT counted from: the primary's last LSN (the delivery's, nothing is written
    after it) and each replica connection it holds, with the LSN that one acknowledged."""
    info = primary.info("replication")
    links = [f"{k}={v}" for k, v in info.items() if k.startswith("slave") and k[5:].isdigit()]
    return f"master_repl_offset={info['master_repl_offset']} {' '.join(links)}"


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
    stop(replica.proc.pid)  # every thread of it, before the delivery is made
    try:
        if claim:
            assert int(p.info("clients")["blocked_clients"]) == 1, \
                "the CLAIM read was served before the replica stopped"
        else:
            p.xadd("s", {"f": "new"})  # serves the blocked read
        reader.join(20)
        assert got and got[0], got
        assert consumer.client_id() == consumer_id, "the consumer's connection was replaced"
        # The delivery is on the primary only: the stopped replica has not acknowledged it.
        counted = consumer.execute_command("WAIT", 1, 300)
        assert counted == 0, f"WAIT counted {counted}: {_replicas_seen(p)}"
        assert consumer.execute_command("WAITAOF", 0, 1, 300)[1] == 0
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)
    assert consumer.execute_command("WAIT", 1, 10_000) == 1
    assert consumer.execute_command("WAITAOF", 0, 1, 10_000)[1] == 1
    r = replica.client()
    _until(lambda: r.xpending("s", "g")["pending"] == p.xpending("s", "g")["pending"],
           "the replica never caught up")
    assert b"c2" in {c["name"] for c in r.xinfo_consumers("s", "g")}


# A process whose main thread (the one the kernel hands a process's SIGSTOP to) is held in an
# uninterruptible wait while another thread writes a byte to `out` every millisecond: it
# posix_spawns a child that blocks opening a FIFO before its exec, and (CLONE_VFORK) the
# parent waits for that exec. The ctypes call releases the GIL: the writer runs on. Once the
# test is gone (its end of the pipe closed) the writer lets the spawned child go and exits.
HELD_MAIN_THREAD = """
import contextlib, ctypes, os, sys, threading, time
fifo, out, true = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def write():
    try:
        while True:
            os.write(out, b"x")
            time.sleep(0.001)
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os._exit(0)
threading.Thread(target=write).start()
libc = ctypes.CDLL(None)
actions = ctypes.create_string_buffer(256)  # a posix_spawn_file_actions_t (80 bytes in glibc)
libc.posix_spawn_file_actions_init(actions)
libc.posix_spawn_file_actions_addopen(actions, 0, fifo.encode(), os.O_RDONLY, 0)
argv = (ctypes.c_char_p * 2)(b"true", None)
envp = (ctypes.c_char_p * 1)(None)
pid = ctypes.c_int()
assert libc.posix_spawn(ctypes.byref(pid), true.encode(), actions, None, argv, envp) == 0
os.waitpid(pid.value, 0)
"""
SIGSTOP_BIT = 1 << (signal.SIGSTOP - 1)


def _state(pid: int, task: int) -> str:
    stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def _held(pid: int) -> bool:
    """The main thread is in its uninterruptible wait for the spawned child (which exists,
    and cannot exec before the test opens the FIFO). Its state alone could be another short
    D, reading a file at its start on a busy disk."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return bool(children) and _state(pid, pid) == "D"


def _pending_for_the_process(pid: int) -> int:
    """The signals queued for the whole process and not yet taken by a thread (ShdPnd)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("ShdPnd:")), 16)


def test_stop_returns_once_every_thread_has_stopped(tmp_path: Path) -> None:
    """The interleaving of the WAIT test's failure, held open: SIGSTOP is queued, the thread
    the kernel gave it to has not acted on it, and another thread runs on. `stop` does not
    return meanwhile (a bare kill() has); once the held thread acts, every thread stops."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    progress, out = os.pipe()
    true = shutil.which("true")
    assert true is not None
    proc = subprocess.Popen([sys.executable, "-c", HELD_MAIN_THREAD, str(fifo), str(out), true],
                            pass_fds=(out,), start_new_session=True)
    os.close(out)
    try:
        _until(lambda: _held(proc.pid), "the main thread was never held", timeout=60)
        stopping = threading.Thread(target=stop, args=(proc.pid,), daemon=True)
        stopping.start()
        _until(lambda: _pending_for_the_process(proc.pid) & SIGSTOP_BIT, "no SIGSTOP queued",
               timeout=60)
        os.read(progress, 1 << 16)  # (what was written before)
        written = 0
        while written < 50:  # written after the signal was queued: the writer runs on
            assert select.select([progress], [], [], 60)[0], "the writer stopped"
            written += len(os.read(progress, 1 << 16))
        assert stopping.is_alive(), "stop() returned while a thread of the process still ran"
        assert not stopped(proc.pid)
        # the spawned child, held opening it for reading, goes on to its exec
        released = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        try:
            stopping.join(30)
            assert not stopping.is_alive()
            assert stopped(proc.pid)
        finally:
            os.close(released)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # (the spawned child too, if still held)
        proc.wait()
        os.close(progress)
