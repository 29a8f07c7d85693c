"""The crash bench's seeded workload on lists: the reliable queue of Celery, RQ and taskiq.

Owns which commands the `lists` workload runs and with which arguments, the keys the model reads
its state by, and what a job looks like. `ListsWorkload(seed)` has `workload.Workload`'s
interface (`next_argv`, `observe`, `index`). A producer pushes jobs to two queues (LPUSH of one
to three jobs, at times an urgent RPUSH to the consumer's end); a consumer moves them to the
processing list (BLMOVE with a short timeout, LMOVE, RPOPLPUSH) and acknowledges each with an
LREM from it; a reaper moves the oldest job in processing back to a queue (as a worker lost
mid-job is recovered); a batch consumer takes jobs outright (LPOP / RPOP with COUNT). Beside the
queues, a log of finished jobs is written by LPUSH and kept short by LTRIM, with LSET and LINSERT
on it: the other list writes, outside the jobs' accounting.

Every job is unique: its operation and its place in the push (`job:<op>.<k>:<sum>:<data>`, the
checksum of `workload.payload_sum`), so a job stored twice, in two lists, or with changed bytes
is recognisable (`job_of`). What the consumer holds it learns from the moves' replies (a job the
model lost, or that a lost reply moved, is acknowledged by an LREM that removes nothing, or
comes back by the reaper); with the same seed and the same replies it issues the same commands.
Must not touch: how commands reach a target (history), what is checked (invariants).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamkeep.tools.crashbench.workload import payload_sum

QUEUES = (b"cb:l:q0", b"cb:l:q1")
PROCESSING = b"cb:l:processing"
DONE = b"cb:l:done"  # the log of finished jobs: not part of the jobs' accounting
JOB_KEYS = (*QUEUES, PROCESSING)  # where a job may be: pushed, not yet acknowledged
LIST_KEYS = (*JOB_KEYS, DONE)
BLOCK_S = b"0.01"  # BLMOVE's timeout: an empty queue costs the consumer 10 ms
BACKLOG = 60  # more jobs waiting than this (as the pushes' replies tell): consume, not push
LOG_KEPT = (4, 16)  # LTRIM keeps the log's first n entries, n in this range

# Relative weights of the operation kinds.
MIX = (("push", 20), ("push_urgent", 2), ("blmove", 16), ("lmove", 9), ("rpoplpush", 8),
       ("ack", 28), ("requeue", 3), ("pop", 4), ("log", 6), ("ltrim", 3), ("lset", 2),
       ("linsert", 2))


def job(op: int, k: int, data: bytes) -> bytes:
    """The `k`th job operation `op` pushes, carrying `data`."""
    name = b"%d.%d" % (op, k)
    return b"job:%s:%s:%s" % (name, payload_sum(op, name + b":" + data), data)


def job_of(value: bytes) -> bytes | None:
    """A job's name (`<op>.<k>`) when `value` is an intact job, else None."""
    parts = value.split(b":")
    if len(parts) != 4 or parts[0] != b"job":
        return None
    op, _dot, k = parts[1].partition(b".")
    if not (op.isdigit() and k.isdigit()):
        return None
    return parts[1] if payload_sum(int(op), parts[1] + b":" + parts[3]) == parts[2] else None


def job_delta(argv: Sequence[bytes], reply: Any) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
    """The jobs an operation with this `reply` added to the queues and removed from them for
    good (an acknowledgement, a batch pop). Moves between queues and processing change
    neither; an error reply (an exception) does nothing."""
    if isinstance(reply, Exception) or argv[1] not in JOB_KEYS:
        return (), ()
    name = argv[0].upper()
    if name in (b"LPUSH", b"RPUSH") and reply is not None:
        return tuple(argv[2:]), ()
    if name == b"LREM" and isinstance(reply, int) and reply > 0:
        return (), (argv[3],)
    if name in (b"LPOP", b"RPOP") and reply:
        return (), ((reply,) if isinstance(reply, bytes) else tuple(reply))
    return (), ()


