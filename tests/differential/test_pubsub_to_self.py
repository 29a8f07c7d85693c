"""A RESP3 connection that publishes to a channel it is subscribed to, inside MULTI/EXEC and
inside a script: the replies and the pushed messages in Redis's order, byte for byte over raw
sockets (Redis's own tests/unit/pubsub.tcl: "publish to self inside multi", "publish to self
inside script", "unsubscribe inside multi, and publish to self").

Redis 7.2+ holds a message its client's own command publishes to that client until the
command's reply is written (networking.c queues it on server.pending_push_messages; afterCommand
appends it to the client's output once the outermost execution unit ends): EXEC's whole array,
or a script's reply, comes first, then the messages in publishing order. The (un)subscribe
commands are the exception: their confirmations are their reply, written where they run (inside
EXEC's array). Debian's 7.0.15, the oracle here, writes a message where it is published: inside
EXEC's array, before a script's reply. Where 7.0 and 8.x agree (EXEC's array of
unsubscribe confirmations, a message to oneself after PUBLISH's own reply) the transcripts are
compared with the oracle's bytes; where they differ, streamkeep is held to 8.x's order and the
oracle to 7.0's, so that each test says what changed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.resp_client import encode_command, read_raw_reply

Steps = list[tuple[tuple[str, ...], int]]  # (argv, how many frames it makes the client receive)


def message(channel: bytes, payload: bytes) -> bytes:
    """A RESP3 `message` push."""
    return (b">3\r\n$7\r\nmessage\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n"
            % (len(channel), channel, len(payload), payload))


def push(kind: bytes, channel: bytes, count: int) -> bytes:
    """A RESP3 (un)subscribe confirmation."""
    return (b">3\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n:%d\r\n"
            % (len(kind), kind, len(channel), channel, count))


@contextmanager
def resp3(target: Any) -> Iterator[tuple[socket.socket, Any]]:
    """A raw connection to `target` after HELLO 3 (its map differs between servers: read,
    not compared)."""
    with socket.create_connection((target.host, target.port), timeout=10) as sock, \
            sock.makefile("rb") as f:
        sock.sendall(encode_command("HELLO", "3"))
        read_raw_reply(f)
        yield sock, f


def transcript(target: Any, steps: Steps) -> list[list[bytes]]:
    """What each step made the connection receive, frame by frame (a frame: one complete
    RESP value, so a message written inside EXEC's array is part of that array's frame)."""
    out = []
    with resp3(target) as (sock, f):
        for argv, frames in steps:
            sock.sendall(encode_command(*argv))
            out.append([read_raw_reply(f) for _ in range(frames)])
        sock.sendall(encode_command("PING"))  # nothing else is waiting: PING's reply is next
        assert read_raw_reply(f) == b"+PONG\r\n"
    return out


# --- pubsub.tcl: "publish to self inside multi" ----------------------------------------------

MULTI_STEPS: Steps = [
    (("SUBSCRIBE", "foo"), 1),
    (("MULTI",), 1),
    (("PING", "abc"), 1),
    (("PUBLISH", "foo", "bar"), 1),
    (("PUBLISH", "foo", "vaz"), 1),
    (("PING", "def"), 1),
    (("EXEC",), 3),
]
QUEUED = [b"+QUEUED\r\n"]
MULTI_COMMON = [[push(b"subscribe", b"foo", 1)], [b"+OK\r\n"], QUEUED, QUEUED, QUEUED, QUEUED]
MULTI_8X_EXEC = [b"*4\r\n$3\r\nabc\r\n:1\r\n:1\r\n$3\r\ndef\r\n",
                 message(b"foo", b"bar"), message(b"foo", b"vaz")]
# 7.0: each message inside EXEC's array, before its PUBLISH's element (the array's length
# still says 4), then the array's last two elements read as two frames.
MULTI_70_EXEC = [b"*4\r\n$3\r\nabc\r\n" + message(b"foo", b"bar") + b":1\r\n"
                 + message(b"foo", b"vaz"), b":1\r\n", b"$3\r\ndef\r\n"]


def test_publish_to_self_inside_multi(served, redis_server):
    assert transcript(served, MULTI_STEPS) == [*MULTI_COMMON, MULTI_8X_EXEC]
    assert transcript(redis_server, MULTI_STEPS) == [*MULTI_COMMON, MULTI_70_EXEC]


# --- pubsub.tcl: "publish to self inside script" ---------------------------------------------

SCRIPT = ('redis.call("ping","abc") redis.call("publish","foo","bar") '
          'redis.call("publish","foo","vaz") redis.call("ping","def") return "bla"')
SCRIPT_STEPS: Steps = [(("SUBSCRIBE", "foo"), 1), (("EVAL", SCRIPT, "0"), 3)]
SCRIPT_8X = [b"$3\r\nbla\r\n", message(b"foo", b"bar"), message(b"foo", b"vaz")]
SCRIPT_70 = [message(b"foo", b"bar"), message(b"foo", b"vaz"), b"$3\r\nbla\r\n"]


def test_publish_to_self_inside_script(served, redis_server):
    subscribed = [push(b"subscribe", b"foo", 1)]
    assert transcript(served, SCRIPT_STEPS) == [subscribed, SCRIPT_8X]
    assert transcript(redis_server, SCRIPT_STEPS) == [subscribed, SCRIPT_70]


# --- pubsub.tcl: "unsubscribe inside multi, and publish to self" -----------------------------

UNSUBSCRIBE_STEPS: Steps = [
    (("SUBSCRIBE", "foo", "bar", "baz"), 3),
    (("MULTI",), 1),
    (("PING", "abc"), 1),
    (("UNSUBSCRIBE", "bar"), 1),
    (("UNSUBSCRIBE", "baz"), 1),
    (("PING", "def"), 1),
    (("EXEC",), 1),
    (("PUBLISH", "foo", "vaz"), 2),
]


def test_unsubscribe_inside_multi_and_publish_to_self(served, redis_server):
    """The confirmations are the UNSUBSCRIBEs' replies: EXEC's elements, in 7.0 as in 8.x.
    PUBLISH's own message follows its reply in 8.x (7.0 sent it first)."""
    ours = transcript(served, UNSUBSCRIBE_STEPS)
    theirs = transcript(redis_server, UNSUBSCRIBE_STEPS)
    assert ours[:-1] == theirs[:-1]
    assert ours[-2] == [b"*4\r\n$3\r\nabc\r\n" + push(b"unsubscribe", b"bar", 2)
                        + push(b"unsubscribe", b"baz", 1) + b"$3\r\ndef\r\n"]
    assert ours[-1] == [b":1\r\n", message(b"foo", b"vaz")]
    assert theirs[-1] == [message(b"foo", b"vaz"), b":1\r\n"]


