"""The crash bench's checker on states made by a real in-memory Engine: the state of every
prefix is accepted where the policy allows it (and the in-flight operation, applied or not),
an acknowledged operation lost under always is `acked-lost`, under everysec only beyond the
bound, a state that is no prefix is `prefix` with a diagnosis naming what differs (changed
bytes, phantoms, entries back), consumer groups alone differing is `groups`, and after a
crash the lineage goes on from the recovered prefix."""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep.tools.crashbench.history import step
from streamkeep.tools.crashbench.invariants import Checker
from streamkeep.tools.crashbench.model import EngineTarget, Reference, read_state
from streamkeep.tools.crashbench.target import CommandFailed
from streamkeep.tools.crashbench.workload import Workload


def drive(checker: Checker, ops: int, seed: int = 3, start_at: float = 0.0) -> Workload:
    """Run `ops` operations on the checker's own model (a perfect target)."""
    from streamkeep import Engine

    target = EngineTarget(Engine())
    workload = Workload(seed)
    for i in range(ops):
        step(target, workload, checker, start_at + i * 0.01)
    return workload


def prefix_state(checker: Checker, j: int) -> tuple:
    return Reference.replayed([(op.argv, None) for op in checker.lineage[:j]]).state()


def test_the_full_state_is_accepted() -> None:
    checker = Checker("always")
    drive(checker, 300)
    verdict = checker.judge(checker.reference.state(), 10.0)
    assert verdict.prefix == 300 and not verdict.violations


def test_a_lost_acknowledged_operation_under_always() -> None:
    checker = Checker("always")
    drive(checker, 300)
    verdict = checker.judge(prefix_state(checker, 290), 3.0)
    assert verdict.prefix is not None and verdict.prefix < 300
    assert verdict.lost_acked >= 1
    assert [v.invariant for v in verdict.violations] == ["acked-lost"]


@pytest.mark.parametrize(("crash_at", "violated"), [(2.99 + 1.5, False), (2.99 + 2.5, True)])
def test_everysec_losses_within_the_bound(crash_at: float, violated: bool) -> None:
    checker = Checker("everysec", window_s=2.0)
    drive(checker, 300)  # op i acknowledged at i * 0.01 s
    verdict = checker.judge(prefix_state(checker, 295), crash_at)
    assert verdict.lost_acked >= 1
    assert bool(verdict.violations) == violated
    assert all(v.invariant == "loss-window" for v in verdict.violations)


def test_no_policy_accepts_any_prefix() -> None:
    checker = Checker("no")
    drive(checker, 200)
    assert not checker.judge(prefix_state(checker, 17), 100.0).violations


def test_the_in_flight_operation_applied_or_not() -> None:
    checker = Checker("always")
    workload = drive(checker, 150)
    argv = workload.next_argv()
    with_it = Reference.replayed([(op.argv, None) for op in checker.lineage] + [(argv, None)])
    assert checker.judge(with_it.state(), 5.0, in_flight=argv).prefix == 151
    assert checker.judge(checker.reference.state(), 5.0, in_flight=argv).prefix == 150


def _tampered(state: tuple, key_index: int, change: Any) -> tuple:
    key, entries, groups = state[key_index]
    out = list(state)
    out[key_index] = (key, change(entries), groups)
    return tuple(out)


def test_changed_bytes_and_phantoms_are_not_a_prefix() -> None:
    checker = Checker("always")
    drive(checker, 200)
    state = checker.reference.state()

    def flip(entries: tuple) -> tuple:
        (first_id, fields), *rest = entries
        return ((first_id, (*fields[:-1], fields[-1] + b"x")), *rest)

    verdict = checker.judge(_tampered(state, 0, flip), 5.0)
    assert [v.invariant for v in verdict.violations] == ["prefix"]
    assert "changed bytes" in verdict.violations[0].detail

    def phantom(entries: tuple) -> tuple:
        return (*entries, (b"9999999999999-0", (b"op", b"1", b"sum", b"0", b"data", b"")))

    verdict = checker.judge(_tampered(state, 1, phantom), 5.0)
    assert "no acknowledged or in-flight XADD wrote" in verdict.violations[0].detail \
        or "changed bytes" in verdict.violations[0].detail


