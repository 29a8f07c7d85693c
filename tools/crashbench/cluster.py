"""The crash bench's cluster mode (`--cluster N`): SIGKILL of the nodes of a cluster of N
`streamkeep serve --cluster-enabled yes` primaries, each on its own data directory, and every
shard judged after each kill, round after round.

Owns the rounds, the cluster's workload and its checks. The cluster is made as `streamkeep
cluster create` makes it (tools.cluster's `create`). Driver threads run the workload through
`ClusterTarget`s (a client that knows one node at first and learns the slot map from MOVED
replies, one crash bench `RespTarget` per node): RPUSH of unique values (one to three per push)
to KEYS keys spread over the slots, each driver writing its own keys (a key's pushes are
acknowledged in the order they are applied). Each push is recorded as acknowledged, unsent
(its node refused the connection: it must be absent) or in doubt (the connection dropped with
it in flight). A round kills one node at a random moment, every node at once, or one node
while a newer topology (one empty slot handed to the next primary) is being set on the nodes,
or (appendfsync always) the source or the target of slots being moved (`Move`: MIGRATING and
IMPORTING, MIGRATE of their keys one at a time, the drivers following ASK);
the drivers write on to the live shards a little longer, then the killed nodes restart on the
same port and data directory, and every node is judged:

- `acked-lost` (always): every acknowledged push of every shard is in its list;
- `loss-window` (everysec): a lost push was acknowledged within the policy's bound;
- `prefix`: each list is the key's pushes in order, every acknowledged one (or, under
  everysec and no, a prefix of them) and an in-doubt push whole or absent, never an unsent one,
  a value no push wrote, or part of a push;
- `slot-owner`: a node holds only keys of the slots it serves, and its slot index agrees
  with its keys (CLUSTER COUNTKEYSINSLOT against SCAN);
- `topology`: a restarted node holds the topology epoch and CLUSTER NODES view it held before
  (in a topology round, the old one or the new one, whole), and answers MOVED for the moved
  slot by the topology it holds; once the controller sets the newest again, all agree.
Must not touch: how servers start (tools.servers), a node's files, the other modes' checks.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamkeep.engine.model.keyslot import SLOTS, key_slot
from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools.cluster import NodeError
from streamkeep.tools.crashbench.client import RespTarget
from streamkeep.tools.crashbench.invariants import Violation
from streamkeep.tools.crashbench.report import BOUNDS, Found, Row
from streamkeep.tools.crashbench.sigkill import dir_bytes
from streamkeep.tools.crashbench.target import CommandFailed, ConnectionLost
from streamkeep.tools.servers import HOST, ServerFailed, StreamkeepServer, kill_all

KEYS = 240  # the workload's keys, spread over the slots (every shard gets its share)
KEY_PREFIX = b"cbc:"
MOMENTS = ("one node", "every node", "topology")
# Under appendfsync always, a round that moves slots: its source or target killed mid-move.
MOVE_MOMENT = "slot move"
MOVED_SLOTS = 8  # slots of workload keys a move round moves (their keys one MIGRATE each)
DEFAULT_ROUNDS = 12
MAX_REDIRECTS = 5  # MOVED replies followed for one command before it counts as refused
SEGMENT_MAX_BYTES = 32 << 10  # (as the sigkill mode: rotations and compactions within rounds)
IDLE_AFTER_FAILURE = 0.005  # seconds a driver waits after its node refused the connection

Progress = Callable[[str, int, int], None]
Address = tuple[str, int]


class ClusterFailed(StreamkeepError):
    """The cluster could not be made (a node did not start, or refused its topology)."""


class NodeDown(ConnectionLost):
    """The node refused the connection: the command was never sent (it cannot be applied)."""


def moved_to(line: str, asked: Address) -> tuple[int, Address] | None:
    """The slot and address of a `MOVED <slot> <host>:<port>` error line (an empty host is the
    one asked, as cluster clients read it), or None for any other line."""
    words = line.split()
    if len(words) != 3 or words[0] != "MOVED" or not words[1].isdigit():
        return None
    host, _, port = words[2].rpartition(":")
    if not port.isdigit():
        return None
    return int(words[1]), (host.strip("[]") or asked[0], int(port))


def asked_at(line: str, asked: Address) -> Address | None:
    """The address of an `ASK <slot> <host>:<port>` error line, or None for any other line."""
    words = line.split()
    if len(words) != 3 or words[0] != "ASK" or not words[1].isdigit():
        return None
    host, _, port = words[2].rpartition(":")
    return (host.strip("[]") or asked[0], int(port)) if port.isdigit() else None


class ClusterTarget:
    """A crash bench Target over a cluster: a command goes to the node the client believes
    serves its key's slot (`argv[1]`), every slot first believed the `seed` node's; a MOVED
    reply teaches the slot's owner and the command is sent there. One RespTarget per node,
    made again after its connection dropped. NodeDown: the owner refused the connection;
    ConnectionLost: its reply never came."""

    def __init__(self, seed: Address, timeout: float = 10.0) -> None:
        self.owners: list[Address] = [seed] * SLOTS
        self.links: dict[Address, RespTarget] = {}
        self.timeout = timeout
        self.redirects = 0  # MOVED replies followed

    def execute(self, argv: Sequence[bytes]) -> Any:
        slot = key_slot(argv[1])
        for _ in range(MAX_REDIRECTS):
            address = self.owners[slot]
            link = self._link(address)
            try:
                return link.execute(argv)
            except CommandFailed as err:
                asked = asked_at(str(err), address)
                if asked is not None:  # (a slot on the move: once, there, after ASKING)
                    self.redirects += 1
                    return self._ask(asked, argv)
                moved = moved_to(str(err), address)
                if moved is None:
                    raise
                self.owners[moved[0]] = moved[1]
                self.redirects += 1
            except ConnectionLost:
                self.links.pop(address, None)
                raise
        raise CommandFailed(f"ERR more than {MAX_REDIRECTS} MOVED replies for slot {slot}")

    def _ask(self, address: Address, argv: Sequence[bytes]) -> Any:
        link = self._link(address)
        try:
            replies = link.pipeline([[b"ASKING"], list(argv)])
        except ConnectionLost:
            self.links.pop(address, None)
            raise
        if isinstance(replies[1], CommandFailed):
            raise replies[1]
        return replies[1]

    def _link(self, address: Address) -> RespTarget:
        link = self.links.get(address)
        if link is None or link.dead:
            try:
                link = RespTarget(*address, timeout=self.timeout)
            except ConnectionLost as err:
                raise NodeDown(str(err)) from None
            self.links[address] = link
        return link

    def close(self) -> None:
        for link in self.links.values():
            link.close()
        self.links.clear()


# --- the workload and its history ----------------------------------------------------------------


ACKED, DOUBT, UNSENT = "acked", "in doubt", "unsent"


@dataclass
class Push:
    """One RPUSH: its values, what became of it, and when it was acknowledged (the run's
    clock)."""

    values: tuple[bytes, ...]
    state: str
    at: float = 0.0


def workload_keys(avoid: int) -> list[bytes]:
    """KEYS key names, none of them in slot `avoid` (the slot topology rounds move)."""
    names = (KEY_PREFIX + b"%d" % i for i in range(10 * KEYS))
    return [name for name in names if key_slot(name) != avoid][:KEYS]


class Driver(threading.Thread):
    """Pushes to its own keys through its own ClusterTarget until `stop`; each push recorded
    in `history`."""

    def __init__(self, number: int, keys: Sequence[bytes], seed: Address,
                 history: dict[bytes, list[Push]], rng: random.Random, started: float) -> None:
        super().__init__(daemon=True, name=f"crashbench-cluster-driver-{number}")
        self.number = number
        self.keys = list(keys)
        self.target = ClusterTarget(seed)
        self.history = history
        self.rng = rng
        self.started = started
        self.stop = threading.Event()
        self.ops = 0  # the next push's number (values are `<driver>:<op>:<i>`)
        self.acked = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.push()
        finally:
            self.target.close()

    def push(self) -> None:
        key = self.rng.choice(self.keys)
        values = tuple(b"%d:%d:%d" % (self.number, self.ops, i)
                       for i in range(self.rng.randint(1, 3)))
        self.ops += 1
        pushes = self.history.setdefault(key, [])
        try:
            self.target.execute([b"RPUSH", key, *values])
        except NodeDown:
            pushes.append(Push(values, UNSENT))
            self.stop.wait(IDLE_AFTER_FAILURE)
            return
        except ConnectionLost:
            pushes.append(Push(values, DOUBT))
            return
        except CommandFailed:
            pushes.append(Push(values, UNSENT))  # answered with an error: nothing written
            return
        pushes.append(Push(values, ACKED, time.monotonic() - self.started))
        self.acked += 1


@dataclass
class KeyVerdict:
    """One key's list judged against its pushes."""

    kept: list[Push]  # the pushes the list holds, in order
    lost: list[Push] = field(default_factory=list)  # acknowledged pushes it lacks
    problems: list[str] = field(default_factory=list)  # `prefix` violations