# --- around them ---------------------------------------------------------------------------


def test_subscribe_and_publish_to_self_in_one_transaction(served, redis_server):
    """SUBSCRIBE's confirmation is its element of EXEC's array; the message its neighbour
    published waits for the end of the array (8.x: execCommand runs each command with its own
    c->cmd, and only the (un)subscribe family writes its pushes at once)."""
    steps: Steps = [(("MULTI",), 1), (("SUBSCRIBE", "foo"), 1), (("PUBLISH", "foo", "x"), 1),
                    (("EXEC",), 2)]
    start = [[b"+OK\r\n"], QUEUED, QUEUED]
    confirmation = push(b"subscribe", b"foo", 1)
    assert transcript(served, steps) == [
        *start, [b"*2\r\n" + confirmation + b":1\r\n", message(b"foo", b"x")]]
    assert transcript(redis_server, steps) == [
        *start, [b"*2\r\n" + confirmation + message(b"foo", b"x"), b":1\r\n"]]


def test_pattern_message_to_self_in_script_and_failed_script(served, redis_server):
    """A pmessage waits like a message, and a script that fails after publishing still
    replies first (8.x's afterCommand runs whatever the command replied)."""
    pmessage = b">4\r\n$8\r\npmessage\r\n$2\r\nf*\r\n$3\r\nfoo\r\n$1\r\n%b\r\n"
    steps: Steps = [
        (("PSUBSCRIBE", "f*"), 1),
        (("EVAL", "redis.call('publish', 'foo', 'a') return 7", "0"), 2),
        (("EVAL", "redis.call('publish', 'foo', 'b') return redis.error_reply('ERR boom')",
          "0"), 2),
    ]
    confirmation = [push(b"psubscribe", b"f*", 1)]
    assert transcript(served, steps) == [
        confirmation, [b":7\r\n", pmessage % b"a"], [b"-ERR boom\r\n", pmessage % b"b"]]
    assert transcript(redis_server, steps) == [
        confirmation, [pmessage % b"a", b":7\r\n"], [pmessage % b"b", b"-ERR boom\r\n"]]


