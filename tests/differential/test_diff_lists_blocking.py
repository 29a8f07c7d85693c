"""Blocking list pops across real connections, on a `streamkeep serve` child process (and on the
in-process server) and on the real redis-server (7.0.15): each scenario runs the same steps on
both and records every reply as the exact bytes sent, the number of blocked clients, the final
keys and (in some) the keyspace events; the two records must be equal.

Covered: clients served in the order they blocked (one push of three elements serving three
waiters; BLPOP, BRPOP and BLMPOP COUNT sharing a key), a client blocked on two keys, a
MULTI/EXEC that pushes to several lists (and one whose pushes are popped again before EXEC
ends), BLMOVE / BRPOPLPUSH chains (a BLMOVE whose destination has its own waiter, a BLMOVE onto
its own source), a BLMOVE whose destination became a string (WRONGTYPE), a waiter unmoved by
its key becoming a string or a stream, timeouts (RESP2 null array `*-1`, RESP3 `_`), CLIENT
UNBLOCK's TIMEOUT and ERROR forms, and blocking pops inside MULTI and scripts (never blocking).

Also 7.2+ only, so tested on streamkeep alone: BLPOP, BRPOP, BLMOVE and BRPOPLPUSH may run in a
script (7.0 flags them `noscript`; BLMPOP is compared), where they do not block.

Where Redis 7.0 and 7.2+ differ, the scenario compared avoids the case: 7.0 serves a client
blocked on several keys from the key that became ready, 7.2+ runs its command again, which pops
from the first non-empty key in argument order (blocked.c, handleClientsBlockedOnKey). A
transaction that fills its keys in argument order is compared; the other order is tested on
streamkeep alone (`test_multi_key_waiter_reruns_its_command`), as 8.x answers it.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.resp_client import encode_command, read_raw_reply
from tests.support.serve_process import ServeProcess, spawner

WAIT = 10.0  # how long a bounded wait for a state (a client blocked, a reply) lasts at most
MARK = b"__keyspace@0__:MARK"  # published after a scenario: the end of its events
Record = list[tuple[str, Any]]


class Conn:
    """One client connection; replies read as the exact bytes sent. A reply that does not come
    is recorded as b'<no reply>' (and the connection is not read again)."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=WAIT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")
        self.dead = False

    def send(self, *argv: Any) -> None:
        self.sock.sendall(encode_command(*argv))

    def read(self) -> bytes:
        if self.dead:
            return b"<dead>"
        try:
            return read_raw_reply(self.file)
        except (TimeoutError, ConnectionError, AssertionError):
            self.dead = True
            return b"<no reply>"

    def __call__(self, *argv: Any) -> bytes:
        self.send(*argv)
        return self.read()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
            self.sock.close()


