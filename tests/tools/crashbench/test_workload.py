"""The crash bench's workload: the same seed and replies give the same commands; every XADD
carries a checksum of its payload that a changed byte breaks; it covers every operation kind
the issue names, on groups it creates first."""

from __future__ import annotations

from streamkeep import Engine
from streamkeep.tools.crashbench.model import EngineTarget
from streamkeep.tools.crashbench.target import CommandFailed
from streamkeep.tools.crashbench.workload import GROUPS, Workload, payload_ok, payload_sum


def run(seed: int, ops: int) -> list[list[bytes]]:
    target = EngineTarget(Engine(clock=iter(range(1_700_000_000_000, 1 << 62)).__next__))
    workload = Workload(seed)
    out = []
    for _ in range(ops):
        argv = workload.next_argv()
        out.append(argv)
        try:
            workload.observe(argv, target.execute(argv))
        except CommandFailed:
            workload.observe(argv, None)
    return out


def test_deterministic_per_seed() -> None:
    assert run(7, 400) == run(7, 400)
    assert run(7, 400) != run(8, 400)


def test_every_kind_and_the_groups_first() -> None:
    argvs = run(1, 600)
    assert [a[:4] for a in argvs[:len(GROUPS)]] == [
        [b"XGROUP", b"CREATE", key, group] for key, group in GROUPS]
    names = {a[0] for a in argvs}
    assert names == {b"XGROUP", b"XADD", b"XREADGROUP", b"XACK", b"XCLAIM", b"XAUTOCLAIM",
                     b"XDEL", b"XTRIM"}
    assert any(b"MAXLEN" in a for a in argvs if a[0] == b"XADD")


def test_payload_checksums() -> None:
    fields = [b"op", b"12", b"sum", payload_sum(12, b"abcd"), b"data", b"abcd"]
    assert payload_ok(fields) == 12
    assert payload_ok([*fields[:5], b"abce"]) is None
    assert payload_ok([b"op", b"13", *fields[2:]]) is None
    assert payload_ok([b"op", b"-1"]) is None
