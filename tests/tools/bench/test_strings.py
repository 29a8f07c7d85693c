"""tools/bench/datatypes.py's strings rows: the release script SCRIPT LOADed to its SHA1, and the EVALSHA rows'
skip, with its reason, on a server without scripting (a real redis-server whose SCRIPT command
is renamed away). (The section itself runs in tests/tools/test_bench.py.)"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from streamkeep.tools.bench import datatypes
from streamkeep.tools.bench.processes import RedisServer
from streamkeep.tools.bench.workload import Skip


@contextmanager
def redis_server(*args: str) -> Iterator[RedisServer]:
    server = RedisServer(persistence=("--appendonly", "no", *args))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.redis
def test_the_release_script_loads_as_its_sha1() -> None:
    with redis_server() as server:
        sha = datatypes.load_release_script(server)
    assert sha == hashlib.sha1(datatypes.RELEASE_SCRIPT.encode()).hexdigest()
    assert "redis.call('del', KEYS[1])" in datatypes.RELEASE_SCRIPT  # redis-py's Lock release


@pytest.mark.redis
def test_a_server_refusing_script_load_skips_the_evalsha_rows() -> None:
    with redis_server("--rename-command", "SCRIPT", "") as server, pytest.raises(Skip) as skip:
        datatypes.load_release_script(server)
    # The reason, not the script's text Redis's error line quotes.
    assert str(skip.value) == "EVALSHA unsupported: SCRIPT LOAD answered unknown command 'SCRIPT'"
