"""The crash bench's checks: what a recovered target must hold, given the history.

Owns `Checker`. It follows one run: every acknowledged operation extends the *lineage* (the
operations the target's state is made of), applied to a `model.Reference` whose state hash is
kept after each. After a crash, the recovered state must be the reference's state after some
prefix j of the lineage, possibly plus the operation that was in flight (its outcome unknown):

- `acked-lost` (always): j covers every acknowledged operation;
- `loss-window` (everysec): every operation acknowledged more than `window` seconds before the
  crash survives; the lost ones' age is the measured loss window;
- `prefix`: the state is a prefix's at all: no phantoms, no duplicates, no holes, nothing
  deleted or trimmed back, no changed bytes (the diagnosis names which); for the types
  workload, every sorted set, hash (fields, values, TTLs), set and function library is the
  prefix's, so a command or function that wrote several keys or members is whole or absent;
  for the lists workload, every list holds the prefix's elements in the prefix's order;
- `jobs` (the lists workload): the jobs' own accounting, kept from the target's replies and
  not from the model: no job is stored twice (in two lists at once: a queue and processing) or
  with changed bytes, none that no acknowledged or in-flight push wrote, and, at the prefix
  found, every job pushed and not acknowledged done (LREM'd, popped) is in a queue or in
  processing, and none acknowledged done is back;
- `groups`: the entries match a prefix but the consumer groups (PEL, delivery counts,
  last-delivered-id, entries-read, consumers) do not;
- `ids-reused`: an `XADD *` never returns an ID acknowledged before for another operation;
- `recovery`: the target opens (unaided after damage to unsynced bytes) and recovering twice
  gives the same state (reported by the crash modes through `violation`);
- `replica`: a replica's state is a prefix of the primary's lineage;
- `bitrot` (the bit-rot model): a flipped bit in fsynced data is detected (recovery refuses,
  naming the damaged file) or changes nothing; an open after it must pass every check above;
- `refused-kept` (the I/O-error mode): a command answered with an error reply left no trace,
  neither in the state right after the reply nor after recovery (`refused`);
- `slot-owner` and `topology` (the cluster mode, whose rounds judge them: tools.crashbench.
  cluster): a node holds only keys of its slots, and a restarted node the topology it held.

After the check the lineage is cut back to j (or extended by the in-flight operation) and the
run goes on from the recovered state.
Must not touch: how targets are crashed or restarted (the crash modes), the workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamkeep.tools.crashbench.lists_workload import JOB_KEYS, job_delta, job_of
from streamkeep.tools.crashbench.model import (
    TAGS,
    Reference,
    State,
    entries_hash,
    explicit,
    lists_part,
    resolved,
    state_hash,
    stream_lengths,
    streams,
    types_part,
)
from streamkeep.tools.crashbench.types_workload import REL_MS
from streamkeep.tools.crashbench.workload import payload_ok

INVARIANTS = ("acked-lost", "loss-window", "prefix", "groups", "jobs", "ids-reused", "recovery",
              "replica", "bitrot", "refused-kept", "slot-owner", "topology")


@dataclass
class Violation:
    invariant: str
    detail: str


@dataclass
class Recovery:
    """One crash's verdict: the prefix found (None: none), what was lost."""

    prefix: int | None
    acked: int  # operations acknowledged before the crash (lineage length)
    lost_acked: int = 0  # acknowledged operations the recovered state does not hold
    loss_window_s: float = 0.0  # age at the crash of the oldest lost acknowledged operation
    violations: list[Violation] = field(default_factory=list)


@dataclass
class _Op:
    argv: list[bytes]  # as applied to the reference (XADD IDs explicit)
    acked_at: float | None  # seconds (the run's clock); None: applied as the in-flight op
    jobs: tuple = ((), ())  # the lists workload: the jobs it added and removed (job_delta)


