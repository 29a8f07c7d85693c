"""A cluster run by `streamkeep cluster controller` for the tests that put a client's workload
on one (tests/frameworks/test_docket_under_controller.py): the controller child processes,
`streamkeep cluster ...` run as the operator runs it, the nodes' roles, and the pydocket venv
the framework suites build (tools/frameworks.py), found or made the way they make it.

Owns nothing on disk but what the caller's temporary directory holds; every controller it
started is killed by `Controllers.close()`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from streamkeep.tools import frameworks
from tests.support import framework_suites

CLI_TIMEOUT = 120.0  # a CLI command's liveness limit


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streamkeep", "cluster", *args],
                          capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False)


class Controllers:
    """`streamkeep cluster controller` child processes, every one killed at the end."""

    def __init__(self, url: str, cluster: str) -> None:
        self.url, self.cluster = url, cluster
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self, name: str) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamkeep", "cluster", "controller", "--etcd", self.url,
             "--cluster", self.cluster, "--name", name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.running.append(process)
        return process

    def run(self, command: str, *args: str) -> subprocess.CompletedProcess[str]:
        """`streamkeep cluster COMMAND --etcd URL --cluster NAME ARGS...`, checked."""
        done = cli(command, "--etcd", self.url, "--cluster", self.cluster, *args)
        assert done.returncode == 0, f"cluster {command} {' '.join(args)}: {done.stderr}"
        return done

    def close(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.kill()
            process.wait()


def address(server: Any) -> str:
    return f"127.0.0.1:{server.port}"


def role(server: Any) -> bytes:
    return bytes(server.client().execute_command("ROLE")[0])


def wait_until(predicate: Callable[[], bool], attempts: int = 600,
               what: str = "the condition") -> None:
    """Until `predicate()` holds, bounded by attempts (a tenth of a second apart): a liveness
    limit, not a time asserted."""
    event = threading.Event()
    for _ in range(attempts):
        if predicate():
            return
        event.wait(0.1)
    raise AssertionError(f"{what} never held")


def pydocket_python() -> str:
    """The Python of the `pydocket-cluster` suite's venv (pydocket at the suites' pin), made
    as tests/frameworks/test_framework_suites.py makes it (the same cache, the same sources
    option); the test is skipped, saying why, when it cannot be fetched or installed."""
    suite = frameworks.SUITES["pydocket-cluster"]
    cache = Path(os.environ.get("STREAMKEEP_SUITES_CACHE", frameworks.DEFAULT_CACHE))
    spec = os.environ.get("STREAMKEEP_SUITES_SOURCES", "")
    sources, refs = framework_suites.parse_sources([s for s in spec.split(",") if "=" in s])
    try:
        cache.mkdir(parents=True, exist_ok=True)
        src = frameworks.fetch_source(suite, cache, sources.get(suite.name), refs.get(suite.name))
        venv = frameworks.ensure_venv(suite, cache, src)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"{suite.name}'s source or dependencies could not be fetched: {exc}")
    return str(venv / "bin" / "python")
