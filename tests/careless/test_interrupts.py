"""Every long command interrupted by SIGINT (Ctrl-C), SIGTERM (`kill`) and SIGHUP (the terminal
closed) in the middle of its work, as a real child process on data big enough to be mid-work
when the signal comes (a moment waited for: a temporary appears, a child process runs), then
counted: no process of the command left (every process it started carries a marker variable
in its environment, found in /proc even after re-parenting: the Spark JVM, build children,
servers, workers), no new file in its temp directory (a private TMPDIR), beside its output or
in the data directory, no traceback, one line, and the exit status of the manual (128 + the
signal's number; `serve` shuts down cleanly: 0). Then the same command SIGKILLed (nothing of
its own can run): its children die with it, and the next run sweeps what it left.

Commands: import, export-rdb, restore, export (Spark: the JVM starting, the context starting in
it, and writing), crashbench (its compaction children), serve while it compacts, an embedded
Engine compacting, bench."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import Result, big_datadir, resp_aof, tree_state
from tests.support.interrupts import Started, entries, owned_by, signal_name

pytestmark = pytest.mark.timeout(600)  # real commands on big data, a busy machine

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
IDS = [signal_name(s) for s in SIGNALS]
SHM = Path("/dev/shm")
DISK_TMP = "/var/tmp" if Path("/var/tmp").is_dir() else None  # (None: the temp directory)
BUILD_CHILD = "streamkeep.snapshot.services.build"
ATTEMPTS = 5  # runs a test may start before one is stopped with its temporaries in place


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600,000 XADD records in three segments, shared (no test may change it)."""
    return big_datadir(tmp_path_factory.mktemp("big") / "data", 600_000, segments=3)


@pytest.fixture(scope="module")
def aof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return resp_aof(tmp_path_factory.mktemp("aof") / "appendonly.aof")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a snapshot and a record after it (an export builds its state)."""
    path = tmp_path_factory.mktemp("small") / "data"
    with Engine.open(str(path)) as db:
        for i in range(2000):
            db.execute("XADD", "jobs", "*", "n", str(i))
        db.compact(wait=True)
        db.execute("XADD", "jobs", "*", "n", "after the snapshot")
    return path


def assert_ended_by(result, signum: int, command: str) -> None:  # type: ignore[no-untyped-def]
    """Exit status 128 + signum, and one line on stderr saying so; no traceback."""
    assert "Traceback" not in result.err, result.err
    assert result.code == 128 + signum, (result.code, result.err)
    how = "" if signum == signal.SIGINT else f" ({signal_name(signum)})"
    assert result.err_lines[-1] == f"streamkeep {command}: interrupted{how}", result.err


def assert_nothing_left(run: Started, *places: tuple[Path, set[str]]) -> None:
    """No file in the command's TMPDIR, none new in each (place, entries before), none in
    /dev/shm named by one of its processes."""
    assert entries(run.tmpdir) == set()
    for place, before in places:
        assert entries(place) == before, place
    assert owned_by(SHM, run.pids) == set()


# --- import, export-rdb, restore: a temporary beside the output -------------------------------


def _beside(tmp_path: Path, name: str) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    return out / name


@pytest.fixture
def on_disk() -> Iterator[Path]:
    """A fresh directory on the machine's disk (/var/tmp), removed after: where the import
    builds its output. Its window (the snapshot written and fsynced beside the output, after
    the whole source was read) is over in a moment on a tmpfs, where `make test` keeps the
    tests' own temporary files, and the signal would come after it."""
    path = Path(tempfile.mkdtemp(prefix="streamkeep-interrupts-", dir=DISK_TMP))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_import(aof: Path, tmp_path: Path, on_disk: Path, signum: int) -> None:
    out = _beside(on_disk, "imported")
    run = Started(["import", aof, "--out", out], tmp_path)
    run.wait_for(lambda: any(out.parent.glob(".imported.tmp-*/*")))
    run.send(signum)
    assert_ended_by(run.finish(), signum, "import")
    assert_nothing_left(run, (out.parent, set()))


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_export_rdb(big: Path, tmp_path: Path, signum: int) -> None:
    before = tree_state(big)
    out = _beside(tmp_path, "dump.rdb")
    run = Started(["export-rdb", big, "--out", out], tmp_path)
    run.wait_for(lambda: any(out.parent.glob(".dump.rdb.export-rdb-*/state/*")))
    run.send(signum)
    assert_ended_by(run.finish(), signum, "export-rdb")
    assert_nothing_left(run, (out.parent, set()))
    assert tree_state(big) == before


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_restore(big: Path, tmp_path: Path, signum: int) -> None:
    before = tree_state(big)
    out = _beside(tmp_path, "restored")
    run = Started(["restore", big, "--to-lsn", "599999", "--out", out], tmp_path)
    run.wait_for(lambda: any(out.parent.glob(".restored.tmp-*/*")))
    run.send(signum)
    assert_ended_by(run.finish(), signum, "restore")
    assert_nothing_left(run, (out.parent, set()))
    assert tree_state(big) == before


