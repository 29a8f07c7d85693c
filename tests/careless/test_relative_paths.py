"""Every `streamkeep` command that takes a path, given relative paths as a user types them.

The working directory is a temporary one and the paths are `d`, `./d` and `../x/d` (a sibling
directory's): the data directory a server wrote (compacted, with records after its snapshot
and a work queue), the outputs (`restore --out`, `import --out`, `export-rdb --out`,
`export --out`/`--since`/`--work-dir`, `crashbench --json`), and the inputs (`aof verify|
stats|dump|fix`, `snapshot info|dump`, `queue stats`, `import SOURCE`, `bench --base`,
`serve --dir` and a config file's `dir`). Each command must do its work where the path
points (resolved against the working directory), and leave nothing else behind in either
directory: no pin, no temporary. Spark's JVM is started from another directory than the one
the export runs in (the module's session), so a relative path handed to its tasks would be
read in the wrong place."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, StreamQueue
from tests.support.careless import run
from tests.support.inspect_util import cli
from tests.support.serve_process import ServeProcess

# Spark's start-up and a child process's JVM take minutes on a busy machine.
pytestmark = pytest.mark.timeout(600)

# name -> (the working directory under the test's tmp_path, the prefix of every path)
FORMS = {"bare": ("x", ""), "dot": ("x", "./"), "parent": ("y", "../x/")}


def _fill(engine: Engine, start: int, count: int) -> None:
    for i in range(start, start + count):
        engine.execute("XADD", "orders", "*", "item", str(i))


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory as a server leaves it: compacted, then written to again."""
    path = tmp_path_factory.mktemp("relative") / "d"
    with Engine.open(str(path), aof_segment_max_bytes=4096) as engine:
        engine.execute("XGROUP", "CREATE", "orders", "audit", "0", "MKSTREAM")
        _fill(engine, 0, 200)
        queue = StreamQueue(engine, "jobs", consumer="w1")
        for i in range(3):
            queue.put({"n": str(i)})
        queue.get(1)
        engine.execute("SET", "greeting", "hello")
        engine.compact(wait=True)
        _fill(engine, 200, 30)
    return path


@pytest.fixture(params=sorted(FORMS))
def at(request: pytest.FixtureRequest, source: Path, tmp_path: Path,
       monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path]]:
    """(the prefix paths are given with, the directory they resolve in): the working
    directory is made the one the form names, `d` is a copy of the source data directory."""
    cwd, prefix = FORMS[request.param]
    for name in ("x", "y"):
        (tmp_path / name).mkdir()
    shutil.copytree(source, tmp_path / "x" / "d")
    monkeypatch.chdir(tmp_path / cwd)
    yield prefix, tmp_path / "x"
    for directory in (tmp_path / "x", tmp_path / "x" / "d", tmp_path / "y"):
        assert not _strays(directory), os.listdir(directory)
    assert os.listdir(tmp_path / "y") == []  # nothing written where the paths do not point


def _strays(directory: Path) -> list[str]:
    """What a command left behind in a directory: temporaries (hidden names), pins."""
    return [n for n in os.listdir(directory) if n.startswith((".", "export-pin-"))]


def _clean(home: Path) -> None:
    assert not _strays(home), os.listdir(home)
    assert not _strays(home / "d"), os.listdir(home / "d")


def test_the_read_only_inspection_commands(at: tuple[str, Path]) -> None:
    prefix, home = at
    d = f"{prefix}d"
    manifest = json.loads((home / "d" / "manifest.json").read_text())
    segment = f"{d}/{manifest['segments'][-1]['file']}"
    for argv in (["aof", "verify", d], ["aof", "verify", segment], ["aof", "verify", "--json", d],
                 ["aof", "stats", d], ["aof", "stats", segment], ["snapshot", "info", d],
                 ["snapshot", "dump", d], ["queue", "stats", d, "jobs"]):
        code, out, err = cli(*argv)
        assert code == 0, (argv, err)
        assert out and "Traceback" not in err, argv
    for argv in (["aof", "dump", d], ["aof", "dump", segment]):  # (it writes bytes: a child)
        result = run(*argv, cwd=Path.cwd())
        assert result.code == 0 and "XADD" in result.out, (argv, result.err)
    code, out, _err = cli("aof", "verify", "--json", d)
    assert json.loads(out)["records"] == 30 and json.loads(out)["path"] == d
    _clean(home)


def test_restore_then_fix_the_copy(at: tuple[str, Path]) -> None:
    prefix, home = at
    code, out, err = cli("restore", f"{prefix}d", "--to-lsn", "215", "--out", f"{prefix}r")
    assert code == 0, err
    assert f"{prefix}r: restored the state after LSN 215" in out
    with Engine.open(str(home / "r")) as engine:
        assert engine.journal is not None and engine.journal.lsn == 215
    manifest = json.loads((home / "r" / "manifest.json").read_text())
    last = home / "r" / manifest["segments"][-1]["file"]
    size = last.stat().st_size
    torn = bytes(12) + b"\x01"  # (zeros alone would be space allocated ahead, not damage)
    with last.open("ab") as f:
        f.write(torn)
    code, out, err = cli("aof", "fix", "--yes", f"{prefix}r")
    assert code == 0, err
    assert (home / "r" / f"{last.name}.cut-{size}").read_bytes() == torn
    assert last.stat().st_size == size
    _clean(home)
    assert sorted(os.listdir(home)) == ["d", "r"]