def judge_key(pushes: Sequence[Push], got: Sequence[bytes], policy: str) -> KeyVerdict:
    """Match a recovered list against the key's pushes (values are unique, so the match is
    greedy): see the module docstring's `acked-lost` and `prefix`."""
    verdict = KeyVerdict([])
    i = 0
    for push in pushes:
        n = len(push.values)
        if tuple(got[i:i + n]) == push.values:
            if push.state == UNSENT:
                verdict.problems.append(f"holds {_show(push.values)}, a push that was never "
                                        f"sent")
            if verdict.lost and policy != "always":
                verdict.problems.append(f"holds {_show(push.values)} after a lost "
                                        f"acknowledged push (a hole, not a lost tail)")
            verdict.kept.append(push)
            i += n
            continue
        if i < len(got) and got[i] in push.values:
            verdict.problems.append(f"holds part of the push {_show(push.values)}")
            while i < len(got) and got[i] in push.values:  # (the match goes on after it)
                i += 1
            continue
        if push.state == ACKED:
            verdict.lost.append(push)
    if i < len(got):
        verdict.problems.append(f"holds {_show(tuple(got[i:i + 3]))} where no push of this "
                                f"key (in order) wrote it")
    return verdict


def _show(values: Sequence[bytes]) -> str:
    return "[" + ", ".join(v.decode(errors="replace") for v in values) + "]"


