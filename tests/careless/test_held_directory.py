"""`streamkeep queue stats` (with --shared or without) on a data directory a plain
`streamkeep serve` holds: refused in one line that says what is wrong (the directory is that
server's) and how to reach it (`--url` and its address), never recommending the flag just
given, and the directory exactly as it was: the same files (no shared.conf, shared.lock or
shared.log), the same bytes, the same mode."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from streamkeep import Engine
from tests.support.careless import assert_refused, run, tree_state


@pytest.fixture
def queue_dir(tmp_path: Path) -> Path:
    """A data directory holding a queue (stream `jobs`, group `workers`), mode 0755."""
    data = tmp_path / "data"
    with Engine.open(str(data)) as db:
        db.execute("XGROUP", "CREATE", "jobs", "workers", "$", "MKSTREAM")
        db.execute("XADD", "jobs", "*", "n", "1")
    data.chmod(0o755)
    return data


@pytest.mark.parametrize("shared", [True, False], ids=["--shared", "without --shared"])
def test_queue_stats_on_a_directory_serve_holds_names_the_server_and_changes_nothing(
        queue_dir: Path, spawn, shared: bool) -> None:  # type: ignore[no-untyped-def]
    server = spawn(queue_dir)
    names, mode = sorted(os.listdir(queue_dir)), stat.S_IMODE(queue_dir.stat().st_mode)
    before = tree_state(queue_dir)
    argv = ["queue", "stats", queue_dir, "jobs", *(["--shared"] if shared else [])]
    url = f"redis://127.0.0.1:{server.port}"
    line = assert_refused(run(*argv), 3, queue_dir, "streamkeep serve", f"--url {url}")
    assert "--shared" not in line  # (given, or not: the server's directory is not shared)
    assert sorted(os.listdir(queue_dir)) == names  # no shared.conf, shared.lock, shared.log
    assert stat.S_IMODE(queue_dir.stat().st_mode) == mode == 0o755
    assert tree_state(queue_dir) == before
    done = run("queue", "stats", "--url", url, "jobs", "--json")  # what the line says works
    assert done.code == 0 and json.loads(done.out)["length"] == 1, done.err
