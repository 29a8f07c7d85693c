"""A redis-server in cluster mode, the oracle for what a cluster node answers on its own
(CLUSTER KEYSLOT and the like).

`cluster_redis` is a module-scoped fixture (import it into the test module:
`from tests.support.cluster_redis import cluster_redis`) yielding a tools.servers.RedisServer
(`.host`, `.port`) started with `--cluster-enabled yes` in a temporary directory of its own,
which holds its cluster config file; at teardown the server is stopped (SIGKILL if it does
not stop in time) and the directory removed. The node serves no slot and knows no other node:
enough for the commands that need neither.

Its cluster bus listens on a port of its own (`--cluster-port`): by default Redis puts the bus
at the client port + 10000, and refuses to start on a client port above 55535, where a free
port may well be.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamkeep.tools.servers import RedisServer, ServerFailed, free_port
from tests.support.resp_client import RespClient

STARTUP_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
ATTEMPTS = 3  # a bus port taken before the node bound it: another port, in another directory


def start_cluster_node(root: Path) -> RedisServer:
    """A running cluster-enabled redis-server whose files are under `root`; ServerFailed, with
    its log's tail, when none starts."""
    failure = ServerFailed("no attempt")
    for attempt in range(ATTEMPTS):
        node = RedisServer(str(root / f"node-{attempt}"), None,
                           extra=("--cluster-enabled", "yes",
                                  "--cluster-config-file", "nodes.conf",
                                  "--cluster-port", str(free_port())),
                           start_timeout=STARTUP_TIMEOUT, stop_timeout=STOP_TIMEOUT,
                           track=False)
        try:
            return node.start()  # (it tries another client port itself)
        except ServerFailed as err:  # nothing is left running
            failure = err
            if "Address already in use" not in str(err):
                break
    raise failure


def serve_every_slot(node: RedisServer) -> None:
    """Give the node every slot and wait until its cluster says ok (a node alone: what a
    streamkeep node alone is)."""
    with RespClient(node.host, node.port) as client:
        assert client.execute("CLUSTER", "ADDSLOTSRANGE", "0", "16383") == "OK"
        for _ in range(600):  # (a wait bounded by attempts: it is ok within a second)
            if b"cluster_state:ok" in client.execute("CLUSTER", "INFO"):
                return
            time.sleep(0.05)
    raise AssertionError("redis-server's cluster did not come up")


@pytest.fixture(scope="module")
def cluster_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None:
        pytest.fail("redis-server not found on PATH (make dev installs it)", pytrace=False)
    root = tmp_path_factory.mktemp("cluster-redis")
    try:
        try:
            node = start_cluster_node(root)
        except ServerFailed as err:
            pytest.fail(str(err), pytrace=False)
        try:
            yield node
        finally:
            node.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