# --- the cluster ---------------------------------------------------------------------------------


@dataclass
class Cluster:
    """The nodes (servers in the topology's order of primaries), the topology the controller
    last set (`epoch`, each node's CLUSTER NODES view, each slot's owner as an index into
    `servers`) and the slot the topology rounds move."""

    servers: list[StreamkeepServer]
    epoch: int = 0
    views: list[list[str]] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)
    moving_slot: int = 0

    def address(self, i: int) -> Address:
        return HOST, self.servers[i].port


def _node_call(server: StreamkeepServer, *argv: bytes) -> Any:
    with RespTarget(HOST, server.port) as target:
        return target.execute(list(argv))


def _held(server: StreamkeepServer) -> tuple[int, list[str]]:
    """The topology epoch a node holds and its CLUSTER NODES view (lines sorted)."""
    with RespTarget(HOST, server.port) as target:
        info = _text(target.execute([b"CLUSTER", b"INFO"]))
        nodes = _text(target.execute([b"CLUSTER", b"NODES"]))
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return int(fields["cluster_current_epoch"]), sorted(nodes.splitlines())


def _text(reply: Any) -> str:
    return reply.decode() if isinstance(reply, bytes) else str(reply)


def _layout(view: Sequence[str]) -> list[str]:
    """A CLUSTER NODES view as every node of one topology shows it (no `myself` flag)."""
    return sorted(line.replace("myself,", "") for line in view)


def make_cluster(root: str, nodes: int, policy: str) -> Cluster:
    """N nodes started and made a cluster as `streamkeep cluster create` makes one."""
    from streamkeep.tools.cluster import create

    servers = [StreamkeepServer(os.path.join(root, f"node-{i}"), appendfsync=policy,
                                segment_max_bytes=SEGMENT_MAX_BYTES,
                                config=("auto-aof-rewrite-min-size 256kb",
                                        "auto-aof-rewrite-percentage 100"),
                                extra=("--cluster-enabled", "yes"))
               for i in range(nodes)]
    for server in servers:
        server.start()
    made = create([f"{HOST}:{s.port}" for s in servers], 0)
    cluster = Cluster(servers, moving_slot=made["primaries"][0]["slots"][0][1])
    _settle(cluster)
    return cluster


def _settle(cluster: Cluster) -> None:
    """The controller's topology as the nodes hold it now: the baseline the next round's
    restarted nodes are compared with."""
    held = [_held(server) for server in cluster.servers]
    cluster.epoch = held[0][0]
    cluster.views = [view for _epoch, view in held]
    cluster.owner = _owners(held[0][1], cluster)


def _owners(view: Sequence[str], cluster: Cluster) -> list[int]:
    """Each slot's owner (an index into the servers) as a CLUSTER NODES view gives it."""
    by_port = {server.port: i for i, server in enumerate(cluster.servers)}
    owner = [-1] * SLOTS
    for line in view:
        words = line.split()
        port = int(words[1].partition("@")[0].rpartition(":")[2])
        for spec in words[8:]:
            first, _, last = spec.partition("-")
            owner[int(first):int(last or first) + 1] = \
                [by_port.get(port, -1)] * (int(last or first) - int(first) + 1)
    return owner


