"""A real etcd (Debian's etcd-server), the cluster controller's store, for the tests.

`etcd` is a module-scoped fixture (import it into the test module:
`from tests.support.etcd import etcd`) yielding a started tools.servers.EtcdServer (`.url`,
`.client()`), a single member in a temporary directory of its own; at teardown it is stopped
(SIGKILL if it does not stop in time) and the directory removed. The tests of a module share
it: each uses keys under a prefix of its own (`key_prefix`, a function-scoped fixture, gives
one: import it too).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from streamkeep.tools.servers import EtcdServer, ServerFailed

STARTUP_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    if shutil.which("etcd") is None:
        pytest.fail("etcd not found on PATH (make dev installs Debian's etcd-server)",
                    pytrace=False)
    root = tmp_path_factory.mktemp("etcd")
    try:
        server = EtcdServer(str(root / "member"), start_timeout=STARTUP_TIMEOUT,
                            stop_timeout=STOP_TIMEOUT, track=False)
        try:
            server.start()
        except ServerFailed as err:  # nothing is left running
            pytest.fail(str(err), pytrace=False)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def key_prefix(request: pytest.FixtureRequest) -> str:
    """Keys of the test's own: "/<test name>/"."""
    return f"/{request.node.name}/"
