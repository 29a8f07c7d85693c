"""A keyspace-notification watcher for the differential tests: a pattern subscriber on one server
and a client running commands there, each command's messages read up to a marker published
after it. Owns `Watcher` and `watcher_pairs` (one on each of two servers); must not touch:
what a test compares.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from tests.support.resp_client import RespClient, RespError, encode_command, read_raw_reply

MARK = b"__keyspace@0__:MARK"  # published after each command: the end of its messages


class Watcher:
    """A pattern subscriber on one server and a client running the script there."""

    def __init__(self, host: str, port: int, classes: str) -> None:
        self.client = RespClient(host, port)
        self.client.execute("FLUSHALL")
        self.client.execute("CONFIG", "SET", "notify-keyspace-events", classes)
        self.sub = socket.create_connection((host, port), timeout=10)
        self.file = self.sub.makefile("rb")
        self.sub.sendall(encode_command("PSUBSCRIBE", "__key*__:*"))
        read_raw_reply(self.file)

    def run(self, argv: tuple[Any, ...] | str) -> list[tuple[bytes, bytes]]:
        """The messages `argv` caused, in order."""
        if argv == "sleep":
            time.sleep(0.02)
            return []
        with contextlib.suppress(RespError):  # a refused command publishes nothing either
            self.client.execute(*argv)
        self.client.execute("PUBLISH", MARK, "x")
        messages = []
        while True:
            parts = read_raw_reply(self.file).split(b"\r\n")  # *4 $8 pmessage $n pattern ...
            channel, data = parts[6], parts[8]
            if channel == MARK:
                return messages
            messages.append((channel, data))

    def close(self) -> None:
        self.client.execute("CONFIG", "SET", "notify-keyspace-events", "")
        self.client.close()
        self.file.close()  # (the socket stays open, subscribed, while its file is)
        self.sub.close()


@contextlib.contextmanager
def watcher_pairs(ours: Any, theirs: Any) -> Iterator[Callable[[str], tuple[Watcher, Watcher]]]:
    """`start(classes)` makes a Watcher on each server (ours, then the oracle), under those
    notify-keyspace-events classes; every one made is closed at the end."""
    made: list[Watcher] = []

    def start(classes: str) -> tuple[Watcher, Watcher]:
        pair = (Watcher(ours.host, ours.port, classes), Watcher(theirs.host, theirs.port, classes))
        made.extend(pair)
        return pair

    try:
        yield start
    finally:
        for watcher in made:
            watcher.close()