class Checker:
    """Follows one run's history and checks each recovery (see the module docstring)."""

    def __init__(self, policy: str, window_s: float = 2.0, workload: str = "streams") -> None:
        self.policy = policy
        self.window_s = window_s
        self.workload = workload  # workload.WORKLOADS: which state the checks read
        self.reference = Reference(workload)
        self.lineage: list[_Op] = []
        # prefix length -> (state hash, entries-only hash), computed when first needed: hashing
        # the state after every operation would cost more than running the workload.
        self.hashes: dict[int, tuple[str, str]] = {}
        self.lengths: dict[int, tuple[int, ...]] = {}  # each prefix's stream lengths (_alike)
        self.ids: dict[tuple[bytes, bytes], int] = {}  # (key, ID) -> the XADD op that got it
        self.violations: list[Violation] = []
        # The lists workload's jobs ledger: the lineage index of the operation that pushed each
        # job and of the one that removed it for good, and how many jobs are live (pushed, not
        # removed) after each prefix.
        self.job_added: dict[bytes, int] = {}
        self.job_removed: dict[bytes, int] = {}
        self.live: list[int] = [0]

    # --- during a run ----------------------------------------------------------------------

    def acked(self, op: int, argv: Sequence[bytes], reply: Any, at: float) -> None:
        """Operation `op` was acknowledged (a reply, or an error reply) at time `at`."""
        if argv[0].upper() == b"XADD" and isinstance(reply, bytes):
            first = self.ids.setdefault((argv[1], reply), op)
            if first != op:
                self.violations.append(Violation(
                    "ids-reused", f"XADD of op {op} returned {reply.decode()}, the ID op "
                    f"{first} was acknowledged with before a crash"))
        self.reference.apply(argv, reply)
        self._append(_Op(explicit(argv, reply), at, self._delta(argv, reply)))

    # --- after a crash ---------------------------------------------------------------------

    def judge(self, state: State, crash_at: float, acked: int | None = None,
              in_flight: Sequence[bytes] | None = None, next_hash: str | None = None
              ) -> Recovery:
        """The verdict on a recovered `state` when the first `acked` operations of the lineage
        (default: all) were acknowledged before the crash at `crash_at`, and `in_flight` was
        the command whose outcome is unknown (`next_hash`: the state hash with it applied, when
        the caller knows it, as an exhaustive run does). Changes nothing."""
        verdict = self._judge_state(state, crash_at, acked, in_flight, next_hash)
        if self.workload == "lists":
            notes = self._jobs_verdict(state, verdict, in_flight)
            if notes:
                verdict.violations.append(Violation("jobs", "; ".join(notes)))
        return verdict

    def _judge_state(self, state: State, crash_at: float, acked: int | None,
                     in_flight: Sequence[bytes] | None, next_hash: str | None) -> Recovery:
        """`judge` but the jobs' accounting."""
        k = len(self.lineage) if acked is None else acked
        verdict = Recovery(None, k)
        got = state_hash(state)
        if self.hash_at(k) == got:
            verdict.prefix = k
            return verdict
        with_it = None
        if next_hash is None and in_flight is not None and k == len(self.lineage):
            with_it = self._with_in_flight(in_flight, state)
            next_hash = None if with_it is None else with_it[1]
        if next_hash is not None and next_hash == got:
            verdict.prefix = k + 1
            return verdict
        j = self.find(got, k, state)
        if j is None:
            entries = entries_hash(state)
            kind = ("groups" if any(self.hashes[i][1] == entries
                                    for i in self._alike(k, stream_lengths(state)))
                    or (with_it is not None and entries_hash(with_it[2]) == entries)
                    else "prefix")
            want = self._state_at(k)
            if with_it is not None and _but_entries_read(with_it[2]) == _but_entries_read(state):
                want = with_it[2]  # the in-flight op was applied; only entries-read differs
            verdict.violations.append(Violation(kind, self._diagnose(state, want)))
            return verdict
        verdict.prefix = j
        self._judge_loss(verdict, j, k, crash_at)
        return verdict

    def recovered(self, state: State, crash_at: float,
                  in_flight: Sequence[bytes] | None = None) -> Recovery:
        """`judge` a run's recovery (every lineage operation was acknowledged), record its
        violations, and continue the lineage from the recovered state."""
        k = len(self.lineage)
        verdict = self.judge(state, crash_at, None, in_flight)
        self.violations.extend(verdict.violations)
        if verdict.prefix is None:
            self._rebuild_from(state)
        elif verdict.prefix == k + 1:
            with_it = self._with_in_flight(in_flight or [], state)
            assert with_it is not None
            self._extend(with_it[0])
        elif verdict.prefix < k:
            self._cut(verdict.prefix)
        return verdict

    def replica_state(self, state: State, what: str) -> Violation | None:
        """A replica's state must be a prefix of the lineage (any j)."""
        if self.find(state_hash(state), len(self.lineage), state) is not None:
            return None
        want = self._state_at(len(self.lineage))
        v = Violation("replica", f"{what}: not the state of any prefix of the primary's "
                                 f"history ({self._diagnose(state, want)})")
        self.violations.append(v)
        return v

    def refused(self, state: State, argv: Sequence[bytes], what: str) -> Violation | None:
        """`argv` was answered with an error reply: `state` (the live one right after, or a
        recovered one) must be the lineage's, without it. `refused-kept` if it holds the
        refused command's change; any other difference is judged as a recovery is."""
        got = state_hash(state)
        k = len(self.lineage)
        if got == self.hash_at(k):
            return None
        with_it = self._with_in_flight(argv, state)
        if with_it is not None and with_it[1] == got:
            v = Violation("refused-kept", f"{what}: {b' '.join(argv[:2]).decode(errors='replace')}"
                                          f" ... was answered with an error, but its change "
                                          f"is in the state")
        else:
            verdict = self.judge(state, float(k))
            v = verdict.violations[0] if verdict.violations else Violation(
                "acked-lost", f"{what}: {verdict.lost_acked} acknowledged operation(s) missing")
        self.violations.append(v)
        return v

    def violation(self, invariant: str, detail: str) -> Violation:
        v = Violation(invariant, detail)
        self.violations.append(v)
        return v

    # --- the lists workload's jobs ------------------------------------------------------------

    def _jobs_verdict(self, state: State, verdict: Recovery,
                      in_flight: Sequence[bytes] | None) -> list[str]:
        """The jobs' accounting (`_job_notes`) at the prefix `verdict` found: with the in-flight
        command's jobs when that prefix includes it; with no prefix, at the acknowledged
        operations, the next (or in-flight) one's jobs allowed either way, and whether jobs
        are missing or back only under always (elsewhere acknowledged operations may go)."""
        n = len(self.lineage)
        j = verdict.prefix
        if j is not None and j <= n:
            return self._job_notes(state, j)
        if j is not None:  # the in-flight command applied
            with_it = self._with_in_flight(in_flight or [], state)
            return self._job_notes(state, n, with_it[0].jobs if with_it else ((), ()))
        k = verdict.acked
        if k < n:
            extra = self.lineage[k].jobs
        else:
            extra = _may(in_flight, self._state_at(k)) if in_flight else ((), ())
        return self._job_notes(state, k, extra, whole=self.policy == "always")

    def _job_notes(self, state: State, j: int, extra: tuple = ((), ()), whole: bool = True
                   ) -> list[str]:
        """What is wrong with the jobs in `state`'s queues and processing list, by the ledger
        after the lineage's first j operations (`extra`: jobs one more command may have added
        or removed): jobs stored twice or in two lists, changed bytes, phantoms; with `whole`,
        also jobs acknowledged done but back, and jobs in neither list that nothing
        acknowledged done."""
        part = lists_part(state)
        if part is None:
            return []
        notes: list[str] = []
        where: dict[bytes, list[bytes]] = {}
        for key, elements in part[1]:
            if key not in JOB_KEYS:
                continue
            bad = [value for value in elements if job_of(value) is None]
            if bad:
                notes.append(f"{key.decode()}: {len(bad)} element(s) that are no intact job "
                             f"(first {_show(bad[0])})")
            for value in elements:
                if job_of(value) is not None:
                    where.setdefault(value, []).append(key)
        both = [v for v, keys in where.items() if len(set(keys)) > 1]
        if both:
            notes.append(f"{len(both)} job(s) in two lists at once (first {_show(both[0])} in "
                         f"{', '.join(k.decode() for k in where[both[0]])})")
        twice = [v for v, keys in where.items() if len(keys) > len(set(keys))]
        if twice:
            notes.append(f"{len(twice)} job(s) stored twice in one list (first "
                         f"{_show(twice[0])} in {where[twice[0]][0].decode()})")
        may_add, may_remove = set(extra[0]), set(extra[1])
        phantom = [v for v in where if self.job_added.get(v, j) >= j and v not in may_add]
        if phantom:
            notes.append(f"{len(phantom)} job(s) no acknowledged or in-flight push wrote "
                         f"(first {_show(phantom[0])} in {where[phantom[0]][0].decode()})")
        if not whole:
            return notes
        back = [v for v in where if self.job_removed.get(v, j) < j]
        if back:
            notes.append(f"{len(back)} job(s) acknowledged done (LREM'd or popped) back in a "
                         f"list (first {_show(back[0])} in {where[back[0]][0].decode()})")
        live_present = sum(1 for v in where if self.job_added.get(v, j) < j
                           and self.job_removed.get(v, j) >= j)
        if live_present != self.live[j]:
            missing = [v for v, i in self.job_added.items() if i < j and v not in where
                       and self.job_removed.get(v, j) >= j and v not in may_remove]
            if missing:
                notes.append(f"{len(missing)} job(s) in neither a queue nor processing, never "
                             f"acknowledged done (first {_show(missing[0])}, pushed by op "
                             f"#{self.job_added[missing[0]]})")
        return notes

    # --- internals -------------------------------------------------------------------------

    def _judge_loss(self, verdict: Recovery, j: int, k: int, crash_at: float) -> None:
        lost = [op for op in self.lineage[j:k] if op.acked_at is not None]
        if not lost:
            return
        verdict.lost_acked = len(lost)
        verdict.loss_window_s = max(0.0, crash_at - min(op.acked_at or crash_at for op in lost))
        first = self.lineage[j]
        what = (f"{len(lost)} acknowledged operation(s) lost, from op #{j} "
                f"({b' '.join(first.argv[:3]).decode(errors='replace')} ...), acknowledged "
                f"{verdict.loss_window_s:.3f} s before the crash")
        if self.policy == "always":
            verdict.violations.append(Violation("acked-lost", what))
        elif self.policy == "everysec" and verdict.loss_window_s > self.window_s:
            verdict.violations.append(Violation(
                "loss-window", f"{what}: beyond the {self.window_s:g} s everysec bound"))

    def _with_in_flight(self, argv: Sequence[bytes], state: State
                        ) -> tuple[_Op, str, State] | None:
        """The lineage's state with the in-flight command applied (`model.resolved`: an XADD's
        ID, an SPOP's members, read off the recovered `state`): the op, the state's hash and
        the state; None if it cannot apply."""
        ref = Reference.replayed([(op.argv, None) for op in self.lineage], self.workload)
        applied = resolved(argv, ref.state(), state)
        if applied is None:
            return None
        reply = ref.apply(applied, None)
        with_it = ref.state()
        return _Op(applied, None, self._delta(applied, reply)), state_hash(with_it), with_it

    def hash_at(self, j: int) -> str:
        """The state hash after the lineage's first j operations."""
        if j not in self.hashes and j == len(self.lineage):  # the reference is there now
            state = self.reference.state()
            self.hashes[j] = (state_hash(state), entries_hash(state))
        if j not in self.hashes:
            self._compute_hashes(j, j)
        return self.hashes[j][0]

    def hash_all(self) -> None:
        """Compute every prefix's hash now (an exhaustive run judges many crash points
        against one lineage)."""
        self._compute_hashes(0, len(self.lineage))

    def find(self, got: str, k: int, state: State) -> int | None:
        """The longest prefix j <= k whose state hash is `got` (the hash of `state`), or
        None."""
        return next((i for i in reversed(self._alike(k, stream_lengths(state)))
                     if self.hashes[i][0] == got), None)

    def _alike(self, k: int, lengths: tuple[int, ...]) -> list[int]:
        """The prefixes j <= k whose streams hold `lengths` entries, their hashes computed:
        the only ones a state of those lengths can equal. Hashing every prefix's whole state
        would take time quadratic in the history (minutes for the tens of thousands of
        operations a busy round acknowledges); the lengths are read by XLEN."""
        alike = [i for i, n in self.lengths.items() if i <= k and n == lengths]
        if len(self.lengths) < k + 1:
            ref = Reference(self.workload)
            for i in range(k + 1):
                if i not in self.lengths:
                    self.lengths[i] = ref.stream_lengths()
                    if self.lengths[i] == lengths:
                        alike.append(i)
                if self.lengths[i] == lengths and i not in self.hashes:
                    state = ref.state()
                    self.hashes[i] = (state_hash(state), entries_hash(state))
                if i < k:
                    ref.apply(self.lineage[i].argv, None)
        missing = [i for i in alike if i not in self.hashes]
        if missing:
            self._compute_hashes(min(missing), max(missing), set(missing))
        return sorted(alike)

    def _compute_hashes(self, lo: int, hi: int, only: set[int] | None = None) -> None:
        ref = Reference(self.workload)
        for i in range(hi + 1):
            if i >= lo and i not in self.hashes and (only is None or i in only):
                state = ref.state()
                self.hashes[i] = (state_hash(state), entries_hash(state))
            if i < hi:
                ref.apply(self.lineage[i].argv, None)

    def _extend(self, op: _Op) -> None:
        self.reference.apply(op.argv, None)
        self._append(op)

    def _append(self, op: _Op) -> None:
        """`op` at the lineage's end, its jobs in the ledger."""
        i = len(self.lineage)
        self.lineage.append(op)
        live = self.live[-1]
        added, removed = op.jobs
        for job in added:
            if job not in self.job_added:
                self.job_added[job] = i
                live += 1
        for job in removed:
            if job in self.job_added and job not in self.job_removed:
                self.job_removed[job] = i
                live -= 1
        self.live.append(live)

    def _delta(self, argv: Sequence[bytes], reply: Any) -> tuple:
        return job_delta(argv, reply) if self.workload == "lists" else ((), ())

    def _cut(self, j: int) -> None:
        kept = self.lineage[:j]
        self.lineage = []
        self.job_added, self.job_removed, self.live = {}, {}, [0]
        for op in kept:
            self._append(op)
        self.hashes = {i: h for i, h in self.hashes.items() if i <= j}
        self.lengths = {i: n for i, n in self.lengths.items() if i <= j}
        self.reference = Reference.replayed([(op.argv, None) for op in self.lineage],
                                            self.workload)

    def _rebuild_from(self, state: State) -> None:
        """After a `prefix` or `groups` violation there is no lineage to continue: the run
        goes on from what was recovered, rebuilt by commands (entries with their IDs, groups
        at their last-delivered-id and entries-read, consumers, PEL entries with their
        delivery counts), so later checks judge only what happens after."""
        self.lineage.clear()
        self.job_added, self.job_removed, self.live = {}, {}, [0]
        self.reference = Reference(self.workload)
        self.hashes = {}
        self.lengths = {}
        for argv in _rebuild_commands(state):
            reply = self.reference.apply(argv, None)
            self._append(_Op(argv, None, self._delta(argv, reply)))

    def _state_at(self, k: int) -> State:
        """The reference state after the lineage's first k operations."""
        return (self.reference.state() if k == len(self.lineage) else
                Reference.replayed([(op.argv, None) for op in self.lineage[:k]],
                                   self.workload).state())

    def _diagnose(self, state: State, want: State) -> str:
        """What differs between `state` and the model's state `want`, by kind."""
        notes: list[str] = []
        ever = set(self.ids)
        notes += _types_diff(types_part(state), types_part(want))
        notes += _lists_diff(lists_part(state), lists_part(want))
        for (key, entries, groups), (_k, want_entries, want_groups) in zip(
                streams(state), streams(want), strict=True):
            have = dict(entries)
            expected = dict(want_entries)
            ops = [payload_ok(fields) for fields in have.values()]
            bad = [i for i, fields in have.items() if payload_ok(fields) is None]
            if bad:
                notes.append(f"{key.decode()}: {len(bad)} entr(ies) with changed bytes "
                             f"(first {bad[0].decode()})")
            dups = {op for op in ops if op is not None and ops.count(op) > 1}
            if dups:
                notes.append(f"{key.decode()}: op(s) {sorted(dups)[:5]} stored twice")
            phantom = [i for i in have if (key, i) not in ever and i not in expected]
            if phantom:
                notes.append(f"{key.decode()}: {len(phantom)} entr(ies) no acknowledged or "
                             f"in-flight XADD wrote (first {phantom[0].decode()})")
            back = [i for i in have if (key, i) in ever and i not in expected]
            if back:
                notes.append(f"{key.decode()}: {len(back)} deleted or trimmed entr(ies) back "
                             f"(first {back[0].decode()})")
            missing = [i for i in expected if i not in have]
            if missing:
                notes.append(f"{key.decode()}: {len(missing)} entr(ies) missing in the middle "
                             f"or end (first {missing[0].decode()})")
            if groups != want_groups:
                notes.append(f"{key.decode()}: consumer groups differ "
                             f"({_group_diff(groups, want_groups)})")
        return "; ".join(notes) or "the state differs from every prefix"


