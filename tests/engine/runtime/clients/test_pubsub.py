"""engine/runtime/clients/pubsub.py: the publishing and PUBSUB methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`PubSubCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.pubsub import PubSubCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("publish", ("ch", "message"), {}),
    ("spublish", ("ch", "message"), {}),
    ("pubsub_channels", (), {}),
    ("pubsub_channels", ("a*",), {}),
    ("pubsub_shardchannels", ("a*",), {}),
    ("pubsub_numsub", ("a", "b"), {}),
    ("pubsub_shardnumsub", ("a",), {}),
    ("pubsub_numpat", (), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(PubSubCommands) - {method for method, _, _ in CALLS} == set()
