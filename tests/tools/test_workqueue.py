"""`streamkeep queue stats`: a queue's figures from a data directory or a server (--url), as a
table or JSON; clear errors and exit codes for a missing queue, a directory in use, a server
that cannot be reached, bad usage."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

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


def test_stats_while_the_shared_server_does_not_answer_yet(
        shared_dir: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The directory's shared server holds its lock but its socket did not answer the look
    (a replacement starting after a kill, in another process): the figures come through it,
    not a refusal telling to connect with --url."""
    from streamkeep.engine.services import shared

    path = str(shared_dir)
    with Engine.open(path, shared=True) as engine:
        _fill(engine)
        looks = []
        monkeypatch.setattr(shared, "serving", lambda p: looks.append(p))  # (None: no answer)
        assert main(["queue", "stats", path, "jobs", "--json"]) == 0
        assert looks and set(looks) == {path}
        assert json.loads(capsys.readouterr().out)["pending"] == 1
        holder = shared.held_by(path)
        assert holder is not None and holder.shared and holder.pid == engine.server_pid


def _blocked_in_recv(thread: threading.Thread, limit: float) -> None:
    """Wait until `thread` waits on a socket read (its kernel wait channel says so), or
    `limit` seconds where the kernel does not show it."""
    wchan = Path(f"/proc/self/task/{thread.native_id}/wchan")
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if "read" in wchan.read_text():
                return
        time.sleep(0.01)


def test_figures_are_read_again_when_the_shared_server_is_killed_mid_read(
        shared_dir: Path) -> None:
    """The directory's shared server SIGKILLed after the request was sent, before it
    replied: the reads are asked again of the server the next call starts, not reported as
    a lost server (the CLI runs beside workers whose server may be killed at any moment)."""
    from streamkeep.engine.wire.errors import ReplyError
    from streamkeep.tools.workqueue import figures
    from tests.support.pids import stop, wait_gone
    from tests.support.shared_dirs import servers_of

    with Engine.open(str(shared_dir), shared=True) as engine:
        _fill(engine)
        old = engine.server_pid
        connected, go = threading.Event(), threading.Event()
        got: list[Any] = []

        def read() -> None:
            engine.execute("PING")  # (this thread's connection made, checked: only reads left)
            connected.set()
            go.wait(60)
            got.append(figures(engine, engine.redis(), "jobs", "workers", None, (ReplyError,)))

        reader = threading.Thread(target=read)
        reader.start()
        assert connected.wait(60)
        stop(old)  # it takes the request, never answers it
        go.set()
        _blocked_in_recv(reader, 5.0)
        os.kill(old, signal.SIGKILL)
        wait_gone(old, 30)
        reader.join(60)
        assert got, "the read did not come back"
        missing, stats = got[0]
        assert missing is None
        assert (stats["pending"], stats["dead"], stats["lag"]) == (1, 1, 2)
        assert old not in servers_of(shared_dir)  # (read of the new server)
        assert len(servers_of(shared_dir)) == 1