def newer_topology(cluster: Cluster) -> tuple[int, list[bytes], list[int]]:
    """The controller's next topology: the moving slot handed to the next primary, at the next
    epoch; its epoch, node lines (CLUSTER NODES' format, no shard ids: each node keeps those it
    knows) and slot owners."""
    from streamkeep.engine.exec.cluster import node_line, parse

    server = cluster.servers[0]
    text = _text(_node_call(server, b"CLUSTER", b"NODES"))
    topology = parse(text, f"{HOST}:{server.port}")
    slot = cluster.moving_slot
    owner = list(cluster.owner)
    owner[slot] = (owner[slot] + 1) % len(cluster.servers)
    port = cluster.servers[owner[slot]].port
    topology.assign(slot, slot, next(n.id for n in topology.nodes.values() if n.port == port))
    topology.epoch = cluster.epoch + 1
    lines = [node_line(topology, node).encode() for node in topology.nodes.values()]
    return topology.epoch, lines, owner


# --- the rounds ----------------------------------------------------------------------------------


@dataclass
class Run:
    """One cluster run's state between rounds."""

    row: Row
    cluster: Cluster
    policy: str
    seed: int
    keys: list[bytes]
    rng: random.Random
    started: float
    history: dict[bytes, list[Push]] = field(default_factory=dict)
    redirects: int = 0
    per_shard: Counter = field(default_factory=Counter)  # node -> acked pushes checked
    checked: int = 0  # acknowledged pushes found present, over every judgement
    kills: int = 0
    lost: int = 0  # acknowledged pushes found lost, over every judgement
    stale: int = 0  # nodes restarted holding the older topology (killed before they took it)
    moves: int = 0  # slot-move rounds
    sent_before_kill: int = 0  # keys a move round had sent when its node was killed
    next_op: int = 0  # the next round's drivers number their pushes from here (values unique)


def rows(policy: str, nodes: int, seed: int, points: int | None, seconds: float | None,
         progress: Progress | None = None, notes: list[str] | None = None) -> list[Row]:
    """The rounds of one policy against a cluster of `nodes` primaries (see the module
    docstring); `notes` gets the run's figures."""
    from streamkeep.tools import temporaries
    from streamkeep.tools.crashbench.runs import scratch_root

    if nodes < 1:
        raise ValueError("--cluster needs 1 node or more")
    root = scratch_root(None)
    row = Row(policy, f"sigkill (cluster of {nodes})", "process crash")
    rounds = points or (None if seconds else DEFAULT_ROUNDS)
    began = time.monotonic()
    try:
        try:
            cluster = make_cluster(root, nodes, policy)
        except (ServerFailed, ConnectionLost, CommandFailed, NodeError) as err:
            raise ClusterFailed(f"the cluster of {nodes} could not be made: {err}") from None
        run = new_run(row, cluster, policy, seed)
        n = 0
        moments = MOMENTS + ((MOVE_MOMENT,) if policy == "always" else ())
        while rounds is None or row.covered < rounds:
            if seconds is not None and time.monotonic() - began > seconds:
                break
            n += 1
            row.reached += 1
            play_round(run, moments[(n - 1) % len(moments)], n)
            if progress is not None:
                progress(f"cluster of {nodes} {policy} sigkill", row.covered,
                         rounds or row.covered)
        if notes is not None:
            notes.append(summary(run))
    finally:
        kill_all()
        row.seconds = time.monotonic() - began
        temporaries.remove(root)
    return [row]


def new_run(row: Row, cluster: Cluster, policy: str, seed: int) -> Run:
    """A run's state before its first round, on a cluster made (`make_cluster`)."""
    return Run(row, cluster, policy, seed, workload_keys(cluster.moving_slot),
               random.Random(f"crashbench-cluster:{seed}:{policy}:{len(cluster.servers)}"),
               time.monotonic())


