"""A server's cluster mode: the node's topology made, kept in its data directory, and attached.

Owns `attach` (a server with cluster-enabled yes: the node's topology, from the data
directory's cluster-config-file or, the first time, a node alone with a fresh id, kept there at
once so the id survives a restart) and that file (the topology's text, engine.exec.cluster's
`render`), written whole to a new file, fsynced and renamed over the old one. A server without a data directory
makes a fresh id at every start. Must not touch: routing and replies (engine.exec.cluster and
engine.commands.cluster).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from streamkeep.engine.exec.cluster import (
    ClusterNode,
    Topology,
    Vouching,
    alone,
    new_id,
    parse,
    render,
)
from streamkeep.engine.services.cluster_relay import Relay

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState

TMP_SUFFIX: Final = ".tmp"


def attach(engine: EngineState, port: int, tls_port: int = 0) -> Topology:
    """Make `engine` a cluster node listening on `port`: its topology loaded from its data
    directory's cluster-config-file, or a node alone (every slot) made and kept there."""
    config = engine.config
    path = _nodes_path(engine)
    topology = None
    if path is not None and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            topology = parse(f.read(), path)
    if topology is None:
        myself = ClusterNode(new_id(), "", port, 0, new_id())
        topology = alone(myself)
    topology.listening(port, tls_port)
    topology.configure(config)
    if topology.managed_by:  # (a move's switch may have been committed while it was down)
        topology.restart_frozen = set(topology.myself.migrating)
    topology.slot_keys.rebuild(engine.keyspaces)
    topology.keep = lambda new: keep(engine, new)
    topology.relay = Relay(engine)
    topology.vouch = _vouching(engine)
    engine.cluster = topology
    if path is not None:
        save(engine, topology)
    follow(engine, topology, None)
    return topology


def keep(engine: EngineState, new: Topology) -> None:
    """A newer topology for the node (CLUSTER SETTOPOLOGY, checked): kept in the data
    directory first, then taken whole (the node's keys index, ports and settings carried
    over), then the node's replication made what it says (a replica follows its primary; a
    primary follows nobody)."""
    old = engine.cluster
    assert old is not None
    new.slot_keys = old.slot_keys
    new.listening(old.port, old.tls_port)
    new.configure(engine.config)
    new.keep = old.keep
    new.relay = old.relay
    new.vouch = old.vouch
    new.lease_until, new.revoked = old.lease_until, old.revoked
    _carry_moves(old, new)
    save(engine, new)
    engine.cluster = new
    follow(engine, new, old)


def _carry_moves(old: Topology, new: Topology) -> None:
    """A controller's moves that go on under `new`: the source's export while the slot is
    still its own and on the move to the same target (all of them), the target's imports while it still
    imports them from the same source. A topology from the controller says it knows where
    every slot is: a restarted node's frozen slots serve again (or have moved)."""
    me = new.myself
    export = old.export
    if export is not None and all(new.owners[slot] == me.id
                                  and me.migrating.get(slot) == export.target
                                  for slot in export.slots):
        new.export = export
    old_me = old.myself
    new.imports = {slot: session for slot, session in old.imports.items()
                   if slot in me.importing and me.importing[slot] == old_me.importing.get(slot)}


def _vouching(engine: EngineState) -> Vouching:
    """How a managed primary asks its replicas whether they still follow it: until when
    `needed` of them are known to (each ACK counts for `seconds`); 0 without replication."""

    def vouched_until(needed: int, seconds: float) -> float:
        replication = engine.replication
        if replication is None:
            return 0.0
        return replication.vouched_until(needed, seconds)

    return vouched_until


def detach(engine: EngineState) -> None:
    """The server stops: the links to the other nodes closed."""
    topology = engine.cluster
    if topology is not None and topology.relay is not None:
        topology.relay.close()


def follow(engine: EngineState, new: Topology, old: Topology | None) -> None:
    """The node's replication as `new` says: following its primary (streamkeep's replication,
    at the address the topology gives it), or none (promoted, if it followed one)."""
    replication = engine.replication
    if replication is None:
        return
    me = new.myself
    if me.primary is not None:
        primary = new.nodes[me.primary]
        replication.replicaof(primary.ip or "127.0.0.1", primary.port)
    elif old is not None and old.myself.primary is not None:
        replication.replicaof(None, 0)


def _nodes_path(engine: EngineState) -> str | None:
    datadir = engine.datadir
    if datadir is None:
        return None
    return os.path.join(datadir.path, str(engine.config["cluster-config-file"]))


def save(engine: EngineState, topology: Topology) -> None:
    """Keep `topology` in the data directory's cluster-config-file, durably: the whole text
    written to a new file and fsynced, then renamed over the old one."""
    path = _nodes_path(engine)
    datadir = engine.datadir
    if path is None or datadir is None:
        return
    fs = datadir.fs
    tmp = path + TMP_SUFFIX
    if fs.exists(tmp):
        fs.unlink(tmp)
    fd = fs.open_write_new(tmp)
    try:
        fs.write(fd, render(topology).encode())
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
    fs.rename(tmp, path)
    fs.fsync_dir(os.path.dirname(path))


__all__ = ["attach", "follow", "keep", "save"]
