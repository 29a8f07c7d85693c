"""Kill moments: functions the SIGKILL runner calls to kill a server at an interesting moment,
each returning a one-line description of what it interrupted (the report's "crash" column).

(a) `kill_during_workload`: at a random delay while a workload thread runs commands;
(b) `kill_during_compaction`: BGREWRITEAOF, then kill while INFO persistence says
    aof_rewrite_in_progress:1 (both servers use Redis's field);
(c) `kill_during_rotation`: on a streamkeep started with a tiny segment size, kill the moment a
    new segment file appears (the rotation's window: file created, manifest next);
(d) `kill_during_recovery`: restart on the existing directory and kill before it is ready, then
    start it again (it must come up);
(e) `kill_during_replica_sync`: start a replica of a streamkeep primary and kill the replica or
    the primary at a random moment during or just after the full sync; `replica_state` and
    `wait_caught_up` read the replica afterwards.
A moment that could not be hit (the compaction ended first, the server was ready before the
delay) raises `MomentMissed`: the runner retries with more data or a shorter delay, never
reports a crash that did not happen.
Must not touch: the workload, the history and the checks; the data directory's files (only
listed, for (c)).
"""

from __future__ import annotations

import random
import threading
import time

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost
from streamkeep.tools.servers import ServerProcess, StreamkeepServer

POLL = 0.002  # INFO and directory polls: short, so the kill lands close to what was seen


class MomentMissed(StreamkeepError):
    """The moment passed before the kill could land in it (nothing was killed)."""


def kill_during_workload(server: ServerProcess, workload: threading.Thread, rng: random.Random,
                         max_delay: float = 0.5) -> str:
    """SIGKILL after a random delay in [0, max_delay) while `workload` (started) runs."""
    delay = rng.uniform(0.0, max_delay)
    workload.join(delay)
    if not workload.is_alive():
        raise MomentMissed(f"the workload ended before the {delay:.3f} s delay")
    server.kill()
    return f"SIGKILL {delay * 1000:.0f} ms into the workload ({server.name})"


def _rewrite_state(server: ServerProcess) -> tuple[bool, int]:
    fields = server.info("persistence")
    return fields.get("aof_rewrite_in_progress") == "1", int(fields.get("aof_rewrites", "0"))


def kill_during_compaction(server: ServerProcess, rng: random.Random, max_delay: float = 0.05,
                           timeout: float = 10.0) -> str:
    """BGREWRITEAOF, wait until INFO says the rewrite is in progress, then SIGKILL at a random
    delay in [0, max_delay) after that, checking it is still in progress just before."""
    rewrites = _rewrite_state(server)[1]
    with server.target() as t:
        try:
            t.execute([b"BGREWRITEAOF"])
        except CommandFailed as err:
            raise MomentMissed(f"BGREWRITEAOF refused: {err}") from err
    deadline = time.monotonic() + timeout
    while True:
        running, count = _rewrite_state(server)
        if running:
            break
        # aof_rewrites moved (Redis counts a rewrite when it starts, streamkeep when it ends)
        # and none runs: this one is over.
        if count != rewrites or time.monotonic() > deadline:
            raise MomentMissed("the rewrite finished (or never started) before it was seen")
        time.sleep(POLL)
    seen = time.monotonic()
    delay = rng.uniform(0.0, max_delay)
    while time.monotonic() - seen < delay:
        if not _rewrite_state(server)[0]:
            raise MomentMissed(f"the rewrite ended within {time.monotonic() - seen:.3f} s")
        time.sleep(POLL)
    running = _rewrite_state(server)[0]
    server.kill()
    if not running:
        raise MomentMissed("the rewrite ended just before the kill")
    return (f"SIGKILL {delay * 1000:.0f} ms into a BGREWRITEAOF (aof_rewrite_in_progress:1 "
            f"at the last poll; {server.name})")


def kill_during_rotation(server: StreamkeepServer, workload: threading.Thread,
                         rng: random.Random, max_delay: float = 0.3,
                         timeout: float = 10.0) -> str:
    """After a random delay in [0, max_delay), SIGKILL the moment a new segment file appears
    (the server should run with a small `segment_max_bytes` and `workload` write to it)."""
    workload.join(rng.uniform(0.0, max_delay))
    before = server.segment_files()
    deadline = time.monotonic() + timeout
    while True:
        now = server.segment_files()
        if now != before and len(now) >= len(before):
            break
        if not workload.is_alive() or time.monotonic() > deadline:
            raise MomentMissed(f"no rotation while the workload ran ({len(before)} segments)")
        time.sleep(POLL / 4)
    server.kill()
    new = sorted(set(now) - set(before))
    return (f"SIGKILL as {', '.join(new) or 'a segment'} appeared ({len(now)} segment files; "
            f"rotation every {server.segment_max_bytes} bytes)")