@dataclass
class ListsWorkload:
    """The command stream of one seed (see the module docstring)."""

    seed: int
    index: int = 0  # the next operation's number
    rng: random.Random = field(init=False)
    holding: list[bytes] = field(default_factory=list)  # jobs moved to processing, oldest first
    finished: list[bytes] = field(default_factory=list)  # recently acknowledged job names
    logged: list[bytes] = field(default_factory=list)  # recent values written to the log
    backlog: dict[bytes, int] = field(default_factory=dict)  # a queue's length, as last told

    def __post_init__(self) -> None:
        self.rng = random.Random(f"crashbench-lists:{self.seed}")
        self._kinds = [k for k, _w in MIX]
        self._weights = [w for _k, w in MIX]

    def next_argv(self) -> list[bytes]:
        """The next operation's command (its number is `index`; `observe` advances it)."""
        kind = self.rng.choices(self._kinds, self._weights)[0]
        if kind.startswith("push") and sum(self.backlog.values()) > BACKLOG:
            kind = "lmove"
        if kind == "ack" and not self.holding:
            kind = "blmove"
        return getattr(self, f"_{kind}")()

    def observe(self, argv: Sequence[bytes], reply: Any) -> None:
        """Learn from operation `index`'s reply (None when it failed or its outcome is
        unknown): the queues' lengths, the jobs moved to processing or back, the jobs
        acknowledged; then move on to the next operation."""
        name = argv[0].upper()
        if name in (b"LPUSH", b"RPUSH") and isinstance(reply, int) and argv[1] in QUEUES:
            self.backlog[argv[1]] = reply
        elif name in (b"BLMOVE", b"LMOVE", b"RPOPLPUSH") and isinstance(reply, bytes):
            if argv[2] == PROCESSING:
                self.holding.append(reply)
                self.backlog[argv[1]] = max(0, self.backlog.get(argv[1], 0) - 1)
            elif reply in self.holding:  # the reaper's
                self.holding.remove(reply)
        elif name == b"LREM" and argv[1] == PROCESSING:
            if argv[3] in self.holding:
                self.holding.remove(argv[3])
            if reply:
                self.finished = [*self.finished[-19:], argv[3].split(b":")[1]]
        elif name in (b"LPOP", b"RPOP") and isinstance(reply, list):
            self.backlog[argv[1]] = max(0, self.backlog.get(argv[1], 0) - len(reply))
        elif name in (b"LPUSH", b"LINSERT", b"LSET") and argv[1] == DONE and reply is not None:
            self.logged = [*self.logged[-19:], argv[-1]]
        self.index += 1

    # --- the producer ------------------------------------------------------------------------

    def _jobs(self, most: int) -> list[bytes]:
        return [job(self.index, k, self.rng.randbytes(self.rng.randint(0, 16)).hex().encode())
                for k in range(self.rng.randint(1, most))]

    def _queue(self) -> bytes:
        return QUEUES[0] if self.rng.random() < 0.7 else QUEUES[1]

    def _push(self) -> list[bytes]:
        return [b"LPUSH", self._queue(), *self._jobs(3)]

    def _push_urgent(self) -> list[bytes]:
        return [b"RPUSH", self._queue(), *self._jobs(1)]

    # --- the consumer ------------------------------------------------------------------------

    def _blmove(self) -> list[bytes]:
        return [b"BLMOVE", self._queue(), PROCESSING, b"RIGHT", b"LEFT", BLOCK_S]

    def _lmove(self) -> list[bytes]:
        return [b"LMOVE", self._queue(), PROCESSING, b"RIGHT", b"LEFT"]

    def _rpoplpush(self) -> list[bytes]:
        return [b"RPOPLPUSH", self._queue(), PROCESSING]

    def _ack(self) -> list[bytes]:
        # Mostly the oldest job held (work finishes about in order), at times another one.
        held = self.holding[0] if self.rng.random() < 0.6 else self.rng.choice(self.holding)
        return [b"LREM", PROCESSING, self.rng.choice((b"1", b"1", b"-1", b"0")), held]

    def _requeue(self) -> list[bytes]:
        if self.rng.random() < 0.5:
            return [b"RPOPLPUSH", PROCESSING, self._queue()]
        return [b"LMOVE", PROCESSING, self._queue(), b"RIGHT", b"RIGHT"]

    def _pop(self) -> list[bytes]:
        return [self.rng.choice((b"LPOP", b"RPOP")), self._queue(),
                b"%d" % self.rng.randint(1, 3)]

    # --- the log of finished jobs --------------------------------------------------------------

    def _log(self) -> list[bytes]:
        name = self.rng.choice(self.finished) if self.finished else b"none"
        return [b"LPUSH", DONE, b"done:%s:%d" % (name, self.index)]

    def _ltrim(self) -> list[bytes]:
        return [b"LTRIM", DONE, b"0", b"%d" % (self.rng.randint(*LOG_KEPT) - 1)]

    def _lset(self) -> list[bytes]:
        # An index past the end at times: ERR index out of range (or no such key), acknowledged.
        return [b"LSET", DONE, b"%d" % self.rng.randint(-4, 8), b"set:%d" % self.index]

    def _linsert(self) -> list[bytes]:
        pivot = self.rng.choice(self.logged) if self.logged else b"none"
        return [b"LINSERT", DONE, self.rng.choice((b"BEFORE", b"AFTER")), pivot,
                b"ins:%d" % self.index]