def summary(run: Run) -> str:
    """The run's figures, one note: kills, pushes acknowledged and checked (per shard), lost,
    stale restarts, MOVED replies followed."""
    row, servers = run.row, run.cluster.servers
    held = sum(p.state == ACKED for pushes in run.history.values() for p in pushes)
    shards = ", ".join(f"node {i + 1} {run.per_shard[i]:,}" for i in range(len(servers)))
    return (f"cluster of {len(servers)}: {row.covered} rounds, {run.kills} kills, seed "
            f"{run.seed}; {row.acked:,} pushes acknowledged to {len(run.keys)} keys; the "
            f"{held:,} the nodes hold at the end each checked after every round since its "
            f"own ({run.checked:,} checks; per shard: {shards}); {run.lost} acknowledged "
            f"lost; {run.stale} node(s) restarted holding the older topology (MOVED by it "
            f"checked); {run.redirects:,} MOVED and ASK replies followed; {run.moves} slot "
            f"moves killed in the middle ({run.sent_before_kill} keys sent before the kills)")


def _drivers(run: Run) -> list[Driver]:
    count = len(run.cluster.servers)
    seed = run.cluster.address(run.rng.randrange(count))
    drivers = [Driver(i, run.keys[i::count], seed, run.history,
                      random.Random(f"{run.seed}:{run.row.reached}:{i}"), run.started)
               for i in range(count)]
    for driver in drivers:
        driver.ops = run.next_op
        driver.start()
    return drivers


def _stop(run: Run, drivers: Sequence[Driver]) -> None:
    for driver in drivers:
        driver.stop.set()
    for driver in drivers:
        driver.join()
        run.row.acked += driver.acked
        run.redirects += driver.target.redirects
        run.next_op = max(run.next_op, driver.ops)


def play_round(run: Run, moment: str, n: int) -> None:
    """Round `n`: the drivers started, the `moment`'s kill (MOMENTS), the nodes restarted
    and judged (`check_shards`, then the topology's checks); a point of the run's row."""
    cluster, rng = run.cluster, run.rng
    count = len(cluster.servers)
    drivers = _drivers(run)
    pusher: threading.Thread | None = None
    newer: tuple[int, list[bytes], list[int]] | None = None
    took: dict[int, bool] = {}
    time.sleep(rng.uniform(0.05, 0.6))
    victims = list(range(count)) if moment == "every node" else [rng.randrange(count)]
    move: Move | None = None
    if moment == MOVE_MOMENT:
        move = Move.begin(run)
        victims = [rng.choice((move.source, move.target))]
        time.sleep(rng.uniform(0.0, 0.02))
    if moment == "topology":
        newer = newer_topology(cluster)
        pusher = threading.Thread(target=_push_topology, args=(cluster, newer, took),
                                  daemon=True)
        pusher.start()
        time.sleep(rng.uniform(0.0, 0.01))
    crash_at = time.monotonic() - run.started
    for i in victims:
        cluster.servers[i].kill()
    run.kills += len(victims)
    if pusher is not None:
        pusher.join()
    if move is not None:
        move.join()
        run.moves += 1
        run.sent_before_kill += move.migrated
    time.sleep(rng.uniform(0.05, 0.3))  # the live shards written on, the dead ones refused
    _stop(run, drivers)
    what = (f"{len(victims)} kill{'s' if len(victims) > 1 else ''}: "
            + ", ".join(f"node {i + 1}" for i in victims)
            + (" while a newer topology was set" if moment == "topology" else "")
            + (f" while {len(move.slots)} slots moved from node {move.source + 1} to node "
               f"{move.target + 1} ({move.migrated} keys sent before the kill)"
               if move is not None else ""))
    where = f"round {n} ({moment}: {what})"
    recovery = 0.0
    for i in victims:
        began = time.monotonic()
        try:
            cluster.servers[i].start()
        except ServerFailed as err:
            _violation(run, Violation("recovery", f"node {i + 1} did not come back: {err}"),
                       n, where)
            run.row.add("refused", 0, 0, 0.0, [], 0.0, 0, at_s=crash_at, where=where,
                        seed=run.seed)
            return
        recovery = max(recovery, time.monotonic() - began)
    if move is not None:
        problem = move.finish()
        if problem:
            _violation(run, Violation("topology", f"the move resumed: {problem}"), n, where)
    violations, lost, window = check_shards(run, n, where, crash_at)
    if move is not None:
        violations += _judge_move_round(run, n, where, move)
    elif newer is not None:
        violations += _judge_topology_round(run, n, where, newer, took)
    else:
        violations += check_topology(run, n, where)
    run.row.add("restarted", sum(d.acked for d in drivers), lost, window, violations,
                recovery, sum(dir_bytes(cluster.servers[i].data_dir) for i in victims),
                at_s=crash_at, where=where, seed=run.seed,
                op=sum(p.state == ACKED for ps in run.history.values() for p in ps))