class Side:
    """One server and the connections a scenario opens on it (closed by `close`)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.conns: list[Conn] = []
        self.ctl = self.conn()
        assert self.ctl("FLUSHALL") == b"+OK\r\n"
        self.sub: Conn | None = None
        self.not_blocked: list[str] = []  # commands `block` sent that did not block

    def conn(self) -> Conn:
        conn = Conn(self.host, self.port)
        self.conns.append(conn)
        return conn

    def conns_of(self, n: int) -> list[Conn]:
        return [self.conn() for _ in range(n)]

    def client_id(self, conn: Conn) -> int:
        return int(conn("CLIENT", "ID")[1:-2])

    def blocked_clients(self) -> int:
        info = self.ctl("INFO", "clients").split(b"\r\n", 1)[1]
        for line in info.split(b"\r\n"):
            if line.startswith(b"blocked_clients:"):
                return int(line.split(b":")[1])
        raise AssertionError(f"no blocked_clients in INFO clients: {info!r}")

    def block(self, conn: Conn, *argv: Any) -> None:
        """Send a blocking command and wait (bounded) until one more client is blocked: the
        next one to block is queued after it. One that does not block (or a connection whose
        earlier reply never came) is noted in `not_blocked`, which `compare` compares too."""
        if conn.dead:
            self.not_blocked.append(" ".join(map(str, argv)) + " (on a dead connection)")
            return
        before = self.blocked_clients()
        conn.send(*argv)
        deadline = time.monotonic() + WAIT
        while self.blocked_clients() <= before:
            if time.monotonic() > deadline:
                self.not_blocked.append(" ".join(map(str, argv)))
                return
            time.sleep(0.005)

    def state(self, *keys: str) -> Record:
        return [(f"state {key}", (self.ctl("TYPE", key), self.ctl("LRANGE", key, "0", "-1")))
                for key in keys]

    def watch(self) -> None:
        """Keyspace and keyevent messages of every class, from now on (`events` reads them)."""
        assert self.ctl("CONFIG", "SET", "notify-keyspace-events", "KEA") == b"+OK\r\n"
        self.sub = self.conn()
        self.sub("PSUBSCRIBE", "__key*__:*")

    def events(self) -> list[tuple[bytes, bytes]]:
        assert self.sub is not None
        self.ctl("PUBLISH", MARK, "x")
        messages = []
        while True:
            reply = self.sub.read()
            if reply in (b"<no reply>", b"<dead>"):
                return [*messages, (reply, b"")]
            parts = reply.split(b"\r\n")  # *4 $8 pmessage $n pattern $n channel $n data
            if parts[6] == MARK:
                return messages
            messages.append((parts[6], parts[8]))

    def close(self) -> None:
        for conn in self.conns[1:]:
            conn.close()
        with contextlib.suppress(OSError):
            self.ctl("CONFIG", "SET", "notify-keyspace-events", "")
            self.ctl("FLUSHALL")
        self.ctl.close()


Scenario = Callable[[Side], Record]


def compare(sides: tuple[Side, Side], scenario: Scenario) -> Record:
    ours, theirs = sides
    mine, oracle = scenario(ours), scenario(theirs)
    mine.append(("commands that did not block", ours.not_blocked))
    oracle.append(("commands that did not block", theirs.not_blocked))
    differences = [f"{m[0]}:\n  streamkeep: {m[1]!r}\n  redis:      {o[1]!r}"
                   for m, o in zip(mine, oracle, strict=True) if m != o]
    assert not differences, "\n" + "\n".join(differences)
    return oracle


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One `streamkeep serve` child for the module (each scenario starts with FLUSHALL)."""
    start, cleanup = spawner()
    try:
        yield start(tmp_path_factory.mktemp("lists-blocking"))
    finally:
        cleanup()


@pytest.fixture(params=["serve", "in-process"])
def ours(request: pytest.FixtureRequest) -> Iterator[Side]:
    target = request.getfixturevalue("serve" if request.param == "serve" else "served")
    side = Side(target.host, target.port)
    try:
        yield side
    finally:
        side.close()


@pytest.fixture
def sides(ours: Side, redis_server: Any) -> Iterator[tuple[Side, Side]]:
    theirs = Side(redis_server.host, redis_server.port)
    try:
        yield ours, theirs
    finally:
        theirs.close()


# --- the scenarios -------------------------------------------------------------------------------


def first_blocked_first_served(s: Side) -> Record:
    c1, c2, c3, c4 = s.conns_of(4)
    s.watch()
    s.block(c1, "BLPOP", "k", "0")
    s.block(c2, "BLPOP", "k", "0")
    s.block(c3, "BRPOP", "k", "0")
    s.block(c4, "BLPOP", "k", "other", "0")
    rec: Record = [("LPUSH k a b c", s.ctl("LPUSH", "k", "a", "b", "c")),
                   ("c1", c1.read()), ("c2", c2.read()), ("c3", c3.read()),
                   ("blocked", s.blocked_clients()), *s.state("k")]
    rec += [("RPUSH other z", s.ctl("RPUSH", "other", "z")), ("c4", c4.read()),
            ("blocked", s.blocked_clients()), *s.state("k", "other"), ("events", s.events())]
    return rec


def pops_and_counts_share_a_key(s: Side) -> Record:
    c1, c2, c3, c4 = s.conns_of(4)
    s.block(c1, "BLMPOP", "0", "1", "k", "LEFT", "COUNT", "2")
    s.block(c2, "BRPOP", "k", "0")
    s.block(c3, "BLMPOP", "0", "2", "j", "k", "RIGHT", "COUNT", "5")
    s.block(c4, "BLPOP", "k", "0")
    rec: Record = [("RPUSH k 1 2 3 4", s.ctl("RPUSH", "k", "1", "2", "3", "4")),
                   ("c1", c1.read()), ("c2", c2.read()), ("c3", c3.read()),
                   ("blocked", s.blocked_clients()), *s.state("k")]
    rec += [("RPUSH j x y", s.ctl("RPUSH", "j", "x", "y")), ("blocked", s.blocked_clients()),
            ("RPUSH k 5 6", s.ctl("RPUSH", "k", "5", "6")), ("c4", c4.read()),
            ("blocked", s.blocked_clients()), *s.state("j", "k")]
    return rec


