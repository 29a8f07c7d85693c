"""The `streamkeep` CLI used carelessly, as real child processes: Ctrl-C in the middle of every
long command (one line, exit 130, no partial output, the data directory as it was), usage
mistakes (exit 3: the usage and one error line), paths of the wrong kind, missing, unreadable
or garbage, and the refusals each command documents (one line naming the file, offset or
port; the exit status of the manual's table; nothing changed). Never a traceback."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import re
import sys
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import (
    assert_refused,
    assert_usage,
    big_datadir,
    has_read,
    interrupt,
    lock_taken_by,
    opened,
    resp_aof,
    run,
    tree_state,
)

BIG_RECORDS = 600_000  # seconds of work for the commands that read them all, at their speed


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory of 600,000 XADD records in three segments, shared: nothing may
    change it (every test checks)."""
    return big_datadir(tmp_path_factory.mktemp("big") / "data", BIG_RECORDS, segments=3)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with a snapshot, later records, a queue (stream `jobs`, group
    `workers`) and a stream whose IDs are as long as IDs get."""
    path = tmp_path_factory.mktemp("small") / "data"
    with Engine.open(str(path)) as db:
        db.execute("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
        for i in range(50):
            db.execute("XADD", "jobs", "*", "n", str(i))
        db.execute("XREADGROUP", "GROUP", "workers", "w1", "COUNT", "3", "STREAMS", "jobs", ">")
        db.execute("XADD", "long-ids", "18446744073709551614-18446744073709551614", "f", "v")
        db.compact(wait=True)
        db.execute("XADD", "jobs", "*", "n", "after the snapshot")
    return path


def torn(path: Path) -> Path:
    """A data directory whose last segment ends in a torn record."""
    with Engine.open(str(path)) as db:
        for i in range(20):
            db.execute("XADD", "s", "*", "n", str(i))
    segment = max(path.glob("segment-*.aof"))
    with open(segment, "ab") as f:
        f.write(b"\x40\x00\x00\x00torn")
    return path


# --- Ctrl-C ---------------------------------------------------------------------------------


# A progress line (tools.progress: one every few seconds when stderr is not a terminal): what
# a long command prints before it is interrupted, as it should; anything else must not be there.
PROGRESS_LINE = re.compile(r"streamkeep [a-z -]+: .+, \d+(m \d+s| s) elapsed")


def assert_interrupted(result, command: str) -> None:  # type: ignore[no-untyped-def]
    err = "".join(line for line in result.err.splitlines(keepends=True)
                  if not PROGRESS_LINE.fullmatch(line.strip()))
    assert_refused(dataclasses.replace(result, err=err), 130,
                   f"streamkeep {command}: interrupted")


@pytest.mark.parametrize("argv", [
    ["aof", "verify", "--deep"],
    ["aof", "verify", "--deep", "--jobs", "2"],
    ["aof", "stats"],
    ["aof", "dump", "--format", "json"],
], ids=["verify-deep", "verify-deep-jobs", "stats", "dump"])
def test_ctrl_c_while_reading_the_aof(big: Path, argv: list[str]) -> None:
    before = tree_state(big)
    # The first segment open (a mapped read keeps it open), or its bytes read (a whole-file
    # read may leave it open too briefly to be seen).
    segment = big / "segment-000001.aof"
    is_open, read = opened(segment), has_read(segment.stat().st_size)
    result = interrupt(*argv, big, when=lambda pgid: is_open(pgid) or read(pgid))
    assert_interrupted(result, " ".join(argv[:2]))
    assert tree_state(big) == before


def test_ctrl_c_during_restore_removes_newdir(big: Path, tmp_path: Path) -> None:
    before = tree_state(big)
    out = tmp_path / "restored"
    result = interrupt("restore", big, "--to-lsn", str(BIG_RECORDS - 1), "--out", out,
                       when=lambda pid: any(tmp_path.glob(".restored.tmp-*/*")))
    assert_interrupted(result, "restore")
    assert not out.exists() and not list(tmp_path.glob(".restored.*"))
    assert tree_state(big) == before


def test_ctrl_c_during_restore_into_an_empty_dir_leaves_it_empty(big: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "restored"
    out.mkdir()
    result = interrupt("restore", big, "--to-lsn", str(BIG_RECORDS - 1), "--out", out,
                       when=lambda pid: any(tmp_path.glob(".restored.tmp-*/*")))
    assert_interrupted(result, "restore")
    assert out.is_dir() and not any(out.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["restored"]  # no stage left


def test_ctrl_c_during_import_removes_the_directory_it_was_making(tmp_path: Path) -> None:
    source = resp_aof(tmp_path / "appendonly.aof")
    out = tmp_path / "imported"
    result = interrupt("import", source, "--out", out,
                       when=lambda pid: any(tmp_path.glob(".imported.tmp-*/*")))
    assert_interrupted(result, "import")
    assert not out.exists() and not list(tmp_path.glob(".imported.*"))


def test_ctrl_c_during_export_rdb_leaves_nothing(big: Path, tmp_path: Path) -> None:
    before = tree_state(big)
    out = tmp_path / "rdb" / "dump.rdb"
    out.parent.mkdir()
    result = interrupt("export-rdb", big, "--out", out,
                       when=lambda pid: any(out.parent.glob(".dump.rdb.export-rdb-*/state/*")))
    assert_interrupted(result, "export-rdb")
    assert list(out.parent.iterdir()) == []  # no --out, no work directory beside it
    assert tree_state(big) == before


def test_ctrl_c_during_serve_replay_releases_the_directory(big: Path) -> None:
    before = tree_state(big, ignore=("LOCK",))
    result = interrupt("serve", "--dir", big, "--port", "0", when=lock_taken_by(big))
    assert_interrupted(result, "serve")
    assert tree_state(big, ignore=("LOCK",)) == before
    with open(big / "LOCK", "rb") as lock:  # released: another process may take it now
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_ctrl_c_while_queue_stats_replays(big: Path) -> None:
    before = tree_state(big, ignore=("LOCK",))
    result = interrupt("queue", "stats", big, "big", when=lock_taken_by(big))
    assert_interrupted(result, "queue stats")
    assert tree_state(big, ignore=("LOCK",)) == before


def test_ctrl_c_at_the_fix_prompt_changes_nothing(tmp_path: Path) -> None:
    data = torn(tmp_path / "data")
    before = tree_state(data, ignore=("LOCK",))
    # The prompt waits for stdin, which never comes: the interrupt lands there.
    result = interrupt("aof", "fix", data, after=1.5)
    assert result.code == 130, result.err
    assert "Traceback" not in result.err
    prompt, last = result.err_lines
    assert prompt.rstrip().endswith("[y/N]") and last == "streamkeep aof fix: interrupted"
    assert tree_state(data, ignore=("LOCK",)) == before


def test_ctrl_c_during_crashbench_writes_no_json(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = interrupt("crashbench", "--ops", "2000", "--json", report, after=3.0)
    # On a pipe, a progress line comes every 5 seconds: on a slow machine one may precede the
    # interruption's.
    lines = [line for line in result.err.splitlines()
             if not re.fullmatch(r"crashbench: .+ elapsed(, about .+ left of it)?", line)]
    assert_interrupted(dataclasses.replace(result, err="\n".join(lines)), "crashbench")
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_spark_export_leaves_no_out_and_no_jvm_output(small: Path,
                                                                     tmp_path: Path) -> None:
    before = tree_state(small)
    out = tmp_path / "export"
    result = interrupt("export", small, "--out", out, "--master", "local[1]",
                       when=lambda pid: any(tmp_path.glob(".export.tmp-*/entries")))
    assert_interrupted(result, "export")  # one line: no Java stack trace, no py4j log
    assert not out.exists() and not list(tmp_path.glob(".export.*"))
    assert tree_state(small) == before  # the pins are gone too


# --- usage mistakes: exit 3, the usage and one error line -----------------------------------


USAGE = [
    ([], "required: COMMAND"),
    (["nope"], "nope"),
    (["aof"], "required: COMMAND"),
    (["aof", "verify"], "path"),
    (["aof", "verify", "--jobs", "many", "DATA"], "many"),
    (["aof", "stats", "--bucket", "1y", "DATA"], "1y"),
    (["aof", "dump", "--format", "xml", "DATA"], "xml"),
    (["aof", "dump", "--to-lsn", "last", "DATA"], "last"),
    (["aof", "fix"], "path"),
    (["restore", "DATA", "--out", "NEW"], "--to-lsn"),
    (["restore", "DATA", "--to-lsn", "x", "--out", "NEW"], "'x'"),
    (["restore", "DATA", "--to-lsn", "5", "--to-time", "5", "--out", "NEW"], "--to-time"),
    (["snapshot"], "required: COMMAND"),
    (["snapshot", "info"], "path"),
    (["snapshot", "dump", "DATA", "--db", "one"], "one"),
    (["import", "SOURCE"], "--out"),
    (["export-rdb", "DATA"], "--out"),
    (["export-rdb", "DATA", "--out", "x.rdb", "--rdb-version", "99"], "99"),
    (["export", "DATA"], "--out"),
    (["export", "DATA", "--out", "o", "--table", "everything"], "everything"),
    (["crashbench", "--ops", "0"], "0"),
    (["crashbench", "--policy", "sometimes"], "sometimes"),
    (["crashbench", "--mode", "meteor"], "meteor"),
    (["queue"], "required: COMMAND"),
    (["queue", "stats"], "DIR"),
    (["serve", "--port", "high"], "high"),
    (["serve", "--appendfsync", "sometimes"], "sometimes"),
    (["bench", "--sections", "nope"], "nope"),
    (["bench", "--repeat", "twice"], "twice"),
    (["demo", "now"], "now"),
    (["commands", "--all"], "--all"),
    (["--verbose", "demo"], "--verbose"),
    (["bench", "--n", "-5"], "-5"),
    (["crashbench", "--jobs", "0"], "0"),
]


@pytest.mark.parametrize(("argv", "named"), USAGE, ids=[" ".join(a) or "-" for a, _ in USAGE])
def test_usage_errors_exit_3_with_the_usage_and_one_line(small: Path, tmp_path: Path,
                                                         argv: list[str], named: str) -> None:
    before = tree_state(small)
    argv = [str(small) if a == "DATA" else str(tmp_path / a) if a in ("NEW", "SOURCE")
            else a for a in argv]
    assert_usage(run(*argv, cwd=tmp_path), named)
    assert tree_state(small) == before
    assert list(tmp_path.iterdir()) == []  # nothing made either


def test_version_and_help() -> None:
    from streamkeep.engine.exec import build_report
    from streamkeep.tools.main import version

    done = run("--version")
    assert done.code == 0 and done.err == ""
    # which implementation runs: the compiled core, or pure Python and why
    assert done.out == f"streamkeep {version()}, {build_report.summary()}\n"
    assert version()[0].isdigit()
    # --help stays cheap: the engine is not imported to print it.
    code = ("import sys; from streamkeep.tools.main import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "print(sorted(m for m in sys.modules if m.startswith('streamkeep.engine.runtime')))")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip().splitlines()[-1] == "[]"


# --- paths of the wrong kind, missing, unreadable or garbage ----------------------------------


@pytest.fixture
def junk(tmp_path: Path) -> dict[str, Path]:
    """A garbage file, an empty directory, a directory that is not a data directory, a data
    directory whose segment cannot be read (a directory where the file should be: even root
    cannot read that), and a named pipe (a file that is not a regular file)."""
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"this is not what any command expects" * 10)
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("hello")
    unreadable = tmp_path / "unreadable"
    with Engine.open(str(unreadable)) as db:
        db.execute("XADD", "s", "*", "f", "v")
    for segment in unreadable.glob("segment-*.aof"):
        segment.unlink()
        segment.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return {"garbage": garbage, "empty": empty, "other": other, "unreadable": unreadable,
            "missing": tmp_path / "missing", "fifo": fifo}


REFUSALS = [
    # (argv, exit status, what the line names); {name} is a path of the junk fixture
    (["aof", "verify", "{missing}"], 3, "{missing}"),
    (["aof", "verify", "{empty}"], 3, "{empty}"),
    (["aof", "verify", "{unreadable}"], 3, "segment-000001.aof"),
    (["aof", "stats", "{missing}"], 3, "{missing}"),
    (["aof", "stats", "{other}"], 3, "manifest.json"),
    (["aof", "stats", "{garbage}"], 2, "garbage.bin"),
    (["aof", "stats", "{unreadable}"], 3, "segment-000001.aof"),
    (["aof", "dump", "{other}"], 3, "manifest.json"),
    (["aof", "dump", "{garbage}"], 2, "garbage.bin"),
    (["aof", "dump", "--since", "yesterday", "{unreadable}"], 3, "yesterday"),
    (["aof", "fix", "{garbage}"], 3, "{garbage}"),
    (["aof", "fix", "{other}"], 3, "{other}"),
    (["aof", "fix", "{missing}"], 3, "{missing}"),
    (["restore", "{garbage}", "--to-lsn", "1", "--out", "{missing}"], 3, "{garbage}"),
    (["restore", "{other}", "--to-lsn", "1", "--out", "{missing}"], 2, "{other}"),
    (["restore", "{unreadable}", "--to-lsn", "1", "--out", "{garbage}"], 3, "{garbage}"),
    (["restore", "{unreadable}", "--to-time", "soon", "--out", "{missing}"], 3, "soon"),
    (["restore", "{unreadable}", "--to-lsn", "-5", "--out", "{missing}"], 3, "-5"),
    (["snapshot", "info", "{missing}"], 3, "{missing}"),
    (["snapshot", "info", "{unreadable}"], 3, "{unreadable}"),
    (["snapshot", "info", "{garbage}"], 2, "{garbage}"),
    (["snapshot", "info", "{empty}"], 3, "{empty}"),
    (["snapshot", "dump", "{garbage}"], 2, "{garbage}"),
    (["import", "{missing}", "--out", "{empty}"], 3, "{missing}"),
    (["import", "{empty}", "--out", "{missing}"], 2, "{empty}"),
    (["import", "{garbage}", "--out", "{other}"], 3, "{other}"),
    (["import", "{garbage}", "--out", "{garbage}"], 3, "{garbage}"),
    (["export-rdb", "{missing}", "--out", "{empty}/x.rdb"], 3, "{missing}"),
    (["export-rdb", "{other}", "--out", "{empty}/x.rdb"], 2, "{other}"),
    (["export-rdb", "{unreadable}", "--out", "{missing}/x.rdb"], 3, "{missing}"),
    (["export-rdb", "{unreadable}", "--out", "{empty}"], 3, "{empty}"),
    (["export-rdb", "{unreadable}", "--out", "{fifo}"], 3, "{fifo}"),  # never replaced
    (["export-rdb", "{unreadable}", "--out", "/proc/dump.rdb"], 3, "/proc/dump.rdb"),
    (["export", "{missing}", "--out", "{empty}/o"], 3, "{missing}"),
    (["export", "{unreadable}", "--out", "{empty}/o"], 3, "{unreadable}"),
    (["export", "{garbage}", "--out", "{empty}/o"], 2, "{garbage}"),
    (["export", "{other}", "--out", "{empty}/o"], 3, "{other}"),
    (["export", "{unreadable}", "--out", "{garbage}/o"], 3, "{garbage}/o"),
    (["queue", "stats", "{other}", "jobs"], 3, "{other}"),
    (["queue", "stats", "{missing}", "jobs"], 3, "{missing}"),
    (["queue", "stats", "{garbage}", "jobs"], 3, "{garbage}"),
    (["queue", "stats", "{unreadable}"], 3, "DIR NAME"),
    (["crashbench", "--json", "{missing}/r.json"], 3, "{missing}"),
    (["crashbench", "--json", "{empty}"], 3, "{empty}"),
    (["serve", "--config", "{missing}", "--dir", "{missing}"], 3, "{missing}"),
    (["serve", "--config", "{garbage}", "--dir", "{missing}"], 3, "{garbage}"),
    (["serve", "--dir", "{garbage}", "--port", "0"], 1, "{garbage}"),
]


@pytest.mark.parametrize(("argv", "status", "named"), REFUSALS,
                         ids=[" ".join(a) for a, _s, _n in REFUSALS])
def test_wrong_paths_are_refused_in_one_line(junk: dict[str, Path], tmp_path: Path,
                                             argv: list[str], status: int, named: str) -> None:
    before = tree_state(tmp_path)
    argv = [a.format(**junk) for a in argv]
    line = assert_refused(run(*argv, cwd=tmp_path), status, named.format(**junk))
    command = argv[:2] if argv[0] in ("aof", "snapshot", "queue") else argv[:1]
    assert line.startswith(f"streamkeep {' '.join(command)}: "), line  # which command says it
    assert "export-pin-" not in line and ".export-rdb-" not in line  # the user's names only
    assert tree_state(tmp_path) == before


def test_verify_reports_a_garbage_segment_on_stdout(junk: dict[str, Path]) -> None:
    """verify's report is its output: the damage is named there (file and offset), stderr
    stays empty."""
    done = run("aof", "verify", junk["garbage"])
    assert done.code == 2 and done.err == ""
    assert "bad-segment-header at garbage.bin:0" in done.out


def test_aof_fix_on_a_missing_path_says_it_does_not_exist(tmp_path: Path) -> None:
    line = assert_refused(run("aof", "fix", "./missing", cwd=tmp_path), 3, "./missing")
    assert "does not exist" in line and "not a directory" not in line
    assert list(tmp_path.iterdir()) == []


def test_queue_stats_says_what_does_not_exist(small: Path) -> None:
    before = tree_state(small, ignore=("LOCK",))
    line = assert_refused(run("queue", "stats", small, "jobs", "--group", "nope"), 2,
                          "jobs", "nope")
    assert "no group nope" in line and "gone" not in line and "workers" in line
    line = assert_refused(run("queue", "stats", small, "nojobs"), 2, "nojobs")
    assert "no such stream" in line and "gone" not in line
    assert run("queue", "stats", small, "jobs").code == 0
    assert tree_state(small, ignore=("LOCK",)) == before


def test_export_rdb_names_the_users_files_not_its_copy(tmp_path: Path) -> None:
    """Records that do not replay: the copy export-rdb works through is not the user's."""
    from streamkeep.aof import codec
    from streamkeep.aof import manifest as manifest_mod
    from streamkeep.aof.fs import RealFS

    data = tmp_path / "data"
    data.mkdir()
    (data / manifest_mod.segment_file(1)).write_bytes(b"".join([
        codec.encode_header(1, 1),
        codec.encode(1, 1_795_000_000_000, 0, [[b"XADD", b"s", b"1-0", b"f", b"v"]]),
        codec.encode(2, 1_795_000_000_001, 0, [[b"XGROUP", b"SETID", b"nokey", b"g", b"0"]])]))
    manifest_mod.store(RealFS(), str(data), manifest_mod.Manifest(
        [manifest_mod.SegmentEntry(manifest_mod.segment_file(1), 1, 1)], None))
    before = tree_state(data)
    out = tmp_path / "dump.rdb"
    line = assert_refused(run("export-rdb", data, "--out", out), 2, data)
    assert ".export-rdb" not in line and "state" not in line
    assert tree_state(data) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_export_names_the_snapshot_not_its_pin(small: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for file in small.iterdir():
        (data / file.name).write_bytes(file.read_bytes())
    (snapshot,) = data.glob("snapshot-*.mdb")
    snapshot.write_bytes(snapshot.read_bytes()[:5000])  # truncated
    before = tree_state(data)
    line = assert_refused(run("export", data, "--out", tmp_path / "out"), 2, snapshot.name)
    assert "export-pin-" not in line
    assert tree_state(data) == before
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def dumpable(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot whose dump is more than a pipe holds."""
    path = tmp_path_factory.mktemp("dumpable") / "data"
    with Engine.open(str(path)) as db:
        for i in range(5000):
            db.execute("XADD", "s", "*", "field", f"value {i}")
        db.compact(wait=True)
    return path


@pytest.mark.parametrize("command", [["aof", "dump"], ["snapshot", "dump"], ["aof", "verify"]])
def test_a_closed_pipe_is_not_an_error(big: Path, dumpable: Path, command: list[str]) -> None:
    """`streamkeep ... | head -1`: the reader goes away; no traceback, status 0."""
    import subprocess

    path = dumpable if command[0] == "snapshot" else big
    proc = subprocess.Popen([sys.executable, "-m", "streamkeep", *command, str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == ""
    assert os.path.exists(path / "manifest.json")


def test_ctrl_c_while_fix_writes_finishes_the_repair(tmp_path: Path) -> None:
    """Ctrl-C once aof fix has started writing (its first .cut- file): the repair is finished
    first (the directory is never half rewritten), then the interrupt takes effect."""
    data = big_datadir(tmp_path / "data", 200_000, segments=2)
    segment = data / "segment-000001.aof"
    damaged = bytearray(segment.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # a CRC mismatch followed by valid records
    segment.write_bytes(bytes(damaged))
    # (the .cut- file is written first, then two segments of 6 MB, fsynced, and the manifest)
    result = interrupt("aof", "fix", "--yes", "--force-skip-damaged", data,
                       when=lambda pid: any(data.glob("*.cut-*")))
    assert_interrupted(result, "aof fix")
    assert "rewrote 2 segment(s); 1 record(s) lost" in result.out
    assert run("aof", "verify", data).code == 0  # repaired, whole
