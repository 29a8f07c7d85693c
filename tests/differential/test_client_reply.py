"""CLIENT REPLY ON|OFF|SKIP against the real redis-server, byte for byte over a raw socket:
OFF silences every reply (errors and refusals too) until ON, SKIP the next command's (a blocked
read's late reply included), OFF and SKIP themselves are not answered, a bad mode is a syntax
error; a subscriber's messages still arrive. On an embedded engine OFF and SKIP are refused."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from streamkeep import Engine
from tests.support.diffutil import err
from tests.support.resp_client import encode_command

SCRIPT: list[tuple[str, ...]] = [
    ("CLIENT", "REPLY", "SKIP"), ("PING", "skipped"), ("PING", "seen-1"),
    ("CLIENT", "REPLY", "SKIP"), ("CLIENT", "REPLY", "SKIP"), ("PING", "skipped-2"),
    ("PING", "seen-2"),
    ("CLIENT", "REPLY", "OFF"), ("SET", "k", "v"), ("GET", "k"), ("NOSUCH",), ("GET",),
    ("CLIENT", "REPLY", "SKIP"), ("CLIENT", "REPLY", "BAD"), ("CLIENT", "REPLY", "ON"),
    ("GET", "k"), ("CLIENT", "REPLY", "BAD"), ("CLIENT", "REPLY"),
    ("CLIENT", "REPLY", "SKIP"), ("XREAD", "BLOCK", "50", "STREAMS", "s", "$"),
    ("PING", "after-block"),
    ("CLIENT", "REPLY", "SKIP"), ("MULTI",), ("PING", "queued"), ("EXEC",),
    ("CLIENT", "REPLY", "on"), ("PING", "end"),
]


def transcript(target: Any) -> bytes:
    """Everything the server sent for SCRIPT, pipelined, up to the final PING's reply."""
    with socket.create_connection((target.host, target.port), timeout=10) as sock:
        sock.sendall(b"".join(encode_command(*argv) for argv in SCRIPT))
        data = b""
        while not data.endswith(b"$3\r\nend\r\n"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        return data


def test_client_reply_matches_redis(served, redis_server, redis_raw):
    assert transcript(served) == transcript(redis_server)


def test_messages_reach_a_silenced_subscriber(served, redis_server, redis_raw):
    """RESP3 with CLIENT REPLY OFF: its own PUBLISH's reply is dropped, the message is not (the
    push is sent, as Redis 7.2+ and Debian's 7.0 both do)."""
    script = [("HELLO", "3"), ("SUBSCRIBE", "ch"), ("CLIENT", "REPLY", "OFF"),
              ("PUBLISH", "ch", "hi"), ("CLIENT", "REPLY", "ON")]
    sent = []
    for target in (served, redis_server):
        with socket.create_connection((target.host, target.port), timeout=10) as sock:
            sock.sendall(b"".join(encode_command(*argv) for argv in script))
            data = b""
            while not data.endswith(b"+OK\r\n"):
                data += sock.recv(65536)
            sent.append(data[data.index(b">3\r\n$9\r\nsubscribe"):])
    assert sent[0] == sent[1]
    assert sent[0].endswith(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n+OK\r\n")


def test_an_embedded_engine_answers_every_command():
    e = Engine()
    assert e.execute("CLIENT", "REPLY", "ON") == "OK"
    for mode in ("OFF", "SKIP"):
        assert err(e, "CLIENT", "REPLY", mode).startswith("ERR CLIENT REPLY OFF and SKIP need")
    assert err(e, "CLIENT", "REPLY", "NO") == "ERR syntax error"


@pytest.fixture(autouse=True)
def _fresh(redis_raw: Any) -> None:
    redis_raw.execute("DEL", "k", "s")