def client_blocked_on_two_keys(s: Side) -> Record:
    c1, c2, c3, c4, c5 = s.conns_of(5)
    s.block(c1, "BLPOP", "a", "b", "0")
    s.block(c2, "BLPOP", "b", "0")
    s.block(c3, "BRPOP", "b", "a", "0")
    rec: Record = [("RPUSH b x", s.ctl("RPUSH", "b", "x")), ("c1", c1.read()),
                   ("blocked", s.blocked_clients()),
                   ("RPUSH a y", s.ctl("RPUSH", "a", "y")), ("c3", c3.read()),
                   ("blocked", s.blocked_clients()),
                   ("RPUSH b z w", s.ctl("RPUSH", "b", "z", "w")), ("c2", c2.read()),
                   ("blocked", s.blocked_clients()), *s.state("a", "b"),
                   ("DEL b", s.ctl("DEL", "b"))]
    # A transaction filling both keys in the waiter's argument order (see the docstring).
    s.block(c4, "BLPOP", "a", "b", "0")
    s.block(c5, "BLMPOP", "0", "2", "a", "b", "RIGHT", "COUNT", "3")
    for argv in (("MULTI",), ("RPUSH", "a", "1"), ("RPUSH", "b", "2", "3"), ("EXEC",)):
        rec.append((" ".join(argv), s.ctl(*argv)))
    rec += [("c4", c4.read()), ("c5", c5.read()), ("blocked", s.blocked_clients()),
            *s.state("a", "b")]
    return rec


def multi_exec_serves_in_order(s: Side) -> Record:
    c1, c2, c3, c4, c5 = s.conns_of(5)
    s.watch()
    s.block(c1, "BLPOP", "a", "0")
    s.block(c2, "BLPOP", "b", "0")
    s.block(c3, "BLPOP", "a", "0")
    s.block(c4, "BLMOVE", "b", "a", "LEFT", "RIGHT", "0")
    s.block(c5, "BLPOP", "c", "0")
    rec: Record = []
    for argv in (("MULTI",), ("RPUSH", "b", "x", "y"), ("RPUSH", "a", "z"), ("RPUSH", "c", "1"),
                 ("LPOP", "c"), ("EXEC",)):
        rec.append((" ".join(argv), s.ctl(*argv)))
    rec += [("c2", c2.read()), ("c4", c4.read()), ("c1", c1.read()), ("c3", c3.read()),
            ("blocked", s.blocked_clients()), *s.state("a", "b", "c")]
    for argv in (("MULTI",), ("RPUSH", "c", "1", "2"), ("LPOP", "c"), ("DEL", "c"),
                 ("RPUSH", "c", "3", "4"), ("LPUSH", "c", "5"), ("EXEC",)):
        rec.append((" ".join(argv), s.ctl(*argv)))
    rec += [("c5", c5.read()), ("blocked", s.blocked_clients()), *s.state("c"),
            ("events", s.events())]
    return rec


def blmove_chains(s: Side) -> Record:
    c0, c1, c2, c3, c4, c5, c6 = s.conns_of(7)
    s.watch()
    s.block(c0, "BLPOP", "b", "0")
    s.block(c1, "BLMOVE", "a", "b", "RIGHT", "LEFT", "0")
    s.block(c2, "BLMOVE", "b", "c", "LEFT", "RIGHT", "0")
    s.block(c3, "BRPOPLPUSH", "c", "d", "0")
    s.block(c4, "BLPOP", "d", "0")
    rec: Record = [("RPUSH a x y", s.ctl("RPUSH", "a", "x", "y")), ("c1", c1.read()),
                   ("c0", c0.read()), ("blocked", s.blocked_clients()), *s.state("a", "b"),
                   ("RPUSH b w", s.ctl("RPUSH", "b", "w")), ("c2", c2.read()),
                   ("c3", c3.read()), ("c4", c4.read()), ("blocked", s.blocked_clients()),
                   *s.state("a", "b", "c", "d")]
    # A BLMOVE onto its own source, and a waiter behind it on the same key.
    s.block(c5, "BLMOVE", "e", "e", "RIGHT", "LEFT", "0")
    s.block(c6, "BLPOP", "e", "0")
    rec += [("RPUSH e v", s.ctl("RPUSH", "e", "v")), ("c5", c5.read()), ("c6", c6.read()),
            ("blocked", s.blocked_clients()), *s.state("e"), ("events", s.events())]
    return rec


