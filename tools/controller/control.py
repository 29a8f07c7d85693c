"""The controller: one leads a cluster through an etcd lease, keeps every node on the topology
etcd holds, and fails a primary over when it stops answering.

Owns leadership (a key under the leader's etcd lease: created only when absent, so one
controller leads and the others wait for the key to go with its lease), a `NodeLink` per node
(a thread that sends the node the committed topology when it holds an older epoch, and renews
the node's lease with CLUSTER LEASE, which answers the node's epoch and log position), and the
decisions: an automatic failover when a primary serving slots has not answered for its
cluster-node-timeout (the reachable replica holding the most of the log promoted, committed in
etcd before any node hears of it), and the operators' requests (a manual failover: the
primary's lease revoked so it takes no write, its replica waited for until it holds the whole
log, then the switch committed). Must not touch: a topology's shape (tools.controller.plans),
the record's bytes (tools.controller.record).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools.controller import plans, record
from streamkeep.tools.controller.etcd import EtcdError

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.tools.controller.etcd import Etcd
    from streamkeep.tools.controller.record import Record

log = logging.getLogger("streamkeep.controller")

LEADER_TTL: Final = 2  # seconds: a dead leader's successor takes over within this
TICK: Final = 0.05  # seconds between the leader's looks at etcd and the nodes
PROBES_PER_TIMEOUT: Final = 10  # a node is probed this often within its node timeout
MAX_PROBE_INTERVAL: Final = 1.0
DEFAULT_NODE_TIMEOUT: Final = 15.0  # seconds, until a node says its cluster-node-timeout
CONNECT_TIMEOUT: Final = 1.0  # seconds, before the node's timeout is known
CATCH_UP_TIMEOUT: Final = 30.0  # a manual failover's replica to reach its primary's log
MOVE_BATCH: Final = 100  # keys in a move's first batch
MOVE_BATCH_MAX: Final = 10_000
MOVE_BYTES: Final = 4 << 20  # a batch's bytes at most (past them, the next batch)
MOVE_HOLD: Final = 0.005  # seconds a batch should hold the source (its clients wait)
MOVE_PACE: Final = 1.0  # the source's clients get this many times a batch's time after it
MOVE_TIMEOUT: Final = 10.0  # seconds a node has to answer a move's step
FREEZE_BELOW: Final = 64 << 10  # the records the source may owe when its slots freeze
TRIM_BATCH: Final = 1000  # keys moved away deleted per CLUSTER TRIM
REQUEST_TTL: Final = 60  # seconds an operator's request waits for a controller


class ControllerError(StreamkeepError):
    """What a controller or a request to it could not do: the line to show."""


@dataclass
class Probe:
    """What a node last answered: when (monotonic; 0 never), its epoch and log position."""

    at: float = 0.0
    epoch: int = -1
    offset: int = 0
    error: str = ""


class NodeLink(threading.Thread):
    """One node as the controller keeps it: on the committed topology, its lease renewed."""

    def __init__(self, controller: Controller, node_id: str, address: str) -> None:
        super().__init__(name=f"controller-{address}", daemon=True)
        self.controller, self.node_id, self.address = controller, node_id, address
        self.probe = Probe()
        self.timeout = DEFAULT_NODE_TIMEOUT  # the node's cluster-node-timeout, once asked
        self.revoked = False  # a manual failover: the node's lease withdrawn
        self.wake = threading.Event()
        self.stopped = threading.Event()
        self._node: Any = None

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self._once()
            except StreamkeepError as err:
                self._close()
                if self.probe.error != str(err):
                    log.warning("node %s: %s", self.address, err)
                self.probe.error = str(err)
            interval = min(self.timeout / PROBES_PER_TIMEOUT, MAX_PROBE_INTERVAL)
            self.wake.wait(interval)
            self.wake.clear()
        self._close()

    def _once(self) -> None:
        from streamkeep.tools.cluster import Node

        current = self.controller.record
        if current is None:
            return
        if self._node is None:
            self._node = Node(self.address, timeout=min(self.timeout / 2, CONNECT_TIMEOUT))
            self.timeout = _node_timeout(self._node)
            self._node.target.set_timeout(self.timeout / 2)
        node = self._node
        epoch = self.probe.epoch
        if epoch < current.epoch:
            lines = record_lines(current.topology)
            node.call("CLUSTER", "SETTOPOLOGY", current.epoch, "CONTROLLER",
                      current.topology.managed_by, *lines)
        lease_ms = 0 if self.revoked else int(self.timeout * 1000)
        reply = node.call("CLUSTER", "LEASE", current.topology.managed_by, current.epoch,
                          lease_ms)
        self.probe = Probe(time.monotonic(), int(reply[0]), int(reply[1]))

    def _close(self) -> None:
        node, self._node = self._node, None
        if node is not None:
            node.target.abort()

    def stop(self) -> None:
        self.stopped.set()
        self.wake.set()


def _node_timeout(node: Any) -> float:
    """The node's cluster-node-timeout, in seconds."""
    reply = node.call("CONFIG", "GET", "cluster-node-timeout")
    values = list(reply.values()) if isinstance(reply, dict) else reply[1::2]
    return int(values[0]) / 1000 if values else DEFAULT_NODE_TIMEOUT


