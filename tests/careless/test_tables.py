"""Every table the tools print fits the width it is printed at (COLUMNS; 80 when piped and
COLUMNS is unset), without cutting an ID or a number: `snapshot info` (IDs as long as IDs get),
`aof stats`, `queue stats` and the crash bench's report, rendered at 80 columns; and at 200 the
tables are tables again."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import run

LONG_ID = "18446744073709551614-18446744073709551614"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tables") / "data"
    with Engine.open(str(path)) as db:
        db.execute("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
        for i in range(120):
            db.execute("XADD", "jobs", "*", "n", str(i))
        db.execute("XREADGROUP", "GROUP", "workers", "a-consumer-with-a-long-name", "COUNT",
                   "3", "STREAMS", "jobs", ">")
        db.execute("XADD", "a-stream-whose-ids-are-as-long-as-ids-get", LONG_ID, "f", "v")
        db.compact(wait=True)
        db.execute("XADD", "jobs", "*", "n", "after")
    return path


def assert_fits(text: str, columns: int = 80) -> None:
    assert text.strip(), "nothing printed"
    wide = [line for line in text.splitlines() if len(line) > columns]
    assert not wide, "\n".join(wide)
    assert "…" not in text and "..." not in text.replace(" .. ", " ")


@pytest.mark.parametrize("columns", ["80", ""], ids=["COLUMNS=80", "piped"])
def test_snapshot_info(data: Path, columns: str) -> None:
    # (a path as short as a user's: a path is one word, never wrapped)
    done = run("snapshot", "info", "data", cwd=data.parent, env={"COLUMNS": columns})
    assert done.code == 0, done.err
    assert_fits(done.out)
    assert LONG_ID in done.out and "a-consumer-with-a-long-name" in done.out
    for name in ("first id", "last delivered", "entries read"):  # a row per block
        assert name in done.out


def test_aof_stats(data: Path) -> None:
    done = run("aof", "stats", "data", cwd=data.parent, env={"COLUMNS": "80"})
    assert done.code == 0, done.err
    assert_fits(done.out)
    assert "jobs" in done.out and "Segments" in done.out


def test_queue_stats(data: Path) -> None:
    done = run("queue", "stats", "data", "jobs", cwd=data.parent, env={"COLUMNS": "80"})
    assert done.code == 0, done.err
    assert_fits(done.out)
    assert "a-consumer-with-a-long-name" in done.out


def test_crashbench_report(tmp_path: Path) -> None:
    done = run("crashbench", "--ops", "40", "--model", "none", "--policy", "all",
               env={"COLUMNS": "80"})
    assert done.code == 0, done.err
    assert_fits(done.out)
    assert "recovery time" in done.out and "PASS" in done.out


def test_wide_enough_tables_stay_tables(data: Path) -> None:
    done = run("snapshot", "info", "data", cwd=data.parent, env={"COLUMNS": "200"})
    assert done.code == 0, done.err
    assert_fits(done.out, 200)
    header = next(line for line in done.out.splitlines() if "first id" in line)
    assert "last id" in header and "max deleted" in header  # one row of headers
