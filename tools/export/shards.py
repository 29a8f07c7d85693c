"""The shards a cluster export reads: one data directory per shard, and the node it is.

Owns `Shard` (a node's id, its address when known, its role and slots, the data directory
read) and finding a cluster's shards: `from_cluster(HOST:PORT)` asks the node for the topology
and each primary for its data directory (tools.cluster.primaries: CONFIG GET dir), then checks
that the directory is readable here and is that node's (its cluster-config-file names the same
node as itself: the path a node gives is a path on its own machine); `from_directories(DIRS)`
takes cluster nodes' data directories as given, each naming its node in its `nodes.conf`, and
refuses two of one shard (its keys would be exported twice). Replicas are never chosen by
`from_cluster` (a primary's data is exported once); a replica's directory given to
`from_directories` stands for its shard. Must not touch: the data directories (their
cluster-config-file is read, nothing else), the nodes' data, Spark.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamkeep.tools.export.pin import ExportError, check_exists

NODES_FILE = "nodes.conf"  # cluster-config-file's default: the name the directory form reads


class NotAShard(ExportError):
    """A directory given is no cluster node's data directory, or repeats a shard."""


class NodeProblem(ExportError):
    """A node cannot be reached, is no cluster node, or its data directory is not readable
    where the export runs."""


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard as the export reads it: the node whose data directory is read (`node`, its
    id: the rows' node column), where it listens (`address`, "" when only its directory was
    given), whether it is its shard's primary, the slots its topology gives the shard, and the
    directory."""

    node: str
    address: str
    role: str  # primary or replica
    slots: tuple[tuple[int, int], ...]
    directory: str

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "address": self.address or None, "role": self.role,
                "slots": [list(r) for r in self.slots], "directory": self.directory}


def from_cluster(address: str) -> list[Shard]:
    """Every primary of the cluster the node at `address` belongs to, with its data directory
    as read from here (NodeProblem: a node unreachable, no cluster node, a directory not
    readable here or holding another node's files)."""
    from streamkeep.tools.cluster import NodeError, PrimaryError, primaries

    try:
        heads = primaries(address)
    except PrimaryError as err:  # (no replica is guessed to be up to date)
        raise NodeProblem(f"{err}: export the shards from their directories instead (--shard "
                          "DIR for each; a replica's will do)") from None
    except NodeError as err:
        raise NodeProblem(str(err)) from None
    shards = []
    for head in heads:
        where = f"primary {head.id} at {head.address}"
        directory = head.directory
        if not os.path.isdir(directory):
            raise NodeProblem(f"{where} keeps its data in {directory}, which is not a "
                              "directory here: the export reads each primary's directory, so "
                              "run it where they are readable (or give them with --shard)")
        try:
            myself, topology = _myself(os.path.join(directory, head.config_file))
        except NotAShard as err:
            raise NodeProblem(f"{where}: {err}") from None
        if myself.id != head.id:
            raise NodeProblem(f"{where} keeps its data in {directory}, which here holds node "
                              f"{myself.id}'s files: run the export where the nodes' "
                              "directories are (or give them with --shard)")
        shards.append(Shard(head.id, head.address, "primary", head.slots,
                            os.path.abspath(directory)))
    return shards


def from_directories(directories: Sequence[str]) -> list[Shard]:
    """The shards of cluster nodes' data directories given (NotAShard: one is not a
    directory, no cluster node's data directory, or of a shard given already)."""
    from streamkeep.tools.safe_output import is_data_directory

    shards: list[Shard] = []
    seen: dict[str, str] = {}  # a shard's id -> the directory that stands for it
    for directory in directories:
        check_exists(directory)
        if not is_data_directory(directory):
            raise NotAShard(f"{directory}: not a streamkeep data directory")
        myself, topology = _myself(os.path.join(directory, NODES_FILE))
        again = next((s.directory for s in shards if s.node == myself.id), None)
        if again is not None:
            raise NotAShard(f"{directory}: node {myself.id}'s directory, given already "
                            f"({again})")
        shard_id = myself.shard_id
        if shard_id in seen:
            raise NotAShard(f"{directory} and {seen[shard_id]} hold the same shard ({shard_id}): "
                            "give one directory per shard")
        seen[shard_id] = directory
        head = myself.primary or myself.id
        address = f"{myself.ip}:{myself.port}" if myself.ip else ""
        shards.append(Shard(myself.id, address, "replica" if myself.primary else "primary",
                            tuple(topology.slot_ranges(head)), os.path.abspath(directory)))
    return shards


def _myself(path: str) -> tuple[Any, Any]:
    """The node a cluster-config-file names as itself, and the topology it holds."""
    from streamkeep.engine.exec.cluster import NodesFileError, parse

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise NotAShard(f"{os.path.dirname(path) or '.'}: no {os.path.basename(path)}: not a "
                        "cluster node's data directory") from None
    except (OSError, UnicodeDecodeError) as err:
        raise NotAShard(f"{path}: cannot be read ({err})") from None
    try:
        topology = parse(text, path)
    except NodesFileError as err:
        raise NotAShard(str(err)) from None
    return topology.myself, topology
