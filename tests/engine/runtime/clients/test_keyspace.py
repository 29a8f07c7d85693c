"""engine/runtime/clients/keyspace.py: the keyspace methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`KeyspaceCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.keyspace import KeyspaceCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("delete", ("a", "b"), {}),
    ("__delitem__", ("a",), {}),
    ("unlink", ("a",), {}),
    ("exists", ("a", "b"), {}),
    ("__contains__", ("a",), {}),
    ("touch", ("a", "b"), {}),
    ("type", ("a",), {}),
    ("keys", (), {}),
    ("keys", ("a*",), {}),
    ("scan", (3,), {"match": "s*", "count": 10, "_type": "stream"}),
    ("scan_iter", (), {"match": "a*"}),
    ("expire", ("k", 10), {"nx": True}),
    ("pexpire", ("k", 1000), {"xx": True, "gt": True}),
    ("expireat", ("k", 4102444800), {"lt": True}),
    ("pexpireat", ("k", 4102444800000), {}),
    ("ttl", ("k",), {}),
    ("pttl", ("k",), {}),
    ("expiretime", ("k",), {}),
    ("pexpiretime", ("k",), {}),
    ("persist", ("k",), {}),
    ("dump", ("k",), {}),
    ("restore", ("k", 0, b"payload"), {"replace": True, "absttl": True, "idletime": 5}),
    ("restore", ("k", 100, b"payload"), {"frequency": 3}),
    ("object", ("ENCODING", "k"), {}),
    ("object", ("freq", "k"), {}),
    ("rename", ("a", "b"), {}),
    ("renamenx", ("a", "b"), {}),
    ("copy", ("a", "b"), {"destination_db": 2, "replace": True}),
    ("wait", (1, 100), {}),
    ("waitaof", (1, 0, 100), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(KeyspaceCommands) - {method for method, _, _ in CALLS} == set()