def wrong_types_while_blocked(s: Side) -> Record:
    c1, c2, c3 = s.conns_of(3)
    s.block(c1, "BLMOVE", "a", "dst", "LEFT", "LEFT", "0")
    s.block(c3, "BLPOP", "a", "0")
    rec: Record = [("SET dst v", s.ctl("SET", "dst", "v")),
                   ("RPUSH a x", s.ctl("RPUSH", "a", "x")), ("c1", c1.read()), ("c3", c3.read()),
                   ("blocked", s.blocked_clients()), *s.state("a", "dst")]
    s.block(c2, "BLPOP", "k", "0")
    for argv in (("SET", "k", "v"), ("DEL", "k"), ("XADD", "k", "1-1", "f", "v"), ("DEL", "k"),
                 ("SADD", "k", "m"), ("RENAME", "k", "k2")):
        rec.append((" ".join(argv), s.ctl(*argv)))
    rec += [("blocked", s.blocked_clients()), ("RPUSH k z", s.ctl("RPUSH", "k", "z")),
            ("c2", c2.read()), ("blocked", s.blocked_clients()), *s.state("k")]
    # A list RENAMEd onto a waited-for key serves the waiter.
    s.block(c2, "BRPOP", "k", "0")
    rec += [("RPUSH src 1 2", s.ctl("RPUSH", "src", "1", "2")),
            ("RENAME src k", s.ctl("RENAME", "src", "k")), ("c2", c2.read()),
            ("blocked", s.blocked_clients()), *s.state("k")]
    return rec


def timeouts(s: Side) -> Record:
    c1 = s.conn()
    rec: Record = []
    for argv in (("BLPOP", "nokey", "0.05"), ("BRPOP", "nokey", "nokey2", "0.05"),
                 ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.05"),
                 ("BRPOPLPUSH", "nokey", "d", "0.05"), ("BLMPOP", "0.05", "1", "nokey", "LEFT"),
                 ("BLMPOP", "0.05", "2", "nokey", "n2", "RIGHT", "COUNT", "2")):
        rec.append((" ".join(argv), c1(*argv)))
    c1("HELLO", "3")  # (the servers' HELLO replies differ: not compared)
    for argv in (("BLPOP", "nokey", "0.05"), ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0.05"),
                 ("BLMPOP", "0.05", "1", "nokey", "LEFT")):
        rec.append(("RESP3 " + " ".join(argv), c1(*argv)))
    c1("HELLO", "2")
    return [*rec, ("after timeouts", s.blocked_clients()), *s.state("nokey", "d")]


def client_unblock(s: Side) -> Record:
    c2 = s.conn()
    rec: Record = []
    id2 = s.client_id(c2)
    for argv, how in ((("BLPOP", "k", "0"), ("TIMEOUT",)),
                      (("BLMOVE", "k", "d", "LEFT", "LEFT", "0"), ("ERROR",)),
                      (("BLMPOP", "0", "1", "k", "LEFT"), ()),
                      (("BRPOPLPUSH", "k", "d", "0"), ("timeout",)),
                      (("BRPOP", "k", "j", "0"), ("error",))):
        s.block(c2, *argv)
        rec += [(f"CLIENT UNBLOCK {' '.join(how)}", s.ctl("CLIENT", "UNBLOCK", id2, *how)),
                (" ".join(argv), c2.read()), ("blocked", s.blocked_clients())]
    rec += [("not blocked", s.ctl("CLIENT", "UNBLOCK", id2)),
            ("bad reason", s.ctl("CLIENT", "UNBLOCK", id2, "FOO")),
            ("bad id", s.ctl("CLIENT", "UNBLOCK", "x")),
            ("no such client", s.ctl("CLIENT", "UNBLOCK", "999999", "TIMEOUT")),
            ("arity", s.ctl("CLIENT", "UNBLOCK")),
            ("still usable", c2("RPUSH", "k", "a")), *s.state("k", "d")]
    return rec


