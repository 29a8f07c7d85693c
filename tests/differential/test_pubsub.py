"""Pub/Sub against a real redis-server, byte for byte over raw sockets (RESP2 and RESP3:
confirmations, messages and pmessages, the subscribed RESP2 gate's error line, PING's reply in
each mode, UNSUBSCRIBE with no channel, RESET, SUBSCRIBE inside EXEC, sharded Pub/Sub, PUBSUB's
replies and errors) and through redis-py's PubSub. Where Redis's order is its hash table's (several patterns
matching one channel, PUBSUB CHANNELS), the scripts keep to one.

One order changed after Debian's 7.0: since Redis 7.2 a message a RESP3 connection publishes to
itself follows the command's reply (PUBLISH alone, in MULTI or in a script), where 7.0 sent it
first (or inside EXEC's array). streamkeep sends Redis 7.2+'s order; the transcript compares the
same frames with the message moved after the reply, and test_a_message_to_oneself_follows_the_
reply checks the order."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import redis

from tests.support.resp_client import encode_command, read_raw_reply

CONNECTIONS = 3
# Every connection answers PING, whatever its mode: sent after each step, its reply marks the
# end of what the step made the connection receive.
PING_REPLIES = (b"+PONG\r\n", b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")
HELLO_REPLY = b"<HELLO's map: the server's version and the client's id differ>"

# (connection, argv): connection 2 speaks RESP3.
SCRIPT: list[tuple[int, tuple[str, ...]]] = [
    (2, ("HELLO", "3")),
    (0, ("UNSUBSCRIBE",)),
    (0, ("PUNSUBSCRIBE",)),
    (0, ("SUBSCRIBE", "ps:a", "ps:b", "ps:a")),
    (0, ("XLEN", "ps:s")),
    (0, ("CONFIG", "GET", "maxclients")),
    (0, ("NOSUCH", "x")),
    (0, ("XADD", "ps:s")),
    (0, ("PING", "hello")),
    (0, ("PSUBSCRIBE", "ps:a*")),
    (1, ("PUBLISH", "ps:a", "m1")),
    (1, ("PUBLISH", "ps:b", "m2")),
    (1, ("PUBLISH", "ps:none", "m3")),
    (1, ("PUBSUB", "NUMSUB", "ps:a", "ps:b", "ps:none")),
    (1, ("PUBSUB", "NUMSUB")),
    (1, ("PUBSUB", "NUMPAT")),
    (1, ("PUBSUB", "CHANNELS", "ps:b*")),
    (1, ("PUBSUB", "CHANNELS", "a", "b")),
    (1, ("PUBSUB",)),
    (1, ("PUBSUB", "NUMPAT", "x")),
    (1, ("PUBSUB", "NOPE")),
    (1, ("PUBLISH", "ps:a")),
    (0, ("UNSUBSCRIBE", "ps:b", "ps:zz")),
    (0, ("PUNSUBSCRIBE",)),
    (0, ("UNSUBSCRIBE",)),
    (0, ("XLEN", "ps:s")),
    (2, ("SUBSCRIBE", "ps:q")),
    (2, ("XLEN", "ps:q")),
    (2, ("PUBLISH", "ps:q", "to-self")),
    (1, ("PUBLISH", "ps:q", "from-1")),
    (2, ("PSUBSCRIBE", "ps:[qr]")),
    (1, ("PUBLISH", "ps:r", "by-pattern")),
    (2, ("UNSUBSCRIBE",)),
    (2, ("PUNSUBSCRIBE", "ps:[qr]", "ps:other")),
    (2, ("UNSUBSCRIBE",)),
    (0, ("SUBSCRIBE", "ps:r")),
    (0, ("RESET",)),
    (0, ("XLEN", "ps:s")),
    (1, ("PUBLISH", "ps:r", "nobody")),
    (0, ("SUBSCRIBE",)),
    (0, ("MULTI",)),
    (0, ("SUBSCRIBE", "ps:m")),
    (0, ("EXEC",)),
    (1, ("PUBLISH", "ps:m", "after-exec")),
    (0, ("UNSUBSCRIBE", "ps:m")),
    (0, ("SSUBSCRIBE", "ps:s1", "ps:s2")),
    (0, ("XLEN", "ps:s")),
    (0, ("SUBSCRIBE", "ps:s1")),
    (1, ("SPUBLISH", "ps:s1", "sharded")),
    (1, ("PUBLISH", "ps:s1", "plain")),
    (1, ("PUBSUB", "SHARDNUMSUB", "ps:s1", "ps:none")),
    (1, ("PUBSUB", "SHARDCHANNELS", "ps:s2")),
    (1, ("PUBSUB", "NUMSUB", "ps:s1")),
    (0, ("SUNSUBSCRIBE", "ps:s2")),
    (0, ("SUNSUBSCRIBE",)),
    (0, ("SUNSUBSCRIBE",)),
    (0, ("UNSUBSCRIBE",)),
    (0, ("XLEN", "ps:s")),
    (0, ("MULTI",)),
    (0, ("SSUBSCRIBE", "ps:s3")),
    (0, ("EXEC",)),
    (0, ("QUIT",)),
]


def read_to_ping(f: Any) -> list[bytes]:
    values = []
    while True:
        value = read_raw_reply(f)
        values.append(value)
        if value in PING_REPLIES:
            return values


@contextmanager
def connections(target: Any) -> Iterator[list[tuple[socket.socket, Any]]]:
    with ExitStack() as stack:
        out = []
        for _ in range(CONNECTIONS):
            sock = stack.enter_context(socket.create_connection((target.host, target.port),
                                                                timeout=10))
            out.append((sock, sock.makefile("rb")))
        yield out


def transcript(target: Any) -> list[tuple[str, list[list[bytes]]]]:
    """After each step, what every connection received, up to its PING's reply."""
    steps = []
    with connections(target) as conns:
        closed: set[int] = set()
        in_multi: set[int] = set()  # a PING there would be queued: the reply is read alone
        for index, argv in SCRIPT:
            sock, f = conns[index]
            sock.sendall(encode_command(*argv))
            in_multi.symmetric_difference_update({index} if argv[0] in ("MULTI", "EXEC") else ())
            received = []
            for i, (other, g) in enumerate(conns):
                if i == index and argv[0] == "QUIT":
                    closed.add(i)
                    received.append([read_raw_reply(g), g.read()])  # +OK, then the end
                    continue
                if i in closed:
                    continue
                if i in in_multi:
                    received.append([read_raw_reply(g)] if i == index else [])
                    continue
                other.sendall(encode_command("PING"))
                values = read_to_ping(g)
                if i == index and argv[0] == "HELLO":
                    values[0] = HELLO_REPLY
                received.append(values)
            steps.append((f"{index}: {' '.join(argv)}", received))
    return steps


