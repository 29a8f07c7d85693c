"""A cluster's record in etcd: its topology, the one copy every decision starts from.

Owns the keys a cluster has in etcd (`/streamkeep/<cluster>/topology`, `/leader`), the
record's bytes (JSON: the epoch, the cluster's timeout, the topology as nodes.conf lines, the
format engine.exec.cluster renders and parses, never another) and the two ways to change it:
`create` (only when the cluster has no record) and `commit` (only when the record is still the
one read: a compare-and-swap on its etcd revision, so two writers never both win). The epoch
of a committed topology is always the one before it plus one. Must not touch: the nodes (the
controller pushes what is committed here), sockets other than etcd's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.wire.errors import StreamkeepError

if TYPE_CHECKING:
    from streamkeep.engine.exec.cluster import Topology
    from streamkeep.tools.controller.etcd import Etcd

PREFIX: Final = "/streamkeep/"
MAX_RECORD_BYTES: Final = 16 << 20  # a 1,000-node topology is well under 1 MB


class RecordError(StreamkeepError):
    """The cluster's record is absent, unreadable, or changed under the caller."""


@dataclass
class Record:
    """The cluster's topology as etcd holds it, and the etcd revision it was read at (what a
    commit compares)."""

    topology: Topology
    revision: int

    @property
    def epoch(self) -> int:
        return self.topology.epoch


def key(cluster: str, name: str) -> str:
    """The etcd key of a cluster's `name` (topology, leader)."""
    return f"{PREFIX}{cluster}/{name}"


def encode(topology: Topology) -> bytes:
    """The record's bytes: the epoch and the nodes' lines (nodes.conf's, no vars line)."""
    from streamkeep.engine.exec.cluster import render

    lines = [line for line in render(topology).splitlines() if not line.startswith("vars ")]
    return json.dumps({"epoch": topology.epoch, "cluster": topology.managed_by,
                       "nodes": lines}).encode()


def decode(data: bytes, where: str) -> Topology:
    """A topology from a record's bytes (`where` names it in errors); RecordError if they are
    not a record."""
    from streamkeep.engine.exec.cluster import NodesFileError, parse

    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"{where}: {len(data)} bytes, more than a topology's record")
    try:
        fields: Any = json.loads(data)
        lines, epoch, cluster = fields["nodes"], fields["epoch"], fields["cluster"]
        if (not isinstance(lines, list) or not lines or not isinstance(epoch, int)
                or not isinstance(cluster, str)):
            raise TypeError("fields of the wrong type")
        first = str(lines[0]).split()[0]
        topology = parse("\n".join(map(str, lines)), where, myself_id=first)
    except (ValueError, KeyError, TypeError, IndexError) as err:
        raise RecordError(f"{where}: not a topology record ({err})") from None
    except NodesFileError as err:
        raise RecordError(str(err)) from None
    topology.epoch, topology.managed_by = epoch, cluster
    return topology


def load(etcd: Etcd, cluster: str) -> Record | None:
    """The cluster's record, or None when it has none yet."""
    name = key(cluster, "topology")
    found = etcd.get(name)
    if found is None:
        return None
    data, revision = found
    return Record(decode(data, f"{etcd.url} {name}"), revision)


def create(etcd: Etcd, cluster: str, topology: Topology) -> Record:
    """The cluster's first record; RecordError if it has one already."""
    topology.managed_by = cluster
    if not etcd.compare_and_put(key(cluster, "topology"), encode(topology), 0):
        raise RecordError(f"cluster {cluster} exists already in {etcd.url}")
    record = load(etcd, cluster)
    assert record is not None
    return record


def commit(etcd: Etcd, cluster: str, record: Record, topology: Topology) -> Record | None:
    """`topology` as the cluster's record at the epoch after `record`'s, if the record is still
    `record` (None otherwise: someone committed first; read it again)."""
    topology.epoch = record.epoch + 1
    topology.managed_by = cluster
    if not etcd.compare_and_put(key(cluster, "topology"), encode(topology), record.revision):
        return None
    return load(etcd, cluster)


__all__ = ["PREFIX", "Record", "RecordError", "commit", "create", "decode", "encode", "key",
           "load"]
