"""tools/crashbench/faultfs.py: the power-loss models on real files (what `materialise`
produces), the per-kind triggers, the overlay's cost (fdatasync, rename and unlink read
nothing back), FaultSpec, and a round trip through the Engine under appendfsync=always.
"""

from __future__ import annotations

import errno
import itertools
import os
import random
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import RealFS
from streamkeep.tools.crashbench.faultfs import (
    BITROT,
    KINDS,
    MODEL_DESCRIPTIONS,
    MODELS,
    TAIL_BYTES,
    TAILS,
    FaultSpec,
    FaultSpecError,
    FaultyFS,
    PowerCut,
    TrackingFS,
    stop_threads,
)

DURABLE = b"D" * 100


def _setup(tmp_path: Path, writes: list[tuple[str, bytes]]) -> tuple[TrackingFS, Path]:
    """Files a and b durable with DURABLE (data and entries fsynced), then `writes` unsynced."""
    d = tmp_path / "db"
    d.mkdir()
    fs = TrackingFS()
    fds = {}
    for name in ("a", "b"):
        fds[name] = fs.open_append(str(d / name))
        fs.write(fds[name], DURABLE)
        fs.fdatasync(fds[name])
    fs.fsync_dir(str(d))
    for name, data in writes:
        fs.write(fds[name], data)
    return fs, d


_runs = itertools.count()


def _materialise(fs: TrackingFS, d: Path, model: str, seed: int) -> dict[str, bytes]:
    dst = d.with_name(f"{d.name}-{model}-{seed}-{next(_runs)}")
    fs.materialise(str(d), str(dst), random.Random(seed), model)
    return {p.name: p.read_bytes() for p in sorted(dst.iterdir())}


def test_models_are_listed_and_described() -> None:
    assert set(TAILS) <= set(MODELS)
    assert {"prefix-torn", "sector512", "sector4096", "nonatomic-rename"} <= set(MODELS)
    assert all(MODEL_DESCRIPTIONS[m] and "\n" not in MODEL_DESCRIPTIONS[m] for m in MODELS)


POWER_LOSS = tuple(m for m in MODELS if m != BITROT)


@pytest.mark.parametrize("model", POWER_LOSS)
def test_every_model_is_deterministic_and_keeps_durable_data(tmp_path: Path, model: str) -> None:
    fs, d = _setup(tmp_path, [("a", b"x" * 700), ("b", b"y" * 300), ("a", b"z" * 900)])
    for seed in range(8):
        first, second = _materialise(fs, d, model, seed), _materialise(fs, d, model, seed + 100)
        again = _materialise(fs, d, model, seed)
        assert again == first
        for files in (first, second):
            assert sorted(files) == ["a", "b"]
            assert all(v.startswith(DURABLE) for v in files.values())


def test_bitrot_flips_one_bit_of_fsynced_data_and_keeps_every_written_byte(
        tmp_path: Path) -> None:
    fs, d = _setup(tmp_path, [("a", b"x" * 700), ("b", b"y" * 300)])
    written = {"a": DURABLE + b"x" * 700, "b": DURABLE + b"y" * 300}
    near_the_end = 0
    for seed in range(40):
        dst = d.with_name(f"rot-{seed}")
        report = fs.materialise(str(d), str(dst), random.Random(seed), BITROT)
        files = {p.name: p.read_bytes() for p in dst.iterdir()}
        name, offset = report[BITROT].split(":")
        assert int(offset) < len(DURABLE)  # only bytes an fsync had covered
        for other in written:
            diff = [i for i, (x, y) in enumerate(zip(files[other], written[other],
                                                     strict=True)) if x != y]
            assert diff == ([int(offset)] if other == name else [])
            assert bin(files[other][int(offset)] ^ written[other][int(offset)]).count("1") \
                == (1 if other == name else 0)
        near_the_end += int(offset) >= len(DURABLE) - TAIL_BYTES
    assert near_the_end >= 20  # half at least: the tail of what was fsynced


