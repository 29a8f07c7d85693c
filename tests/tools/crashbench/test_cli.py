"""`streamkeep crashbench` as a user runs it (a child process, as CI's bounded configuration):
every policy's exhaustive power-loss run over a short workload holds every invariant and
exits 0, its JSON report has a row per policy x model, a --replay token replays one crash
point, and bad input is a usage error (exit 2) without a traceback."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.tools.progress import RateLines

# A progress line on a pipe: what runs, points judged of its points, the rate, time elapsed.
PROGRESS = re.compile(r"crashbench: (always|everysec|no) exhaustive seed \d+: [\d,]+/[\d,]+ "
                      r"\(\d+%\), ([\d,.]+/s, )?.+ elapsed(, about .+ left of it)?")


def crashbench(*args: str, timeout: float = 300,
               env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamkeep", "crashbench", *args],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path_factory.mktemp("crashbench") / "report.json"
    proc = crashbench("--policy", "all", "--ops", "150", "--model", "none", "--model", "zeros",
                      "--json", str(report))
    return proc, json.loads(report.read_text())


def test_every_policy_holds_every_invariant(bounded: tuple) -> None:
    proc, doc = bounded
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # piped: plain progress lines (one every few seconds, one at the end), no engine warnings
    lines = proc.stderr.splitlines()
    assert lines and all(PROGRESS.match(line) for line in lines[:-1]), proc.stderr
    assert re.fullmatch(r"crashbench: [\d,]+ judged in \S+( \S+)? \([\d,.]+/s\)", lines[-1])
    assert doc["ok"] is True
    rows = {(r["policy"], r["model"]): r for r in doc["rows"]}
    assert set(rows) == {(p, m) for p in ("always", "everysec", "no") for m in ("none", "zeros")}
    for row in rows.values():
        assert row["covered"] == row["reached"] > 100  # exhaustive: every point tried
        assert row["violations"] == {}
        assert row["recoveries"].get("refused", 0) == 0
    assert rows["always", "none"]["lost"] == 0
    assert rows["everysec", "none"]["loss_points"] > 0  # unsynced writes were lost...
    assert rows["everysec", "none"]["loss_window_s"] <= 2.0  # ...within the bound
    assert "acked-lost" in proc.stdout and "PASS" in proc.stdout


def test_replay_token(bounded: tuple) -> None:
    _proc, doc = bounded
    row = doc["rows"][0]
    token = f"powerloss:{row['policy']}:1:150:50:40:{row['model']}"
    proc = crashbench("--replay", token)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "crash point:" in proc.stdout and "1/1" in proc.stdout


@pytest.mark.parametrize("args", [["--replay", "nonsense"], ["--model", "bogus"],
                                  ["--ops", "0"], ["--policy", "sometimes"]])
def test_usage_errors(args: list[str]) -> None:
    proc = crashbench(*args, "--ops", "20") if "--ops" not in args else crashbench(*args)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("token", "says"), [
    ("powerloss:always:1:20:8:1:bogus", "<model> must be one of none, all,"),
    ("powerloss:sometimes:1:20:8:1:zeros", "<policy> must be one of"),
    ("powerloss:always:x:20:8:1:zeros", "<seed> must be an integer, not 'x'"),
    ("powerloss:always:1:0:8:1:zeros", "<ops> must be an integer of at least 1"),
    ("powerloss:always:1:20:-3:1:zeros", "<compact_every> must be an integer of at least 0"),
    ("powerloss:always:1:20:8:-1:zeros", "<call> must be an integer of at least 0"),
    ("powerloss:always:1:20:8:99999:zeros", "<call> 99999 is past the run's last"),
    ("powerloss:always:1:20:8:1:zeros:bogus", "<workload> must be one of streams, types, lists"),
    ("sigkill:x:always:1:2", "<target> must be one of streamkeep, redis-server"),
    ("sigkill:streamkeep:sometimes:1:1", "<policy> must be one of"),
    ("sigkill:streamkeep:always:1:0", "<rounds> must be an integer of at least 1"),
    ("ioerror:always:1:x:write:ENOSPC:0:0", "<ops> must be an integer of at least 1"),
])
def test_a_bad_replay_token_is_a_usage_error(token: str, says: str) -> None:
    """Exit 1 means an invariant was violated: a token that names no run, or a field out of
    range, is a usage error (3) that says which field, never a traceback or a run of
    something else."""
    proc = crashbench("--replay", token)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"streamkeep crashbench: --replay {token}: " in proc.stderr, proc.stderr
    assert says in proc.stderr


def test_a_replay_token_on_any_call_replays_it() -> None:
    """Call 0 (the data directory's lock) is no write, fsync, rename or directory fsync: the
    replay judges a crash just before it, and exits 0 (every invariant held)."""
    proc = crashbench("--replay", "powerloss:always:1:20:8:0:zeros")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "crash point: lock #1 (call 0 of " in proc.stdout and "1/1" in proc.stdout


def test_help_has_examples_and_exit_codes() -> None:
    proc = crashbench("--help")
    assert proc.returncode == 0
    assert "examples:" in proc.stdout and "exit codes:" in proc.stdout


@pytest.fixture(scope="module")
def sigkill_both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """SIGKILL rounds (every moment once) against streamkeep serve and redis-server."""
    out = {}
    for target, points in (("streamkeep", "6"), ("redis-server", "3")):
        report = tmp_path_factory.mktemp("sigkill") / "report.json"
        proc = crashbench("--mode", "sigkill", "--target", target, "--points", points,
                          "--json", str(report))
        out[target] = (proc, json.loads(report.read_text()))
    return out


def test_sigkill_streamkeep_holds_every_invariant(sigkill_both: dict) -> None:
    proc, doc = sigkill_both["streamkeep"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = doc["rows"]
    assert row["target"] == "streamkeep" and row["covered"] == 6
    assert row["acked"] > 0 and row["lost"] == 0
    assert row["recovery_ms_mean"] is not None


def test_sigkill_redis_server_side_by_side(sigkill_both: dict) -> None:
    """The same rounds against redis-server (7.0 on Debian): it recovers every acknowledged
    write, but its AOF does not keep a group's entries-read (XREADGROUP is propagated as
    XCLAIM ... LASTID), and a kill during its recovery on a busy machine was seen to leave a
    group with fewer pending entries than the reads made (PEL 424, the model 428), so the
    bench may report `groups` there (entries-read or the PEL), and nothing else."""
    proc, doc = sigkill_both["redis-server"]
    (row,) = doc["rows"]
    assert row["target"] == "redis-server" and row["covered"] == 3 and row["acked"] > 0
    assert row["lost"] == 0
    assert set(row["violations"]) <= {"groups"}, (row["violations"], row["found"])
    assert all("entries-read" in f["detail"] or " PEL of " in f["detail"]
               for f in row["found"]), row["found"]
    assert proc.returncode == (1 if row["violations"] else 0)


def test_io_errors_hold_every_invariant(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = crashbench("--mode", "ioerror", "--points", "2", "--ops", "120", "--json",
                      str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(report.read_text())
    assert {r["model"] for r in doc["rows"]} == {"ENOSPC: disk full", "ENOSPC on write",
                                                  "EIO on write", "EIO on fsync",
                                                  "ENOSPC on fsync"}
    assert all(r["covered"] == 2 and not r["violations"] for r in doc["rows"])


def test_io_errors_find_a_refused_write_kept(tmp_path: Path) -> None:
    """The planted bug: a record that could not be written is dropped but its command not
    rolled back. The retrying client's check right after MISCONF sees it in the state."""
    report = tmp_path / "report.json"
    proc = crashbench("--mode", "ioerror", "--points", "2", "--ops", "120", "--json",
                      str(report), env={"STREAMKEEP_PLANTED_BUGS": "failed-write-kept"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["model"]: r for r in json.loads(report.read_text())["rows"]}
    assert rows["EIO on write"]["violations"].get("refused-kept"), rows["EIO on write"]


def test_random_mode_tries_the_points_asked(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    proc = crashbench("--mode", "random", "--policy", "everysec", "--ops", "120", "--points",
                      "60", "--model", "prefix-torn", "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads(report.read_text())["rows"]
    assert row["mode"] == "random" and row["covered"] == 60 and row["reached"] > 60


def test_bit_rot_is_detected_never_applied_or_dropped(tmp_path: Path) -> None:
    """The bit-rot model: a process crash, then one bit of fsynced data flipped (half the time
    in the last fsynced bytes). Recovery refuses, naming the file, or the flip changed nothing:
    never an open with a different state or fewer acknowledged writes."""
    report = tmp_path / "report.json"
    proc = crashbench("--mode", "random", "--policy", "all", "--ops", "120", "--points", "80",
                      "--model", "bitrot", "--json", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(report.read_text())["rows"]
    assert {r["policy"] for r in rows} == {"always", "everysec", "no"}
    for row in rows:
        assert row["model"] == "bitrot" and row["covered"] == 80 and not row["violations"]
        assert row["recoveries"].get("refused", 0) > 10  # detected, and said where
    assert rows[0]["lost"] == 0  # always: no acknowledged write dropped as a "torn tail"


def test_json_report_to_a_pipe_is_written_into_it(tmp_path: Path) -> None:
    """--json FILE is written beside FILE and renamed over it, unless FILE is not a regular
    file (a pipe, /dev/stdout): then into it, never replacing it."""
    import os
    import threading

    from streamkeep.tools.crashbench.cli import write_json

    fifo = tmp_path / "report.pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write_json(str(fifo), {"rows": [], "ok": True})
    reader.join(10)
    assert json.loads(got[0]) == {"rows": [], "ok": True}
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["report.pipe"]
    plain = tmp_path / "report.json"
    write_json(str(plain), {"ok": False})
    assert json.loads(plain.read_text()) == {"ok": False}
    write_json(str(plain), {"ok": True}, force=True)
    assert json.loads(plain.read_text()) == {"ok": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.pipe"]


def test_the_json_report_is_never_written_over_a_file_or_into_a_data_directory(
        tmp_path: Path) -> None:
    from streamkeep import Engine

    existing = tmp_path / "report.json"
    existing.write_text("yesterday's report")
    proc = crashbench("--ops", "20", "--model", "none", "--json", str(existing))
    assert proc.returncode == 3 and proc.stdout == ""  # refused before the run
    assert "report.json exists (--force overwrites it)" in proc.stderr
    assert existing.read_text() == "yesterday's report"
    with Engine.open(str(tmp_path / "data")):
        pass
    proc = crashbench("--ops", "20", "--model", "none", "--json",
                      str(tmp_path / "data" / "report.json"), "--force")
    assert proc.returncode == 3 and "inside the streamkeep data directory" in proc.stderr
    assert not (tmp_path / "data" / "report.json").exists()


def test_progress_lines_come_every_few_seconds_and_at_the_end() -> None:
    """On a pipe, a line at most every `every` seconds as updates come (a count lower than one
    seen is ignored: workers report ahead of the results), and the last line the run's."""
    now = [100.0]
    out = io.StringIO()
    lines = RateLines("crashbench", "judged", out, every=5.0, clock=lambda: now[0])
    for t, done in ((1.0, 20), (4.9, 40), (5.0, 100), (7.0, 80), (10.0, 150), (10.5, 160)):
        now[0] = 100.0 + t
        lines.update("always exhaustive seed 1", done, 200)
    now[0] = 112.0
    lines.finish()
    printed = out.getvalue().splitlines()
    # The rate is what was counted since the part's first update (t=1, 20) over the time since.
    assert printed == [
        "crashbench: always exhaustive seed 1: 100/200 (50%), 20.0/s, 5.0 s elapsed, about "
        "5.0 s left of it",
        "crashbench: always exhaustive seed 1: 150/200 (75%), 14.4/s, 10.0 s elapsed, about "
        "3.5 s left of it",
        "crashbench: 160 judged in 12.0 s (13.3/s)"]
    assert all(PROGRESS.match(line) for line in printed[:-1])


def test_a_parts_first_update_gives_no_rate_until_one_can_be_measured() -> None:
    """A part whose first update comes when a line is due (its points judged before it, in a
    time unknown): that line has no rate and no time left, nor one a moment later; the next
    one measures from that first update."""
    now = [100.0]
    out = io.StringIO()
    lines = RateLines("crashbench", "judged", out, every=5.0, clock=lambda: now[0])
    for t, done in ((6.0, 1000), (11.5, 1000), (17.0, 1500)):
        now[0] = 100.0 + t
        lines.update("always exhaustive seed 1", done, 3000)
    printed = out.getvalue().splitlines()
    assert printed == [
        "crashbench: always exhaustive seed 1: 1,000/3,000 (33%), 6.0 s elapsed",
        "crashbench: always exhaustive seed 1: 1,000/3,000 (33%), 0.0/s, 11.5 s elapsed",
        "crashbench: always exhaustive seed 1: 1,500/3,000 (50%), 45.5/s, 17.0 s elapsed, "
        "about 33.0 s left of it"]
    assert all(PROGRESS.match(line) for line in printed)