@pytest.mark.parametrize(("argv", "made"), [
    (["import", "{aof}", "--out", "{out}/imported"], ".imported.tmp-*/*"),
    (["export-rdb", "{big}", "--out", "{out}/dump.rdb"], ".dump.rdb.export-rdb-*/state/*"),
    (["restore", "{big}", "--to-lsn", "599999", "--out", "{out}/restored"], ".restored.tmp-*/*"),
], ids=["import", "export-rdb", "restore"])
def test_a_killed_runs_temporaries_are_swept_by_the_next(aof: Path, big: Path, tmp_path: Path,
                                                         argv: list[str], made: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    words = [a.format(aof=aof, big=big, out=out) for a in argv]
    for _attempt in range(ATTEMPTS):
        killed = Started(words, tmp_path)
        # Stopped the moment its temporaries show, then killed: on a busy machine a run
        # left to go on could finish in between (its output then in place: tried again).
        pid = killed.pid
        killed.wait_for(lambda pid=pid: any(out.glob(made)) and not os.kill(pid, signal.SIGSTOP))
        killed.kill()
        killed.finish()
        if not (out / Path(words[-1]).name).exists():
            break
        shutil.rmtree(out)
        out.mkdir()
    left = entries(out)
    assert left and left == owned_by(out, {killed.pid})  # (SIGKILL: nothing of its own ran)
    (out / ".keep.tmp-1-deadbeef").mkdir()  # not of its form (pid 1 lives): never swept
    (out / "mine.tmp-99999999-deadbeef").mkdir()  # not of its form either
    again = Started([*words[:-1], f"{words[-1]}-again"], tmp_path)
    result = again.finish()
    assert result.code == 0, result.err
    assert entries(out) == {".keep.tmp-1-deadbeef", "mine.tmp-99999999-deadbeef",
                            Path(words[-1]).name + "-again"}


# --- export: the Spark JVM --------------------------------------------------------------------


def _export(small: Path, tmp_path: Path, signum: int, moment: str) -> Result:
    before = tree_state(small)
    out = _beside(tmp_path, "export")
    run = Started(["export", small, "--out", out, "--master", "local[1]"], tmp_path)
    if moment == "starting":  # the JVM runs, the gateway is not connected yet
        run.wait_for(lambda: run.running("java"))
    elif moment == "context":
        # The SparkContext is being made, by calls into the JVM: its block manager has made
        # its directory in the command's Spark directory (spark.local.dir), and the rest of
        # the context's start-up follows in the same call.
        run.wait_for(lambda: any(run.tmpdir.glob("streamkeep-spark-*/blockmgr-*")))
    else:
        run.wait_for(lambda: any(out.parent.glob(".export.tmp-*/entries")))
    run.send(signum)
    result = run.finish()  # no JVM, no Python worker of its left
    assert_ended_by(result, signum, "export")  # one line: no Java stack trace, no py4j log
    assert_nothing_left(run, (out.parent, set()))  # no Spark directory, no log, no stage
    assert tree_state(small) == before  # no pin left
    return result


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_export_while_the_jvm_starts(small: Path, tmp_path: Path, signum: int) -> None:
    """The moment that used to leave a JVM running for ever, re-parented to init."""
    _export(small, tmp_path, signum, "starting")


def test_export_ctrl_c_while_spark_starts(small: Path, tmp_path: Path) -> None:
    """Ctrl-C in the middle of a call into the JVM that starts the SparkContext: py4j used to
    log the call it interrupted ("KeyboardInterrupt while sending command.", a traceback and
    all) before the command's line. Only that line now, and nothing left."""
    result = _export(small, tmp_path, signal.SIGINT, "context")
    said = [line for line in result.err_lines if not line.endswith(" elapsed")]  # (progress)
    assert said == ["streamkeep export: interrupted"], result.err


@pytest.mark.slow  # (SIGINT while writing: tests/careless/test_cli_hygiene.py)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_export_while_writing(small: Path, tmp_path: Path, signum: int) -> None:
    _export(small, tmp_path, signum, "writing")


def test_export_killed_takes_its_jvm_and_the_next_sweeps(small: Path, tmp_path: Path) -> None:
    """--snapshot-only: the snapshot's pin is in the data directory for the whole export."""
    before = tree_state(small)
    out = _beside(tmp_path, "export")
    tmpdir = tmp_path / "tmpdir"
    killed = Started(["export", small, "--snapshot-only", "--out", out, "--master", "local[1]"],
                     tmp_path, tmpdir=tmpdir)
    killed.wait_for(lambda: any(out.parent.glob(".export.tmp-*/entries")))
    assert killed.running("java")
    killed.kill()
    killed.finish()  # the JVM died with it (PR_SET_PDEATHSIG), its workers with the JVM
    assert entries(out.parent) == owned_by(out.parent, {killed.pid}) != set()
    assert entries(tmpdir) == owned_by(tmpdir, {killed.pid}) != set()  # Spark's directory
    pins = {n for n in entries(small) if n.startswith("export-pin-")}
    assert pins and all(f"-p{killed.pid}" in n for n in pins)
    again = Started(["export", small, "--out", f"{out}-again", "--master", "local[1]",
                     "--table", "streams"], tmp_path, tmpdir=tmpdir)
    result = again.finish()
    assert result.code == 0, result.err
    assert entries(out.parent) == {"export-again"}
    assert entries(tmpdir) == set()
    assert tree_state(small) == before


KILLED_WHILE_PINNED = textwrap.dedent("""\
    import sys
    import time
    from streamkeep.tools.export import pin

    pin.claim()
    held = [pin.pin(sys.argv[1]).path, *pin.pin_log(sys.argv[1]).paths()]
    print(" ".join(held), flush=True)
    time.sleep(3600)  # (until it is killed)
""")


def test_an_exports_pins_are_swept_once_it_is_gone(small: Path, tmp_path: Path) -> None:
    """What a killed export pinned in a data directory (named after it, locked while it ran)
    is removed by the next; a live export's pins, and a Spark application's, are not."""
    from streamkeep.tools.export import pin

    data = tmp_path / "data"
    shutil.copytree(small, data)
    before = tree_state(data)
    script = tmp_path / "export.py"
    script.write_text(KILLED_WHILE_PINNED)
    alive = Started([script, data], tmp_path, script=True)
    killed = Started([script, data], tmp_path, script=True)
    for run in (alive, killed):
        assert run.proc.stdout is not None and run.proc.stdout.readline()
    theirs = pin.pin(str(data))  # (not claimed: a Spark application's, swept by age only)
    killed.kill()
    killed.finish()
    dead = {n for n in entries(data) if f"-p{killed.pid}" in n}
    assert dead
    # A segment's pin is a link to the segment's inode, which the live export's pin holds a
    # lock on too: it waits until that one is gone as well.
    shared = {n for n in dead if n.endswith(".aof")}
    assert set(pin.sweep_dead(str(data))) == dead - shared
    assert dead & entries(data) == shared
    assert {n for n in entries(data) if f"-p{alive.pid}" in n}  # its maker lives
    alive.kill()
    alive.finish()
    theirs.release()
    assert set(pin.sweep_dead(str(data))) >= shared
    assert tree_state(data) == before


# --- crashbench: its compaction children ------------------------------------------------------


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_crashbench(tmp_path: Path, signum: int) -> None:
    """The signal comes while a compaction's build child runs: with SIGINT and SIGHUP it is
    sent to the whole process group, as by a terminal; the child is in a session of its own
    and never prints a traceback of its own."""
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    run = Started(["crashbench", "--ops", "2000", "--json", report], tmp_path)
    run.wait_for(lambda: run.running(BUILD_CHILD))
    run.send(signum)
    assert_ended_by(run.finish(), signum, "crashbench")
    assert_nothing_left(run, (report.parent, set()))


def test_crashbench_killed_takes_its_children_and_the_next_sweeps(tmp_path: Path) -> None:
    killed = Started(["crashbench", "--ops", "2000"], tmp_path)
    killed.wait_for(lambda: run_has_workers(killed))
    killed.kill()
    killed.finish()  # pool workers and build children died with it
    stale = owned_by(SHM, {killed.pid})
    assert stale  # its scratch directory
    again = Started(["crashbench", "--ops", "2000"], tmp_path)
    again.wait_for(lambda: owned_by(SHM, {again.pid}))  # its own, made once the stale swept
    assert not stale & entries(SHM)
    again.send(signal.SIGTERM)
    assert_ended_by(again.finish(), signal.SIGTERM, "crashbench")
    assert owned_by(SHM, again.pids) == set()


def run_has_workers(run: Started) -> bool:
    """A crash bench judging points: its pool's workers run (processes beside the main one
    and its build children)."""
    return len([p for p in run.processes() if BUILD_CHILD not in p.cmdline]) > 1


# --- compaction: serve, and an embedded Engine ------------------------------------------------


def _serving(data: Path, tmp_path: Path) -> tuple[Started, int]:
    run = Started(["serve", "--dir", data, "--port", "0", "--loglevel", "warning"], tmp_path)
    line = run.proc.stdout.readline()  # type: ignore[union-attr]
    assert " listening on " in line, line
    return run, int(line.split(" port ")[1].split()[0])


def _compact(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*1\r\n$12\r\nBGREWRITEAOF\r\n")
        assert s.recv(100).startswith(b"+")


def _temporaries(data: Path) -> set[str]:
    return {name for name in entries(data) if name.endswith(".tmp")}


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_serve_while_compacting(tmp_path: Path, signum: int) -> None:
    """serve shuts down cleanly on each (exit 0): the compaction is abandoned, its build
    child stopped, its files removed."""
    data = big_datadir(tmp_path / "data", 300_000, segments=3)
    run, port = _serving(data, tmp_path)
    _compact(port)
    run.wait_for(lambda: run.running(BUILD_CHILD))
    run.send(signum)
    result = run.finish()
    assert result.code == 0, result.err
    assert "Traceback" not in result.err, result.err
    assert _temporaries(data) == set()
    assert entries(run.tmpdir) == set()


def test_serve_killed_while_compacting_takes_its_child(tmp_path: Path) -> None:
    """SIGKILL: the build child dies with the server; the next start removes its files."""
    data = big_datadir(tmp_path / "data", 300_000, segments=3)
    run, port = _serving(data, tmp_path)
    _compact(port)
    run.wait_for(lambda: _temporaries(data))
    run.kill()
    run.finish()  # the build child went with it
    assert _temporaries(data)
    again, _port = _serving(data, tmp_path)
    assert _temporaries(data) == set()
    again.send(signal.SIGTERM)
    assert again.finish().code == 0


EMBEDDED = textwrap.dedent("""\
    import sys
    from streamkeep import Engine

    try:
        with Engine.open(sys.argv[1]) as db:
            db.compact(wait=True)
    except KeyboardInterrupt:  # the application's own way out: the with-block closed first
        sys.exit(130)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_embedded_engine_compacting(tmp_path: Path, signum: int) -> None:
    """An application that closes its Engine on the way out (Ctrl-C): the build child is
    stopped and its files removed. One that dies at once (SIGTERM's default): the child dies
    with it, and the next open removes the files."""
    data = big_datadir(tmp_path / "data", 300_000, segments=3)
    script = tmp_path / "app.py"
    script.write_text(EMBEDDED)
    run = Started([script, data], tmp_path, script=True)
    run.wait_for(lambda: run.running(BUILD_CHILD))
    run.send(signum)
    result = run.finish()
    assert "Traceback" not in result.err, result.err
    if signum == signal.SIGINT:
        assert result.code == 130
        assert _temporaries(data) == set()
    else:
        assert result.code == -signal.SIGTERM
    with Engine.open(str(data)):
        assert _temporaries(data) == set()


# --- bench: its servers -----------------------------------------------------------------------


@pytest.mark.parametrize("signum", SIGNALS, ids=IDS)
def test_bench(tmp_path: Path, signum: int) -> None:
    run = Started(["bench", "server", "--quick"], tmp_path)
    run.wait_for(lambda: run.running("redis-server"))
    run.send(signum)
    assert_ended_by(run.finish(), signum, "bench")
    assert_nothing_left(run)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_bench_while_its_latency_harness_starts(tmp_path: Path, signum: int) -> None:
    """The harness (a multiprocessing child, of the bench's process group) never gets the
    terminal's signal, not even while its interpreter starts: no traceback of its own."""
    run = Started(["bench", "server", "--quick"], tmp_path)
    run.wait_for(lambda: run.running("spawn_main"))
    run.send(signum)
    assert_ended_by(run.finish(), signum, "bench")
    assert_nothing_left(run)


def test_bench_killed_takes_its_servers_and_the_next_sweeps(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmpdir"
    killed = Started(["bench", "server", "--quick"], tmp_path, tmpdir=tmpdir)
    killed.wait_for(lambda: killed.running("redis-server") and killed.running(" serve "))
    killed.kill()
    killed.finish()  # redis-server and streamkeep serve died with it
    stale = entries(tmpdir)
    assert stale and stale == owned_by(tmpdir, {killed.pid})
    again = Started(["bench", "server", "--quick"], tmp_path, tmpdir=tmpdir)
    again.wait_for(lambda: again.running("redis-server"))
    assert not stale & entries(tmpdir)  # swept as the new run made its own
    again.send(signal.SIGTERM)
    assert_ended_by(again.finish(), signal.SIGTERM, "bench")
    assert entries(tmpdir) == set()

