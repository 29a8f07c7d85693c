"""streamkeep under Redis Sentinel, with real processes: three `redis-sentinel`s (quorum 2)
monitor a `streamkeep serve` primary (a) and two replicas (b, c), each node run from a config
file as the guide shows (docs/src/guides/sentinel.md). Checked step by step, each by polling
with a generous deadline (never by elapsed time):

- discovery (the nodes require a password: `sentinel auth-pass`): every sentinel finds both replicas at the addresses they announce
  (`replica-announce-ip`: they listen on 127.0.0.2 and 127.0.0.3 but reach the primary from
  127.0.0.1), with the priority they report (`replica-priority`, one from its config file, one
  by CONFIG SET), and the two other sentinels;
- a writer that follows the primary through redis-py's `Sentinel.master_for` records which writes
  and consumer-group deliveries a `WAIT 1` confirmed. Replica b is stopped (SIGSTOP) until c
  alone has confirmed more of them, then the primary is SIGKILLed: b is behind;
- promotion: Sentinel must choose c, the replica with the larger offset (the priorities are
  equal); b is reconfigured to follow c; both config files are rewritten (CONFIG REWRITE in
  Sentinel's MULTI); the writer goes on through master_for on c;
- every confirmed write and delivery is on c, which holds nothing the writer did not send, and
  b holds the same state;
- the old primary, restarted on its directory as a primary, is turned into c's replica by
  Sentinel and catches up.

Every process is killed at the end, whatever happened (the fixtures' finalizers)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep.tools.servers import free_port
from tests.support.pids import stop
from tests.support.replication_util import caught_up, info, wait_for
from tests.support.sentinel import GROUP, KEY, Sentinels, Writer
from tests.support.serve_process import ServeProcess

NAME = "mymaster"
DEADLINE = 90.0  # seconds for any one step; each takes 1-5 on an idle machine
DOWN_AFTER_MS = 3000
FAILOVER_TIMEOUT_MS = 10000
PASSWORD = "s3cret"  # every node's requirepass and masterauth (any may become the primary)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    group = Sentinels(tmp_path)
    try:
        yield group
    finally:
        group.kill_all()


@pytest.fixture
def writers() -> Iterator[list[Writer]]:
    """Holds the test's writer, stopped at the end whatever happened."""
    held: list[Writer] = []
    yield held
    for writer in held:
        writer.stop()


class Node:
    """One data node: its directory, its config file, the address it serves on."""

    def __init__(self, root: Path, name: str, host: str, *settings: str) -> None:
        self.host, self.port = host, free_port()
        self.dir = root / name
        self.conf = root / f"{name}.conf"
        self.conf.write_text("\n".join([f"bind {host}", f"port {self.port}",
                                        "appendfsync always", f"requirepass {PASSWORD}",
                                        f"masterauth {PASSWORD}", *settings]) + "\n")
        self.proc: ServeProcess | None = None
        self._client: redis.Redis | None = None

    @property
    def address(self) -> list[str]:
        return [self.host, str(self.port)]

    @property
    def name(self) -> str:
        return f"{self.host}:{self.port}"  # as Sentinel names a replica

    def start(self, spawn: Callable[..., ServeProcess]) -> None:
        if self._client is not None:
            self._client.close()
        self.proc = spawn(self.dir, "--config", str(self.conf), port=self.port, host=self.host)
        self._client = self.proc.client(socket_timeout=10, password=PASSWORD)

    def client(self) -> redis.Redis:
        assert self._client is not None
        return self._client

    def stop(self) -> None:
        """SIGSTOP, every thread of it stopped before the test goes on (a thread still
        running would acknowledge writes meant for the other replica alone)."""
        assert self.proc is not None
        stop(self.proc.proc.pid)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.proc.pid, signal.SIGCONT)

    def replicaof_lines(self) -> list[str]:
        return [line for line in self.conf.read_text().splitlines()
                if line.startswith("replicaof")]


def follows(node: Node, primary: Node) -> bool:
    """The node is a replica of `primary`, its link up."""
    role = node.client().execute_command("ROLE")
    return role[0] == b"slave" and [role[1].decode(), str(role[2])] == primary.address \
        and info(node.client()).get("master_link_status") == "up"


def replicas_seen(sentinels: Sentinels) -> list[dict[str, dict[str, str]]]:
    """Each sentinel's view of the replicas: name -> SENTINEL REPLICAS fields."""
    return [{} if reply is None else {r["name"]: r for r in map(_fields, reply)}
            for reply in sentinels.each("SENTINEL", "REPLICAS", NAME)]


def _fields(reply: Any) -> dict[str, str]:
    return reply if isinstance(reply, dict) else dict(zip(reply[::2], reply[1::2], strict=True))


def up(view: dict[str, str]) -> bool:
    flags = set(view["flags"].split(","))
    return not flags & {"s_down", "o_down", "disconnected"} and \
        view["master-link-status"] == "ok"


def all_see(sentinels: Sentinels, replicas: list[Node]) -> bool:
    names = {node.name for node in replicas}
    return all(names <= set(view) and all(up(view[n]) for n in names)
               for view in replicas_seen(sentinels))


def primary_named(sentinels: Sentinels) -> list[Any]:
    return sentinels.each("SENTINEL", "GET-MASTER-ADDR-BY-NAME", NAME)