def pops_inside_multi_and_scripts(s: Side) -> Record:
    c1 = s.conn()
    rec: Record = []
    for argv in (("MULTI",), ("BLPOP", "nokey", "0"), ("BRPOP", "nokey", "0"),
                 ("BLMOVE", "nokey", "d", "LEFT", "LEFT", "0"), ("BRPOPLPUSH", "nokey", "d", "0"),
                 ("BLMPOP", "0", "1", "nokey", "LEFT"), ("RPUSH", "k", "a", "b", "c", "e"),
                 ("BLPOP", "k", "0"), ("BLMOVE", "k", "d", "LEFT", "LEFT", "0"),
                 ("BLMPOP", "0", "1", "k", "RIGHT", "COUNT", "5"), ("BLPOP", "k", "0"),
                 ("EXEC",),
                 ("EVAL", "return redis.call('BLMPOP', 0, 1, KEYS[1], 'LEFT')", "1", "nokey"),
                 ("EVAL", "return redis.call('BLMPOP', 0, 1, KEYS[1], 'LEFT')", "1", "d")):
        rec.append((" ".join(argv), c1(*argv)))
    rec += [("blocked", s.blocked_clients()), *s.state("k", "d")]
    return rec


@pytest.mark.parametrize("scenario", [
    first_blocked_first_served, pops_and_counts_share_a_key, client_blocked_on_two_keys,
    multi_exec_serves_in_order, blmove_chains, wrong_types_while_blocked,
    timeouts, client_unblock, pops_inside_multi_and_scripts,
], ids=lambda f: f.__name__)
def test_blocking_like_redis(sides: tuple[Side, Side], scenario: Scenario) -> None:
    compare(sides, scenario)


def test_multi_key_waiter_reruns_its_command(ours: Side) -> None:
    """Redis 7.2+ (not Debian's 7.0): a client woken by its second key runs its command again,
    which pops from the first of its keys that has elements (7.0 serves each waiter from the
    key that woke it: [b, x], then [a, [y]])."""
    c1, c2 = ours.conns_of(2)
    ours.block(c1, "BLPOP", "a", "b", "0")
    ours.block(c2, "BLMPOP", "0", "2", "a", "b", "LEFT", "COUNT", "2")
    for argv in (("MULTI",), ("RPUSH", "b", "x"), ("RPUSH", "a", "y"), ("EXEC",)):
        ours.ctl(*argv)
    assert c1.read() == b"*2\r\n$1\r\na\r\n$1\r\ny\r\n"
    assert c2.read() == b"*2\r\n$1\r\nb\r\n*1\r\n$1\r\nx\r\n"
    assert ours.blocked_clients() == 0


def test_blocking_pops_in_scripts_do_not_block(ours: Side) -> None:
    """Redis 7.2+ (not Debian's 7.0, which refuses them in scripts): a script's BLPOP, BRPOP,
    BLMOVE and BRPOPLPUSH answer at once, nil (false in Lua) for an empty key."""
    c1 = ours.conn()
    assert c1("RPUSH", "d", "x", "y") == b":2\r\n"
    for argv, reply in (
            (("EVAL", "return redis.call('BLPOP', KEYS[1], 0)", "1", "nokey"), b"$-1\r\n"),
            (("EVAL", "return redis.call('BLMOVE', KEYS[1], KEYS[2], 'LEFT', 'LEFT', 0)", "2",
              "nokey", "d"), b"$-1\r\n"),
            (("EVAL", "return redis.call('BRPOPLPUSH', KEYS[1], KEYS[2], 0)", "2", "nokey", "d"),
             b"$-1\r\n"),
            (("EVAL", "return redis.call('BRPOP', KEYS[1], 0)", "1", "d"),
             b"*2\r\n$1\r\nd\r\n$1\r\ny\r\n"),
            (("EVAL", "return redis.call('BLMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT', 0)", "2",
              "d", "e"), b"$1\r\nx\r\n")):
        assert c1(*argv) == reply, argv
    assert ours.blocked_clients() == 0
    assert ours.state("d", "e") == [("state d", (b"+none\r\n", b"*0\r\n")),
                                    ("state e", (b"+list\r\n", b"*1\r\n$1\r\nx\r\n"))]