def _rebuild_commands(state: State) -> list[list[bytes]]:
    """Commands that build `state` from nothing. A PEL entry whose stream entry is gone
    (deleted or trimmed after delivery) is made by adding a placeholder entry, claiming it
    and deleting it again: XCLAIM only claims entries that exist."""
    out = _rebuild_types(types_part(state))
    out += [[b"RPUSH", key, *elements] for key, elements in
            (lists_part(state) or (None, ()))[1] if elements]
    for key, entries, groups in streams(state):
        present = dict(entries)
        gone = {entry_id for g in groups for entry_id, _c, _n in g[3]} - set(present)
        for entry_id in sorted(set(present) | gone, key=_id_order):
            out.append([b"XADD", key, entry_id, *present.get(entry_id, (b"op", b"-1"))])
        for name, ldi, entries_read, pending, consumers in groups:
            out.append([b"XGROUP", b"CREATE", key, name, ldi, b"MKSTREAM"])
            out.extend([b"XGROUP", b"CREATECONSUMER", key, name, c] for c, _n in consumers)
            out.extend([b"XCLAIM", key, name, consumer, b"0", entry_id, b"FORCE", b"RETRYCOUNT",
                        b"%d" % count, b"JUSTID"] for entry_id, consumer, count in pending)
            if entries_read is not None:
                out.append([b"XGROUP", b"SETID", key, name, ldi, b"ENTRIESREAD",
                            b"%d" % entries_read])
        out.extend([b"XDEL", key, entry_id] for entry_id in sorted(gone, key=_id_order))
    return out


