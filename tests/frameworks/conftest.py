"""Fixtures of the framework scenarios: `target`, parametrized, is a `streamkeep serve` child
process (one per test module) or the session's real redis-server, flushed before each test, so
every scenario runs against both and asserts the same outcomes; `children` starts the scenario's
own child processes and kills what is left at teardown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.frameworks import Children, Target
from tests.support.serve_process import ServeProcess, spawner


@pytest.fixture(scope="module")
def streamkeep_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    start, cleanup = spawner()
    try:
        yield start(tmp_path_factory.mktemp("streamkeep") / "data")
    finally:
        cleanup()


@pytest.fixture(params=["streamkeep", pytest.param("redis-server", marks=pytest.mark.redis)])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "streamkeep":
        proc: ServeProcess = request.getfixturevalue("streamkeep_serve")
        assert proc.proc.poll() is None, proc.output()
        found = Target("streamkeep", proc.host, proc.port)
    else:
        server: Any = request.getfixturevalue("redis_server")
        found = Target("redis-server", server.host, server.port)
    with found.client() as client:
        client.flushall()
    yield found


@pytest.fixture
def children() -> Iterator[Children]:
    kids = Children()
    try:
        yield kids
    finally:
        kids.reap()
