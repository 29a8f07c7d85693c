"""Segmented snapshots: which file holds each stream node, and when part files are merged.

Owns the plan a compaction writes a segmented snapshot by (snapshot.writer carries it out): a
node nothing changed since the previous snapshot stays in the part file that holds it and is
referenced by a run, not copied; a new or changed node goes into the compaction's new part
file; and the merge policy, which picks the part files whose live nodes are copied into the new
part so that they can be deleted:

- dead space: part files hold nodes no stream refers to any more (trimmed, deleted, changed
  since). While the dead bytes exceed `dead_fraction` of all the parts' bytes, the part with
  the most dead bytes per live byte is merged (copying its live nodes costs what it holds live;
  a part nothing refers to is dropped without copying anything);
- files per read: while more than `max_parts` part files would remain, the one with the fewest
  live bytes is merged (the small, recent parts: a merge costs what they hold).

Bytes are what the files take on disk; a part's live bytes are its size times the share of its
nodes still referenced (LMDB's pages hold nodes of a stream that are much alike in size).
Must not touch: files (the writer writes, the reader reads), the engine's structures beyond
reading a node's counters and home.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamkeep.snapshot.cold import SnapshotNodes

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Node, Stream
    from streamkeep.snapshot.snapshot_reader import Run

@dataclass(frozen=True, slots=True)
class MergePolicy:
    dead_fraction: float = 0.25
    max_parts: int = 8


DEFAULT_POLICY = MergePolicy()


@dataclass(slots=True)
class PartUse:
    """A part file the previous snapshot refers to, and what the new one would keep of it."""

    path: str
    size: int  # the file's bytes on disk
    total: int  # the nodes it holds
    nodes: int = 0  # of which the new snapshot refers to

    @property
    def live(self) -> int:
        return self.size * self.nodes // max(self.total, 1)

    @property
    def dead(self) -> int:
        return self.size - self.live


@dataclass(slots=True)
class StreamPlan:
    """Where each of a stream's nodes goes: `runs[i]` is the previous snapshot's run the node
    stays in, None for a node written to the new part."""

    stream: Stream
    number: int
    runs: list[Run | None] = field(default_factory=list)


def clean_run(stream: Stream, node: Node) -> Run | None:
    """The previous snapshot's run that holds `node` exactly as it is (None: it must be
    written: new, changed since, or held in an older format that is repacked)."""
    home = stream.home
    store = None if home is None else home.store
    if not isinstance(store, SnapshotNodes) or home is None:
        return None
    if not node.is_cold() and node.epoch >= store.clean_before:
        return None
    run = store.snapshot.locate(home.number, node.master)
    if run is None or not run.part.packed:
        return None
    return run


def part_nodes(run: Run) -> int:
    """How many nodes the file holding `run` holds (of every stream)."""
    if run.owner is not None and run.index >= 0:
        return run.owner.part_infos[run.index].nodes
    return sum(info.nodes for info in run.part.streams())  # a self-contained snapshot


def plan(streams: list[tuple[int, Stream]], size_of: Callable[[str], int] = os.path.getsize
         ) -> tuple[list[StreamPlan], dict[str, PartUse]]:
    """Each stream's nodes placed (streams as (number in the new snapshot, stream)); the part
    files referenced, with their bytes on disk (`size_of` a path)."""
    plans: list[StreamPlan] = []
    parts: dict[str, PartUse] = {}
    for number, stream in streams:
        p = StreamPlan(stream, number)
        for node in stream.nodes:
            run = clean_run(stream, node)
            p.runs.append(run)
            if run is not None:
                path = run.part.path
                use = parts.get(path)
                if use is None:
                    use = parts[path] = PartUse(path, size_of(path), part_nodes(run))
                use.nodes += 1
        plans.append(p)
    return plans, parts


def choose_merges(parts: dict[str, PartUse], new_bytes: int,
                  policy: MergePolicy = DEFAULT_POLICY) -> set[str]:
    """The part files whose live nodes are copied into the new part (see the module
    docstring). `new_bytes`: what the new part holds before any merge."""
    kept = dict(parts)
    merged: set[str] = set()

    def dead() -> int:
        return sum(use.dead for use in kept.values())

    def total() -> int:
        return new_bytes + sum(use.live for use in merged_uses()) + sum(
            use.size for use in kept.values())

    def merged_uses() -> list[PartUse]:
        return [parts[path] for path in merged]

    while kept and dead() > policy.dead_fraction * total():
        worst = max(kept.values(), key=lambda u: (u.dead / max(u.live, 1), u.path))
        merged.add(worst.path)
        del kept[worst.path]
    while len(kept) + 1 > policy.max_parts:
        smallest = min(kept.values(), key=lambda u: (u.live, u.path))
        merged.add(smallest.path)
        del kept[smallest.path]
    return merged


__all__ = ["DEFAULT_POLICY", "MergePolicy", "PartUse", "StreamPlan", "choose_merges", "clean_run",
           "part_nodes", "plan"]