def _but_entries_read(state: State) -> State:
    """`state` with every group's entries-read left out (redis-server's AOF does not keep it,
    so a diagnosis looks past it to find the state a recovery matches otherwise)."""
    return tuple((key, entries, tuple((g[0], g[1], g[3], g[4]) for g in groups))
                 for key, entries, groups in streams(state)) + tuple(
        part for part in state if part[0] in TAGS)


def _id_order(entry_id: bytes) -> tuple[int, int]:
    ms, _, seq = entry_id.partition(b"-")
    return int(ms), int(seq or 0)


def _group_diff(have: tuple, want: tuple) -> str:
    names = {g[0]: g for g in have}
    for g in want:
        h = names.get(g[0])
        if h is None:
            return f"group {g[0].decode()} missing"
        if h[1] != g[1]:
            return (f"group {g[0].decode()} last-delivered-id {h[1].decode()}, the model "
                    f"{g[1].decode()}")
        if h[3] != g[3]:
            return f"group {g[0].decode()} PEL of {len(h[3])}, the model {len(g[3])}"
        if h[2] != g[2]:
            return f"group {g[0].decode()} entries-read {h[2]}, the model {g[2]}"
        if h != g:
            return f"group {g[0].decode()} consumers {h[4]}, the model {g[4]}"
    return "extra groups"


