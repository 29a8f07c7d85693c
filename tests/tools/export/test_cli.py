"""`streamkeep export`: usage errors before Spark starts, and a whole export read back."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.tools.main import main
from streamkeep.tools.value_tables import STREAM_TABLES, available
from tests.support.typed_keys import FAR, engine_keys, typed_engine, write_typed_snapshot

# Spark's JVM starts once per module and its first jobs warm it up: on a machine shared with
# other jobs that alone can take most of the suite's default two minutes. (A safety net
# against a hang, not a bound on how long a job may take.)
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def datadir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("cli") / "data")
    engine = Engine.open(path, stream_node_max_entries=3)
    try:
        for i in range(20):
            engine.execute("XADD", "orders:eu", f"{i + 1}-0", "item", str(i), "item", b"\xff")
        engine.execute("XADD", "audit", "5-0", "who", "me")
        engine.execute("XDEL", "orders:eu", "3-0")
        engine.execute("XGROUP", "CREATE", "orders:eu", "g", "0")
        engine.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "4", "STREAMS", "orders:eu", ">")
        engine.compact(wait=True)
    finally:
        engine.close()
    return path


def test_usage_errors_exit_before_spark(datadir: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    assert main(["export", str(tmp_path / "missing"), "--out", out]) == 3
    assert "no such file or directory" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["export", str(empty), "--out", out]) == 3
    garbage = tmp_path / "garbage.mdb"
    garbage.write_bytes(b"not a snapshot" * 1000)
    assert main(["export", str(garbage), "--out", out]) == 2
    err = capsys.readouterr().err
    assert "not a readable LMDB snapshot" in err and "Traceback" not in err
    assert [n for n in os.listdir(tmp_path) if n.startswith("export-pin-")] == []  # released
    os.makedirs(os.path.join(out, "streams"))
    assert main(["export", datadir, "--out", out, "--table", "streams"]) == 3
    assert "out exists (--force overwrites it)" in capsys.readouterr().err


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One session for the module: export uses a running session and leaves it running (its
    own start-up is what a CLI run pays; here it would be paid per export)."""
    from pyspark import sql
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p)
    session = (sql.SparkSession.builder.master("local[2]").appName("streamkeep-export-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions",
                       "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .getOrCreate())
    yield session
    session.stop()


def test_export_all_tables_to_parquet_then_json(spark: Any, datadir: str,
                                                tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    out = str(tmp_path / "out")
    assert main(["export", datadir, "--out", out, "--master", "local[2]",
                 "--num-partitions", "3"]) == 0
    manifest = json.loads(Path(out, "export-manifest.json").read_text())
    counts = {t: v["rows"] for t, v in manifest["tables"].items()}
    stream_counts = {t: counts.pop(t) for t in STREAM_TABLES}
    assert stream_counts == {"entries": 20, "streams": 2, "groups": 1, "pending": 4,
                             "consumers": 1}
    # the key tables: the two streams' keys, no key of another type
    assert counts == {"keys": 2, **{t.table: 0 for t in available()}}
    entries = pq.read_table(os.path.join(out, "entries")).to_pylist()
    assert sorted((r["stream"], r["ms"]) for r in entries) == sorted(
        [(b"audit", 5)] + [(b"orders:eu", i) for i in range(1, 21) if i != 3])
    first = next(r for r in entries if r["stream"] == b"orders:eu" and r["ms"] == 1)
    assert first["pairs"] == [{"field": b"item", "value": b"0"},
                              {"field": b"item", "value": b"\xff"}]
    assert {r["snapshot_lsn"] for r in entries} == {manifest["snapshot_lsn"]}
    assert not [n for n in os.listdir(datadir) if n.startswith("export-pin-")]
    assert spark.sparkContext._jsc is not None  # noqa: SLF001 (still running: not ours to stop)

    json_out = str(tmp_path / "json")
    assert main(["export", datadir, "--out", json_out, "--format", "json", "--table",
                 "entries", "--streams", "orders:*", "--master", "local[2]"]) == 0
    lines = [json.loads(line) for f in sorted(Path(json_out, "entries").glob("part-*"))
             for line in f.read_text().splitlines()]
    assert len(lines) == 19 and {r["stream_str"] for r in lines} == {"orders:eu"}


def parquet_entries(out: str) -> set[tuple]:
    import pyarrow.parquet as pq

    rows = pq.read_table(os.path.join(out, "entries")).to_pylist()
    return {(r["db"], r["stream"], r["id"], tuple((p["field"], p["value"]) for p in r["pairs"]))
            for r in rows}


def test_incremental_exports_add_up_to_a_full_export(spark: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A base export, an incremental one from the AOF, another after a compaction folded its
    records (from the snapshot, by the positions in the previous manifest): together they
    equal a full export at the end."""
    path = str(tmp_path / "data")
    outs = [str(tmp_path / name) for name in ("base", "day1", "day2", "full")]
    with Engine.open(path, stream_node_max_entries=5) as engine:
        for i in range(30):
            engine.execute("XADD", f"s{i % 3}", "*", "n", str(i), "n", b"\x00")
        engine.compact(wait=True)
        assert main(["export", path, "--out", outs[0], "--table", "entries"]) == 0
        assert "entries              30 rows" in capsys.readouterr().out
        for i in range(30, 45):
            engine.execute("XADD", f"s{i % 4}", "*", "n", str(i))
        assert main(["export", path, "--out", outs[1], "--since", outs[0], "--json"]) == 0
        day1 = json.loads(capsys.readouterr().out)
        assert day1["incremental"]["since_lsn"] > 0 and not day1["incremental"]["from_snapshot"]
        assert day1["tables"]["entries"]["rows"] == 15
        for i in range(45, 60):
            engine.execute("XADD", f"s{i % 5}", "*", "n", str(i))
        engine.compact(wait=True)  # folds day2's first records into the snapshot
        engine.execute("XADD", "s9", "*", "n", "last")
        assert main(["export", path, "--since-lsn", str(day1["lsn"]), "--out", outs[2]]) == 3
        assert "use --since with the previous export" in capsys.readouterr().err
        assert main(["export", path, "--out", outs[2], "--since", outs[1]]) == 0
        engine.compact(wait=True)
        assert main(["export", path, "--out", outs[3], "--table", "entries"]) == 0
    capsys.readouterr()
    day2 = json.loads(Path(outs[2], "export-manifest.json").read_text())
    assert day2["incremental"]["from_snapshot"] and day2["tables"]["entries"]["rows"] == 16
    parts = [parquet_entries(out) for out in outs]
    assert len(parts[3]) == 61
    assert parts[0] | parts[1] | parts[2] == parts[3]
    assert sum(len(p) for p in parts[:3]) == 61  # nothing exported twice
    full = json.loads(Path(outs[3], "export-manifest.json").read_text())
    assert full["positions"] == day2["positions"]  # the same state, reached both ways
    assert not [n for n in os.listdir(path) if n.startswith("export-pin-")]


def test_csv_partitioned_by_date_and_stream(spark: Any, datadir: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    import base64
    import csv

    out = str(tmp_path / "csv")
    assert main(["export", datadir, "--out", out, "--format", "csv", "--table", "entries",
                 "--partition-by", "date"]) == 0
    assert "entries" in capsys.readouterr().out
    assert sorted(n for n in os.listdir(os.path.join(out, "entries"))
                  if not n.startswith(".")) == ["_SUCCESS", "date=1970-01-01"]
    rows = [row for f in Path(out, "entries").glob("date=*/part-*.csv")
            for row in csv.DictReader(f.open())]
    assert len(rows) == 20
    first = next(r for r in rows if r["stream_str"] == "orders:eu" and r["ms"] == "1")
    assert base64.b64decode(first["stream"]) == b"orders:eu"
    assert [(base64.b64decode(p["field"]), base64.b64decode(p["value"]))
            for p in json.loads(first["pairs"])] == [(b"item", b"0"), (b"item", b"\xff")]
    out = str(tmp_path / "by-stream")
    assert main(["export", datadir, "--out", out, "--partition-by", "stream", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partition_by"] == "stream" and doc["tables"]["streams"]["rows"] == 2
    assert sorted(n for n in os.listdir(os.path.join(out, "entries")) if "=" in n) == [
        "stream_str=audit", "stream_str=orders%3Aeu"]


def test_a_directory_is_exported_as_of_its_current_state(spark: Any, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    """Before the first compaction, and after one with later writes: everything the directory
    holds, as of its last LSN (said on stdout and in the manifest); --snapshot-only reads the
    snapshot alone and says how far behind it is; an incremental export from a current-state
    export adds exactly the entries written since; --force replaces only what it writes."""
    path = str(tmp_path / "data")
    outs = {name: str(tmp_path / name) for name in ("early", "now", "snap", "since", "full")}
    with Engine.open(path, stream_node_max_entries=5) as engine:
        for i in range(12):
            engine.execute("XADD", f"s{i % 2}", "*", "n", str(i))
        lsn = engine.datadir.journal.lsn  # type: ignore[union-attr]
        assert main(["export", path, "--out", outs["early"], "--table", "entries"]) == 0
        printed = capsys.readouterr().out
        assert f"as of LSN {lsn}: its snapshot (LSN 0) and the {lsn} record(s)" in printed
        assert "entries              12 rows" in printed
        early = json.loads(Path(outs["early"], "export-manifest.json").read_text())
        assert (early["lsn"], early["state"]) == (lsn, "current")

        engine.compact(wait=True)
        for i in range(12, 20):
            engine.execute("XADD", f"s{i % 2}", "*", "n", str(i))
        engine.execute("XGROUP", "CREATE", "s0", "g", "0", "MKSTREAM")
        engine.execute("XGROUP", "CREATECONSUMER", "s0", "g", "late")
        lsn = engine.datadir.journal.lsn  # type: ignore[union-attr]
        assert main(["export", path, "--out", outs["now"], "--json"]) == 0
        now = json.loads(capsys.readouterr().out)
        assert now["lsn"] == now["snapshot_lsn"] == lsn and now["state_seconds"] is not None
        assert now["tables"]["entries"]["rows"] == 20
        assert now["tables"]["consumers"]["rows"] == 1  # made after the snapshot: still here

        assert main(["export", path, "--out", outs["snap"], "--table", "streams",
                     "--snapshot-only"]) == 0
        printed = capsys.readouterr().out
        snap = json.loads(Path(outs["snap"], "export-manifest.json").read_text())
        behind = snap["behind"]
        assert snap["state"] == "snapshot" and behind["log_lsn"] == lsn
        assert behind["records"] == lsn - snap["lsn"] > 0
        assert f"{behind['records']} record(s) behind the directory" in printed

        for i in range(20, 25):
            engine.execute("XADD", "s9", "*", "n", str(i))
        assert main(["export", path, "--out", outs["since"], "--since", outs["now"]]) == 0
        assert "entries               5 rows" in capsys.readouterr().out
        engine.compact(wait=True)
        assert main(["export", path, "--out", outs["full"], "--table", "entries"]) == 0
    capsys.readouterr()
    assert parquet_entries(outs["now"]) | parquet_entries(outs["since"]) == \
        parquet_entries(outs["full"])
    assert len(parquet_entries(outs["full"])) == 25

    Path(outs["full"], "notes.txt").write_text("mine")
    assert main(["export", path, "--out", outs["full"], "--table", "streams"]) == 3
    assert "full exists (--force overwrites it)" in capsys.readouterr().err
    assert main(["export", path, "--out", outs["full"], "--table", "streams",
                 "--overwrite"]) == 0  # --force's alias: the tables written replace theirs
    assert sorted(os.listdir(outs["full"])) == ["entries", "export-manifest.json", "notes.txt",
                                                "streams"]
    assert sorted(os.listdir(tmp_path)) == sorted(["data", *outs])  # no temporary left
    assert not [n for n in os.listdir(path) if n.startswith("export-pin-")]


def test_every_type_is_exported_with_its_table(spark: Any, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot of streams, strings and sorted sets: every table written (Parquet), the
    key tables equal to the engine; --streams filters the key tables by key name (CSV)."""
    import base64
    import csv

    import pyarrow.parquet as pq

    engine = typed_engine()
    path = write_typed_snapshot(engine, str(tmp_path / "snapshot-000000000009.mdb"))
    out = str(tmp_path / "all")
    assert main(["export", path, "--out", out, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["tables"]) == {*STREAM_TABLES, "keys", *(t.table for t in available())}
    keys = pq.read_table(os.path.join(out, "keys")).to_pylist()
    assert sorted((r["db"], r["key"], r["type"], r["expire_ms"]) for r in keys) == \
        engine_keys(engine)
    strings = pq.read_table(os.path.join(out, "strings")).to_pylist()
    assert sorted((r["db"], r["key"], r["value"], r["expire_ms"]) for r in strings) == [
        (0, b"bin\xff", b"\x00\xff", FAR + 1), (0, b"plain", b"v", None),
        (2, b"counter", b"41", None)]
    members = pq.read_table(os.path.join(out, "zset_members")).to_pylist()
    assert doc["tables"]["zset_members"]["rows"] == len(members) == 304
    board = sorted((r["score"], r["member"]) for r in members if r["key"] == b"board")
    assert board == [(float("-inf"), b"bob"), (1.5, b"alice"), (1e300, b"\xffcarol")]

    out = str(tmp_path / "csv")
    assert main(["export", path, "--out", out, "--format", "csv", "--table", "keys",
                 "--streams", "b*"]) == 0
    assert "keys" in capsys.readouterr().out
    rows = [row for f in Path(out, "keys").glob("part-*.csv") for row in csv.DictReader(f.open())]
    assert sorted((base64.b64decode(r["key"]), r["type"]) for r in rows) == [
        (b"big", "zset"), (b"bin\xff", "string"), (b"board", "zset")]