class Move(threading.Thread):
    """A move round's slots moved as redis-cli moves them, by the bench: IMPORTING on the
    target, MIGRATING on the source, then each key sent with MIGRATE ... REPLACE, one at a time,
    until a node dies (`begin`, then this thread); once the killed node is back, the rest sent
    and every node told `SETSLOT slot NODE target` (`finish`)."""

    def __init__(self, cluster: Cluster, slots: list[int], source: int, target: int) -> None:
        super().__init__(daemon=True, name="crashbench-cluster-move")
        self.cluster, self.slots, self.source, self.target = cluster, slots, source, target
        self.target_id = ""
        self.migrated = 0

    @staticmethod
    def begin(run: Run) -> Move:
        """The slots of up to MOVED_SLOTS workload keys of one node set on the move to the
        next node, and their keys' sending begun."""
        cluster = run.cluster
        count = len(cluster.servers)
        source = run.rng.randrange(count)
        target = (source + 1) % count
        slots = sorted({key_slot(k) for k in run.keys
                        if cluster.owner[key_slot(k)] == source})[:MOVED_SLOTS]
        move = Move(cluster, slots, source, target)
        ids = [_text(_node_call(server, b"CLUSTER", b"MYID")) for server in cluster.servers]
        for slot in slots:
            _node_call(cluster.servers[target], b"CLUSTER", b"SETSLOT", b"%d" % slot,
                       b"IMPORTING", ids[source].encode())
            _node_call(cluster.servers[source], b"CLUSTER", b"SETSLOT", b"%d" % slot,
                       b"MIGRATING", ids[target].encode())
        move.target_id = ids[target]
        move.start()
        return move

    def run(self) -> None:
        with contextlib.suppress(ConnectionLost, CommandFailed):  # (a node was killed:
            self._send_all()  # `finish` sends the rest)

    def _send_all(self) -> None:
        source = self.cluster.servers[self.source]
        port = b"%d" % self.cluster.servers[self.target].port
        with RespTarget(HOST, source.port) as link:
            for slot in self.slots:
                while True:
                    keys = link.execute([b"CLUSTER", b"GETKEYSINSLOT", b"%d" % slot, b"1"])
                    if not keys:
                        break
                    link.execute([b"MIGRATE", HOST.encode(), port, b"", b"0", b"10000",
                                  b"REPLACE", b"KEYS", *keys])
                    self.migrated += len(keys)

    def finish(self) -> str:
        """The move completed after the restart: "" or what failed."""
        try:
            self._send_all()
            for server in self.cluster.servers:
                for slot in self.slots:
                    _node_call(server, b"CLUSTER", b"SETSLOT", b"%d" % slot, b"NODE",
                               self.target_id.encode())
        except (ConnectionLost, CommandFailed) as err:
            return str(err)
        for slot in self.slots:
            self.cluster.owner[slot] = self.target
        return ""


def _judge_move_round(run: Run, n: int, where: str, move: Move) -> list[Violation]:
    """After a move round: every node holds the same topology, the moved slots the target's
    (a read of one answered by the target, MOVED there by the others); the new baseline."""
    cluster = run.cluster
    violations: list[Violation] = []
    try:
        _settle(cluster)
    except (ConnectionLost, CommandFailed) as err:
        return _report(run, n, where, [Violation("topology", f"after the move: {err}")])
    if len({tuple(_layout(v)) for v in cluster.views}) != 1:
        violations.append(Violation("topology", "the nodes disagree after the move"))
    for slot in move.slots:
        if cluster.owner[slot] != move.target:
            violations.append(Violation("topology", f"slot {slot} is node "
                                                    f"{cluster.owner[slot] + 1}'s after the "
                                                    f"move, not node {move.target + 1}'s"))
    return _report(run, n, where, violations)


def _push_topology(cluster: Cluster, newer: tuple[int, list[bytes], list[int]],
                   took: dict[int, bool]) -> None:
    """The controller setting the newer topology on every node in turn (a node killed
    meanwhile does not stop it)."""
    epoch, lines, _owner = newer
    for i, server in enumerate(cluster.servers):
        try:
            took[i] = _node_call(server, b"CLUSTER", b"SETTOPOLOGY", b"%d" % epoch,
                                 *lines) == "OK"
        except (ConnectionLost, CommandFailed):
            took[i] = False