def _show(value: bytes) -> str:
    """An element as a note names it: a job by its name, anything else by its first bytes."""
    name = job_of(value)
    return f"job {name.decode()}" if name is not None else repr(value[:40])


def _may(argv: Sequence[bytes], before: State) -> tuple:
    """The jobs the command `argv` (in flight) may have added and removed, given the model's
    state `before` it: a push's, an LREM's job, what a pop of COUNT would take."""
    name = argv[0].upper()
    if name in (b"LPUSH", b"RPUSH", b"LREM"):
        return job_delta(argv, 1)
    if name in (b"LPOP", b"RPOP") and argv[1] in JOB_KEYS:
        count = int(argv[2]) if len(argv) > 2 else 1
        elements = dict((lists_part(before) or (None, ()))[1]).get(argv[1], ())
        return (), tuple(elements[:count] if name == b"LPOP" else elements[-count:])
    return (), ()


def _lists_diff(have: tuple | None, want: tuple | None) -> list[str]:
    """What differs between two lists parts, per list: its length, the first index where it
    differs, the elements missing and extra."""
    if have is None or want is None or have == want:
        return []
    notes = []
    for (key, mine), (_k, theirs) in zip(have[1], want[1], strict=True):
        if mine == theirs:
            continue
        at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                  min(len(mine), len(theirs)))
        missing = len(set(theirs) - set(mine))
        extra = len(set(mine) - set(theirs))
        notes.append(f"list {key.decode()}: {len(mine)} element(s), the model {len(theirs)}; "
                     f"first difference at index {at}; {missing} missing, {extra} extra")
    return notes


