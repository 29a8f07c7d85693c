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
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from streamkeep.snapshot.cold import SnapshotNodes

if TYPE_CHECKING:
    from streamkeep.engine.model.stream import Node, Stream
    from streamkeep.snapshot.reader import Run

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


@dataclass(frozen=True, slots=True)
class Span:
    """Nodes `start` to `end` (exclusive) of a stream, in one place: consecutive nodes of
    `run`'s file, none missing between them, each exactly as that file holds it; or, with
    `run` None, nodes the new part file gets."""

    start: int
    end: int
    run: Run | None


@dataclass(slots=True)
class StreamPlan:
    """Where a stream's nodes go, span by span, in node order."""

    stream: Stream
    number: int
    spans: list[Span] = field(default_factory=list)

    def written(self) -> Iterator[Node]:
        """The nodes the new part file gets."""
        nodes = self.stream.nodes
        for span in self.spans:
            if span.run is None:
                yield from nodes[span.start:span.end]

    def merged(self, paths: set[str]) -> None:
        """The nodes of the part files in `paths` are written to the new part instead."""
        if paths:
            self.spans = [Span(s.start, s.end, None)
                          if s.run is not None and s.run.part.path in paths else s
                          for s in self.spans]


def part_nodes(run: Run) -> int:
    """How many nodes the file holding `run` holds (of every stream)."""
    if run.owner is not None and run.index >= 0:
        return run.owner.part_infos[run.index].nodes
    return sum(info.nodes for info in run.part.streams())  # a self-contained snapshot


def plan_stream(stream: Stream, number: int) -> StreamPlan:
    """The stream's spans (see Span): its nodes within each of the previous snapshot's runs
    that nothing changed stay there, in as few spans as the nodes removed from the run allow;
    the others are written. The work is a pass over the nodes' masters and counters, never a
    read of the file, unless a node was removed from the middle of a run (the run's masters
    are then read from its file's keys)."""
    p = StreamPlan(stream, number)
    nodes = stream.nodes
    home = stream.home
    store = None if home is None else home.store
    if not isinstance(store, SnapshotNodes) or home is None:
        if nodes:
            p.spans.append(Span(0, len(nodes), None))
        return p
    masters = [node.master for node in nodes]
    clean_before = store.clean_before
    pos = 0
    for run in store.snapshot.runs(home.number):
        i = bisect_left(masters, run.first, pos)
        j = bisect_right(masters, run.last, i)
        if i > pos:
            p.spans.append(Span(pos, i, None))
        if i < j:
            _place(p, nodes, masters, run, i, j, clean_before)
        pos = j
    if pos < len(nodes):
        p.spans.append(Span(pos, len(nodes), None))
    return p


def _place(p: StreamPlan, nodes: list[Node], masters: list[int], run: Run, i: int, j: int,
           clean_before: int) -> None:
    """Spans for nodes i to j, whose masters are within `run`."""
    if not run.part.packed:  # an older format: repacked into the new part
        p.spans.append(Span(i, j, None))
        return
    place: dict[int, int] | None = None
    if run.nodes != j - i:  # nodes removed from the run: where each of the others is in it
        place = {m: k for k, m in enumerate(run.part.run_masters(run))}
    start, clean = i, None
    for k in range(i, j):
        node = nodes[k]
        now = node.is_cold() or node.epoch < clean_before
        if k > start and (now != clean or (now and place is not None
                                          and place[masters[k]] != place[masters[k - 1]] + 1)):
            p.spans.append(Span(start, k, run if clean else None))
            start = k
        clean = now
    p.spans.append(Span(start, j, run if clean else None))


def plan(streams: list[tuple[int, Stream]], size_of: Callable[[str], int] = os.path.getsize
         ) -> tuple[list[StreamPlan], dict[str, PartUse]]:
    """Each stream's nodes placed (streams as (number in the new snapshot, stream)); the part
    files referenced, with their bytes on disk (`size_of` a path)."""
    plans: list[StreamPlan] = []
    parts: dict[str, PartUse] = {}
    for number, stream in streams:
        p = plan_stream(stream, number)
        for span in p.spans:
            run = span.run
            if run is not None:
                use = parts.get(run.part.path)
                if use is None:
                    use = parts[run.part.path] = PartUse(run.part.path, size_of(run.part.path),
                                                         part_nodes(run))
                use.nodes += span.end - span.start
        plans.append(p)
    return plans, parts


def choose_merges(parts: dict[str, PartUse], new_bytes: int,
                  policy: MergePolicy = DEFAULT_POLICY) -> set[str]:
    """The part files whose live nodes are copied into the new part (see the module
    docstring). `new_bytes`: what the new part holds before any merge."""
    kept = dict(parts)
    merged: set[str] = set()
    dead = sum(use.dead for use in kept.values())
    total = new_bytes + sum(use.size for use in kept.values())
    while kept and dead > policy.dead_fraction * total:
        worst = max(kept.values(), key=lambda u: (u.dead / max(u.live, 1), u.path))
        merged.add(worst.path)
        del kept[worst.path]
        dead -= worst.dead
        total -= worst.dead  # its live bytes move into the new part
    while len(kept) + 1 > policy.max_parts:
        smallest = min(kept.values(), key=lambda u: (u.live, u.path))
        merged.add(smallest.path)
        del kept[smallest.path]
    return merged


__all__ = ["DEFAULT_POLICY", "MergePolicy", "PartUse", "Span", "StreamPlan", "choose_merges",
           "part_nodes", "plan", "plan_stream"]