def measure_recovery(server: ServerProcess) -> float:
    """Seconds a (killed) server takes from spawn to answering PING on its directory now; it is
    left running."""
    if server.alive:
        server.kill()
    began = time.monotonic()
    server.start()
    return time.monotonic() - began


def kill_during_recovery(server: ServerProcess, rng: random.Random,
                         recovery_seconds: float | None = None) -> str:
    """Restart `server` on its directory, SIGKILL it at a random point of its recovery (a delay
    in [0, 0.9 * recovery_seconds); measured by one full restart when not given) while it does
    not answer PING yet, then start it again: returns once it is up."""
    if recovery_seconds is None:
        recovery_seconds = measure_recovery(server)
    if server.alive:
        server.kill()
    delay = rng.uniform(0.0, 0.9 * recovery_seconds)
    server.spawn()
    began = time.monotonic()
    while time.monotonic() - began < delay:
        if server.ready():
            server.kill()
            server.start()
            raise MomentMissed(f"ready after {time.monotonic() - began:.3f} s, before the "
                               f"{delay:.3f} s delay")
        time.sleep(POLL * 5)
    loading = not server.ready()
    server.kill()
    if not loading:
        server.start()
        raise MomentMissed("ready just before the kill")
    server.start()
    return (f"SIGKILL {delay * 1000:.0f} ms into recovery (full recovery "
            f"{recovery_seconds * 1000:.0f} ms; not answering PING yet), then restarted "
            f"({server.name})")


def replica_state(replica: ServerProcess) -> dict[str, str]:
    """The replica's INFO replication (role, master_link_status, master_sync_in_progress,
    master_repl_offset, ...)."""
    return replica.info("replication")


def wait_caught_up(primary: ServerProcess, replica: ServerProcess,
                   timeout: float = 30.0) -> str:
    """Wait until the replica's link is up, its offset is the primary's and both DEBUG DIGESTs
    are equal; the digest. ReplicaBehind on timeout."""
    deadline = time.monotonic() + timeout
    seen = "no INFO answered"  # what the last look found, for the error
    while True:
        try:
            mine = primary.info("replication")["master_repl_offset"]
            theirs = replica_state(replica)
            seen = (f"primary offset {mine}; replica link "
                    f"{theirs.get('master_link_status')}, sync in progress "
                    f"{theirs.get('master_sync_in_progress')}, offset "
                    f"{theirs.get('master_repl_offset')}")
            if theirs.get("master_link_status") == "up" and \
                    theirs.get("master_repl_offset") == mine:
                with primary.target() as p, replica.target() as r:
                    digest = p.execute([b"DEBUG", b"DIGEST"])
                    if digest == r.execute([b"DEBUG", b"DIGEST"]):
                        return str(digest)
                    seen += ": the same offset, different digests"
        except (ConnectionLost, CommandFailed, KeyError):
            pass  # restarting, or not a replica yet
        if time.monotonic() > deadline:
            raise ReplicaBehind(f"the replica on port {replica.port} did not catch up with "
                                f"the primary on port {primary.port} in {timeout:.0f} s "
                                f"(last seen: {seen})")
        time.sleep(0.02)


class ReplicaBehind(StreamkeepError):
    """`wait_caught_up` timed out."""


def kill_during_replica_sync(primary: StreamkeepServer, replica_dir: str, rng: random.Random,
                             victim: str = "replica", max_delay: float = 0.5,
                             appendfsync: str = "always") -> tuple[StreamkeepServer, str]:
    """Start a streamkeep replica of `primary` on `replica_dir`, SIGKILL `victim` ("replica" or
    "primary") at a random delay in [0, max_delay) after the replica answers PING (during or
    just after its full sync: the description says which INFO showed). Returns the replica
    object (dead if it was the victim: `start()` it again) and the description."""
    if victim not in ("replica", "primary"):
        raise ValueError(f"victim is 'replica' or 'primary', not {victim!r}")
    replica = StreamkeepServer(replica_dir, replicaof=primary.port, appendfsync=appendfsync)
    replica.start()
    delay = rng.uniform(0.0, max_delay)
    time.sleep(delay)
    try:
        state = replica_state(replica)
        seen = (f"master_sync_in_progress:{state.get('master_sync_in_progress', '?')} "
                f"link:{state.get('master_link_status', '?')}")
    except (ConnectionLost, CommandFailed):
        seen = "replica INFO unavailable"
    (replica if victim == "replica" else primary).kill()
    return replica, (f"SIGKILL the {victim} {delay * 1000:.0f} ms after the replica started "
                     f"({seen})")
