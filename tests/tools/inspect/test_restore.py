"""`streamkeep restore` round trips: the restored directory opens with exactly the digest an
in-memory engine had right after the chosen record (by LSN and by time, with and without a
snapshot, at segment boundaries), the source directory is untouched, and the impossible cases
(before the snapshot, past the log's end, damage before the point) and usage errors."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.aof_workload import FakeClock, run
from tests.support.datadir import fingerprint, open_dir
from tests.support.inspect_util import (
    Written,
    cli,
    flip_byte,
    manifest,
    record_offsets,
    segments,
    verify_json,
    write_dir,
)


@pytest.fixture(scope="module")
def snapshotted(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_dir(tmp_path_factory.mktemp("restore") / "data", commands=400,
                     compact_after=250)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return write_dir(tmp_path_factory.mktemp("restore") / "data", commands=300)


def opened(path: Path) -> tuple[str, int]:
    with Engine.open(str(path), auto_aof_rewrite_percentage=0) as engine:
        return engine.digest(), engine.journal.lsn  # type: ignore[union-attr]


def boundaries(written: Written) -> list[int]:
    """The last LSN of each segment but the last."""
    return [s["first_lsn"] - 1 for s in manifest(written.path)["segments"][1:]]


def test_to_lsn_round_trips_with_snapshot(snapshotted: Written, tmp_path: Path) -> None:
    before = fingerprint(snapshotted.path)
    snap_lsn = manifest(snapshotted.path)["snapshot"]["lsn"]
    points = sorted({snap_lsn, snap_lsn + 1, (snap_lsn + snapshotted.lsn) // 2,
                     boundaries(snapshotted)[0], boundaries(snapshotted)[0] + 1,
                     snapshotted.lsn})
    for lsn in points:
        out = tmp_path / f"at-{lsn}"
        code, stdout, err = cli("restore", str(snapshotted.path), "--to-lsn", str(lsn),
                                "--out", str(out))
        assert code == 0, err
        assert f"after LSN {lsn}" in stdout
        assert verify_json(out)[0] == 0
        assert opened(out) == (snapshotted.digest_at(lsn), lsn), lsn
        assert manifest(out)["repl_id"] != manifest(snapshotted.path)["repl_id"]
    assert fingerprint(snapshotted.path) == before  # never changed (nor locked)


def test_to_lsn_round_trips_without_snapshot(plain: Written, tmp_path: Path) -> None:
    for lsn in (0, 1, 17, boundaries(plain)[2], plain.lsn - 1):
        out = tmp_path / f"at-{lsn}"
        code, _stdout, err = cli("restore", str(plain.path), "--to-lsn", str(lsn),
                                 "--out", str(out))
        assert code == 0, err
        assert opened(out) == (plain.digest_at(lsn), lsn), lsn


def test_to_time(plain: Written, tmp_path: Path) -> None:
    lsn = plain.lsn // 2
    at = plain.times[lsn]
    # Milliseconds, exactly a record's time and just before the next record's.
    for text in (str(at), str(plain.times[lsn + 1] - 1)):
        out = tmp_path / f"ms-{text}"
        code, _stdout, err = cli("restore", str(plain.path), "--to-time", text,
                                 "--out", str(out))
        assert code == 0, err
        assert opened(out) == (plain.digest_at(lsn), lsn)
    # ISO 8601 (UTC): the time has whole milliseconds.
    iso = datetime.datetime.fromtimestamp(at / 1000, datetime.UTC).isoformat()
    out = tmp_path / "iso"
    code, _stdout, err = cli("restore", str(plain.path), "--to-time",
                             iso.replace("+00:00", "Z"), "--out", str(out))
    assert code == 0, err
    assert opened(out)[1] == lsn


def test_before_the_snapshot_is_impossible(snapshotted: Written, tmp_path: Path) -> None:
    snap_lsn = manifest(snapshotted.path)["snapshot"]["lsn"]
    code, _out, err = cli("restore", str(snapshotted.path), "--to-lsn", str(snap_lsn - 1),
                          "--out", str(tmp_path / "x"))
    assert code == 2 and "before the snapshot" in err
    code, _out, err = cli("restore", str(snapshotted.path), "--to-time", "1000",
                          "--out", str(tmp_path / "y"))
    assert code == 2 and "compacted away" in err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_past_the_end_is_impossible(plain: Written, tmp_path: Path) -> None:
    code, _out, err = cli("restore", str(plain.path), "--to-lsn", str(plain.lsn + 1),
                          "--out", str(tmp_path / "x"))
    assert code == 2 and f"ends at LSN {plain.lsn}" in err


def test_damage_before_the_point(tmp_path: Path) -> None:
    written = write_dir(tmp_path / "data", commands=200)
    seg = segments(written.path)[1]
    flip_byte(seg, record_offsets(seg)[2] + 12)
    code, _out, err = cli("restore", str(written.path), "--to-lsn", str(written.lsn),
                          "--out", str(tmp_path / "x"))
    assert code == 2 and f"{seg}:{record_offsets(seg)[2]}" in err
    # A point before the damage is still restorable.
    first = manifest(written.path)["segments"][1]["first_lsn"]
    code, _out, err = cli("restore", str(written.path), "--to-lsn", str(first + 1),
                          "--out", str(tmp_path / "y"))
    assert code == 0, err
    assert opened(tmp_path / "y") == (written.digest_at(first + 1), first + 1)


def test_usage_errors(plain: Written, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    code, _out, err = cli("restore", str(plain.path), "--to-lsn", "5", "--out", str(busy))
    assert code == 3 and "not an empty directory" in err
    code, _out, err = cli("restore", str(plain.path), "--to-time", "yesterday",
                          "--out", str(tmp_path / "z"))
    assert code == 3 and "yesterday" in err
    code, _out, err = cli("restore", str(tmp_path / "nope"), "--to-lsn", "5",
                          "--out", str(tmp_path / "z"))
    assert code == 3 and "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _out, err = cli("restore", str(plain.path), "--to-lsn", "5", "--out", str(empty))
    assert code == 0, err
    code, out, _err = cli("restore", "--help")
    assert code == 0 and "examples:" in out and "exit status:" in out


def test_never_inside_a_data_directory_and_never_half_built(plain: Written,
                                                             tmp_path: Path) -> None:
    before = fingerprint(plain.path)
    for out in (plain.path, plain.path / "restored", plain.path / "manifest.json"):
        code, _out, err = cli("restore", str(plain.path), "--to-lsn", "5", "--out", str(out))
        assert code == 3 and "streamkeep data directory" in err and str(out) in err
    assert fingerprint(plain.path) == before
    # A failure while building (the point is past the log's end) leaves nothing, not even
    # the temporary beside NEWDIR.
    code, _out, _err = cli("restore", str(plain.path), "--to-lsn", str(plain.lsn + 10),
                           "--out", str(tmp_path / "new"))
    assert code == 2 and list(tmp_path.iterdir()) == []
    code, _out, err = cli("restore", str(plain.path), "--to-lsn", "5", "--out",
                          str(tmp_path / "new"))
    assert code == 0, err
    assert [p.name for p in tmp_path.iterdir()] == ["new"]  # renamed into place, nothing else


def test_bad_snapshot_is_impossible(tmp_path: Path) -> None:
    written = write_dir(tmp_path / "data", commands=200, compact_after=100)
    snap = written.path / manifest(written.path)["snapshot"]["file"]
    with open(snap, "ab") as out:
        out.write(bytes(100))
    code, _out, err = cli("restore", str(written.path), "--to-lsn", str(written.lsn),
                          "--out", str(tmp_path / "x"))
    assert code == 2 and str(snap) in err and "the manifest says" in err


def test_restore_while_an_engine_writes_and_compacts(tmp_path: Path) -> None:
    """DIR is not locked: restoring from a directory an open Engine writes (and compacts) to
    works, and the result opens at the LSN asked for."""
    clock = FakeClock()
    engine = open_dir(tmp_path / "live", clock)
    try:
        run(engine, clock, "live", 0, 150)
        lsn = engine.journal.lsn  # type: ignore[union-attr]
        stop = threading.Event()

        def writer() -> None:
            i = 150
            while not stop.is_set():
                run(engine, clock, "live", i, i + 25)
                i += 25
                if i % 100 == 0:
                    engine.compact(wait=True)

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            for n in range(5):
                code, _out, err = cli("restore", str(tmp_path / "live"), "--to-lsn", str(lsn),
                                      "--out", str(tmp_path / f"r{n}"))
                # A compaction past `lsn` makes it impossible (said so), never an error.
                assert code in (0, 2), err
                if code == 0:
                    assert opened(tmp_path / f"r{n}")[1] == lsn
                else:
                    assert "before the snapshot" in err
        finally:
            stop.set()
            thread.join()
    finally:
        engine.close()


def test_damage_inside_fsynced_bytes_is_not_a_torn_tail(tmp_path: Path) -> None:
    """Restoring the latest state (as export-rdb does) past a damaged last record that was
    fsynced is impossible, not a silent cut; a point before it is restorable."""
    written = write_dir(tmp_path / "data", commands=200)
    last = [path for path in segments(written.path) if record_offsets(path)][-1]  # (a rotation
    offset = record_offsets(last)[-1]  # may have left the newest segment empty)
    flip_byte(last, offset + 12)
    code, _out, err = cli("restore", str(written.path), "--to-time", str(1 << 62),
                          "--out", str(tmp_path / "x"))
    assert code == 2 and f"{last}:{offset}" in err, err
    assert not (tmp_path / "x").exists()
    code, _out, err = cli("restore", str(written.path), "--to-lsn", str(written.lsn - 1),
                          "--out", str(tmp_path / "y"))
    assert code == 0, err
    assert opened(tmp_path / "y") == (written.digest_at(written.lsn - 1), written.lsn - 1)


def test_a_time_before_the_first_record_is_refused(plain: Written, tmp_path: Path) -> None:
    """No record that old and no snapshot: the empty state is never restored for a time (a
    wrong date or zone would serve an empty database); `--to-lsn 0` still builds it."""
    first = plain.times[1]
    code, out, err = cli("restore", str(plain.path), "--to-time", str(first - 1),
                         "--out", str(tmp_path / "x"))
    assert code == 2 and out == "", (out, err)
    assert "no record is at or before" in err and "the log starts with LSN 1" in err
    assert str(first) in err and "--to-lsn 0" in err
    assert not (tmp_path / "x").exists()
    code, out, err = cli("restore", str(plain.path), "--to-lsn", "0", "--out",
                         str(tmp_path / "empty"))
    assert code == 0, err
    assert "after LSN 0" in out and "the empty state" in out
    assert opened(tmp_path / "empty") == (plain.digest_at(0), 0)
    # The first record's own time restores the state after it, and says which record.
    code, out, err = cli("restore", str(plain.path), "--to-time", str(first), "--out",
                         str(tmp_path / "one"))
    assert code == 0 and "after LSN 1 " in out and "its record of 20" in out, (out, err)
