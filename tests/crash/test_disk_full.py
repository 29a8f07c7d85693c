"""An error reply means no effect, on real file systems: a real `streamkeep serve` on a small tmpfs
that fills up, and on ext4 over a loop device whose backing store runs out (its writes then
fail with ENOSPC and EIO, as a thin-provisioned or failing disk's do), fed by a producer that
pipelines XADDs of 1 KiB values and retries every error reply.

Checked, under each fsync policy: each logical write is in the stream exactly once, live, on a
replica and after a restart; reads are answered while writes are refused; once space is freed
writes resume by themselves (the disk-full case), or after the directory is reopened (a failed
fsync). Root only (tests/support/small_disk.py): the test fails, never skips, where it cannot
run, because CI runs as root and a skipped durability test proves nothing.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import small_disk
from tests.support.resp_client import RespClient, RespError
from tests.support.serve_process import ServeProcess

VALUE = "v" * 1024
BATCH = 100
PAUSE_S = 0.05  # the producer's pause after a round with refusals
DEADLINE_S = 120.0  # a producer still refused this long: the test fails, naming where


@pytest.fixture(autouse=True)
def _root() -> None:
    why = small_disk.available()
    assert why is None, f"cannot run here: {why}"


class Producer:
    """Writes `XADD s * n <i> v <1 KiB>` for i in range(total), BATCH per pipeline, retrying
    every command answered with an error reply until it is acknowledged."""

    def __init__(self, total: int, pace_s: float = 0.0) -> None:
        self.pending = list(range(total))
        self.pace_s = pace_s  # a pause after every round (everysec: let its fsyncs come)
        self.refused: set[int] = set()  # every write ever answered with an error
        self.acked: set[int] = set()
        self.refused_rounds = 0
        self.errors: Counter[str] = Counter()
        self.reads_while_refused = 0

    def run(self, server: ServeProcess, on_refused: Callable[[int], bool]) -> None:
        """Until everything is acknowledged, or `on_refused(rounds)` (called after each round
        with a refusal) returns True: the caller has something to do (a restart)."""
        deadline = time.monotonic() + DEADLINE_S
        with RespClient(server.host, server.port, timeout=60) as client:
            while self.pending:
                chunk, rest = self.pending[:BATCH], self.pending[BATCH:]
                replies = client.pipeline(*[("XADD", "s", "*", "n", str(n), "v", VALUE)
                                            for n in chunk])
                failed = []
                for n, reply in zip(chunk, replies, strict=True):
                    if isinstance(reply, RespError):
                        assert str(reply).startswith("MISCONF "), reply
                        self.errors[str(reply)] += 1
                        failed.append(n)
                self.pending = failed + rest
                self.refused.update(failed)
                self.acked.update(set(chunk) - set(failed))
                time.sleep(self.pace_s)
                if not failed:
                    continue
                self.refused_rounds += 1
                assert isinstance(client.execute("XLEN", "s"), int)  # reads go on
                self.reads_while_refused += 1
                assert time.monotonic() < deadline, \
                    f"still refused after {DEADLINE_S:g} s: {len(self.pending)} writes left, " \
                    f"{dict(self.errors)}\n{server.output()[-3000:]}"
                if on_refused(self.refused_rounds):
                    return
                time.sleep(PAUSE_S)


def numbers(server: ServeProcess) -> Counter[int]:
    with RespClient(server.host, server.port, timeout=60) as client:
        return Counter(int(fields[1]) for _id, fields in client.execute("XRANGE", "s", "-", "+"))


def exactly_once(got: Counter[int], total: int, where: str) -> None:
    twice = sorted(n for n, count in got.items() if count > 1)
    missing = sorted(set(range(total)) - set(got))
    assert not twice and not missing and len(got) == total, \
        f"{where}: {len(twice)} written twice (first {twice[:5]}), {len(missing)} missing " \
        f"(first {missing[:5]})"


def refused_eventually(server: ServeProcess) -> None:
    """Writes to another key until one is refused (the device's failure reported)."""
    deadline = time.monotonic() + DEADLINE_S
    with RespClient(server.host, server.port, timeout=60) as client:
        while True:
            try:
                client.execute("XADD", "probe", "*", "p", "1")
            except RespError as err:
                assert str(err).startswith("MISCONF "), err
                return
            assert time.monotonic() < deadline, "the device never failed"
            time.sleep(0.05)


def restarted(server: ServeProcess, spawn: Callable[..., ServeProcess], datadir: Path,
              *args: str) -> ServeProcess:
    """SIGKILL the server and start it again on the same directory."""
    server.proc.send_signal(signal.SIGKILL)
    server.wait()
    return spawn(datadir, *args)


def wait_replica(primary: ServeProcess, replica: ServeProcess, total: int) -> Counter[int]:
    deadline = time.monotonic() + 60
    while True:
        got = numbers(replica)
        if sum(got.values()) >= total or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


@pytest.mark.parametrize("policy,preallocate", [("always", "4mb"), ("everysec", "4mb"),
                                                ("no", "4mb"), ("everysec", "0")],
                         ids=["always", "everysec", "no", "everysec-nothing-allocated-ahead"])
def test_a_full_disk_refuses_then_resumes_and_each_write_lands_once(
        tmp_path: Path, spawn: Callable[..., ServeProcess], policy: str,
        preallocate: str) -> None:
    """24 MiB, half of it taken by a ballast file: the log fills the rest, writes are refused
    before they run (or, with nothing allocated ahead, rolled back), the ballast goes, and the
    same server takes the rest of the writes. With nothing allocated ahead each full-disk write
    is met in the middle of its record: what the rollback is for."""
    total = 15_000  # ~16.5 MB of log: more than the 12 MiB left, less than 24 MiB
    config = tmp_path / "sk.conf"
    config.write_text(f"aof-preallocate {preallocate}\n")
    args = ("--appendfsync", policy, "--config", str(config))
    with small_disk.SmallDisk(tmp_path / "mnt", 24 << 20) as disk:
        disk.ballast(12 << 20)
        datadir = tmp_path / "mnt" / "d"
        primary = spawn(datadir, *args)
        replica = spawn(tmp_path / "replica", "--replicaof", primary.host, str(primary.port))
        producer = Producer(total)

        def free_space(rounds: int) -> bool:
            if rounds == 5:
                disk.free_ballast()
            return False

        producer.run(primary, free_space)
        assert producer.refused_rounds >= 5, "the disk never filled up"
        assert producer.errors.keys() == {
            "MISCONF Errors writing to the AOF file: No space left on device"}
        exactly_once(numbers(primary), total, "live")
        exactly_once(wait_replica(primary, replica, total), total, "on the replica")
        again = restarted(primary, spawn, datadir, *args)
        exactly_once(numbers(again), total, "after a restart")
        log = again.output() + primary.output()
        if preallocate == "0":
            assert "rolled back" in log, log[-3000:]


@pytest.mark.parametrize("policy", ["always", "everysec"])
def test_a_failing_device_refuses_until_reopened_and_each_write_lands_once(
        tmp_path: Path, spawn: Callable[..., ServeProcess], policy: str) -> None:
    """ext4 on a 96 MiB loop device backed by 24 MiB: the file system thinks it has room (the
    space allocated ahead is granted), the device fails its writes, the fsync reports it. A
    failed fsync is never retried: writes are refused until the directory is reopened. The
    device is repaired, the server restarted, the producer goes on retrying."""
    total = 30_000  # ~33 MB: more than the store takes
    args = ("--appendfsync", policy)
    with small_disk.FailingDevice(tmp_path / "mnt", backing=24 << 20, size=96 << 20) as dev:
        datadir = tmp_path / "mnt" / "d"
        server = spawn(datadir, *args)
        producer = Producer(total, pace_s=0.01 if policy == "everysec" else 0.0)
        producer.run(server, lambda rounds: rounds >= 5)
        if not producer.pending:
            # Under everysec the device's failure shows at an fsync: one that a busy machine
            # delays may come after every write was acknowledged. It comes: writes are refused.
            assert policy == "everysec", "the device never failed"
            refused_eventually(server)
        errors = set(producer.errors)
        # The file system is mounted errors=remount-ro: once ext4 sees the device fail it turns
        # read-only, and a write after that fails with EROFS rather than EIO.
        assert errors <= {"MISCONF Errors writing to the AOF file: Input/output error",
                          "MISCONF Errors writing to the AOF file: No space left on device",
                          "MISCONF Errors writing to the AOF file: Read-only file system"}
        server.proc.send_signal(signal.SIGKILL)
        server.wait()
        dev.repair(backing=160 << 20)
        if policy == "everysec":
            # What the device lost may leave a hole in the unsynced tail with valid records
            # after it: the open refuses it, naming this command, which the operator runs.
            # (Under always nothing unsynced was acknowledged, and the directory must open
            # unaided.)
            fixed = subprocess.run([sys.executable, "-m", "streamkeep", "aof", "fix", "--yes",
                                    "--force-skip-damaged", str(datadir)], capture_output=True,
                                   text=True, timeout=120)
            assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        server = spawn(datadir, *args)
        after_repair = set(numbers(server))
        acked = set(producer.acked)
        assert after_repair <= acked, "a write answered with an error (or never sent) is there"
        # Under always nothing acknowledged is lost. Under everysec what was acknowledged
        # since the last fsync that worked may be lost with the device, as on a power loss.
        lost = acked - after_repair
        assert not lost or policy == "everysec", f"{len(lost)} acknowledged writes lost"
        producer.run(server, lambda rounds: False)
        got = numbers(server)
        assert max(got.values()) == 1, "a write landed twice"
        assert set(got) == set(range(total)) - lost
        again = restarted(server, spawn, datadir, *args)
        assert numbers(again) == got, "a restart changed the stream"
