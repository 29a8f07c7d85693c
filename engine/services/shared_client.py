"""A process's client of its data directory's shared server: the Engine's API over a socket.

Owns `SharedEngine`, what `Engine.open(path, shared=True)` returns: `execute`, `redis()`,
blocking reads, `subscribe` / `psubscribe`, `set_config`, `compact`, `close`, with the same
replies and errors as the in-process Engine (RESP2 on the wire, whose shapes are the embedded
API's plain values; an error reply raised as ReplyError with the server's line). Each thread
has a connection of its own, made on its first call (so a MULTI or a blocked read of one
thread never mixes with another's); a forked child makes its own instead of sharing its
parent's. Also owns `SharedSubscription` (a subscriber on a connection of its own) and
`SharedQueueBackend` (StreamQueue's backend over the same connections: `queue_backend()`).

A call whose request could not be sent (the server had gone: its socket refuses the write) is
sent again on a new connection, which starts a new server if none runs (engine.services.shared),
unless the connection held a session's state (MULTI, WATCH, SELECT...); a call whose reply was
lost raises ServerLost (its outcome is unknown, as over any network) and the next call
reconnects. Finding, starting and checking the server is engine.services.shared's: connections
come from the `connect` callable given. Must not touch: command semantics (everything is a
command), the directory's files; never imports redis-py (a dev-only dependency).
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from streamkeep.engine.exec.pubsub import SubscriptionOverflow, message_dict
from streamkeep.engine.wire.argv import encode_args
from streamkeep.engine.wire.errors import ReplyError, StreamkeepError
from streamkeep.engine.wire.reply import Push, to_plain
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command

Argv = tuple[bytes, ...]
RECV_BYTES = 1 << 16
# Commands that leave state on the connection (its session): a connection that ran one is not
# silently replaced by a new one after the server went away. MULTI and WATCH last until EXEC,
# DISCARD or UNWATCH; the others for the connection's life.
_TRANSIENT = frozenset({b"MULTI", b"WATCH"})
_TRANSIENT_END = frozenset({b"EXEC", b"DISCARD", b"UNWATCH"})
_STICKY = frozenset({b"SELECT", b"HELLO", b"AUTH", b"CLIENT", b"RESET", b"READONLY",
                     b"SWAPDB"})
# Commands after which a connection no longer answers one reply per request: refused before
# they are sent, as an in-process engine refuses them (its error lines), or where it has none,
# saying why (subscriptions have a connection of their own: subscribe()).
_SUBSCRIBE = frozenset({b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE"})
_OUT_OF_STEP = _SUBSCRIBE | {b"CLIENT", b"SYNC", b"PSYNC"}
_LOOKED_AT = _TRANSIENT | _TRANSIENT_END | _STICKY | _OUT_OF_STEP | {b"QUIT"}

# Bumped in a forked child: connections made before the fork belong to the parent.
_generation = 0


def _forked() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked)


class SharedError(StreamkeepError):
    """Shared mode cannot work as asked: the directory or its socket is not this user's, its
    server could not be started, or it runs with other settings than the opener asked for."""


class ServerLost(SharedError, ConnectionError):
    """The directory's server went away while a call waited for its reply: the call's outcome
    is unknown. The next call connects again (starting a new server if none runs)."""


def command_arg(arg: Any) -> bytes:
    """One argument as Engine.execute converts it: str as UTF-8, int and float in decimal
    (repr), bytes-like as bytes; bool and anything else refused (TypeError)."""
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, bool):
        raise TypeError("bool is not a valid command argument")
    if isinstance(arg, int | float):
        return repr(arg).encode()
    if isinstance(arg, bytearray | memoryview):
        return bytes(arg)
    raise TypeError(f"invalid command argument type {type(arg).__name__}")


def command_argv(args: Sequence[Any]) -> Argv:
    argv = encode_args(args)  # str and bytes, the common case, in one kernel call
    return argv if argv is not None else tuple(map(command_arg, args))


class Connection:
    """One socket to the server, its reply parser, and what its session holds."""

    __slots__ = ("sock", "server_pid", "parser", "idle", "generation", "sticky", "transient",
                 "protocol", "quitting", "closed", "__weakref__")

    def __init__(self, sock: socket.socket, server_pid: int) -> None:
        self.sock = sock
        self.server_pid = server_pid
        self.parser = ReplyParser()
        self.idle = True  # the parser holds nothing: the next bytes start a reply
        self.generation = _generation
        self.sticky = False  # ran a command whose state lasts (SELECT, HELLO...)
        self.transient = False  # inside MULTI or WATCH
        self.protocol = 2
        self.quitting = False  # QUIT sent: the server closes the connection after its reply
        self.closed = False

    @property
    def stateful(self) -> bool:
        return self.sticky or self.transient

    @staticmethod
    def refusal(argv: Argv) -> ReplyError | None:
        """The error for a command that would leave the connection out of step, or None."""
        name = argv[0].upper()
        if name in _SUBSCRIBE:
            return ReplyError(f"ERR {name.decode()} needs a connection that can receive "
                              "messages: on an embedded engine use Engine.subscribe")
        if name == b"CLIENT" and len(argv) > 2 and argv[1].upper() == b"REPLY" \
                and argv[2].upper() in (b"OFF", b"SKIP"):
            return ReplyError("ERR CLIENT REPLY OFF and SKIP need a connection: an embedded "
                              "engine returns every reply")
        if name in (b"SYNC", b"PSYNC"):
            return ReplyError(f"ERR {name.decode()} needs a connection of its own (a "
                              "replica's), not a shared engine's")
        return None

    def note(self, argv: Argv) -> None:
        """Track what the command leaves on the session (see _STICKY)."""
        name = argv[0].upper()
        if name == b"QUIT":
            self.quitting = True
        elif name in _TRANSIENT:
            self.transient = True
        elif name in _TRANSIENT_END:
            self.transient = False
        elif name in _STICKY:
            self.sticky = True
            if name == b"HELLO" and len(argv) > 1 and argv[1] == b"3":
                self.protocol = 3

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> Any:
        """The next reply (an error reply as a ReplyError value). ServerLost if the
        connection ends first."""
        parser = self.parser
        if self.idle:  # the common case: one reply, whole in one read
            data = self._recv()
            reply = _whole_simple(data)
            if reply is not NEED_MORE:
                return reply
            parser.feed(data)
            reply = parser.next()
        else:
            reply = parser.next()
        while reply is NEED_MORE:
            parser.feed(self._recv())
            reply = parser.next()
        self.idle = not parser.pending_bytes()
        return reply

    def _recv(self) -> bytes:
        try:
            data = self.sock.recv(RECV_BYTES)
        except OSError as err:
            self.close()
            raise ServerLost(f"the shared server (process {self.server_pid}) went away "
                             f"before replying: {err.strerror or err}") from None
        if not data:
            self.close()
            raise ServerLost(f"the shared server (process {self.server_pid}) went away before "
                             "replying (the command's outcome is unknown)")
        return data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()


def _whole_simple(data: bytes) -> Any:
    """`data` as the reply it is when it is exactly one bulk string, integer or status line
    (most replies), else NEED_MORE (the parser's work)."""
    end = len(data) - 2
    if end < 1 or data[end:] != b"\r\n":
        return NEED_MORE
    kind = data[0]
    if kind == 0x24:  # '$'
        eol = data.find(b"\r\n")
        if eol == end:
            return None if data == b"$-1\r\n" else NEED_MORE
        if data[1:eol].isdigit() and eol + 2 + int(data[1:eol]) == end:
            return data[eol + 2:end]
        return NEED_MORE
    if kind not in (0x3A, 0x2B) or data.find(b"\r\n") != end:  # ':', '+'
        return NEED_MORE
    if kind == 0x3A:
        try:
            return int(data[1:end])
        except ValueError:
            return NEED_MORE
    return data[1:end].decode("utf-8", "surrogateescape")


Connect = Callable[[], Connection]


class SharedEngine:
    """The directory's engine as another process's server runs it; see the module docstring.
    Thread-safe: each thread talks over a connection of its own."""

    def __init__(self, path: str, connect: Connect, first: Connection,
                 reopen: tuple[Callable[..., SharedEngine], tuple[Any, ...]]) -> None:
        self.path = path
        self._connect = connect
        self._reopen = reopen
        self._local = threading.local()
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.closed = False
        self._adopt(first)

    def __repr__(self) -> str:
        return f"<SharedEngine {self.path} (server process {self.server_pid})>"

    def __reduce__(self) -> tuple[Callable[..., SharedEngine], tuple[Any, ...]]:
        """Pickled as its path and settings: a process it is sent to (a multiprocessing
        pool's worker) opens the directory itself."""
        return self._reopen

    def __enter__(self) -> SharedEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def server_pid(self) -> int:
        """The pid of the server this thread's connection reaches."""
        return self._connection().server_pid

    # --- connections ----------------------------------------------------------------------

    def _adopt(self, conn: Connection) -> Connection:
        self._local.conn = conn
        with self._lock:
            self._connections.add(conn)
        return conn

    def _connection(self) -> Connection:
        try:
            conn: Connection = self._local.conn
        except AttributeError:
            conn = None  # type: ignore[assignment]
        if conn is not None and not conn.closed and conn.generation == _generation:
            return conn
        if self.closed:
            raise ValueError(f"{self.path}: the shared engine is closed")
        if conn is not None and conn.generation != _generation:
            conn.close()  # the parent's socket: this child's copy only
        return self._adopt(self._connect())

    def request(self, argvs: Sequence[Argv], resend: bool = True) -> list[Any]:
        """Send the commands at once (a pipeline), then read their replies. The request goes
        again on a new connection if it could not be sent at all and the connection held no
        session state (and `resend`). The queue's commands only: none is refused here."""
        data = encode_command(argvs[0]) if len(argvs) == 1 \
            else b"".join(map(encode_command, argvs))
        conn = self._connection()
        try:
            conn.send(data)
        except OSError as err:
            conn = self._sent_again(conn, data, err, resend)
        for argv in argvs:
            conn.note(argv)
        return [conn.read() for _ in argvs]

    def _sent_again(self, conn: Connection, data: bytes, err: OSError,
                    resend: bool = True) -> Connection:
        """`data` could not be sent on `conn` (the server had gone): nothing of it ran. Send
        it on a new connection (made by starting a server if none runs), unless `conn` held
        session state that a new one would not have; the connection it went on."""
        conn.close()
        if conn.stateful or not resend:
            raise ServerLost(f"the shared server (process {conn.server_pid}) went away "
                             f"({err.strerror or err}): this thread's MULTI, WATCH or "
                             "session settings went with it") from None
        conn = self._connection()
        try:
            conn.send(data)
        except OSError as again:
            conn.close()
            raise ServerLost(f"the shared server (process {conn.server_pid}) went away: "
                             f"{again.strerror or again}") from None
        return conn

    def drop_connection(self) -> None:
        """Close this thread's connection (its session state with it): the next call makes
        a new one."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close this process's connections (the server exits once no process has one left
        and its idle-shutdown time has passed). Subscriptions stay open until closed."""
        self.closed = True
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.close()

    # --- the Engine's API -----------------------------------------------------------------

    def execute(self, *args: Any) -> Any:
        """Run one command; plain reply values, errors raised as ReplyError (Engine.execute)."""
        argv = encode_args(args)
        if argv is None:
            argv = tuple(map(command_arg, args))
        if not argv:
            raise ReplyError("ERR empty command")  # (a request of no words cannot be sent)
        name = argv[0]
        looked_at = name in _LOOKED_AT or not name.isupper()
        if looked_at and (refused := Connection.refusal(argv)) is not None:
            raise refused
        conn = self._connection()
        data = encode_command(argv)
        try:
            conn.send(data)
        except OSError as err:
            conn = self._sent_again(conn, data, err)
        if looked_at:
            conn.note(argv)
        reply = conn.read()
        if conn.quitting:
            conn.close()  # (its next call makes a new connection)
        return self._replied(reply, conn.protocol)

    @staticmethod
    def _replied(reply: Any, protocol: int) -> Any:
        if type(reply) is ReplyError:
            raise reply
        return to_plain(reply) if protocol == 3 else reply

    def redis(self, decode_responses: bool = False) -> Any:
        """redis-py's stream and keyspace methods over this engine (as Engine.redis())."""
        from streamkeep.engine.runtime.redis_api import RedisAPI

        return RedisAPI(self, decode_responses)

    def aredis(self, decode_responses: bool = False) -> Any:
        """redis.asyncio's client over this directory's server (as Engine.aredis()): a pool
        of connections made by this engine's connector, used from an event loop."""
        from streamkeep.engine.runtime.async_redis import AsyncRedis
        from streamkeep.engine.services.async_network import shared_backend

        return AsyncRedis(shared_backend(self._connect), decode_responses)

    def subscribe(self, *channels: bytes | str, limit_bytes: int | None = None
                  ) -> SharedSubscription:
        """A Pub/Sub subscriber on a connection of its own (Engine.subscribe). Its unread
        messages are bounded by the server's `client-output-buffer-limit pubsub`
        (`limit_bytes` is the in-process engine's and is not used here)."""
        subscription = SharedSubscription(self._connect())
        if channels:
            subscription.subscribe(*channels)
        return subscription

    def psubscribe(self, *patterns: bytes | str, limit_bytes: int | None = None
                   ) -> SharedSubscription:
        subscription = SharedSubscription(self._connect())
        if patterns:
            subscription.psubscribe(*patterns)
        return subscription

    def set_config(self, name: str, value: Any) -> None:
        """Change one setting on the server (CONFIG SET): every process sees it."""
        self.execute("CONFIG", "SET", name.replace("_", "-"), value)

    def compact(self, wait: bool = True) -> None:
        """Compact the AOF into a new snapshot (SAVE; BGSAVE without `wait`)."""
        self.execute("SAVE" if wait else "BGSAVE")

    def shutdown_server(self) -> None:
        """Stop the directory's server now (SHUTDOWN): every process's connection ends;
        their next call starts a new server."""
        conn = self._connection()
        try:
            conn.send(encode_command((b"SHUTDOWN",)))
            reply = conn.read()
        except (OSError, ServerLost):
            return  # gone: what SHUTDOWN asks
        finally:
            conn.close()
        if type(reply) is ReplyError:
            raise reply

    def queue_backend(self) -> SharedQueueBackend:
        """StreamQueue's backend over this engine's connections (engine.services.queue)."""
        return SharedQueueBackend(self)


class SharedSubscription:
    """A subscriber over a connection of its own (Engine.subscribe's Subscription): messages
    and confirmations as redis-py's PubSub.get_message gives them."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.send_lock = threading.Lock()
        self.overflowed = False
        self.closed = False

    def subscribe(self, *channels: bytes | str) -> None:
        self._run(b"SUBSCRIBE", channels)

    def psubscribe(self, *patterns: bytes | str) -> None:
        self._run(b"PSUBSCRIBE", patterns)

    def unsubscribe(self, *channels: bytes | str) -> None:
        self._run(b"UNSUBSCRIBE", channels)

    def punsubscribe(self, *patterns: bytes | str) -> None:
        self._run(b"PUNSUBSCRIBE", patterns)

    def _run(self, name: bytes, args: tuple[bytes | str, ...]) -> None:
        if self.closed:
            raise ValueError("the subscription is closed")
        with self.send_lock:
            try:
                self.conn.send(encode_command((name, *command_argv(args))))
            except OSError as err:
                raise ServerLost(f"the shared server (process {self.conn.server_pid}) went "
                                 f"away: {err.strerror or err}") from None

    def get_message(self, timeout: float | None = 0.0) -> dict[str, Any] | None:
        """The next message or confirmation, waiting up to `timeout` seconds (None: until one
        comes); None if there is none by then. SubscriptionOverflow once the server ended the
        subscription for falling behind (client-output-buffer-limit pubsub), ServerLost if
        the server went away."""
        conn = self.conn
        parser = conn.parser
        deadline = None if timeout is None else time.monotonic() + max(timeout, 0.0)
        while (item := parser.next()) is NEED_MORE:
            if self.closed:
                return None
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            readable, _, _ = select.select([conn.sock], [], [], wait)
            if not readable:
                return None
            try:
                data = conn.sock.recv(RECV_BYTES)
            except OSError:
                data = b""
            if not data:
                self._ended()
            parser.feed(data)
        if type(item) is ReplyError:
            raise item
        return message_dict(item if type(item) is Push else Push(list(item)))

    def _ended(self) -> None:
        """The connection ended: an overflow if the server still runs, else it went away."""
        pid = self.conn.server_pid
        self.conn.close()
        self.closed = True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            raise ServerLost(f"the shared server (process {pid}) went away") from None
        except PermissionError:
            pass
        self.overflowed = True
        raise SubscriptionOverflow("the subscriber fell behind by more than the server's "
                                   "client-output-buffer-limit pubsub; its subscriptions "
                                   "ended")

    def close(self) -> None:
        """Every subscription ended (the connection closed)."""
        if not self.closed:
            self.closed = True
            self.conn.close()

    def __enter__(self) -> SharedSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SharedQueueBackend:
    """StreamQueue's backend (engine.services.queue's _EngineBackend and _RedisBackend do the
    same over an Engine and over redis-py) over a SharedEngine's per-thread connections:
    replies in RESP2's shape, a transaction pipelined as MULTI ... EXEC in one write."""

    def __init__(self, engine: SharedEngine) -> None:
        self.engine = engine
        self._request = engine.request

    def call(self, argv: Argv) -> Any:
        reply = self._request([argv])[0]
        if type(reply) is ReplyError:
            raise reply
        return reply

    def read(self, argv: Argv) -> list[Any]:
        return self._entries(self._request([argv])[0])

    def atomic(self, commands: Sequence[Argv], read_last: bool = False) -> list[Any]:
        replies = self._request([(b"MULTI",), *commands, (b"EXEC",)])
        for reply in replies:
            if type(reply) is ReplyError:
                raise reply
        results: list[Any] = replies[-1]
        if read_last:
            return [*results[:-1], self._entries(results[-1])]
        return results

    def guarded(self, key: bytes, check: Argv,
                decide: Callable[[Any], Sequence[Argv] | None]) -> list[Any] | None:
        """WATCH key, run `check`, and if `decide(its reply)` gives commands run them as one
        transaction: their replies; [] if it decided not to; None if the key changed between
        the check and EXEC. A connection that failed midway is closed (its WATCH with it)."""
        request = self._request
        try:
            _watched, checked = request([(b"WATCH", key), check])
            if type(checked) is ReplyError:
                raise checked
            commands = decide(checked)
            if commands is None:
                request([(b"UNWATCH",)], resend=False)
                return []
            replies = request([(b"MULTI",), *commands, (b"EXEC",)], resend=False)
        except BaseException:
            self.engine.drop_connection()
            raise
        for reply in replies:
            if type(reply) is ReplyError:
                raise reply
        return replies[-1]  # type: ignore[no-any-return]

    @staticmethod
    def _entries(reply: Any) -> list[Any]:
        if reply is None:
            return []
        if type(reply) is ReplyError:
            raise reply
        return reply[0][1]  # type: ignore[no-any-return]  # [[stream, entries]]


__all__ = ["Connection", "ServerLost", "SharedEngine", "SharedError", "SharedQueueBackend",
           "SharedSubscription", "command_arg", "command_argv"]