# Steps whose publisher gets its own message: Redis 7.2+ sends it after the reply.
MESSAGE_TO_SELF = {"2: PUBLISH ps:q to-self"}


def reply_first(values: list[bytes]) -> list[bytes]:
    """A connection's frames in Redis 7.2+'s order: its own messages after the reply (and
    before PING's)."""
    messages = [v for v in values[:-1] if v.startswith(b">3\r\n$7\r\nmessage")]
    others = [v for v in values[:-1] if v not in messages]
    return [*others, *messages, values[-1]]


def test_raw_pubsub_transcript_matches_redis(served, redis_server):
    ours, theirs = transcript(served), transcript(redis_server)
    for (step, got), (_, expected) in zip(ours, theirs, strict=True):
        if step in MESSAGE_TO_SELF:
            index = int(step.split(":")[0])
            expected[index] = reply_first(expected[index])
        assert got == expected, step


def test_a_message_to_oneself_follows_the_reply(served, redis_server):
    """RESP3: PUBLISH to a channel the connection is subscribed to, alone, in MULTI and in a
    script: streamkeep sends the reply, then the message (Redis 7.2+). Debian's 7.0 sends the
    same frames, the message first."""
    message = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n%b\r\n"
    steps = [
        (("PUBLISH", "ch", "a"), [b":1\r\n", message % b"a"]),
        (("MULTI",), [b"+OK\r\n"]),
        (("PUBLISH", "ch", "b"), [b"+QUEUED\r\n"]),
        (("PING",), [b"+QUEUED\r\n"]),
        (("EXEC",), [b"*2\r\n:1\r\n+PONG\r\n", message % b"b"]),
        (("EVAL", "redis.call('publish', 'ch', 'c'); return 5", "0"),
         [b":5\r\n", message % b"c"]),
    ]
    for target, ordered in ((served, True), (redis_server, False)):
        with socket.create_connection((target.host, target.port), timeout=10) as sock, \
                sock.makefile("rb") as f:
            for argv in (("HELLO", "3"), ("SUBSCRIBE", "ch")):
                sock.sendall(encode_command(*argv))
                read_raw_reply(f)
            for argv, expected in steps:
                sock.sendall(encode_command(*argv))
                got = [read_raw_reply(f) for _ in expected]
                if ordered:
                    assert got == expected, argv
                else:  # the oracle's frames are the same, in 7.0's order
                    assert sorted(got) == sorted(expected) or \
                        b"".join(got) == b"*2\r\n" + message % b"b" + b":1\r\n+PONG\r\n", argv


def _messages(client: redis.Redis, publisher: redis.Redis) -> list[Any]:
    pubsub = client.pubsub()
    out: list[Any] = []

    def drain() -> None:
        while (message := pubsub.get_message(timeout=0.5)) is not None:
            out.append(message)

    try:
        pubsub.subscribe("ps:x", "ps:y")
        pubsub.psubscribe("ps:z*")
        drain()
        out.append(publisher.publish("ps:x", "1"))
        out.append(publisher.publish("ps:zed", "2"))
        out.append(publisher.pubsub_numsub("ps:x", "ps:zed"))
        out.append(publisher.pubsub_numpat())
        drain()
        pubsub.unsubscribe("ps:x")
        pubsub.punsubscribe()
        drain()
        out.append(publisher.publish("ps:x", "3"))
        out.append(pubsub.ping())
        drain()
    finally:
        pubsub.close()
    return out


def test_redis_py_pubsub_matches_redis(served, redis_server):
    results = []
    for target in (served, redis_server):
        for protocol in (2, 3):
            client = redis.Redis(host=target.host, port=target.port, protocol=protocol)
            publisher = redis.Redis(host=target.host, port=target.port)
            try:
                results.append(_messages(client, publisher))
            finally:
                client.close()
                publisher.close()
    assert results[:2] == results[2:]
