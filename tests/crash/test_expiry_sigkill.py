"""Keys with TTLs across SIGKILLs of a real `streamkeep serve`: nothing acknowledged lost, no
passed TTL readable, every TTL still in the future at the same absolute time, and the restart
(snapshot + AOF) in the same state as an in-memory replay of every record ever logged.

Three client threads (tests.support.expiry_ledger.Writer) write strings with short and long
TTLs (SET PX/PXAT/EX, SETEX, GETEX, PEXPIRE, PERSIST, INCR) and streams (XADD, PEXPIRE,
PERSIST) while the server runs, each keeping a ledger of what its replies acknowledged. The
server is SIGKILLed at a seeded random moment of one of three kinds:

* `workload`: at a random delay while the clients write;
* `expiry`: a burst of keys set to expire at one instant, killed at a random delay after it,
  while the active cycle (10 times a second, a few hundred keys per cycle) is deleting them;
* `compaction`: BGREWRITEAOF (a snapshot holding string values and TTLs), killed while it runs;
* `compacted`: killed just after it ends, so the restart loads that snapshot.

Then: the reopened directory's digest equals that of an in-memory Engine that applied every
record (the segments a compaction removed are kept by hard links taken before it), the server
restarts and every key of every ledger is read in one MULTI (PEXPIRETIME and value) and judged
(expiry_ledger.match). The AOF writes each record to the OS before the reply leaves and the
page cache survives SIGKILL, so nothing acknowledged may be lost under `always`, `everysec` or
`no` alike (as in test_aof_crash.py; everysec's one-second window is a power-loss bound,
tests/crash/test_aof_powerloss.py).

A second test kills the server, waits until every short TTL has passed, restarts it: each such
key is gone on first access or by the active cycle, with exactly one DEL in the AOF each (read
with `streamkeep aof dump`), and the keys without a TTL (or PERSISTed) are all there.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import RealFS
from streamkeep.aof.segment_reader import SegmentReader
from tests.support.aof_inspect_data import run_cli
from tests.support.datadir import manifest_doc, reopen_digest
from tests.support.expiry_ledger import KeyState, Writer, judge, now_ms, observe
from tests.support.replication_util import wait_for
from tests.support.serve_process import ServeProcess

Spawn = Callable[..., ServeProcess]
WRITERS = 3
BURST = 600  # keys expiring at one instant: the active cycle needs a few passes


@contextmanager
def seeded(seed: str) -> Iterator[None]:
    """Any failure inside names the seed that replays it."""
    try:
        yield
    except BaseException as err:
        err.add_note(f"seed {seed!r} (re-run with it to replay the same workload and kills)")
        raise


class Archive:
    """Every AOF record ever logged in a data directory: hard links keep the segments a
    compaction removes (taken before each BGREWRITEAOF; segments are only removed by a
    compaction here: they are 64 MiB and the auto-rewrite threshold is far off)."""

    def __init__(self, datadir: Path, into: Path) -> None:
        self.datadir, self.into = datadir, into
        into.mkdir(parents=True)
        self.kept: dict[int, tuple[Path, int, int]] = {}  # inode -> (link, segment, first LSN)

    def keep(self) -> None:
        for seg in manifest_doc(self.datadir)["segments"]:
            path = self.datadir / seg["file"]
            inode = path.stat().st_ino
            if inode not in self.kept:
                link = self.into / f"{inode}-{seg['file']}"
                os.link(path, link)
                self.kept[inode] = (link, seg["segment"], seg["first_lsn"])

    def records(self) -> list[tuple]:
        """Every record, LSN 1 to the last, read by the engine's own segment reader."""
        files = list(self.kept.values()) + [
            (self.datadir / s["file"], s["segment"], s["first_lsn"])
            for s in manifest_doc(self.datadir)["segments"]]
        by_lsn: dict[int, tuple] = {}
        for path, number, first in files:
            for lsn, t, db, effects in SegmentReader(RealFS(), str(path), number,
                                                     first).records():
                record = (lsn, t, db, [list(e) for e in effects])
                assert by_lsn.setdefault(lsn, record) == record, f"two records {lsn}"
        assert sorted(by_lsn) == list(range(1, len(by_lsn) + 1)), "records missing"
        return [by_lsn[lsn] for lsn in sorted(by_lsn)]


