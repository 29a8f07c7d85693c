"""engine/runtime/clients/server.py: the server methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`ServerCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.server import ServerCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("dbsize", (), {}),
    ("flushdb", (), {}),
    ("flushall", (), {"asynchronous": True}),
    ("info", (), {}),
    ("info", ("server", "clients"), {}),
    ("config_get", (), {}),
    ("config_get", ("maxmemory", "hz"), {}),
    ("config_set", ("hz", 20), {}),
    ("config_resetstat", (), {}),
    ("lastsave", (), {}),
    ("save", (), {}),
    ("bgsave", (), {}),
    ("bgsave", (), {"schedule": False}),
    ("bgrewriteaof", (), {}),
    ("memory_usage", ("k",), {"samples": 5}),
    ("command_count", (), {}),
    ("time", (), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(ServerCommands) - {method for method, _, _ in CALLS} == set()