def _read_node(server: StreamkeepServer) -> tuple[dict[bytes, Any], dict[int, Any]]:
    """Every key a node holds, with its list (a CommandFailed when it is no list), and what
    CLUSTER COUNTKEYSINSLOT says of each slot those keys are in."""
    with RespTarget(HOST, server.port) as target:
        keys: list[bytes] = []
        cursor = b"0"
        while True:
            cursor, batch = target.execute([b"SCAN", cursor, b"COUNT", b"1000"])
            keys += batch
            if cursor == b"0":
                break
        lists = target.pipeline([[b"LRANGE", key, b"0", b"-1"] for key in keys]) if keys \
            else []
        slots = sorted({key_slot(key) for key in keys})
        counts = target.pipeline([[b"CLUSTER", b"COUNTKEYSINSLOT", b"%d" % slot]
                                  for slot in slots]) if slots else []
    return dict(zip(keys, lists, strict=True)), dict(zip(slots, counts, strict=True))


def check_shards(run: Run, n: int, where: str, crash_at: float
                 ) -> tuple[list[Violation], int, float]:
    """Every shard's lists against the history (and each key on its slot's owner); the
    history then continues from what the nodes hold. Returns the violations, the acknowledged
    pushes lost and the oldest one's age at the crash."""
    cluster = run.cluster
    violations: list[Violation] = []
    lost, window = 0, 0.0
    held: dict[bytes, Any] = {}
    for i, server in enumerate(cluster.servers):
        try:
            got, counts = _read_node(server)
        except (ConnectionLost, CommandFailed) as err:
            violations.append(Violation("recovery", f"node {i + 1} cannot be read: {err}"))
            return _report(run, n, where, violations), 0, 0.0
        scanned = Counter(key_slot(key) for key in got)
        for slot, count in counts.items():
            if count != scanned[slot]:
                violations.append(Violation(
                    "slot-owner", f"node {i + 1}: CLUSTER COUNTKEYSINSLOT {slot} says "
                                  f"{count}, its keys (SCAN) {scanned[slot]}"))
        for key, value in got.items():
            owner = cluster.owner[key_slot(key)]
            if owner != i:
                violations.append(Violation(
                    "slot-owner", f"node {i + 1} holds {_show((key,))} of slot "
                                  f"{key_slot(key)}, node {owner + 1}'s"))
            held[key] = value
    for key in sorted(set(run.history) | set(held)):
        shard = cluster.owner[key_slot(key)]
        value = held.get(key, [])
        if isinstance(value, CommandFailed) or key not in run.history:
            violations.append(Violation("prefix", f"{_show((key,))} on node {shard + 1}: no "
                                                  f"key the workload wrote ({value})"))
            continue
        pushes = run.history[key]
        verdict = judge_key(pushes, value, run.policy)
        for problem in verdict.problems:
            violations.append(Violation("prefix", f"{_show((key,))} on node {shard + 1}: "
                                                  f"{problem}"))
        for push in verdict.lost:
            lost += 1
            run.lost += 1
            window = max(window, crash_at - push.at)
            if run.policy == "always":
                violations.append(Violation(
                    "acked-lost", f"{_show((key,))} on node {shard + 1} lacks the "
                                  f"acknowledged push {_show(push.values)}"))
            elif BOUNDS.get(run.policy) is not None and \
                    crash_at - push.at > (BOUNDS[run.policy] or 0.0) + 1.0:
                violations.append(Violation(
                    "loss-window", f"{_show((key,))} on node {shard + 1} lost "
                                   f"{_show(push.values)}, acknowledged "
                                   f"{crash_at - push.at:.2f} s before the crash"))
        checked = sum(p.state == ACKED for p in verdict.kept)
        run.checked += checked
        run.per_shard[shard] += checked
        run.history[key] = ([Push(p.values, ACKED, p.at) for p in verdict.kept]
                            if not verdict.problems else
                            [Push((v,), ACKED, crash_at) for v in value])
    return _report(run, n, where, violations), lost, window


def check_topology(run: Run, n: int, where: str) -> list[Violation]:
    """Every node holds the epoch and CLUSTER NODES view it held before the round."""
    violations = []
    for i, server in enumerate(run.cluster.servers):
        try:
            epoch, view = _held(server)
        except (ConnectionLost, CommandFailed) as err:
            violations.append(Violation("topology", f"node {i + 1}: {err}"))
            continue
        if (epoch, view) != (run.cluster.epoch, run.cluster.views[i]):
            violations.append(Violation(
                "topology", f"node {i + 1} holds epoch {epoch} and {len(view)} node lines "
                            f"after the round, epoch {run.cluster.epoch} and "
                            f"{len(run.cluster.views[i])} before" + _first_difference(
                                view, run.cluster.views[i])))
    return _report(run, n, where, violations)