def assert_replay_matches(datadir: Path, archive: Archive) -> None:
    """The directory reopened (snapshot + AOF tail) == every record applied in memory."""
    reopened, lsn = reopen_digest(datadir)
    records = archive.records()
    assert records[-1][0] == lsn
    engine = Engine()
    engine.replay.apply_many(records)
    assert engine.digest() == reopened, "restart and in-memory replay differ"


# --- kill moments: each SIGKILLs the server and says what it interrupted -----------------------


def kill_in_workload(server: ServeProcess, ledger: dict, rng: random.Random,
                     archive: Archive, rnd: int) -> str:
    time.sleep(rng.uniform(0.05, 0.5))
    server.kill()
    return "during the workload"


def kill_in_expiry(server: ServeProcess, ledger: dict, rng: random.Random,
                   archive: Archive, rnd: int) -> str:
    client = server.client()
    at = now_ms() + 300
    pipe = client.pipeline(transaction=False)
    for i in range(BURST):
        pipe.set(f"b{rnd}:s{i}", b"burst", pxat=at)
    pipe.execute()
    for i in range(BURST):
        ledger[f"b{rnd}:s{i}"] = [KeyState(b"burst", (at, at))]
    delay = rng.uniform(0, 0.3)
    while now_ms() < at + delay * 1000:
        time.sleep(0.005)
    server.kill()
    return f"{delay * 1000:.0f} ms after {BURST} keys expired"


def compaction_started(server: ServeProcess, archive: Archive) -> tuple[Any, int]:
    """BGREWRITEAOF once it runs: the client and the count of rewrites before it."""
    client = server.client()
    archive.keep()  # the segments the rotation closes: the compaction removes them
    done = client.info("persistence")["aof_rewrites"]
    client.execute_command("BGREWRITEAOF")

    def started() -> bool:  # streamkeep counts a rewrite when it ends
        fields = client.info("persistence")
        return fields["aof_rewrite_in_progress"] == 1 or fields["aof_rewrites"] > done

    wait_for(started, 30, "the compaction")
    return client, done


def kill_in_compaction(server: ServeProcess, ledger: dict, rng: random.Random,
                       archive: Archive, rnd: int) -> str:
    compaction_started(server, archive)
    delay = rng.uniform(0, 0.1)
    time.sleep(delay)
    server.kill()
    return f"{delay * 1000:.0f} ms into a compaction"


def kill_after_compaction(server: ServeProcess, ledger: dict, rng: random.Random,
                          archive: Archive, rnd: int) -> str:
    """The restart loads the new snapshot (string values, TTLs) and the AOF after it."""
    client, done = compaction_started(server, archive)
    wait_for(lambda: client.info("persistence")["aof_rewrites"] > done, 60,
             "the compaction's end")
    delay = rng.uniform(0, 0.2)
    time.sleep(delay)
    server.kill()
    return f"{delay * 1000:.0f} ms after a compaction"


MOMENTS = {"workload": kill_in_workload, "expiry": kill_in_expiry,
           "compaction": kill_in_compaction, "compacted": kill_after_compaction}


def check_restarted(server: ServeProcess, ledger: dict[str, list[KeyState]]) -> Counter[str]:
    """Every key as its ledger allows; the ledger then holds what was read. Counts the keys
    found gone, with a TTL (the same absolute one) and without."""
    client = server.client()
    seen: Counter[str] = Counter()
    for key, candidates in ledger.items():
        value, pet, t0, t1 = observe(client, key)
        known = judge(candidates, value, pet, t0, t1)
        assert known is not None, (f"{key}: read {value!r} PEXPIRETIME {pet} at [{t0}, {t1}]; "
                                   f"acknowledged {candidates}")
        ledger[key] = [known]
        seen["gone" if known.value is None else "ttl" if known.expire else "no ttl"] += 1
    client.close()
    return seen


