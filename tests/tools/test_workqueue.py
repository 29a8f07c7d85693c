"""`streamkeep queue stats`: a queue's figures from a data directory or a server (--url), as a
table or JSON; clear errors and exit codes for a missing queue, a directory in use, a server
that cannot be reached, bad usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamkeep import Engine, StreamQueue
from streamkeep.tools.main import main


def _fill(engine: Engine) -> None:
    q = StreamQueue(engine, "jobs", consumer="w1", max_deliveries=1)
    for i in range(5):
        q.put({"n": str(i)})
    first, second = q.get(2)
    first.ack()
    second.nack()  # its only delivery failed: dead-lettered
    q.get(1)  # held


def test_stats_of_a_data_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "d")
    with Engine.open(path) as engine:
        _fill(engine)
    assert main(["queue", "stats", path, "jobs", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {k: doc[k] for k in ("queue", "group", "length", "pending", "lag", "dead")} == {
        "queue": "jobs", "group": "workers", "length": 5, "pending": 1, "lag": 2, "dead": 1}
    assert list(doc["consumers"]) == ["w1"] and doc["oldest_pending_ms"] >= 0
    assert main(["queue", "stats", path, "jobs"]) == 0
    out = capsys.readouterr().out
    assert "queue jobs (group workers)" in out and "dead letters" in out and "w1" in out
    with Engine.open(path) as engine:  # the command changed nothing
        assert engine.execute("XINFO", "CONSUMERS", "jobs", "workers")[0][1] == b"w1"
        assert main(["queue", "stats", path, "jobs"]) == 3  # in use
    assert "in use" in capsys.readouterr().err


def test_stats_over_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.server_util import start_server

    engine = Engine()
    _fill(engine)
    handle = start_server(engine)
    try:
        url = f"redis://{handle.host}:{handle.port}"
        assert main(["queue", "stats", "--url", url, "jobs", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["pending"] == 1
        assert main(["queue", "stats", "--url", url, "nope"]) == 2
        assert "no queue nope" in capsys.readouterr().err
        assert main(["queue", "stats", "--url", url, "jobs", "--group", "other"]) == 2
        assert "queue jobs has no group other" in capsys.readouterr().err
    finally:
        handle.stop()
    assert main(["queue", "stats", "--url", "redis://127.0.0.1:1", "jobs"]) == 3
    assert "redis://127.0.0.1:1" in capsys.readouterr().err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queue", "stats", str(tmp_path), "jobs"]) == 3
    assert "not a data directory" in capsys.readouterr().err
    assert main(["queue", "stats", "jobs"]) == 3
    assert "give DIR NAME, or --url URL NAME" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["queue", "stats", "--help"])
    assert "examples:" in capsys.readouterr().out


def test_stats_through_the_directorys_shared_server(shared_dir: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.pids import wait_gone
    from tests.support.shared_dirs import servers_of

    path = str(shared_dir)
    with Engine.open(path, shared=True) as engine:
        _fill(engine)
        # Its server holds the directory: the figures come from it (nothing started).
        assert main(["queue", "stats", path, "jobs", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["pending"] == 1
        stopped = engine.server_pid
        assert servers_of(shared_dir) == [stopped]
        engine.shutdown_server()
    wait_gone(stopped, 30)
    # No server runs: in process by default, through a server it starts with --shared.
    assert main(["queue", "stats", path, "jobs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["dead"] == 1
    assert servers_of(shared_dir) == []
    assert main(["queue", "stats", path, "jobs", "--shared", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lag"] == 2
    (started,) = servers_of(shared_dir)
    assert started != stopped
