"""engine/runtime/clients/hashes.py: the hash methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`HashCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.hashes import HashCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv


class _FieldsNotExist:
    """redis-py's DataPersistOptions.FNX stand-in (an enum member: its `.value` is sent)."""

    value = "FNX"


CALLS: list[tuple[str, tuple, dict]] = [
    ("hset", ("h", "f", "v"), {"mapping": {"a": 1}, "items": ["x", "y"]}),
    ("hsetnx", ("h", "f", "v"), {}),
    ("hmset", ("h", {"a": 1, "b": 2}), {}),
    ("hsetex", ("h", "f", "v"), {"ex": 10, "data_persist_option": _FieldsNotExist()}),
    ("hsetex", ("h",), {"mapping": {"a": 1}, "keepttl": True}),
    ("hget", ("h", "f"), {}),
    ("hmget", ("h", ["a", "b"], "c"), {}),
    ("hgetall", ("h",), {}),
    ("hgetdel", ("h", "a", "b"), {}),
    ("hgetex", ("h", "a"), {"px": 100}),
    ("hgetex", ("h", "a", "b"), {"persist": True}),
    ("hdel", ("h", "a", "b"), {}),
    ("hexists", ("h", "f"), {}),
    ("hincrby", ("h", "f", 2), {}),
    ("hincrbyfloat", ("h", "f", 0.5), {}),
    ("hkeys", ("h",), {}),
    ("hvals", ("h",), {}),
    ("hlen", ("h",), {}),
    ("hstrlen", ("h", "f"), {}),
    ("hrandfield", ("h",), {}),
    ("hrandfield", ("h", -3), {"withvalues": True}),
    ("hscan", ("h",), {"cursor": 5, "match": "a*", "count": 10}),
    ("hscan", ("h",), {"no_values": True}),
    ("hscan_iter", ("h",), {"match": "a*"}),
    ("hexpire", ("h", 10, "a", "b"), {"nx": True}),
    ("hpexpire", ("h", 1000, "a"), {"gt": True}),
    ("hexpireat", ("h", 4102444800, "a"), {"xx": True}),
    ("hpexpireat", ("h", 4102444800000, "a"), {"lt": True}),
    ("hpersist", ("h", "a", "b"), {}),
    ("hexpiretime", ("h", "a"), {}),
    ("hpexpiretime", ("h", "a"), {}),
    ("httl", ("h", "a", "b"), {}),
    ("hpttl", ("h", "a"), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(HashCommands) - {method for method, _, _ in CALLS} == set()