def test_export_rdb_then_import(at: tuple[str, Path]) -> None:
    prefix, home = at
    code, out, err = cli("export-rdb", f"{prefix}d", "--out", f"{prefix}dump.rdb")
    assert code == 0, err
    assert (home / "dump.rdb").read_bytes()[:5] == b"REDIS"
    code, out, err = cli("import", f"{prefix}dump.rdb", "--out", f"{prefix}imported")
    assert code == 0, err
    with Engine.open(str(home / "d")) as engine:
        expected = engine.execute("XLEN", "orders"), engine.execute("GET", "greeting")
    with Engine.open(str(home / "imported")) as engine:
        assert (engine.execute("XLEN", "orders"), engine.execute("GET", "greeting")) == expected
    _clean(home)
    assert sorted(os.listdir(home)) == ["d", "dump.rdb", "imported"]


def test_crashbench_json(at: tuple[str, Path]) -> None:
    prefix, home = at
    code, _out, err = cli("crashbench", "--mode", "random", "--points", "1", "--ops", "30",
                          "--json", f"{prefix}report.json")
    assert code == 0, err
    assert json.loads((home / "report.json").read_text())
    _clean(home)


def test_bench_checkouts_are_made_absolute(at: tuple[str, Path]) -> None:
    from streamkeep.tools.main import build_parser

    prefix, home = at
    args = build_parser().parse_args(["bench", "nodes", "--base", f"{prefix}d",
                                      "--before", f"{prefix}d"])
    assert args.base == args.before == str(home / "d")
    code, _out, err = cli("bench", "nodes", "--base", f"{prefix}d")
    assert code == 3 and str(home / "d" / ".venv" / "bin" / "python") in err


def test_serve_dir_and_a_config_files_dir(at: tuple[str, Path]) -> None:
    prefix, home = at
    conf = Path(f"{prefix}sk.conf")
    conf.write_text(f"dir {prefix}from-conf\nappendfsync always\n")
    for name, args in (("d", ["--dir", f"{prefix}d"]), ("new", ["--dir", f"{prefix}new"]),
                       ("from-conf", ["--config", str(conf)])):
        server = ServeProcess(None, *args, cwd=Path.cwd())
        try:
            client = server.client()
            client.xadd("orders", {"item": "served"})
            assert client.config_get("dir")["dir"] == str(home / name)
            client.shutdown()
            assert server.wait() == 0
        finally:
            server.kill()
    with Engine.open(str(home / "d")) as engine:
        assert engine.execute("XLEN", "orders") == 231
    for name in ("new", "from-conf"):
        with Engine.open(str(home / name)) as engine:
            assert engine.execute("XLEN", "orders") == 1
    assert sorted(os.listdir(home)) == ["d", "from-conf", "new", "sk.conf"]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One session for the module, started from the checkout (not from the directories the
    exports run in)."""
    from pyspark import sql
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p)
    session = (sql.SparkSession.builder.master("local[2]").appName("streamkeep-relative-paths")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions",
                       "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .getOrCreate())
    yield session
    session.stop()


def test_export_whole_incremental_and_work_dir(spark: Any, at: tuple[str, Path]) -> None:
    prefix, home = at
    code, out, err = cli("export", f"{prefix}d", "--out", f"{prefix}e1", "--master", "local[2]",
                         "--table", "streams")
    assert code == 0, err
    assert "kept being replaced" not in err
    _code, verified, _err = cli("aof", "verify", "--json", f"{prefix}d")
    last_lsn = json.loads(verified)["lsn_range"][1]
    assert json.loads((home / "e1" / "export-manifest.json").read_text())["lsn"] == last_lsn
    (home / "w").mkdir()
    code, out, err = cli("export", f"{prefix}d", "--out", f"{prefix}e2", "--master", "local[2]",
                         "--table", "entries", "--work-dir", f"{prefix}w")
    assert code == 0, err
    assert os.listdir(home / "w") == []
    code, out, err = cli("export", f"{prefix}d", "--out", f"{prefix}e3", "--master", "local[2]",
                         "--since", f"{prefix}e2")
    assert code == 0, err
    assert (home / "e3" / "export-manifest.json").exists()
    _clean(home)
    assert sorted(os.listdir(home)) == ["d", "e1", "e2", "e3", "w"]


def test_export_as_its_help_shows_it(tmp_path: Path, source: Path) -> None:
    """`streamkeep export ./data --out exp`, a child process started in the directory that
    holds `data` (its JVM too)."""
    shutil.copytree(source, tmp_path / "data")
    result = run("export", "./data", "--out", "exp", "--table", "streams", "--master",
                 "local[1]", cwd=tmp_path, timeout=540)
    assert result.code == 0, result.err
    assert (tmp_path / "exp" / "streams").is_dir()
    assert sorted(os.listdir(tmp_path)) == ["data", "exp"]
    assert not _strays(tmp_path / "data")