def _first_difference(have: Sequence[str], want: Sequence[str]) -> str:
    for a, b in zip(have, want, strict=False):
        if a != b:
            return f" (first difference: {a!r}, was {b!r})"
    return ""


def _judge_topology_round(run: Run, n: int, where: str,
                          newer: tuple[int, list[bytes], list[int]],
                          took: dict[int, bool]) -> list[Violation]:
    """After a kill while the newer topology was set: each node holds the old topology or
    the new one whole, answers MOVED for the moving slot by the one it holds; then the
    controller sets the newer one on every node again and all must agree."""
    cluster = run.cluster
    epoch, lines, owner = newer
    violations: list[Violation] = []
    old_layout = _layout(cluster.views[0])
    for i, server in enumerate(cluster.servers):
        try:
            held_epoch, view = _held(server)
        except (ConnectionLost, CommandFailed) as err:
            violations.append(Violation("topology", f"node {i + 1}: {err}"))
            continue
        if held_epoch == cluster.epoch and _layout(view) == old_layout:
            serves = cluster.owner
            run.stale += 1
        elif held_epoch == epoch and _layout(view) == _layout(_new_view(newer)):
            serves = owner
        else:
            violations.append(Violation(
                "topology", f"node {i + 1} holds epoch {held_epoch}, neither the old topology "
                            f"(epoch {cluster.epoch}) nor the new one (epoch {epoch}) whole"))
            continue
        if took.get(i) and serves is not owner:
            violations.append(Violation(
                "topology", f"node {i + 1} answered OK to the topology of epoch {epoch}, and "
                            f"holds epoch {held_epoch} after its restart"))
            continue
        problem = answers_by(cluster, i, serves)
        if problem:
            violations.append(Violation("topology", f"node {i + 1} (epoch {held_epoch}): "
                                                    f"{problem}"))
    try:
        for server in cluster.servers:  # the controller again: the newest on every node
            _node_call(server, b"CLUSTER", b"SETTOPOLOGY", b"%d" % epoch, *lines)
        _settle(cluster)
    except (ConnectionLost, CommandFailed) as err:
        violations.append(Violation("topology", f"the newest topology set again: {err}"))
        return _report(run, n, where, violations)
    if cluster.epoch != epoch or len({tuple(_layout(v)) for v in cluster.views}) != 1:
        violations.append(Violation("topology", "the nodes disagree once the newest topology "
                                                "was set on each again"))
    return _report(run, n, where, violations)


def _new_view(newer: tuple[int, list[bytes], list[int]]) -> list[str]:
    """The newer topology's lines, as a node holding it shows them in CLUSTER NODES."""
    return [line.decode() for line in newer[1]]


def answers_by(cluster: Cluster, i: int, owner: Sequence[int]) -> str:
    """Whether node i answers a read of the moving slot as `owner` (a topology's slot
    owners) says: served (an empty reply) when its own, else MOVED to its owner."""
    slot = cluster.moving_slot
    expected = f"MOVED {slot} {HOST}:{cluster.servers[owner[slot]].port}"
    try:
        _node_call(cluster.servers[i], b"LLEN", probe_key(slot))
    except CommandFailed as err:
        if owner[slot] != i and str(err) == expected:
            return ""
        return (f"a read of slot {slot} answered {err}, not "
                f"{expected if owner[slot] != i else 'served'}")
    if owner[slot] == i:
        return ""
    return f"served slot {slot}, which its topology gives node {owner[slot] + 1}"


def probe_key(slot: int) -> bytes:
    """A key of `slot` (no workload key is in the moving slot: this one reads it)."""
    return next(key for key in (b"cbc-probe:%d" % k for k in range(1 << 22))
                if key_slot(key) == slot)


def _report(run: Run, n: int, where: str, violations: list[Violation]) -> list[Violation]:
    for v in violations:
        _violation(run, v, n, where, count=False)
    return violations


def _violation(run: Run, v: Violation, n: int, where: str, count: bool = True) -> None:
    if count:
        run.row.violations[v.invariant] += 1
    run.row.found.append(Found(v.invariant, f"{where}: {v.detail}",
                               f"cluster:{run.row.policy}:{len(run.cluster.servers)}:"
                               f"{run.seed}:{n}"))