def test_keyspace_event_to_self_inside_multi(served, redis_server):
    """A keyspace notification is a message too: a connection subscribed to its own key's
    events gets them after EXEC's array (7.0: each where its command ran, the array's
    length not counting them, so its frames split after its second element)."""
    channel = b"__keyspace@0__:pts:k"
    steps: Steps = [(("SUBSCRIBE", channel.decode()), 1), (("MULTI",), 1),
                    (("SET", "pts:k", "v"), 1), (("DEL", "pts:k"), 1), (("EXEC",), 3)]
    start = [[push(b"subscribe", channel, 1)], [b"+OK\r\n"], QUEUED, QUEUED]
    for target in (served, redis_server):
        with resp3(target) as (sock, f):
            sock.sendall(encode_command("CONFIG", "SET", "notify-keyspace-events", "KA"))
            assert read_raw_reply(f) == b"+OK\r\n"
    try:
        assert transcript(served, steps) == [
            *start, [b"*2\r\n+OK\r\n:1\r\n", message(channel, b"set"), message(channel, b"del")]]
        assert transcript(redis_server, steps) == [
            *start, [b"*2\r\n" + message(channel, b"set") + b"+OK\r\n", message(channel, b"del"),
                     b":1\r\n"]]
    finally:
        with resp3(redis_server) as (sock, f):
            sock.sendall(encode_command("CONFIG", "SET", "notify-keyspace-events", ""))
            read_raw_reply(f)


def test_pipelined_publish_to_self_then_the_next_reply(served, redis_server):
    """The held message goes out before the next command's reply: PUBLISH's reply, its
    message, then PING's (7.0: the message first)."""
    replies = {}
    for name, target in (("ours", served), ("theirs", redis_server)):
        with resp3(target) as (sock, f):
            sock.sendall(encode_command("SUBSCRIBE", "foo"))
            read_raw_reply(f)
            sock.sendall(encode_command("PUBLISH", "foo", "p") + encode_command("PING", "x"))
            replies[name] = [read_raw_reply(f) for _ in range(3)]
    assert replies["ours"] == [b":1\r\n", message(b"foo", b"p"), b"$1\r\nx\r\n"]
    assert replies["theirs"] == [message(b"foo", b"p"), b":1\r\n", b"$1\r\nx\r\n"]


def test_streamkeep_serve_orders_messages_to_self(spawn, tmp_path):
    """The same three transcripts from a `streamkeep serve` process."""
    server = spawn(tmp_path / "data")
    assert transcript(server, MULTI_STEPS) == [*MULTI_COMMON, MULTI_8X_EXEC]
    assert transcript(server, SCRIPT_STEPS) == [[push(b"subscribe", b"foo", 1)], SCRIPT_8X]
    assert transcript(server, UNSUBSCRIBE_STEPS)[-1] == [b":1\r\n", message(b"foo", b"vaz")]


def test_messages_to_self_wait_behind_a_reply_held_for_fsync(tmp_path):
    """With appendfsync always a write's reply waits for its fsync: a message the same
    transaction or script published to its own connection waits behind it, still after it."""
    from streamkeep import Engine
    from tests.support.server_util import start_server

    handle = start_server(Engine.open(str(tmp_path / "data"), appendfsync="always"))
    try:
        steps: Steps = [(("SUBSCRIBE", "foo"), 1), (("MULTI",), 1), (("SET", "k", "v"), 1),
                        (("PUBLISH", "foo", "m"), 1), (("EXEC",), 2),
                        (("EVAL", "redis.call('set', 'k', 'w') redis.call('publish', 'foo', 's')"
                          " return 1", "0"), 2)]
        assert transcript(handle, steps) == [
            [push(b"subscribe", b"foo", 1)], [b"+OK\r\n"], QUEUED, QUEUED,
            [b"*2\r\n+OK\r\n:1\r\n", message(b"foo", b"m")], [b":1\r\n", message(b"foo", b"s")]]
    finally:
        handle.stop()