def groups_moved_back(checker: Checker) -> tuple:
    """The model's state with its first group's last-delivered-id moved back to 0-1: the
    state of no prefix, its entries those of the last one."""
    state = list(checker.reference.state())
    key, entries, groups = state[0]
    name, _ldi, *rest = groups[0]
    state[0] = (key, entries, ((name, b"0-1", *rest), *groups[1:]))
    return tuple(state)


def test_groups_alone_differing() -> None:
    checker = Checker("always")
    drive(checker, 200)
    verdict = checker.judge(groups_moved_back(checker), 5.0)
    assert [v.invariant for v in verdict.violations] == ["groups"]
    assert "last-delivered-id" in verdict.violations[0].detail


def test_a_verdict_reads_the_whole_state_of_few_prefixes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Searching the lineage for the recovered state (a groups violation: no prefix matches)
    reads the whole state only of the prefixes whose streams are as long as the recovered
    ones: not of every prefix, which made a long round's verdict take minutes."""
    checker = Checker("always")
    drive(checker, 1500)
    state = groups_moved_back(checker)
    reads = []
    full_state = Reference.state
    monkeypatch.setattr(Reference, "state", lambda ref: reads.append(1) or full_state(ref))
    verdict = checker.judge(state, 5.0)
    assert [v.invariant for v in verdict.violations] == ["groups"]
    assert 0 < len(reads) < 1500 // 10, len(reads)


def test_entries_read_lost_after_an_applied_in_flight_read() -> None:
    """redis-server's AOF drops entries-read; when the in-flight XREADGROUP was applied too,
    the diagnosis compares with the state that includes it (its PEL), naming entries-read."""
    checker = Checker("always")
    drive(checker, 150)
    argv = [b"XREADGROUP", b"GROUP", b"g1", b"c1", b"COUNT", b"5", b"STREAMS",
            checker.reference.state()[0][0], b">"]
    with_it = list(Reference.replayed([(op.argv, None) for op in checker.lineage]
                                      + [(argv, None)]).state())
    key, entries, groups = with_it[0]
    assert checker.reference.state()[0][2] != groups  # the read delivered something
    name, ldi, entries_read, *rest = groups[0]
    lost = None if entries_read is not None else 7
    with_it[0] = (key, entries, ((name, ldi, lost, *rest), *groups[1:]))
    verdict = checker.judge(tuple(with_it), 5.0, in_flight=argv)
    assert [v.invariant for v in verdict.violations] == ["groups"]
    assert "entries-read" in verdict.violations[0].detail, verdict.violations[0].detail


def test_the_lineage_goes_on_from_the_recovered_prefix() -> None:
    checker = Checker("everysec")
    drive(checker, 200)
    verdict = checker.recovered(prefix_state(checker, 180), 2.5)
    assert verdict.prefix is not None and verdict.prefix <= 180
    assert len(checker.lineage) == verdict.prefix
    # the run goes on: the recovered state plus new operations is judged against the cut
    # lineage (no spurious loss of the operations cut away)
    assert not checker.judge(checker.reference.state(), 3.0).violations


def test_an_id_acknowledged_twice_is_reported() -> None:
    checker = Checker("everysec")
    drive(checker, 50)
    key, entry_id = next(iter(checker.ids))
    checker.acked(999, [b"XADD", key, b"*", b"op", b"999"], entry_id, 9.0)
    assert [v.invariant for v in checker.violations] == ["ids-reused"]


def test_read_state_of_an_engine_leaves_timestamps_out() -> None:
    from streamkeep import Engine

    engine = Engine()
    target = EngineTarget(engine)
    workload = Workload(5)
    for _ in range(60):
        argv = workload.next_argv()
        try:
            workload.observe(argv, target.execute(argv))
        except CommandFailed:
            workload.observe(argv, None)
    first = read_state(target)
    assert read_state(target) == first  # idle times moved on; the state did not
    assert any(groups for _key, _entries, groups in first)


def test_after_a_violation_the_lineage_is_rebuilt_from_the_recovered_state() -> None:
    checker = Checker("always")
    drive(checker, 300)
    state = list(checker.reference.state())
    key, entries, groups = state[0]
    name, ldi, _read, *rest = groups[0]
    state[0] = (key, entries, ((name, ldi, 1, *rest), *groups[1:]))  # entries-read changed
    verdict = checker.recovered(tuple(state), 5.0)
    assert [v.invariant for v in verdict.violations] == ["groups"]
    assert checker.reference.state() == tuple(state)  # the run goes on from what recovered
    assert not checker.judge(tuple(state), 6.0).violations
