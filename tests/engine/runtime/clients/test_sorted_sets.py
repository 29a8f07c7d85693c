"""engine/runtime/clients/sorted_sets.py: the sorted set methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`SortedSetCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.sorted_sets import SortedSetCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("zadd", ("z", {"a": 1, "b": 2.5}), {}),
    ("zadd", ("z", {"a": 1}), {"xx": True, "ch": True, "incr": True}),
    ("zadd", ("z", {"a": 1}), {"gt": True}),
    ("zcard", ("z",), {}),
    ("zcount", ("z", "-inf", "(3"), {}),
    ("zlexcount", ("z", "[a", "+"), {}),
    ("zscore", ("z", "a"), {}),
    ("zmscore", ("z", ["a", "b"]), {}),
    ("zincrby", ("z", 2.5, "a"), {}),
    ("zrem", ("z", "a", "b"), {}),
    ("zremrangebylex", ("z", "[a", "[c"), {}),
    ("zremrangebyrank", ("z", 0, 1), {}),
    ("zremrangebyscore", ("z", 1, "+inf"), {}),
    ("zrange", ("z", 0, -1), {"withscores": True}),
    ("zrange", ("z", 0, -1), {"desc": True}),
    ("zrange", ("z", "(1", 5), {"byscore": True, "desc": True, "offset": 1, "num": 2}),
    ("zrange", ("z", "[a", "+"), {"bylex": True}),
    ("zrangestore", ("d", "z", 0, 2), {}),
    ("zrangestore", ("d", "z", 1, 5), {"byscore": True, "offset": 0, "num": 1}),
    ("zrevrange", ("z", 0, 1), {"withscores": True}),
    ("zrangebyscore", ("z", 1, 5), {"start": 0, "num": 2, "withscores": True}),
    ("zrevrangebyscore", ("z", 5, 1), {}),
    ("zrangebylex", ("z", "-", "+"), {"start": 1, "num": 1}),
    ("zrevrangebylex", ("z", "+", "-"), {}),
    ("zrank", ("z", "a"), {}),
    ("zrank", ("z", "a"), {"withscore": True}),
    ("zrevrank", ("z", "a"), {"withscore": True}),
    ("zpopmin", ("z",), {}),
    ("zpopmax", ("z", 2), {}),
    ("bzpopmin", (["a", "b"],), {"timeout": 1}),
    ("bzpopmax", ("a",), {}),
    ("zmpop", (2, ["a", "b"]), {"min": True, "count": 3}),
    ("bzmpop", (1, 2, ["a", "b"]), {"max": True}),
    ("zrandmember", ("z", 2), {"withscores": True}),
    ("zunion", (["a", "b"],), {"aggregate": "MAX", "withscores": True}),
    ("zunionstore", ("d", {"a": 1, "b": 2}), {}),
    ("zinter", ({"a": 2, "b": 3},), {"aggregate": "min"}),
    ("zinterstore", ("d", ["a", "b"]), {"aggregate": "SUM"}),
    ("zintercard", (2, ["a", "b"]), {"limit": 3}),
    ("zdiff", (["a", "b"],), {"withscores": True}),
    ("zdiffstore", ("d", ["a", "b"]), {}),
    ("zscan", ("z", 2), {"match": "a*", "count": 5}),
    ("zscan_iter", ("z",), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(SortedSetCommands) - {method for method, _, _ in CALLS} == set()
