"""engine/runtime/clients/strings.py: the string methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`StringCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.strings import StringCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("get", ("k",), {}),
    ("__getitem__", ("k",), {}),
    ("set", ("k", "v"), {}),
    ("set", ("k", 1.5), {"ex": 10, "nx": True, "get": True}),
    ("set", ("k", "v"), {"pxat": 5, "ifeq": "old"}),
    ("set", ("k", "v"), {"keepttl": True, "ifdne": "abc"}),
    ("__setitem__", ("k", "v"), {}),
    ("setnx", ("k", "v"), {}),
    ("setex", ("k", 10, "v"), {}),
    ("psetex", ("k", 1500, "v"), {}),
    ("getset", ("k", "v"), {}),
    ("getdel", ("k",), {}),
    ("getex", ("k",), {"px": 100}),
    ("getex", ("k",), {"persist": True}),
    ("mget", (["a", "b"], "c"), {}),
    ("mset", ({"a": 1, "b": "2"},), {}),
    ("msetnx", ({"a": 1},), {}),
    ("msetex", ({"a": 1, "b": 2},), {"ex": 10}),
    ("incr", ("n",), {}),
    ("incrby", ("n", 5), {}),
    ("incrbyfloat", ("n", 0.5), {}),
    ("decr", ("n",), {"amount": 2}),
    ("decrby", ("n", 3), {}),
    ("append", ("k", "v"), {}),
    ("strlen", ("k",), {}),
    ("getrange", ("k", 0, -1), {}),
    ("setrange", ("k", 2, "v"), {}),
    ("substr", ("k", 1), {}),
    ("lcs", ("a", "b"), {"idx": True, "minmatchlen": 2, "withmatchlen": True}),
    ("lcs", ("a", "b"), {"len": True}),
    ("delex", ("k",), {}),
    ("delex", ("k",), {"ifne": "v"}),
    ("digest", ("k",), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(StringCommands) - {method for method, _, _ in CALLS} == set()
