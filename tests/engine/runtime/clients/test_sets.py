"""engine/runtime/clients/sets.py: the set methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`SetCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.sets import SetCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("sadd", ("s", "a", 1), {}),
    ("srem", ("s", "a"), {}),
    ("scard", ("s",), {}),
    ("smembers", ("s",), {}),
    ("sismember", ("s", "a"), {}),
    ("smismember", ("s", ["a", "b"], "c"), {}),
    ("smove", ("s", "t", "a"), {}),
    ("spop", ("s",), {}),
    ("spop", ("s", 2), {}),
    ("srandmember", ("s", -2), {}),
    ("sdiff", (["a", "b"],), {}),
    ("sdiffstore", ("d", "a", "b"), {}),
    ("sinter", ("a", "b"), {}),
    ("sinterstore", ("d", ["a", "b"]), {}),
    ("sintercard", (2, ["a", "b"]), {"limit": 5}),
    ("sunion", ("a",), {}),
    ("sunionstore", ("d", "a", "b"), {}),
    ("sscan", ("s", 3), {"match": "a*", "count": 10}),
    ("sscan_iter", ("s",), {"count": 5}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(SetCommands) - {method for method, _, _ in CALLS} == set()
