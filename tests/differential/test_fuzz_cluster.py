"""The type fuzz (tests.support.type_lockstep: test_fuzz_types.py's sequences of sorted-set,
hash, set, list, string and generic commands, some through a Redis Function) against a cluster node on
each side: a streamkeep server with cluster-enabled yes (a node alone, every slot its own) and
a cluster-enabled redis-server given every slot. Its keys sit in many slots, so the multi-key
commands, RENAME, COPY, the stores and FCALL with several keys meet the routing: every reply,
CROSSSLOT included, and then every key's state must agree.

One line differs by version: a script's command whose keys span slots. Redis 7.0 (the oracle)
says "Script attempted to access a non local key in a cluster node", Redis 8 (src/script.c,
scriptVerifyClusterState) "Command '<name>' in script attempted to access keys that don't hash
to the same slot", which streamkeep says: the engine's line is read as 7.0's before the
comparison."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.cluster_redis import serve_every_slot, start_cluster_node
from tests.support.diffutil import ServedEngine, WallClock, outcome
from tests.support.resp_client import RespClient
from tests.support.type_lockstep import DEFAULTS, Lockstep, fuzz

pytestmark = pytest.mark.redis

REDIS_8_SCRIPT_CROSSSLOT = re.compile(
    r"ERR Command '[^']+' in script attempted to access keys that don't hash to the same slot")
REDIS_7_0_LINE = "ERR Script attempted to access a non local key in a cluster node"


class ClusterLockstep(Lockstep):
    def compare(self, argv: list[bytes], norm: Any = None) -> tuple[str, Any]:
        ours, theirs = outcome(self.engine, *argv), outcome(self.redis, *argv)
        if ours[0] == "err":
            ours = ("err", REDIS_8_SCRIPT_CROSSSLOT.sub(REDIS_7_0_LINE, ours[1]))
        elif norm is not None:
            ours = (ours[0], norm(ours[1]))
        if norm is not None and theirs[0] == "ok":
            theirs = (theirs[0], norm(theirs[1]))
        assert ours == theirs, f"\nargv:   {argv!r}\nengine: {ours!r}\nredis:  {theirs!r}"
        return theirs


@pytest.fixture
def cluster_lockstep(tmp_path) -> Iterator[Lockstep]:
    oracle = start_cluster_node(tmp_path / "redis")
    served = None
    try:
        serve_every_slot(oracle)
        served = ServedEngine(Engine(clock=WallClock(), **{"cluster-enabled": "yes"}))
        assert served.execute("CLUSTER", "INFO").startswith(b"cluster_state:ok")
        with RespClient(oracle.host, oracle.port, timeout=30) as theirs:
            yield ClusterLockstep(served, theirs)
            for name, value in DEFAULTS.items():
                theirs.execute("CONFIG", "SET", name, value)
            outcome(theirs, "FUNCTION", "DELETE", "fuzzlib")
    finally:
        if served is not None:
            served.close()
        oracle.stop()


@pytest.mark.parametrize("examples", [
    pytest.param(25, id="bounded"),
    pytest.param(500, id="soak", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])
def test_a_cluster_node_matches_redis(cluster_lockstep: Lockstep, examples: int) -> None:
    fuzz(cluster_lockstep, examples)
