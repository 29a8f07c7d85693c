"""A careless user exports a data directory and expects what it holds now: before its first
compaction (it used to fail, "no snapshot yet"), and after one with later writes and a consumer
made since (they used to be left out, silently). The export is as of the directory's last LSN
and says so; the directory is not changed; what cannot be exported is refused in one line;
Ctrl-C leaves no partial export behind. (--snapshot-only saying how far behind it is:
tests/tools/export/test_cli.py, in one Spark session.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import assert_refused, interrupt, run, tree_state
from tests.support.inspect_util import flip_byte, record_offsets, segments

SPARK = ("--master", "local[2]")
# Each case starts Spark's JVM in a child process, as a user's run does: on a machine shared
# with other jobs that alone can take most of the suite's default two minutes. (A safety net
# against a hang, not a bound on how long an export may take.)
TIMEOUT = 600
pytestmark = pytest.mark.timeout(TIMEOUT)


def _manifest(out: Path) -> dict:
    return json.loads((out / "export-manifest.json").read_text())


def test_before_the_first_compaction(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        for i in range(25):
            engine.execute("XADD", f"orders:{i % 2}", "*", "n", str(i))
        lsn = engine.datadir.journal.lsn  # type: ignore[union-attr]
    before = tree_state(data)
    out = tmp_path / "export"
    result = run("export", data, "--out", out, "--table", "entries", *SPARK, timeout=TIMEOUT)
    assert result.code == 0, result.err
    assert f"as of LSN {lsn}: its snapshot (LSN 0) and the {lsn} record(s) after it" in result.out
    assert f"export     as of LSN {lsn} -> {out}" in result.out
    doc = _manifest(out)
    assert (doc["lsn"], doc["state"], doc["tables"]["entries"]["rows"]) == (lsn, "current", 25)
    assert tree_state(data) == before  # read through a copy: nothing written there
    assert sorted(os.listdir(tmp_path)) == ["data", "export"]  # the scratch copy is gone


def test_later_writes_and_a_late_consumer_are_exported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        for i in range(353):
            engine.execute("XADD", "orders", "*", "n", str(i))
        engine.execute("XGROUP", "CREATE", "orders", "billing", "0")
        engine.execute("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "5", "STREAMS",
                       "orders", ">")
        engine.compact(wait=True)
        for i in range(20):  # after the snapshot
            engine.execute("XADD", "orders", "*", "n", f"late-{i}")
        engine.execute("XREADGROUP", "GROUP", "billing", "bob", "COUNT", "2", "STREAMS",
                       "orders", ">")
        lsn = engine.datadir.journal.lsn  # type: ignore[union-attr]
    before = tree_state(data)
    out = tmp_path / "export"
    result = run("export", data, "--out", out, "--json", *SPARK, timeout=TIMEOUT)
    assert result.code == 0, result.err
    doc = json.loads(result.out)
    assert doc["lsn"] == lsn and doc["state"] == "current"
    rows = {table: v["rows"] for table, v in doc["tables"].items()}
    assert rows == {"entries": 373, "streams": 1, "groups": 1, "pending": 7, "consumers": 2,
                    "keys": 1, "strings": 0, "zset_members": 0, "hash_fields": 0,
                    "set_members": 0, "list_elements": 0}
    assert _manifest(out) == doc
    assert tree_state(data) == before


def test_what_cannot_be_exported_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        for i in range(30):
            engine.execute("XADD", "s", "*", "n", str(i))
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    cases = [
        (["--snapshot-only"], 3, [data, "no snapshot yet", "without --snapshot-only"]),
        (["--snapshot-only", "--since-lsn", "3"], 3, ["--snapshot-only"]),
        (["--work-dir", tmp_path / "nowhere"], 3, [tmp_path / "nowhere", "not a directory"]),
        (["--out", existing], 3, [existing, "--force"]),
        (["--out", data / "export"], 3, [data / "export", "data directory"]),
    ]
    before = tree_state(tmp_path)
    for extra, code, names in cases:
        args = ["export", data, *([] if "--out" in extra else ["--out", tmp_path / "out"]),
                *extra]
        assert_refused(run(*args), code, *names)
    segment = segments(data)[0]
    flip_byte(segment, record_offsets(segment)[10] + 12)  # damage before the log's end
    damaged = tree_state(tmp_path)
    assert_refused(run("export", data, "--out", tmp_path / "out"), 2,
                   f"{segment}:{record_offsets(segment)[10]}", "before the log's end")
    assert tree_state(tmp_path) == damaged != before
    assert sorted(os.listdir(tmp_path)) == ["data", "existing"]


@pytest.mark.parametrize("after", [6.0])
def test_ctrl_c_leaves_no_partial_export(tmp_path: Path, after: float) -> None:
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        for i in range(200):
            engine.execute("XADD", "s", "*", "n", str(i))
    before = tree_state(data)
    out = tmp_path / "export"
    interrupt("export", data, "--out", out, *SPARK, after=after, timeout=TIMEOUT)
    if out.exists():  # it finished first: then whole
        assert _manifest(out)["tables"]["consumers"]["rows"] == 0
    assert sorted(os.listdir(tmp_path)) in (["data"], ["data", "export"])  # no temporaries
    assert tree_state(data) == before  # no pin left behind either


# pyspark as a user without the `spark` extra has it: no module of that name.
NO_PYSPARK = 'raise ModuleNotFoundError("No module named \'pyspark\'", name="pyspark")\n'


@pytest.mark.parametrize("missing", ["pyspark", "java"])
def test_what_spark_needs_is_checked_before_any_work(tmp_path: Path, missing: str) -> None:
    """Without pyspark (a `pyspark` on the import path that cannot be imported) or without
    Java (none on PATH, no JAVA_HOME), the export says so in one line, exit status 3, before
    it copies the directory's state or pins anything: nothing printed on stdout (the state
    line comes after the copy), nothing left beside OUT or in the directory."""
    data = tmp_path / "data"
    with Engine.open(str(data)) as engine:
        for i in range(30):
            engine.execute("XADD", "s", "*", "n", str(i))
        engine.compact(wait=True)
        engine.execute("XADD", "s", "*", "n", "after the snapshot")  # a copy to make
    work = tmp_path / "work"
    (work / "pyspark").mkdir(parents=True)
    (work / "pyspark" / "__init__.py").write_text(NO_PYSPARK)
    if missing == "pyspark":
        env = {"PYTHONPATH": str(work)}
    else:
        env = {"PATH": str(work), "JAVA_HOME": ""}  # (an empty JAVA_HOME is no JAVA_HOME)
    before = tree_state(data)
    result = run("export", data, "--out", tmp_path / "out", *SPARK, env=env, timeout=TIMEOUT)
    line = assert_refused(result, 3, "pyspark" if missing == "pyspark" else "Java")
    assert ("pip install 'streamkeep[spark]'" if missing == "pyspark" else "JAVA_HOME") in line
    assert result.out == ""  # no state line: nothing was copied or built
    assert sorted(os.listdir(tmp_path)) == ["data", "work"]  # no scratch copy, no OUT
    assert tree_state(data) == before  # no pin


def test_a_missing_path_is_named_before_what_spark_needs(tmp_path: Path) -> None:
    """Without pyspark, an export of a path that is not there says the path is missing (what
    the user can fix in the command line), not that pyspark is."""
    work = tmp_path / "work"
    (work / "pyspark").mkdir(parents=True)
    (work / "pyspark" / "__init__.py").write_text(NO_PYSPARK)
    missing = tmp_path / "nonexistent"
    result = run("export", missing, "--out", tmp_path / "out", env={"PYTHONPATH": str(work)})
    line = assert_refused(result, 3, missing, "no such file or directory")
    assert "pyspark" not in line
    assert sorted(os.listdir(tmp_path)) == ["work"]