def test_tails(tmp_path: Path) -> None:
    fs, d = _setup(tmp_path, [("a", b"x" * 500)])
    full = DURABLE + b"x" * 500
    assert _materialise(fs, d, "none", 0) == {"a": DURABLE, "b": DURABLE}
    assert _materialise(fs, d, "all", 0)["a"] == full
    for seed in range(5):
        partial = _materialise(fs, d, "partial", seed)["a"]
        assert full.startswith(partial) and len(partial) > len(DURABLE)
        zeros = _materialise(fs, d, "zeros", seed)["a"]
        assert zeros[100:] == bytes(len(zeros) - 100) and len(zeros) > 100
        assert len(_materialise(fs, d, "garbage", seed)["a"]) > 100


def _prefix_torn_ok(writes: list[tuple[str, bytes]], files: dict[str, bytes]) -> bool:
    """Some k: writes[:k-1] landed whole, writes[k-1] torn (short, zeros, garbage), no later."""
    for k in range(len(writes) + 1):
        expect = {"a": DURABLE, "b": DURABLE}
        for name, data in writes[: max(0, k - 1)]:
            expect[name] += data
        if k == 0:
            if files == expect:
                return True
            continue
        name, data = writes[k - 1]
        others = {n: v for n, v in files.items() if n != name}
        if others != {n: v for n, v in expect.items() if n != name}:
            continue
        got = files[name]
        base = expect[name]
        if not got.startswith(base):
            continue
        tail = got[len(base):]
        if data.startswith(tail) or len(tail) == len(data):  # short, or zeros/garbage
            return True
    return False


def test_prefix_torn_keeps_a_prefix_of_the_writes_across_files(tmp_path: Path) -> None:
    writes = [("a", b"1" * 300), ("b", b"2" * 200), ("a", b"3" * 400), ("b", b"4" * 100)]
    fs, d = _setup(tmp_path, writes)
    seen = set()
    for seed in range(60):
        files = _materialise(fs, d, "prefix-torn", seed)
        assert _prefix_torn_ok(writes, files), (seed, {k: len(v) for k, v in files.items()})
        seen.add(len(files["a"]) + len(files["b"]))
    assert len(seen) > 5  # different prefixes are reached


