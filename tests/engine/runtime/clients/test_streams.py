"""engine/runtime/clients/streams.py: the stream methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`StreamCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.streams import StreamCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("xadd", ("s", {"a": "1", "b": 2.5}), {}),
    ("xadd", ("s", {"a": "1"}), {"id": "5-*", "maxlen": 10, "limit": 100}),
    ("xadd", ("s", {"a": "1"}), {"minid": "3-0", "approximate": False, "nomkstream": True}),
    ("xadd", ("s", {"a": "1"}), {"maxlen": 0, "ref_policy": "ACKED"}),
    ("xadd", ("s", {"a": "1"}), {"idmpauto": "p"}),
    ("xadd", ("s", {"a": "1"}), {"idmp": ("p", b"i")}),
    ("xlen", ("s",), {}),
    ("xrange", ("s",), {}),
    ("xrange", ("s", "1-0", "9-0"), {"count": 2}),
    ("xrevrange", ("s",), {"count": 3}),
    ("xdel", ("s", "1-0", "2-0"), {}),
    ("xdelex", ("s", "1-0", "2-0"), {"ref_policy": "DELREF"}),
    ("xtrim", ("s",), {"maxlen": 5}),
    ("xtrim", ("s",), {"minid": "5-0", "approximate": False, "limit": 3,
                       "ref_policy": "ACKED"}),
    ("xread", ({"a": 0, "b": "$"},), {"count": 2, "block": 10}),
    ("xread", ({"a": "0-0"},), {"count": 2, "max_count": 4, "max_size": 9}),
    ("xreadgroup", ("g", "c", {"a": ">"}), {"count": 1, "block": 0, "noack": True}),
    ("xreadgroup", ("g", "c", {"a": ">"}), {"claim_min_idle_time": 50}),
    ("xgroup_create", ("s", "g"), {}),
    ("xgroup_create", ("s", "g", "0"), {"mkstream": True, "entries_read": 3}),
    ("xgroup_setid", ("s", "g", "5-0"), {"entries_read": 1}),
    ("xgroup_destroy", ("s", "g"), {}),
    ("xgroup_createconsumer", ("s", "g", "c"), {}),
    ("xgroup_delconsumer", ("s", "g", "c"), {}),
    ("xack", ("s", "g", "1-0", "2-0"), {}),
    ("xackdel", ("s", "g", "1-0"), {"ref_policy": "ACKED"}),
    ("xcfgset", ("s",), {"idmp_duration": 60, "idmp_maxsize": 10}),
    ("xnack", ("s", "g", "FAIL", "1-0"), {"retrycount": 2, "force": True}),
    ("xpending", ("s", "g"), {}),
    ("xpending_range", ("s", "g", "-", "+", 10), {}),
    ("xpending_range", ("s", "g", "-", "+", 10), {"consumername": "c", "idle": 5}),
    ("xclaim", ("s", "g", "c", 100, ["1-0", "2-0"]), {}),
    ("xclaim", ("s", "g", "c", 100, ["1-0"]), {"idle": 1, "time": 2, "retrycount": 3,
                                               "force": True, "justid": True}),
    ("xautoclaim", ("s", "g", "c", 100), {}),
    ("xautoclaim", ("s", "g", "c", 100), {"start_id": "1-0", "count": 5, "justid": True}),
    ("xinfo_stream", ("s",), {}),
    ("xinfo_stream", ("s",), {"full": True}),
    ("xinfo_groups", ("s",), {}),
    ("xinfo_consumers", ("s", "g"), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(StreamCommands) - {method for method, _, _ in CALLS} == set()
