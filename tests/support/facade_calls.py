"""The redis-py facade's calls taken apart, for the tests of engine.runtime.clients' mixins.

Owns `facade_argv` (the argv a RedisAPI method sends, stopped before it runs, and checked to be a
command the method declares with `sends`), `redis_py_argv` (what redis-py 8.1's method of the
same name sends for the same arguments), both as the bytes redis-py's encoder puts on the wire,
`assert_declared` and `mixin_methods` (the methods a command group's mixin defines: the ones its
test must call).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import streamkeep.engine.commands  # noqa: F401  (the command table, for `resolve`)
from streamkeep.engine.exec.table import resolve
from streamkeep.engine.runtime.clients.base import commands_sent
from streamkeep.engine.runtime.redis_api import RedisAPI


class _Sent(Exception):
    """Raised by the capturing executors once a command is sent."""


def _encoded(argv: tuple[Any, ...]) -> list[bytes]:
    """argv as redis-py's Encoder puts it on the wire (bytes as they are, str as UTF-8, a
    number as its repr)."""
    out = []
    for value in argv:
        if isinstance(value, (bytes, bytearray, memoryview)):
            out.append(bytes(value))
        elif isinstance(value, str):
            out.append(value.encode())
        else:
            out.append(repr(value).encode())
    return out


def _call(client: Any, method: str, args: tuple, kwargs: dict) -> None:
    result = getattr(client, method)(*args, **kwargs)
    if isinstance(result, Iterator):  # (scan_iter and its kin send on their first step)
        next(result)


def assert_declared(method: str, argv: tuple[Any, ...]) -> None:
    """The command `argv` runs is one RedisAPI's `method` declares it sends (an unknown
    subcommand, sent for its error reply: its command declared)."""
    words = [a if isinstance(a, bytes) else str(a).encode() for a in argv[:2]]
    spec = resolve(words)
    declared = commands_sent(getattr(RedisAPI, method))
    if spec is None:
        assert words[0].decode().lower() in {d.partition("|")[0] for d in declared}, argv
        return
    assert spec.name in declared, (method, argv, declared)


def facade_argv(method: str, args: tuple = (), kwargs: dict | None = None) -> list[bytes]:
    """The argv RedisAPI's `method` sends (a command it declares), encoded."""
    sent: list[tuple[Any, ...]] = []

    class Capture:
        def execute(self, *argv: Any) -> Any:
            sent.append(argv)
            raise _Sent

    with pytest.raises(_Sent):
        _call(RedisAPI(Capture()), method, args, kwargs or {})
    [argv] = sent
    assert_declared(method, argv)
    return _encoded(argv)


def redis_py_argv(method: str, args: tuple = (), kwargs: dict | None = None) -> list[bytes]:
    """The argv redis-py 8.1's `method` sends (its command name split as its connection
    splits it), encoded."""
    import redis

    sent: list[tuple[Any, ...]] = []

    class Capture(redis.Redis):
        def execute_command(self, *argv: Any, **options: Any) -> Any:
            sent.append(argv)
            raise _Sent

    client = Capture(protocol=2)
    try:
        with pytest.raises(_Sent), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (its deprecated and experimental calls)
            _call(client, method, args, kwargs or {})
    finally:
        client.close()
    [argv] = sent
    name, *rest = argv
    words = name.split() if isinstance(name, (str, bytes)) else [name]
    return _encoded((*words, *rest))


def mixin_methods(mixin: type) -> set[str]:
    """The methods `mixin` defines that send a command (the public ones and `r[key]`'s)."""
    return {name for name, value in vars(mixin).items() if commands_sent(value)}