@pytest.mark.parametrize("sector", [512, 4096])
def test_sector_models_tear_one_sector(tmp_path: Path, sector: int) -> None:
    new = b"\xab" * 9000
    fs, d = _setup(tmp_path, [("a", new)])
    saw_zeros = False
    for seed in range(40):
        data = _materialise(fs, d, f"sector{sector}", seed)["a"]
        assert data.startswith(DURABLE) and len(data) <= len(DURABLE) + len(new)
        assert set(data[100:]) <= {0xAB, 0}
        end = len(data)
        # everything up to the last boundary before the torn sector is new bytes, intact
        cut = max(100, (end - 1) // sector * sector) if end > 100 else 100
        assert data[100:cut] == new[: cut - 100], seed
        assert end - cut <= sector
        saw_zeros |= 0 in data[cut:]
    assert saw_zeros


def test_unsynced_directory_entries_are_undone(tmp_path: Path) -> None:
    fs, d = _setup(tmp_path, [])
    fd = fs.open_append(str(d / "new"))  # created, never in a fsynced directory
    fs.write(fd, b"n")
    fs.fdatasync(fd)
    fs.rename(str(d / "b"), str(d / "c"))
    fs.unlink(str(d / "a"))
    for model in POWER_LOSS:
        files = _materialise(fs, d, model, 1)
        if model != "nonatomic-rename":
            assert files == {"a": DURABLE, "b": DURABLE}, model
    fs.fsync_dir(str(d))
    assert _materialise(fs, d, "none", 2) == {"c": DURABLE, "new": b"n"}


def test_nonatomic_rename_outcomes(tmp_path: Path) -> None:
    d = tmp_path / "db"
    d.mkdir()
    fs = TrackingFS()
    fd = fs.open_write_new(str(d / "m"))
    fs.write(fd, b"old")
    fs.fdatasync(fd)
    fs.fsync_dir(str(d))
    new = b"new contents of m"
    fd = fs.open_write_new(str(d / "m.tmp"))
    fs.write(fd, new)
    fs.rename(str(d / "m.tmp"), str(d / "m"))  # renamed before its data was synced
    fs.fdatasync(fd)
    outcomes = set()
    for seed in range(40):
        files = _materialise(fs, d, "nonatomic-rename", seed)
        assert list(files) == ["m"]
        m = files["m"]
        if m == b"old":
            outcomes.add("undone")
        elif m == new:
            outcomes.add("done")
        elif m == b"":
            outcomes.add("empty")
        else:
            assert new.startswith(m)
            outcomes.add("truncated")
    assert outcomes == {"undone", "done", "empty", "truncated"}
    fs.fsync_dir(str(d))  # once the directory is synced the rename is plain history
    assert _materialise(fs, d, "nonatomic-rename", 0) == {"m": new}
    # A file synced before its rename (what the engine does) keeps its data either way.
    fd = fs.open_write_new(str(d / "m.tmp"))
    fs.write(fd, b"newer")
    fs.fdatasync(fd)
    fs.rename(str(d / "m.tmp"), str(d / "m"))
    assert {_materialise(fs, d, "nonatomic-rename", seed)["m"] for seed in range(40)} == {
        new, b"newer"}


def test_a_rewrite_keeps_the_durable_bytes_copy_on_write(tmp_path: Path) -> None:
    fs, d = _setup(tmp_path, [])
    fd = fs.open_write_new(str(d / "a"))  # O_TRUNC of a durable file
    fs.write(fd, b"rewritten")
    fs.truncate(str(d / "b"), 10)
    assert fs.stats.overlay_bytes_read == 100 + 90  # exactly the durable bytes that changed
    for model in POWER_LOSS:
        assert _materialise(fs, d, model, 3) == {"a": DURABLE, "b": DURABLE}, model
    fs.fdatasync(fd)
    assert _materialise(fs, d, "none", 0)["a"] == b"rewritten"


def _script(fs: TrackingFS, d: Path) -> None:
    """Every kind of operation, several times."""
    for i in range(3):
        fd = fs.open_append(str(d / f"f{i}"))
        for _ in range(3):
            fs.write(fd, b"w" * 10)
            fs.fdatasync(fd)
        fs.close(fd)
        fs.rename(str(d / f"f{i}"), str(d / f"g{i}"))
        fs.fsync_dir(str(d))


@pytest.mark.parametrize("kind", KINDS)
def test_triggers_cut_at_the_nth_operation_of_a_kind(tmp_path: Path, kind: str) -> None:
    probe = TrackingFS()
    (tmp_path / "probe").mkdir()
    _script(probe, tmp_path / "probe")
    total = probe.stats.counts()[kind]
    assert total >= 3
    assert probe.stats.counts() == {"any": 27, "write": 9, "fsync": 9, "rename": 3,
                                    "dirfsync": 3}
    for n in range(1, total + 1):
        d = tmp_path / f"{kind}-{n}"
        d.mkdir()
        fs = TrackingFS(cut_at=n, cut_kind=kind, log_ops=True)
        with pytest.raises(PowerCut):
            _script(fs, d)
        assert fs.dead and fs.stats.count(kind) == n
        if kind != "any":
            word = {"write": "write", "fsync": "fdatasync", "rename": "rename",
                    "dirfsync": "fsync_dir"}[kind]
            assert fs.stats.history[-1].startswith(word + " ")
        with pytest.raises(PowerCut):
            fs.fsync_dir(str(d))  # and the power stays off
    with pytest.raises(FaultSpecError):
        TrackingFS(cut_at=1, cut_kind="mkdir")


def test_fdatasync_rename_and_unlink_read_nothing(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "db"
    d.mkdir()
    fs = TrackingFS()

    def no_reads(*_args: object) -> bytes:
        raise AssertionError("the overlay read a file back")

    monkeypatch.setattr(os, "pread", no_reads)
    monkeypatch.setattr(os, "read", no_reads)
    monkeypatch.setattr(RealFS, "read_file", no_reads)
    fd = fs.open_append(str(d / "seg"))
    for _ in range(500):
        fs.write(fd, b"r" * 1000)
        fs.fdatasync(fd)
    fs.fsync_dir(str(d))
    fs.rename(str(d / "seg"), str(d / "seg2"))
    fs.unlink(str(d / "seg2"))
    monkeypatch.undo()
    assert fs.stats.overlay_bytes_read == 0
    # the unlinked file is still there for the model, through the kept descriptor
    assert _materialise(fs, d, "none", 0) == {"seg": b"r" * 500_000}
    fs.fsync_dir(str(d))
    assert _materialise(fs, d, "none", 1) == {}


def _xadds(directory: Path, fs: TrackingFS, n: int) -> tuple[list, bool, Engine | None]:
    acked: list = []
    engine = None
    try:
        engine = Engine.open(str(directory), appendfsync="always",
                             aof_segment_max_bytes=600, fs=fs)
        for i in range(n):
            acked.append(engine.execute("XADD", "s", "*", "i", str(i)))
    except PowerCut:
        fs.abandon()
        stop_threads(engine)
        return acked, True, engine
    fs.abandon()
    stop_threads(engine)
    return acked, False, engine


def test_an_abandoned_engine_leaves_no_thread_behind(tmp_path: Path) -> None:
    """stop_threads ends the journal's threads and the expiry timer's: a bench of many crash
    points would otherwise keep one expiry thread per abandoned engine."""
    import threading

    before = {t.ident for t in threading.enumerate()}
    _acked, _cut, engine = _xadds(tmp_path / "d", TrackingFS(), 3)
    assert engine is not None and engine.expiry_timer is not None
    engine.expiry_timer.thread.join(10)
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == []


@pytest.mark.parametrize("kind", KINDS)
def test_engine_round_trip_keeps_every_acknowledged_entry(tmp_path: Path, kind: str) -> None:
    n = 40
    probe = TrackingFS()
    _xadds(tmp_path / "probe", probe, n)
    total = probe.stats.count(kind)
    assert total > 0, kind
    rng = random.Random(kind)
    for cut in sorted(rng.sample(range(1, total + 1), min(4, total))):
        fs = TrackingFS(cut_at=cut, cut_kind=kind)
        directory = tmp_path / f"{kind}-{cut}"
        acked, was_cut, _ = _xadds(directory, fs, n)
        assert was_cut
        for model in POWER_LOSS:
            dst = tmp_path / f"{kind}-{cut}-{model}"
            fs.materialise(str(directory), str(dst), rng, model)
            with Engine.open(str(dst)) as recovered:
                ids = [e[0] for e in recovered.execute("XRANGE", "s", "-", "+")]
                assert ids[: len(acked)] == acked, (kind, cut, model)
                assert len(ids) <= len(acked) + 1  # at most the command in flight
        fs.release()


def test_fault_spec() -> None:
    spec = FaultSpec.parse("ENOSPC:write+partial:3")
    assert spec == FaultSpec(errno=errno.ENOSPC, op="write", after=3, partial=True)
    assert FaultSpec.parse("eio:dirfsync").op == "dirfsync"
    assert FaultSpec.parse("EIO:fsync:0:manifest").match == "manifest"
    assert "ENOSPC" in spec.describe()
    for bad in ("EIO", "EWHAT:write", "EIO:mkdir", "EIO:write:x", "EIO:write+twice"):
        with pytest.raises(FaultSpecError):
            FaultSpec.parse(bad)
    fs = FaultyFS.from_spec(FaultSpec.parse("EIO:fsync:1"))
    assert (fs.fsync_errno, fs.fsync_after, fs.write_errno) == (errno.EIO, 1, None)


def test_faulty_fs_fails_after_n_calls(tmp_path: Path) -> None:
    fs = FaultyFS.from_spec(FaultSpec(errno=errno.ENOSPC, op="write", after=2, match="seg"))
    fd = fs.open_append(str(tmp_path / "seg-1"))
    fs.write(fd, b"a")
    fs.write(fd, b"b")
    with pytest.raises(OSError) as err:
        fs.write(fd, b"c")
    assert err.value.errno == errno.ENOSPC
    fs.clear()
    fs.write(fd, b"d")
    fs.close(fd)
    assert (tmp_path / "seg-1").read_bytes() == b"abd"
    fs = FaultyFS.from_spec(FaultSpec(errno=errno.EIO, op="dirfsync", after=1))
    fs.fsync_dir(str(tmp_path))
    with pytest.raises(OSError):
        fs.fsync_dir(str(tmp_path))
