"""engine/runtime/clients/scripting.py: the scripting and function methods' argv.

Each call's argv equals what redis-py 8.1's method of the same name sends for the same
arguments (redis-py's argv and option words, in its order), and is a command the method
declares it sends (`sends`: tests/support/facade_calls.py checks it); every method of
`ScriptingCommands` has a call here.
"""

from __future__ import annotations

import pytest

from streamkeep.engine.runtime.clients.scripting import ScriptingCommands
from tests.support.facade_calls import facade_argv, mixin_methods, redis_py_argv

CALLS: list[tuple[str, tuple, dict]] = [
    ("eval", ("return 1", 1, "k", "a"), {}),
    ("eval_ro", ("return 1", 0), {}),
    ("evalsha", ("0" * 40, 1, "k"), {}),
    ("evalsha_ro", ("0" * 40, 0, "a"), {}),
    ("script_load", ("return 1",), {}),
    ("script_exists", ("0" * 40, "1" * 40), {}),
    ("script_flush", (), {}),
    ("script_flush", ("ASYNC",), {}),
    ("script_kill", (), {}),
    ("function_load", ("code",), {}),
    ("function_load", ("code",), {"replace": True}),
    ("function_delete", ("lib",), {}),
    ("function_flush", (), {}),
    ("function_flush", ("ASYNC",), {}),
    ("function_list", (), {}),
    ("function_list", ("lib*",), {"withcode": True}),
    ("function_dump", (), {}),
    ("function_restore", (b"payload",), {"policy": "REPLACE"}),
    ("function_stats", (), {}),
    ("function_kill", (), {}),
    ("fcall", ("f", 1, "k", "a"), {}),
    ("fcall_ro", ("f", 0), {}),
]


@pytest.mark.parametrize(("method", "args", "kwargs"), CALLS,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CALLS)])
def test_argv_is_redis_pys(method: str, args: tuple, kwargs: dict) -> None:
    assert facade_argv(method, args, kwargs) == redis_py_argv(method, args, kwargs)


def test_every_method_has_a_call() -> None:
    assert mixin_methods(ScriptingCommands) - {method for method, _, _ in CALLS} == set()
