"""engine/runtime/clients/lists.py: the list methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`ListCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.lists import ListCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("lpush", ("l", "a", 1), {}),
    ("rpush", ("l", "a"), {}),
    ("lpushx", ("l", "a"), {}),
    ("rpushx", ("l", "a", "b"), {}),
    ("lpop", ("l",), {}),
    ("rpop", ("l", 2), {}),
    ("llen", ("l",), {}),
    ("lrange", ("l", 0, -1), {}),
    ("lindex", ("l", 3), {}),
    ("lset", ("l", 0, "v"), {}),
    ("linsert", ("l", "BEFORE", "a", "b"), {}),
    ("lrem", ("l", -2, "a"), {}),
    ("ltrim", ("l", 1, -1), {}),
    ("lpos", ("l", "a"), {"rank": -1, "count": 2, "maxlen": 10}),
    ("lmove", ("a", "b"), {}),
    ("lmove", ("a", "b", "RIGHT", "LEFT"), {}),
    ("blmove", ("a", "b", 1.5), {"src": "RIGHT"}),
    ("rpoplpush", ("a", "b"), {}),
    ("brpoplpush", ("a", "b"), {"timeout": 2}),
    ("blpop", (["a", "b"],), {"timeout": 1}),
    ("brpop", ("a",), {}),
    ("lmpop", (2, "a", "b"), {"direction": "LEFT", "count": 3}),
    ("blmpop", (1, 2, "a", "b"), {"direction": "RIGHT"}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(ListCommands) - {method for method, _, _ in CALLS} == set()