def crash_rounds(spawn: Spawn, tmp: Path, policy: str, seed: str, moments: list[str]) -> None:
    rng = random.Random(seed)
    datadir = tmp / "data"
    archive = Archive(datadir, tmp / "archive")
    ledger: dict[str, list[KeyState]] = {}
    args = ("--appendfsync", policy)
    server = spawn(datadir, *args)
    seen: Counter[str] = Counter()
    for rnd, moment in enumerate(moments):
        stop = threading.Event()
        writers = [Writer(n, ledger, f"{seed}:{rnd}", server.port, stop)
                   for n in range(WRITERS)]
        for w in writers:
            w.start()
        wait_for(lambda ws=writers: sum(w.acked for w in ws) >= 100, 60, "the writers")
        what = MOMENTS[moment](server, ledger, rng, archive, rnd)
        stop.set()
        for w in writers:
            w.join(60)
            assert not w.is_alive(), f"{w.name} hangs"
            assert not w.violations, w.violations
        with seeded(f"{seed} (round {rnd}: killed {what})"):
            assert_replay_matches(datadir, archive)
            server = spawn(datadir, *args)
            seen += check_restarted(server, ledger)
    assert min(seen["gone"], seen["ttl"], seen["no ttl"]) > 0, seen  # each case was checked
    server.kill()
    assert_replay_matches(datadir, archive)  # with the DELs the restarts logged


@pytest.mark.parametrize(("policy", "moments"), [
    ("always", ["expiry", "compacted"]),
    ("everysec", ["compaction", "workload"]),
    ("no", ["compacted", "expiry"]),
])
def test_sigkill_keeps_acknowledged_ttls(spawn: Spawn, tmp_path: Path, policy: str,
                                         moments: list[str]) -> None:
    seed = f"ttl:{policy}:1"
    with seeded(seed):
        crash_rounds(spawn, tmp_path, policy, seed, moments)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["always", "everysec", "no"])
def test_sigkill_keeps_acknowledged_ttls_soak(spawn: Spawn, tmp_path: Path,
                                              policy: str) -> None:
    for n in range(4):
        seed = f"ttl-soak:{policy}:{n}"
        rng = random.Random(seed)
        with seeded(seed):
            crash_rounds(spawn, tmp_path / str(n), policy, seed,
                         [rng.choice(sorted(MOMENTS)) for _ in range(6)])


# --- TTLs that pass while the server is down ------------------------------------------------------


def test_ttls_passed_while_down_expire_at_restart_with_one_del_each(
        spawn: Spawn, tmp_path: Path) -> None:
    datadir = tmp_path / "data"
    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    expiring = [f"s{i}" for i in range(40)] + [f"x{i}" for i in range(5)] + ["setex", "getex"]
    kept = [f"keep{i}" for i in range(5)] + ["persisted", "xkeep"]
    for i in range(40):
        c.set(f"s{i}", b"v", px=1500 + i)
    for i in range(5):
        c.xadd(f"x{i}", {"f": "v"})
        c.pexpire(f"x{i}", 1500)
    c.execute_command("SETEX", "setex", 2, b"v")
    c.set("getex", b"v")
    assert c.getex("getex", px=1500) == b"v"
    for i in range(5):
        c.set(f"keep{i}", b"v")
    c.set("persisted", b"v", px=1500)
    assert c.persist("persisted")
    c.xadd("xkeep", {"f": "v"})
    expiries = [c.pexpiretime(k) for k in expiring]
    assert c.pexpiretime("persisted") == -1
    c.close()
    server.kill()
    # None expired before the kill (a machine too slow for that would make the test vacuous).
    assert min(expiries) > now_ms(), "the TTLs passed before the kill"
    last = max(expiries)
    lsn_before = reopen_digest(datadir)[1]
    while now_ms() <= last + 50:  # every TTL passes while the server is down
        time.sleep(0.05)

    server = spawn(datadir, "--appendfsync", "always")
    c = server.client()
    for key in expiring[::2]:  # first access: gone, at once
        read = c.xrange(key) if key.startswith("x") else c.get(key)
        assert not read, key
        assert c.pttl(key) == -2, key
    # The active cycle deletes the rest (DBSIZE counts a key until it is deleted).
    wait_for(lambda: c.dbsize() == len(kept), 30, "the active cycle")
    for key in kept:
        assert c.pttl(key) == -1, key
    assert c.get("persisted") == b"v"
    c.close()
    server.kill()

    done = run_cli("aof", "dump", str(datadir), "--format", "json",
                   "--from-lsn", str(lsn_before + 1))
    assert done.returncode == 0, done.stderr
    effects = [e for line in done.stdout.splitlines() for e in json.loads(line)["effects"]]
    deleted = [key for e in effects for key in e[1:]]
    assert {e[0] for e in effects} == {"DEL"}, effects  # the restart logged only expiries
    assert sorted(deleted) == sorted(expiring)  # one DEL per key, none for a kept key
    archive = Archive(datadir, tmp_path / "archive")
    assert_replay_matches(datadir, archive)
