"""Replication under crashes and cut links, with real `streamkeep serve` processes killed with
SIGKILL: whatever happens, once things settle every replica holds exactly the primary's state
(`DEBUG DIGEST`), and a replica that can continue does so by a partial sync.

Covered: a replica killed at random moments during a workload (it restarts and continues from
its own last LSN); the primary killed and restarted (the replica reconnects and continues); a
compaction on the primary while the replica is down (the records it needs are gone: full sync)
and while a replica is syncing; the link cut in the record stream and in a full sync (CLIENT
KILL TYPE replica); a replica killed during a full sync; promotion after the primary is lost,
with the other replica following the promoted one by a partial sync; a primary restarted from an
older copy of its directory, which then wrote other records under the same LSNs (the replica
must notice the divergence and sync in full, never keep a mixed history).
"""

from __future__ import annotations

import contextlib
import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.replication_util import (
    caught_up,
    drive,
    drive_until_killed,
    info,
    wait_for,
)
from tests.support.serve_process import ServeProcess

Spawn = Callable[..., ServeProcess]


def replica_of(spawn: Spawn, d: Path, primary: ServeProcess) -> ServeProcess:
    return spawn(d, "--replicaof", "127.0.0.1", str(primary.port))


def _sync_lines(server: ServeProcess) -> str:
    return "".join(line for line in server.output().splitlines(keepends=True)
                   if "sync" in line or "replica" in line)


def stat(client: redis.Redis, name: str) -> int:
    return int(info(client, "stats")[name])


def compacted(client: redis.Redis) -> None:
    before = int(info(client, "persistence")["aof_rewrites"])
    client.execute_command("BGREWRITEAOF")
    wait_for(lambda: int(info(client, "persistence")["aof_rewrites"]) > before, 30,
             "the compaction")


def test_a_replica_killed_at_random_moments_continues_by_partial_sync(
        spawn: Spawn, tmp_path: Path) -> None:
    primary = spawn(tmp_path / "p")
    p = primary.client()
    rng = random.Random(11)
    replica = replica_of(spawn, tmp_path / "r", primary)
    caught_up(p, replica.client())
    assert stat(p, "sync_full") == 1
    done = 0
    for _round in range(4):
        writer = threading.Thread(target=drive, args=(p, 3, done, done + 800))
        writer.start()
        time.sleep(rng.uniform(0.01, 0.3))
        replica.kill()
        writer.join()
        done += 800
        replica = replica_of(spawn, tmp_path / "r", primary)
        caught_up(p, replica.client())
    # Every restart continued where it was (the primary's log says why a sync was full).
    assert stat(p, "sync_full") == 1, _sync_lines(primary)
    # One partial sync per restart: a replica whose server listens only after its first
    # connection announces its port on that link, it does not reconnect for it.
    assert stat(p, "sync_partial_ok") == 4


def test_the_primary_killed_and_restarted_is_followed_again(spawn: Spawn,
                                                            tmp_path: Path) -> None:
    primary = spawn(tmp_path / "p")
    port = primary.port
    replica = replica_of(spawn, tmp_path / "r", primary)
    r = replica.client()
    for round_ in range(3):
        p = primary.client()
        writer = threading.Thread(target=drive_until_killed,
                                  args=(p, 5, round_ * 600, round_ * 600 + 600))
        writer.start()
        time.sleep(0.05 + 0.1 * round_)
        primary.kill()
        writer.join()
        primary = spawn(tmp_path / "p", "--port", str(port), port=port)
        p = primary.client()
        drive(p, 6, round_ * 50, round_ * 50 + 50)
        caught_up(p, r)
    assert stat(p, "sync_full") == 0  # the restarted primary kept its history: partial syncs


def test_compaction_while_a_replica_is_down_forces_a_full_sync(spawn: Spawn,
                                                               tmp_path: Path) -> None:
    primary = spawn(tmp_path / "p")
    p = primary.client()
    replica = replica_of(spawn, tmp_path / "r", primary)
    drive(p, 8, 0, 500)
    caught_up(p, replica.client())
    replica.kill()
    drive(p, 8, 500, 1500)
    compacted(p)
    drive(p, 8, 1500, 1700)
    full = stat(p, "sync_full")
    replica = replica_of(spawn, tmp_path / "r", primary)
    caught_up(p, replica.client())
    assert stat(p, "sync_full") == full + 1
    assert stat(p, "sync_partial_err") >= 1
    # Compacting while another replica is in its full sync changes nothing for it.
    second = replica_of(spawn, tmp_path / "r2", primary)
    compacted(p)
    drive(p, 8, 1700, 2000)
    caught_up(p, second.client())
    caught_up(p, replica.client())


