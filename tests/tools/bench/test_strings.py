"""tools/bench/strings.py: the release script SCRIPT LOADed to its SHA1, and the EVALSHA rows'
skip, with its reason, on a server without scripting (a real redis-server whose SCRIPT command
is renamed away). (The section itself runs in tests/tools/test_bench.py.)"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from streamkeep.tools.bench import strings
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
        sha = strings.load_release_script(server)
    assert sha == hashlib.sha1(strings.RELEASE_SCRIPT.encode()).hexdigest()
    assert "redis.call('del', KEYS[1])" in strings.RELEASE_SCRIPT  # redis-py's Lock release


@pytest.mark.redis
def test_a_server_refusing_script_load_skips_the_evalsha_rows() -> None:
    with redis_server("--rename-command", "SCRIPT", "") as server, pytest.raises(Skip) as skip:
        strings.load_release_script(server)
    # The reason, not the script's text Redis's error line quotes.
    assert str(skip.value) == "EVALSHA unsupported: SCRIPT LOAD answered unknown command 'SCRIPT'"