def step(what: str, predicate: Callable[[], Any], sentinels: Sentinels) -> Any:
    try:
        return wait_for(predicate, DEADLINE, what)
    except AssertionError:
        raise AssertionError(f"timed out waiting for {what}\n{sentinels.logs()}") from None


def test_sentinel_fails_over_a_streamkeep_primary_and_rejoins_it(
        tmp_path: Path, spawn: Callable[..., ServeProcess], sentinels: Sentinels,
        writers: list[Writer]) -> None:
    a = Node(tmp_path, "a", "127.0.0.1")
    b = Node(tmp_path, "b", "127.0.0.2", "replica-announce-ip 127.0.0.2",
             "replica-priority 50", f"replicaof {a.host} {a.port}")
    c = Node(tmp_path, "c", "127.0.0.3", "replica-announce-ip 127.0.0.3",
             f"replicaof {a.host} {a.port}")
    for node in (a, b, c):
        node.start(spawn)
    primary = a.client()
    primary.xgroup_create(KEY, GROUP, id="$", mkstream=True)
    assert primary.execute_command("WAIT", 2, 30000) == 2
    assert c.client().config_set("replica-priority", "50")
    listed = [",".join(v.split(",")[:2]) for k, v in info(primary).items() if k[:5] == "slave"]
    assert sorted(listed) == [f"ip={n.host},port={n.port}" for n in (b, c)]

    # --- discovery ------------------------------------------------------------------------
    sentinels.start(3, NAME, a.host, a.port, 2, DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS, PASSWORD)
    step("every sentinel to see both replicas up", lambda: all_see(sentinels, [b, c]),
         sentinels)
    for view in replicas_seen(sentinels):
        assert [(view[n.name]["ip"], view[n.name]["slave-priority"]) for n in (b, c)] == \
            [(b.host, "50"), (c.host, "50")]
    step("the sentinels to find each other",
         lambda: all(r is not None and len(r) == 2
                     for r in sentinels.each("SENTINEL", "SENTINELS", NAME)), sentinels)
    assert sentinels.each("SENTINEL", "CKQUORUM", NAME)[0].startswith("OK 3 usable")

    # --- writes; b left behind; the primary SIGKILLed under them --------------------------
    writer = Writer(sentinels.addresses(), NAME, PASSWORD)
    writers.append(writer)
    writer.start()
    step("writes confirmed by WAIT 1", lambda: len(writer.confirmed) >= 60 or writer.failure,
         sentinels)
    assert writer.failure is None, writer.failure
    b.stop()
    try:
        confirmed = len(writer.confirmed)
        step("writes confirmed by c alone",
             lambda: len(writer.confirmed) >= confirmed + 30 or writer.failure, sentinels)
        assert primary_named(sentinels) == [a.address] * 3  # no failover yet
        assert a.proc is not None
        a.proc.kill()  # SIGKILL, and reaped: nothing is acknowledged by it from now on
        writer.mark()
    finally:
        b.resume()
    assert writer.failure is None, writer.failure

    # --- promotion of the replica with the larger offset; b reconfigured; master_for ------
    step("every sentinel to name c the primary",
         lambda: primary_named(sentinels) == [c.address] * 3, sentinels)
    assert c.client().execute_command("ROLE")[0] == b"master"
    step("b to follow c", lambda: follows(b, c), sentinels)
    step("the writer to go on through master_for on c",
         lambda: writer.confirmed_after_mark >= 30 or writer.failure, sentinels)
    writer.stop()
    assert writer.failure is None, writer.failure
    # Sentinel's MULTI: SLAVEOF, CONFIG REWRITE, CLIENT KILL: the roles are in the files.
    assert c.replicaof_lines() == []
    assert b.replicaof_lines() == [f"replicaof {c.host} {c.port}"]

    # --- what the new primary holds -------------------------------------------------------
    new_primary = c.client()
    entries = {e[0].decode(): e[1] for e in new_primary.xrange(KEY)}
    missing = writer.confirmed - set(entries)
    assert not missing, f"{len(missing)} WAIT-confirmed writes lost: {sorted(missing)[:5]}"
    # Nothing else: each entry is a write the writer sent (acknowledged under that ID, or
    # one whose reply was lost), once, in the order sent.
    seq_of = {entry: seq for seq, entry in writer.acked.items()}
    numbers = [int(fields[b"n"]) for fields in entries.values()]
    wrong = [(entry, n) for entry, n in zip(entries, numbers, strict=True)
             if not 1 <= n <= writer.sent or seq_of.get(entry, n) != n or
             (entry not in seq_of and n in writer.acked)]
    assert not wrong, f"entries on c the writer did not send so: {wrong[:5]}"
    assert numbers == sorted(set(numbers)), "an entry twice or out of order"
    pending = {p["message_id"].decode()
               for p in new_primary.xpending_range(KEY, GROUP, "-", "+", 10 ** 6)}
    assert writer.confirmed_deliveries <= pending
    digest = caught_up(new_primary, b.client())

    # --- the old primary rejoins as a replica ---------------------------------------------
    a.start(spawn)  # its config file still says it is a primary
    step("Sentinel to turn a into c's replica", lambda: follows(a, c), sentinels)
    assert caught_up(new_primary, a.client()) == digest
    assert a.replicaof_lines() == [f"replicaof {c.host} {c.port}"]
    step("every sentinel to see a and b up as c's replicas", lambda: all_see(sentinels, [a, b]),
         sentinels)