def _kill_replica_links(p: redis.Redis) -> int:
    return int(p.execute_command("CLIENT", "KILL", "TYPE", "replica"))


def test_links_cut_in_the_stream_and_in_a_full_sync_recover(spawn: Spawn,
                                                            tmp_path: Path) -> None:
    primary = spawn(tmp_path / "p")
    p = primary.client()
    pipe = p.pipeline(transaction=False)
    for i in range(60_000):  # a snapshot of a few MB: the full sync takes a moment
        pipe.xadd("big", {"f": "x" * 40, "i": str(i)})
        if i % 5000 == 4999:
            pipe.execute()
    pipe.execute()
    compacted(p)
    replica = replica_of(spawn, tmp_path / "r", primary)
    r = replica.client()
    cut = wait_for(lambda: _kill_replica_links(p), 20, "a replica link to cut")
    assert cut == 1
    caught_up(p, r)
    for _ in range(3):
        writer = threading.Thread(target=drive, args=(p, 9, 0, 1500))
        writer.start()
        time.sleep(0.05)
        _kill_replica_links(p)
        writer.join()
    caught_up(p, r)
    # A replica killed in the middle of its full sync starts over cleanly.
    other = replica_of(spawn, tmp_path / "r2", primary)
    wait_for(lambda: "slave1" in info(p) or "slave0" in info(p), 20, "the second replica")
    other.kill()
    other = replica_of(spawn, tmp_path / "r2", primary)
    caught_up(p, other.client())


def test_promotion_and_the_other_replica_follows_by_partial_sync(spawn: Spawn,
                                                                 tmp_path: Path) -> None:
    primary = spawn(tmp_path / "p")
    p = primary.client()
    a = replica_of(spawn, tmp_path / "a", primary)
    b = replica_of(spawn, tmp_path / "b", primary)
    drive(p, 12, 0, 1000)
    caught_up(p, a.client())
    caught_up(p, b.client())
    primary.kill()
    ra, rb = a.client(), b.client()
    old_id = info(ra)["master_replid"]
    assert ra.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
    fields = info(ra)
    assert fields["role"] == "master" and fields["master_replid2"] == old_id
    assert int(fields["second_repl_offset"]) == int(fields["master_repl_offset"]) + 1
    ra.xadd("after", {"promoted": "1"})
    assert rb.execute_command("REPLICAOF", "127.0.0.1", a.port) == b"OK"
    caught_up(ra, rb)
    assert stat(ra, "sync_partial_ok") == 1 and stat(ra, "sync_full") == 0
    assert info(rb)["master_replid"] == info(ra)["master_replid"]
    # Both survive a restart with the new history: the replica resumes by a partial sync.
    b.kill()
    b = spawn(tmp_path / "b", "--replicaof", "127.0.0.1", str(a.port))
    drive(ra, 13, 0, 300)
    caught_up(ra, b.client())
    assert stat(ra, "sync_full") == 0


def test_a_primary_restored_from_an_older_copy_is_not_mixed_into_the_replica(
        spawn: Spawn, tmp_path: Path) -> None:
    primary = spawn(tmp_path / "p")
    port = primary.port
    p = primary.client()
    drive(p, 14, 0, 300)
    with contextlib.suppress(redis.ConnectionError):  # the server closes as it stops
        p.execute_command("SHUTDOWN")
    primary.wait()
    shutil.copytree(tmp_path / "p", tmp_path / "backup")
    primary = spawn(tmp_path / "p", "--port", str(port), port=port)
    p = primary.client()
    replica = replica_of(spawn, tmp_path / "r", primary)
    drive(p, 14, 300, 700)
    caught_up(p, replica.client())
    # The primary is lost and restored from the backup, then writes other records: the same
    # LSNs now hold other records than the replica's.
    primary.kill()
    shutil.rmtree(tmp_path / "p")
    shutil.copytree(tmp_path / "backup", tmp_path / "p")
    (tmp_path / "p" / "LOCK").unlink(missing_ok=True)
    primary = spawn(tmp_path / "p", "--port", str(port), port=port)
    p = primary.client()
    drive(p, 15, 0, 600)  # more records than the replica has: its LSN is not ahead
    digest = caught_up(p, replica.client())
    assert digest == p.execute_command("DEBUG", "DIGEST")
    assert stat(p, "sync_full") == 1
