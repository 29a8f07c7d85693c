"""Error lines built from the client's own bytes (unknown command / subcommand, EXEC with the
wrong arity), byte for byte against a real redis-server over raw sockets: Redis cuts them by
bytes, which may split a UTF-8 character."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tests.support.resp_client import encode_command

E_ACUTE = "é".encode()

UNKNOWN = [
    (b"foo" + E_ACUTE, E_ACUTE + b"x", E_ACUTE * 65),
    (b"foo" + E_ACUTE, b"a" + E_ACUTE * 64 + b"b", b"zz"),  # the 128-byte cut splits a character
    (b"foo", b"a" * 125, E_ACUTE * 3, b"q"),
    (b"foo", b"a" * 124, E_ACUTE * 3),
    (E_ACUTE * 70, b"x"),
    (b"foo", b"a\r\nb", E_ACUTE + b"\n", b"\xff\x80\0tail"),
    (b"XINFO", E_ACUTE * 70),
    (b"CONFIG", E_ACUTE * 70),
]

EXEC_ARITY = [
    [(b"EXEC", b"x"), (b"EXEC",)],  # outside MULTI
    [(b"DEL", b"exec:s"), (b"MULTI",), (b"XADD", b"exec:s", b"1-1", b"f", b"v"), (b"EXEC", b"x"),
     (b"EXEC",), (b"XLEN", b"exec:s")],
    [(b"MULTI",), (b"EXEC", b"x", b"y"), (b"DISCARD",)],
]


def _replies(target: Any, commands: list[tuple[bytes, ...]]) -> list[bytes]:
    """Each command's reply line, read one at a time over a raw socket."""
    lines = []
    with socket.create_connection((target.host, target.port), timeout=10) as sock:
        reader = sock.makefile("rb")
        for argv in commands:
            sock.sendall(encode_command(*argv))
            lines.append(reader.readline())
    return lines


@pytest.mark.parametrize("argv", UNKNOWN)
def test_unknown_command_lines_match_redis_byte_for_byte(served, redis_server, argv) -> None:
    assert _replies(served, [argv]) == _replies(redis_server, [argv])


@pytest.mark.parametrize("commands", EXEC_ARITY)
def test_exec_with_wrong_arity_matches_redis(served, redis_server, commands) -> None:
    expected = _replies(redis_server, commands)
    assert b"EXECABORT" in expected[-1] or any(b"EXECABORT" in line for line in expected)
    assert _replies(served, commands) == expected


UNAUTHENTICATED_EXEC = [(b"EXEC", b"x"), (b"MULTI",), (b"EXEC", b"x"), (b"EXEC",), (b"MULTI", b"x"),
                        (b"AUTH", b"secret"), (b"MULTI",), (b"PING",), (b"EXEC", b"x"), (b"EXEC",)]


def _set_password(target: Any, old: bytes | None, new: bytes) -> None:
    commands = [(b"AUTH", old)] if old else []
    _replies(target, [*commands, (b"CONFIG", b"SET", b"requirepass", new)])


def test_unauthenticated_exec_with_wrong_arity_matches_redis(served, redis_server) -> None:
    """Redis checks arity before authentication; a refused EXEC is an EXECABORT either way."""
    outcomes = []
    for target in (redis_server, served):
        _set_password(target, None, b"secret")
        try:
            outcomes.append(_replies(target, UNAUTHENTICATED_EXEC))
        finally:
            _set_password(target, b"secret", b"")
    assert outcomes[0][0].startswith(b"-EXECABORT")
    assert outcomes[1] == outcomes[0]
