"""Fixtures of the framework scenarios: `target`, parametrized, is a fresh `streamkeep serve`
child process or the session's real redis-server (flushed), so every scenario runs against both
and asserts the same outcomes; `children` starts the scenario's own child processes and kills
what is left at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import Children, Target
from tests.support.serve_process import ServeProcess


@pytest.fixture(params=["streamkeep", "redis-server"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    if request.param == "streamkeep":
        spawn: Callable[..., ServeProcess] = request.getfixturevalue("spawn")
        proc = spawn(tmp_path / "data")
        yield Target("streamkeep", proc.host, proc.port)
        return
    server: Any = request.getfixturevalue("redis_server")
    found = Target("redis-server", server.host, server.port)
    with found.client() as client:
        client.flushall()
        client.script_flush()
    yield found


@pytest.fixture
def children() -> Iterator[Children]:
    kids = Children()
    try:
        yield kids
    finally:
        kids.reap()