def _rebuild_types(part: tuple | None) -> list[list[bytes]]:
    """Commands that build a types part from nothing (a relative TTL as the workload's
    HPEXPIRE sets one: the model keeps only its presence)."""
    if part is None:
        return []
    _tag, zsets, hashes, sets, libraries = part
    out = [[b"FUNCTION", b"LOAD", b"REPLACE", code] for _name, code in libraries]
    out += [[b"ZADD", key, *(x for member, score in pairs for x in (score, member))]
            for key, pairs in zsets if pairs]
    for key, fields in hashes:
        if fields:
            out.append([b"HSET", key, *(x for name, value, _ttl in fields for x in (name, value))])
        for name, _value, ttl in fields:
            if ttl is not None:
                how = [b"HPEXPIRE", key, b"%d" % REL_MS] if ttl == "rel" else [
                    b"HPEXPIREAT", key, b"%d" % ttl]
                out.append([*how, b"FIELDS", b"1", name])
    out += [[b"SADD", key, *members] for key, members in sets if members]
    return out


def _types_diff(have: tuple | None, want: tuple | None) -> list[str]:
    """What differs between two types parts, per key: members or fields missing, extra, or
    with another score, value or TTL; libraries."""
    if have is None or want is None or have == want:
        return []
    notes = []
    for what, mine, theirs in zip(("sorted set", "hash", "set"), have[1:4], want[1:4],
                                  strict=True):
        for (key, items), (_k, want_items) in zip(mine, theirs, strict=True):
            got, exp = _as_dict(items), _as_dict(want_items)
            missing = [m for m in exp if m not in got]
            extra = [m for m in got if m not in exp]
            changed = [m for m in exp if m in got and got[m] != exp[m]]
            for names, how in ((missing, "missing"), (extra, "extra"),
                               (changed, "changed (score, value or TTL)")):
                if names:
                    notes.append(f"{what} {key.decode()}: {len(names)} {how} (first "
                                 f"{names[0].decode(errors='replace')})")
    if have[4] != want[4]:
        notes.append(f"function libraries {[n.decode() for n, _c in have[4]]}, the model "
                     f"{[n.decode() for n, _c in want[4]]}")
    return notes


def _as_dict(items: tuple) -> dict[bytes, object]:
    """A sorted set's pairs, a hash's triples or a set's members, by member or field."""
    return {item[0]: item[1:] for item in items} if items and isinstance(items[0], tuple) \
        else dict.fromkeys(items)
