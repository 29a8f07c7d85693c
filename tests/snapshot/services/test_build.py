"""snapshot.services.build: a snapshot built from a data directory's records (the closed segments, after
the previous snapshot or from the start) holds the state the engine had at that LSN; inputs
that are not what the job says (a gap, the wrong end LSN, a segment that is not the one named
or is damaged) fail the build with a BuildError naming the file; and the child process's
command line (`python -m streamkeep.snapshot.services.build JOB`) reports success and failure by its
exit status and a line on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import RealFS
from streamkeep.aof.manifest import Manifest, load, snapshot_file
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot.integrity import child_env
from streamkeep.snapshot.services.build import BuildError, build
from streamkeep.snapshot.services.load import load_snapshot
from tests.support.aof_workload import FakeClock, run
from tests.support.datadir import open_dir

SEED = "build"


def directory_after(path: Path, commands: int, compact_after: int | None = None
                    ) -> tuple[Manifest, int, str]:
    """A data directory after `commands` commands of the AOF workload (compacted after the
    first `compact_after` if given): its manifest, its last LSN and the engine's digest."""
    clock = FakeClock()
    with open_dir(path, clock) as engine:
        done = 0
        if compact_after is not None:
            done = run(engine, clock, SEED, 0, compact_after)
            engine.compact(wait=True)
        run(engine, clock, SEED, done, commands)
        assert engine.journal is not None
        lsn, digest = engine.journal.lsn, engine.digest()
    return load(RealFS(), str(path)), lsn, digest


def job_for(path: Path, manifest: Manifest, lsn: int, **changes: Any) -> dict[str, Any]:
    job = {
        "dir": str(path), "base": manifest.snapshot.file if manifest.snapshot else None,
        "segments": [[s.file, s.segment, s.first_lsn] for s in manifest.segments],
        "lsn": lsn, "out": snapshot_file(lsn) + ".tmp", "repl_id": manifest.repl_id,
        "created_ms": 1700000000000, "config": {"stream-node-max-entries": 100},
    }
    job.update(changes)
    return job


def digest_of(path: str) -> str:
    engine = Engine()
    load_snapshot(engine, path)
    digest = engine.digest()
    engine.close()
    return digest


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest, int, str]:
    """A directory with several segments and no snapshot (tests only read it)."""
    path = tmp_path_factory.mktemp("build") / "data"
    manifest, lsn, digest = directory_after(path, 400)
    assert len(manifest.segments) >= 3 and manifest.snapshot is None
    return path, manifest, lsn, digest


def test_from_the_segments_alone(logged: tuple[Path, Manifest, int, str]) -> None:
    path, manifest, lsn, digest = logged
    job = job_for(path, manifest, lsn, out="from-segments.mdb.tmp")
    assert build(job) == {"parts": [], "new_part": False}  # self-contained: no part_out
    assert digest_of(str(path / "from-segments.mdb.tmp")) == digest


def test_from_a_snapshot_and_the_segments_after_it(tmp_path: Path) -> None:
    path = tmp_path / "data"
    manifest, lsn, digest = directory_after(path, 400, compact_after=200)
    assert manifest.snapshot is not None
    build(job_for(path, manifest, lsn))
    assert digest_of(str(path / (snapshot_file(lsn) + ".tmp"))) == digest


def test_the_segments_must_end_at_the_lsn(logged: tuple[Path, Manifest, int, str]) -> None:
    path, manifest, lsn, _digest = logged
    with pytest.raises(BuildError) as caught:
        build(job_for(path, manifest, lsn + 1, out="long.tmp"))
    assert str(caught.value) == f"the segments end at LSN {lsn}, not {lsn + 1}"
    assert isinstance(caught.value, StorageError)


def test_a_gap_is_refused(logged: tuple[Path, Manifest, int, str]) -> None:
    path, manifest, lsn, _digest = logged
    second = manifest.segments[1]
    job = job_for(path, manifest, lsn, out="gap.tmp")
    del job["segments"][0]
    with pytest.raises(BuildError) as caught:
        build(job)
    assert str(caught.value) == \
        f"{path / second.file}: starts at LSN {second.first_lsn}, expected 1"


def test_a_segment_that_is_not_the_one_named_is_refused(
        logged: tuple[Path, Manifest, int, str]) -> None:
    path, manifest, lsn, _digest = logged
    job = job_for(path, manifest, lsn, out="misnamed.tmp")
    job["segments"][0][1] += 100
    with pytest.raises(BuildError, match=r"header says segment \d+ first LSN 1, the manifest "
                                         r"says segment \d+ first LSN 1"):
        build(job)


def test_a_damaged_closed_segment_fails_the_build(tmp_path: Path) -> None:
    path = tmp_path / "data"
    manifest, lsn, _digest = directory_after(path, 400)
    segment = path / manifest.segments[0].file
    data = bytearray(segment.read_bytes())
    data[len(data) // 2] ^= 0x40
    segment.write_bytes(bytes(data))
    with pytest.raises(BuildError, match=r"in a closed segment$") as caught:
        build(job_for(path, manifest, lsn))
    assert manifest.segments[0].file in str(caught.value)


def run_main(job: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkeep.snapshot.services.build", job],
                          capture_output=True, text=True, env=child_env(), timeout=120)


def test_the_command_line(logged: tuple[Path, Manifest, int, str]) -> None:
    path, manifest, lsn, digest = logged
    done = run_main(json.dumps(job_for(path, manifest, lsn, out="main.tmp",
                                       parent=os.getpid())))
    assert (done.returncode, done.stderr) == (0, "")
    assert digest_of(str(path / "main.tmp")) == digest
    done = run_main(json.dumps(job_for(path, manifest, lsn + 5, out="main-wrong.tmp")))
    assert done.returncode == 1
    assert done.stderr == f"snapshot build failed: the segments end at LSN {lsn}, not {lsn + 5}\n"


def test_the_command_line_refuses_a_bad_job_or_a_gone_parent(
        logged: tuple[Path, Manifest, int, str]) -> None:
    done = run_main("{not json")
    assert done.returncode == 1
    assert done.stderr.startswith("snapshot build failed: bad job: ")
    path, manifest, lsn, _digest = logged
    # the child's parent is this process: any other pid says the parent went away
    done = run_main(json.dumps(job_for(path, manifest, lsn, out="orphan.tmp",
                                       parent=os.getpid() + 1)))
    assert done.returncode == 1
    assert done.stderr == "snapshot build failed: the parent process is gone\n"
    assert not (path / "orphan.tmp").exists()


def test_the_serving_child_leaves_ctrl_c_and_hang_up_to_its_parent() -> None:
    """SIGINT and SIGHUP sent to a serving child (a `kill` of a process group it shared)
    neither end it nor make it print a traceback: its parent stops it."""
    import signal

    child = subprocess.Popen([sys.executable, "-m", "streamkeep.snapshot.services.build", "--serve",
                              str(os.getpid())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        assert child.stdin is not None and child.stdout is not None
        for signum in (None, signal.SIGINT, signal.SIGHUP):
            if signum is not None:
                child.send_signal(signum)
            child.stdin.write("{not json\n")  # answered: it is in its loop, and still there
            child.stdin.flush()
            assert json.loads(child.stdout.readline())["ok"] is False
        out, err = child.communicate(timeout=60)  # stdin closed: it ends, quietly
        assert (child.returncode, err) == (0, "")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