def record_lines(topology: Topology) -> list[str]:
    """The topology's nodes.conf lines, as CLUSTER SETTOPOLOGY takes them."""
    from streamkeep.engine.exec.cluster import render

    return [line for line in render(topology).splitlines() if not line.startswith("vars ")]


def address_of(topology: Topology, node_id: str) -> str:
    node = topology.nodes[node_id]
    return f"{node.ip or '127.0.0.1'}:{node.port}"


class Mover(threading.Thread):
    """The leader's slot mover: the slots the record has on the move, moved atomically
    (engine.commands.slot_moves), those from one source to one target in one session. The
    target drops what an earlier attempt left; the source's records and keys are relayed
    in batches (each sized to hold the source about MOVE_HOLD, followed by MOVE_PACE times
    its hold for the source's own clients) while the source serves the slots; once it owes
    nothing the slots freeze, the rest is applied, the target's AOF and replicas confirm
    it (WAITAOF), the switch is committed in etcd and handed to both nodes; then the
    source's copies are trimmed. Any failure: the move starts again in a new session. Its
    own etcd client (the leader's is its loop's)."""

    def __init__(self, controller: Controller) -> None:
        super().__init__(name="controller-mover", daemon=True)
        self.controller = controller
        self.stopped = threading.Event()
        self.sessions = 0
        self.to_trim: set[str] = set()  # primaries that may hold keys of slots moved away
        self.trim_all = True  # (at first: a former leader may have left some)

    def run(self) -> None:
        from streamkeep.tools.controller.etcd import Etcd

        etcd = Etcd(self.controller.etcd.url)
        try:
            while not self.stopped.is_set():
                try:
                    if not self._once(etcd):
                        self.stopped.wait(TICK * 4)
                except StreamkeepError as err:
                    log.warning("moving slots: %s", err)
                    self.stopped.wait(1.0)
        finally:
            etcd.close()

    def _once(self, etcd: Etcd) -> bool:
        current = record.load(etcd, self.controller.cluster)
        if current is None:
            return False
        links = self.controller.links
        if self.trim_all:
            self.to_trim |= {node.id for node in current.topology.nodes.values()
                             if node.is_primary}
            self.trim_all = False
        groups: dict[tuple[str, str], list[int]] = {}
        for slot, source_id, target_id in plans.on_the_move(current.topology):
            groups.setdefault((source_id, target_id), []).append(slot)
        for (source_id, target_id), slots in groups.items():
            source, target = links.get(source_id), links.get(target_id)
            if (source is None or target is None or source.probe.epoch < current.epoch
                    or target.probe.epoch < current.epoch):
                continue  # (not every node holds the move yet)
            self._move(etcd, current, slots, source, target)
            return True
        self._trim(current.topology)
        return False

    def _move(self, etcd: Etcd, current: Record, slots: list[int], source: NodeLink,
              target: NodeLink) -> None:
        from streamkeep.tools.cluster import Node

        self.sessions += 1
        session = f"{self.controller.name}/{current.epoch}/{self.sessions}"
        src = Node(source.address, timeout=MOVE_TIMEOUT)
        dst = Node(target.address, timeout=MOVE_TIMEOUT)
        cancel = False  # (whether a failure cancels the source's export: not once a switch
        # may have been committed)
        try:
            dst.call("CLUSTER", "IMPORT", "START", source.node_id, session, *slots)
            src.call("CLUSTER", "EXPORT", "START", target.node_id, session, *slots)
            cancel = True
            if not self._relay(src, dst, session):
                return
            self._apply(dst, session, src.call("CLUSTER", "EXPORT", "FREEZE", session))
            self._confirm(dst, target, len(current.topology.replicas_of(target.node_id)))
            cancel = False
            committed = self._commit(etcd, current, slots, source.node_id, target.node_id)
            if committed is None:
                cancel = True
                return
            lines = record_lines(committed.topology)
            for node in (dst, src):  # (the source's slots wait for it, frozen)
                node.call("CLUSTER", "SETTOPOLOGY", committed.epoch, "CONTROLLER",
                          committed.topology.managed_by, *lines)
            log.info("moved %d slots to %s (epoch %d)", len(slots), target.address,
                     committed.epoch)
            self.to_trim.add(source.node_id)
        except StreamkeepError:
            self.to_trim.add(target.node_id)
            raise
        finally:
            if cancel:
                with contextlib.suppress(StreamkeepError):
                    src.call("CLUSTER", "EXPORT", "CANCEL", session)
            src.close()
            dst.close()

    def _relay(self, src: Any, dst: Any, session: str) -> bool:
        """The source's batches applied at the target until it owes nothing; False when
        the mover stops first."""
        count = MOVE_BATCH
        while not self.stopped.is_set():
            began = time.monotonic()
            blob, done, queued = src.call("CLUSTER", "EXPORT", "NEXT", session, count,
                                          MOVE_BYTES)
            held = time.monotonic() - began
            self._apply(dst, session, blob)
            if done and queued < FREEZE_BELOW:
                return True
            if held > MOVE_HOLD:
                count = max(1, count // 2)
            elif held < MOVE_HOLD / 4:
                count = min(MOVE_BATCH_MAX, count * 2)
            self.stopped.wait(held * MOVE_PACE)
        return False

    @staticmethod
    def _confirm(dst: Any, target: NodeLink, replicas: int) -> None:
        """The target's AOF holds what it applied, fsynced, and its replicas have it (what
        WAIT confirms of a client's write), before the switch is committed."""
        local, _remote = dst.call("WAITAOF", 1, 0, int(MOVE_TIMEOUT * 1000))
        held = dst.call("WAIT", replicas, int(MOVE_TIMEOUT * 1000)) if replicas else 0
        if local < 1 or held < replicas:
            raise ControllerError(f"{target.address}: its AOF or replicas did not confirm the "
                                  f"slots' records")

    @staticmethod
    def _apply(dst: Any, session: str, blob: bytes) -> None:
        if blob:
            dst.call("CLUSTER", "IMPORT", "APPLY", session, blob)

    def _commit(self, etcd: Etcd, current: Record, slots: list[int], source_id: str,
                target_id: str) -> Record | None:
        """The switch committed: the slots given to the target, on the record as it is now
        (None: the move changed meanwhile, a failover's: the source's freeze is cancelled
        and it starts again). An etcd error is raised with the source left frozen: whether
        the switch was committed is known only once etcd is read again."""
        for _attempt in range(10):
            still = {slot for slot, src, dst in plans.on_the_move(current.topology)
                     if src == source_id and dst == target_id}
            if not still.issuperset(slots):
                return None
            committed = record.commit(etcd, self.controller.cluster, current,
                                      plans.moved(current.topology, slots))
            if committed is not None:
                return committed
            reloaded = record.load(etcd, self.controller.cluster)
            if reloaded is None:
                return None
            current = reloaded
        return None

    def _trim(self, topology: Topology) -> None:
        """A batch of the keys moved away deleted at each primary that may hold some."""
        from streamkeep.tools.cluster import Node

        for node_id in sorted(self.to_trim):
            node = topology.nodes.get(node_id)
            link = self.controller.links.get(node_id)
            if node is None or not node.is_primary or link is None:
                self.to_trim.discard(node_id)
                continue
            try:
                conn = Node(link.address, timeout=MOVE_TIMEOUT)
            except StreamkeepError:
                continue  # (down: trimmed once it is back; the others meanwhile)
            try:
                while not self.stopped.is_set():
                    began = time.monotonic()
                    if not conn.call("CLUSTER", "TRIM", TRIM_BATCH):
                        self.to_trim.discard(node_id)
                        break
                    self.stopped.wait((time.monotonic() - began) * MOVE_PACE)
            except StreamkeepError:
                continue  # (lost meanwhile: the same)
            finally:
                conn.close()

    def stop(self) -> None:
        self.stopped.set()


class Controller:
    """A controller of `cluster` (its etcd `etcd`): `run` until `stop` is set."""

    def __init__(self, etcd: Etcd, cluster: str, name: str | None = None) -> None:
        self.etcd, self.cluster = etcd, cluster
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.record: Record | None = None
        self.links: dict[str, NodeLink] = {}
        self.lease = 0
        self.leading_since = 0.0
        self.renewed = 0.0
        self.failovers = 0
        self.mover: Mover | None = None
        self.stop_event = threading.Event()

    @property
    def leading(self) -> bool:
        return self.lease != 0

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                try:
                    self._step()
                except (EtcdError, record.RecordError) as err:
                    log.warning("etcd: %s", err)
                    if self.leading and time.monotonic() - self.renewed > LEADER_TTL / 2:
                        self._abdicate("etcd unreachable")
                self.stop_event.wait(TICK if self.leading else LEADER_TTL / 4)
        finally:
            self._abdicate("stopping")

    def stop(self) -> None:
        self.stop_event.set()

    # --- leadership ----------------------------------------------------------------------------

    def _step(self) -> None:
        if not self.leading:
            self._campaign()
            if not self.leading:
                return
        now = time.monotonic()
        if now - self.renewed > LEADER_TTL / 4:
            if self.etcd.keepalive(self.lease) <= 0:
                self._abdicate("its etcd lease expired")
                return
            self.renewed = now
        self._refresh()
        self._serve_requests()
        self._fail_over_the_silent()

    def _campaign(self) -> None:
        lease = self.etcd.grant(LEADER_TTL)
        if self.etcd.compare_and_put(record.key(self.cluster, "leader"), self.name.encode(), 0,
                                     lease=lease):
            self.lease, self.renewed = lease, time.monotonic()
            self.leading_since = self.renewed
            log.info("controller %s leads cluster %s", self.name, self.cluster)
            self.mover = Mover(self)
            self.mover.start()
        else:
            self.etcd.revoke(lease)

    def _abdicate(self, why: str) -> None:
        mover, self.mover = self.mover, None
        if mover is not None:
            mover.stop()
            mover.join()
        for link in self.links.values():
            link.stop()
        self.links.clear()
        self.record = None
        if self.lease:
            log.info("controller %s stops leading cluster %s: %s", self.name, self.cluster, why)
            lease, self.lease = self.lease, 0
            with contextlib.suppress(EtcdError):  # (it expires by itself)
                self.etcd.revoke(lease)

    # --- the nodes -----------------------------------------------------------------------------

    def _refresh(self) -> None:
        """The committed record read again; the links made to match its nodes."""
        current = record.load(self.etcd, self.cluster)
        if current is None:
            return
        changed = self.record is None or current.revision != self.record.revision
        self.record = current
        if not changed:
            return
        topology = current.topology
        for node_id in list(self.links):
            if node_id not in topology.nodes:
                self.links.pop(node_id).stop()
        for node_id in topology.nodes:
            address = address_of(topology, node_id)
            link = self.links.get(node_id)
            if link is not None and link.address != address:
                self.links.pop(node_id).stop()
                link = None
            if link is None:
                link = self.links[node_id] = NodeLink(self, node_id, address)
                link.start()
            link.wake.set()

    def _commit(self, topology: Topology) -> bool:
        assert self.record is not None
        committed = record.commit(self.etcd, self.cluster, self.record, topology)
        if committed is None:
            return False
        self.record = None  # (read again: the links follow)
        self._refresh()
        return True

    def _fail_over_the_silent(self) -> None:
        current = self.record
        if current is None:
            return
        topology = current.topology
        now = time.monotonic()
        for primary in [n for n in topology.nodes.values() if n.is_primary]:
            link = self.links.get(primary.id)
            if link is None or not topology.slot_ranges(primary.id):
                continue
            heard = max(link.probe.at, self.leading_since)
            if now - heard <= link.timeout:
                continue
            offsets = {}
            for replica in topology.replicas_of(primary.id):
                other = self.links.get(replica.id)
                if (other is not None and now - other.probe.at <= other.timeout
                        and other.probe.epoch == current.epoch):
                    offsets[replica.id] = other.probe.offset
            chosen = plans.most_advanced(offsets)
            if chosen is None:
                continue
            log.warning("primary %s at %s silent for %.1f s; promoting %s at %s (log position "
                        "%d)", primary.id, link.address, now - heard, chosen,
                        address_of(topology, chosen), offsets[chosen])
            if self._commit(plans.failed_over(topology, chosen)):
                self.failovers += 1
            return  # one change per commit: the next tick sees the new record

    # --- operators' requests -------------------------------------------------------------------

    def _serve_requests(self) -> None:
        prefix = record.key(self.cluster, "requests/")
        for name, (value, revision) in self.etcd.get_prefix(prefix).items():
            if not self.etcd.compare_and_delete(name, revision):
                continue
            try:
                request = json.loads(value)
                result = self._request(request)
            except (ValueError, KeyError, TypeError) as err:
                result = {"error": f"not a request ({err})"}
            except StreamkeepError as err:
                result = {"error": str(err)}
            reply_key = record.key(self.cluster, "replies/" + name.rpartition("/")[2])
            lease = self.etcd.grant(REQUEST_TTL)
            self.etcd.put(reply_key, json.dumps(result).encode(), lease=lease)

    def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] != "failover":
            raise ControllerError(f"unknown request {request['op']!r}")
        return self._manual_failover(str(request["node"]), bool(request.get("force")))

    def _manual_failover(self, name: str, force: bool) -> dict[str, Any]:
        """A replica made its shard's primary with nothing lost: the primary's lease withdrawn
        (it takes no write from then on), the replica waited for until it holds the
        primary's whole log, then the switch committed and pushed. `force`: without waiting
        for the primary (it is gone)."""
        current = self.record
        if current is None:
            raise ControllerError("the cluster has no topology yet")
        replica = plans.find(current.topology, name)
        if replica.primary is None:
            raise ControllerError(f"{name} is a primary already")
        primary = self.links[replica.primary]
        chosen = self.links[replica.id]
        if not force:
            primary.revoked = True
            try:
                self._catch_up(primary, chosen)
            except ControllerError:
                primary.revoked = False
                raise
        new = plans.failed_over(current.topology, replica.id)
        if not self._commit(new):
            primary.revoked = False
            raise ControllerError("the topology changed meanwhile; try again")
        assert self.record is not None
        return {"epoch": self.record.epoch, "primary": replica.id,
                "address": address_of(self.record.topology, replica.id)}

    def _catch_up(self, primary: NodeLink, replica: NodeLink) -> None:
        """Until the replica's log reaches the primary's, probed after its lease was
        withdrawn (the primary writes nothing more)."""
        asked = time.monotonic()
        primary.wake.set()
        deadline = asked + CATCH_UP_TIMEOUT
        while time.monotonic() < deadline and not self.stop_event.is_set():
            if (primary.probe.at > asked and replica.probe.at > primary.probe.at
                    and replica.probe.offset >= primary.probe.offset):
                return
            replica.wake.set()
            time.sleep(TICK)
        raise ControllerError(f"replica {replica.address} did not reach primary "
                              f"{primary.address}'s log within {CATCH_UP_TIMEOUT:g} s")


def ask(etcd: Etcd, cluster: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """An operator's request to the cluster's leading controller, through etcd: put under
    requests/, its reply read from replies/ (ControllerError when none comes in time)."""
    token = os.urandom(8).hex()
    lease = etcd.grant(REQUEST_TTL)
    etcd.put(record.key(cluster, "requests/" + token), json.dumps(request).encode(), lease=lease)
    reply_key = record.key(cluster, "replies/" + token)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = etcd.get(reply_key)
        if found is not None:
            etcd.delete(reply_key)
            reply: dict[str, Any] = json.loads(found[0])
            if "error" in reply:
                raise ControllerError(reply["error"])
            return reply
        time.sleep(0.1)
    etcd.delete(record.key(cluster, "requests/" + token))
    raise ControllerError(f"no controller of cluster {cluster} answered within {timeout:g} s "
                          "(is one running?)")


__all__ = ["Controller", "ControllerError", "NodeLink", "Probe", "address_of", "ask",
           "record_lines"]
