"""The network server: RESP2/RESP3 over TCP in front of one Engine, on asyncio (uvloop if
installed).

Owns connections (`Client`: the parser, the output buffer, the reply ordering under
`appendfsync always`, blocked reads, limits), accepting and refusing them (maxclients, fitted to
the open-files limit at start by engine.server.limits; protected mode), their socket options
(TCP_NODELAY, tcp-keepalive), closing idle ones (timeout), authentication gating, the group fsync that replies wait for, and shutdown. Commands run
one at a time through `Engine.submit` on the event-loop thread, so no client sees a half-applied
command and nothing here blocks the loop: blocked reads are woken by the engine's notify callback,
fsyncs and SAVE's wait run in worker threads. Must not touch: command semantics (the command
table), the wire format (engine.wire's request_parser and reply_encoder), files (aof/, snapshot/).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import os
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

from streamkeep.engine.commands.connection import default_login
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.exec.context import Later
from streamkeep.engine.exec.pubsub import (
    MESSAGE_KINDS,
    SUBSCRIBED_CONTEXT_COMMANDS,
    Subscriber,
    subscribed_context_error,
)
from streamkeep.engine.exec.settings import ConfigError
from streamkeep.engine.exec.transactions import end_transaction
from streamkeep.engine.runtime.refusals import NOAUTH
from streamkeep.engine.server.client_output import ClientOutput
from streamkeep.engine.server.limits import DescriptorLimitError, adjust_open_files_limit
from streamkeep.engine.server.listeners import bind_all
from streamkeep.engine.wire.errors import ProtocolError, ReplyError
from streamkeep.engine.wire.reply import NO_REPLY, NULL_ARRAY, Push
from streamkeep.engine.wire.reply_encoder import OutputLimitReached, ReplyBuffer, write_reply
from streamkeep.engine.wire.request_parser import QueryBufferLimit, RequestParser

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import Session
    from streamkeep.engine.services.engine import Engine

log = logging.getLogger("streamkeep.server")
# Every reply's encoder and its "send nothing" marker, bound once: the compiled build reads a
# Final name without a lookup in the module's globals (neither is one of its native names).
_write_reply: Final = write_reply
_NO_REPLY: Final = NO_REPLY

# Commands an unauthenticated client may run (Redis: AUTH, HELLO, QUIT; RESET too in 7.x).
NO_AUTH_NEEDED: Final = frozenset({b"auth", b"hello", b"quit", b"reset"})
MAX_CLIENTS_ERR: Final = b"-ERR max number of clients reached\r\n"
DENIED: Final = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no "
    b"password is set for the default user. In this mode connections are only accepted from the "
    b"loopback interface. If you want to connect from external computers to Redis you may adopt "
    b"one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG "
    b"SET protected-mode no' from the loopback interface by connecting to Redis from the same "
    b"host the server is running, however MAKE SURE Redis is not publicly accessible from "
    b"internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively "
    b"you can just disable the protected mode by editing the Redis configuration file, and "
    b"setting the protected mode option to 'no', and then restarting the server. 3) If you "
    b"started the server manually just for testing, restart it with the '--protected-mode no' "
    b"option. 4) Set up an authentication password for the default user. NOTE: You only need to "
    b"do one of the above things in order for the server to start accepting connections from "
    b"the outside.\r\n"
)
READ_PAUSE_BYTES: Final = 1 << 20  # a blocked client's unparsed input beyond this: stop reading
FLUSH_BYTES: Final = 64 << 10  # replies queued beyond this during a pipeline: write them out now
COPY_OUT_BYTES: Final = 16 << 10  # a flush this small leaves as a bytes copy; the buffer is kept
UNAUTH_OUTPUT_LIMIT: Final = 1 << 20  # an unauthenticated client's unread replies: like its input
# One reply may pass the output limits up to proto-max-bulk-len plus this much framing: a value
# the server accepted always fits in the reply that returns it (XRANGE, XINFO STREAM FULL).
REPLY_FRAMING: Final = 1 << 20
NO_LIMIT: Final = 1 << 62
# A TLS handshake not done by then is dropped (the loop drives it: it never blocks anyone).
TLS_HANDSHAKE_SECONDS: Final = 10.0
ACCEPT_WHILE_BUSY: Final = 64  # connections accepted per look while a script is busy
ACTIVE_EXPIRE_SECONDS: Final = 0.1
IDLE_CHECK_SECONDS: Final = 1.0  # how often idle clients are looked for (`timeout`)
KEEPALIVE_PROBES: Final = 3  # anetKeepAlive's TCP_KEEPCNT
# A pipelined batch gives way to other clients after this long (checked every so many commands),
# so one client's pipeline delays another's PING by a few milliseconds at most.
PIPELINE_SLICE_SECONDS: Final = 0.002
PIPELINE_SLICE_COMMANDS: Final = 32


def is_loopback(host: str | None) -> bool:
    """Protected mode's test: loopback addresses (and Unix sockets, host None) are local."""
    if not host:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


class Client:
    """One connection. Its replies leave in command order; under `appendfsync always` a reply
    (and every reply queued behind it) waits for the fsync that covers its record.

    The event loop's protocol for the connection: the loop calls its connection_made,
    data_received, connection_lost and resume_writing (and eof_received, pause_writing), which
    is all asyncio and uvloop ask of a protocol; it does not subclass asyncio.Protocol, so that
    the compiled build makes it a native class."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.engine = server.engine
        self.id = server.next_client_id()
        self.session: Session = server.new_session(self)
        self.journal = server.engine.journal  # None in memory (then no reply carries an LSN)
        # The settings dict (CONFIG SET changes its values in place): the output limits are
        # read from it at every flush, without a property call or two in between.
        self.config: dict[str, Any] = server.engine.config
        self._wake = self._notify  # one bound method, not one per command
        self.parser = RequestParser()  # its limits are set when the connection is made
        self.protocol = 2
        self.authenticated = False
        self.transport: asyncio.Transport | None = None
        self.addr = ""
        self.laddr = ""
        self.fd = -1
        self.created = time.monotonic()
        self.last_interaction = self.created
        self.lib_name = b""  # CLIENT SETINFO LIB-NAME / LIB-VER
        self.lib_ver = b""
        # Its limit is set by its first check after each flush (ClientOutput).
        self.out: ReplyBuffer = self._new_output()
        self.held: deque[tuple[int, ReplyBuffer | bytes]] = deque()  # replies awaiting an fsync
        # (start, end, LSN) of write replies in out, as offsets in its output (out.size()).
        self.marks: list[tuple[int, int, int]] = []
        self.waiting: Waiter | None = None  # a blocked XREAD/XREADGROUP
        self.busy = False  # a blocked read or a SAVE: the next commands wait their turn
        self.closing = False  # close once the output is flushed (QUIT, protocol errors)
        self.closed = False
        self.reading_paused = False
        self.yielded = False  # a pipelined batch gave way: its continuation is scheduled
        self.soft_limit_since: float | None = None
        self.exempt = 0  # a reply bigger than the hard limit, let through: see _check_output_limit
        self.timers: list[asyncio.TimerHandle] = []
        self.link: Any = None  # a replica's connection after PSYNC: its sender (replication)
        # What its REPLCONFs announced until its PSYNC (replication.service).
        self.handshake: dict[str, Any] | None = None
        # Its Pub/Sub subscriptions; messages published to them are queued as replies.
        self.subscriber = self.session.subscriber = Subscriber(self._deliver)
        self.push_flush_due = False
        self.flush_due = False  # queued for the loop pass's end (Server.flush_later)
        # While one of its commands runs, messages it publishes to itself wait for the reply
        # (PUBLISH, keyspace events, in MULTI or a script too), as Redis 7.2+ orders them.
        self.executing = False
        self.deferred: list[Push] = []
        # CLIENT REPLY OFF / SKIP (engine.commands.client): None while every reply is sent.
        self.reply_switch: ReplySwitch | None = None
        self.late_reply_muted = False  # a muted command blocked: its reply is dropped too
        self.tls = False  # accepted on the TLS port

    # --- the event loop's protocol calls ----------------------------------------------------

    def connection_made(self, base_transport: asyncio.BaseTransport) -> None:
        # A stream connection's transport (uvloop's does not subclass asyncio.Transport).
        transport: asyncio.Transport = base_transport  # type: ignore[assignment]
        if type(self.transport) is BusyTransport:  # accepted while a script was busy: the loop's now
            self.transport.hand_over(transport)
            self.transport = transport
            return
        self.transport = transport
        sock = transport.get_extra_info("socket")
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self.addr = _format_addr(peer)
        self.laddr = _format_addr(local)
        if sock is not None:
            self.fd = sock.fileno()
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if sock.family != socket.AF_UNIX:
                with contextlib.suppress(OSError):
                    set_keepalive(sock, self.server.tcp_keepalive)
        server = self.server
        if len(server.clients) >= server.maxclients:
            server.rejected_connections += 1
            transport.write(MAX_CLIENTS_ERR)
            transport.close()
            self.closed = True
            return
        host = peer[0] if isinstance(peer, tuple) else None
        if server.protected_mode and server.default_needs_no_password() \
                and not server.is_local(host):
            transport.write(DENIED)
            transport.close()
            self.closed = True
            return
        # The settings as of now, not as of the accept: a CONFIG SET can run in between (the
        # loop calls connection_made a pass later), and a client it missed would keep the old
        # proto-max-bulk-len, or skip a password set meanwhile.
        self.parser.proto_max_bulk_len = server.proto_max_bulk_len
        self.parser.query_buffer_limit = server.query_buffer_limit
        self.authenticated = self.parser.authenticated = default_login(self.engine,
                                                                        self.session)
        server.clients[self.id] = self

    def data_received(self, data: bytes) -> None:
        if self.closed or self.closing:
            return
        self.last_interaction = time.monotonic()
        server = self.server
        server.net_input_bytes += len(data)
        server.reads_processed += 1
        try:
            self.parser.feed(data)
        except QueryBufferLimit:
            self._query_buffer_exceeded()
            return
        if self.busy or self.yielded:  # the blocked command / the scheduled continuation runs it
            self._check_input_backlog()
            return
        self.process()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()

    def eof_received(self) -> bool | None:
        return None  # the transport closes itself (a half-closed client gets nothing more)

    def pause_writing(self) -> None:
        """Nothing stops: the output limits deal with a client that does not read."""

    def resume_writing(self) -> None:
        if self.link is not None:  # a replica's socket drained: send it more of the log
            self.link.pump()

    # --- running commands ------------------------------------------------------------------

    def process(self) -> None:
        """Run every complete command in the input, until one blocks or the client closes, or
        until the batch has had its share of the loop (PIPELINE_SLICE_SECONDS): then the replies
        so far leave and the rest continues on a later pass, after other clients' events.

        The batch holds the engine lock (re-entrant) once for all its commands rather than once
        each; the other threads that take it (the journal's, an embedded caller's) wait at most
        a slice. The collector waits until the batch's replies are encoded and handed to the
        transport: a reply of a million entries is a million lists, which collections (a full
        one among them) would otherwise walk, only for them to be freed right after. (Once per
        batch, not per command: three calls less on every command's path.)"""
        next_command = self.parser.next  # (the bound method once, not looked up per command)
        collecting = gc.isenabled()
        gc.disable()
        began = time.perf_counter()
        count = 0
        lock = self.engine.lock
        lock.acquire()
        try:
            while not self.busy and not self.closing and not self.closed:
                try:
                    argv = next_command()
                except QueryBufferLimit:
                    self._query_buffer_exceeded()
                    return
                except ProtocolError as err:
                    self.engine.refusals.error_replied(err.line)
                    self.reply(err.reply())
                    self.closing = True
                    break
                if argv is None:
                    break
                self.run(argv)
                out = self.out
                if len(out) + out.big_size >= FLUSH_BYTES:
                    # Hand big replies to the transport as they come, so the output limit is
                    # checked per reply: a pipeline of big reads from a client that does not
                    # read is cut at the limit, and nothing after it runs (Redis's
                    # CLIENT_CLOSE_ASAP), instead of buffering every reply first.
                    self.flush()
                count += 1
                if (not count % PIPELINE_SLICE_COMMANDS
                        and time.perf_counter() - began >= PIPELINE_SLICE_SECONDS
                        and not self.busy and not self.closing and not self.closed):
                    self._give_way()
                    break
        finally:
            lock.release()
            self.engine.commands_done()
            self.server.flush_later(self)
            if collecting:
                gc.enable()

    def _give_way(self) -> None:
        """Let the loop serve other clients before the rest of this client's input runs. Input
        arriving meanwhile is only buffered (data_received), so nothing runs twice or early."""
        self.yielded = True
        self.server.loop.call_soon(self._continue)

    def _continue(self) -> None:
        self.yielded = False
        if self.closed or self.closing or self.busy:
            return
        self._resume()

    def run(self, argv: list[bytes]) -> None:
        if not self.authenticated and argv[0].lower() not in NO_AUTH_NEEDED:
            # The engine refuses it (NOAUTH, or the command's existence or arity first, as
            # Redis checks them), so that the refusal is counted in INFO's statistics.
            self._answer(self.engine.refusals.refuse_unauthenticated(self.session, tuple(argv)))
            return
        if (self.subscriber.active and self.protocol == 2
                and argv[0].lower() not in SUBSCRIBED_CONTEXT_COMMANDS):
            # A RESP2 subscriber's replies and messages share one stream: Redis lets it run
            # only the commands whose replies look like messages.
            self._answer(self.engine.refusals.refuse_subscribed(self.session, tuple(argv)))
            return
        self._execute(argv)

    def busy_gate(self, argv: list[bytes]) -> Callable[[str], str] | None:
        """`run`'s refusals for a command sent while a script is busy (serve_while_busy): NOAUTH
        before AUTH, a RESP2 subscriber's; None if it may go on."""
        name = argv[0].lower()
        if not self.authenticated and name not in NO_AUTH_NEEDED:
            return _noauth
        if (self.subscriber.active and self.protocol == 2
                and name not in SUBSCRIBED_CONTEXT_COMMANDS):
            return subscribed_context_error
        return None

    def _execute(self, argv: list[bytes]) -> None:
        """One command of the batch `process` runs (engine lock held): its reply queued, or
        its blocked read or deferred wait started."""
        self.executing = True
        try:
            reply, lsn = self.engine.run_locked(self.session, tuple(argv), None, self._wake)
        except ReplyError as err:  # (answered here: kept in a local, it would hold this frame)
            self.executing = False
            self._answer(err)
            if self.deferred:
                self._push_deferred()
            return
        finally:
            self.executing = False
        t = type(reply)
        if self.reply_switch is not None and self.reply_switch.command_done():
            if t is Waiter or t is Later:
                self.late_reply_muted = True
            else:
                reply = NO_REPLY
        if t is Waiter:
            self._block(reply, lsn)
        elif t is Later:
            self._later(reply)
        else:
            self.reply(reply, lsn)
        if self.deferred:
            self._push_deferred()

    def _answer(self, value: Any) -> None:
        """A refusal's reply: dropped like any other while CLIENT REPLY mutes this command."""
        if self.reply_switch is not None and self.reply_switch.command_done():
            return
        self.reply(value)

    def set_reply_mode(self, mode: bytes) -> None:
        """CLIENT REPLY ON, OFF or SKIP (the handler validated `mode`)."""
        if self.reply_switch is None:
            self.reply_switch = ReplySwitch()
        if self.reply_switch.set(mode):
            self.reply_switch = None  # ON: every reply is sent again

    def reply(self, value: Any, lsn: int = 0) -> None:
        """Queue a reply; held back behind the fsync of `lsn` (or behind held replies).

        The output limit is checked while the reply is encoded (`ReplyBuffer.limit`, what the
        limit leaves after the output the transport still holds; see ClientOutput): a reply
        too big for it is cut short and the client closed, before the reply is built whole."""
        if self.closed or value is _NO_REPLY:
            # No reply to hold, but its record is fsynced and sent to replicas all the same
            # under `always` (a client gone before its reply, CLIENT REPLY OFF): no round
            # would cover it before some other write.
            if lsn and self.journal is not None and self.journal.sync_on_commit:
                self.server.sync_soon(lsn)
            return
        out = self.out
        try:
            if self.held or (lsn and self.journal.sync_on_commit):  # type: ignore[union-attr]
                if not out.limit:
                    out.limit = self._reply_budget()
                buf = ReplyBuffer(max(out.limit - out.size(), 1))
                _write_reply(buf, value, self.protocol)
                self.held.append((lsn, buf))
                self.server.need_sync(self, lsn)
            elif lsn:  # its record must reach the OS before this reply leaves (see flush)
                start = len(out) + out.big_size  # (out.size(), without the call)
                _write_reply(out, value, self.protocol)
                self.marks.append((start, len(out) + out.big_size, lsn))
            else:
                _write_reply(out, value, self.protocol)
        except OutputLimitReached:
            self.out = self._new_output()  # drop what was encoded
            self._output_exceeded(out.size())

    def _new_output(self) -> ClientOutput:
        return ClientOutput(self._reply_budget)

    def reply_budget(self) -> int:
        """_reply_budget for a command reading a stream (0: no limit). It is the output's
        limit until the next flush, so the reply's encoding reuses it (`reply`)."""
        out = self.out
        if not out.limit:
            out.limit = self._reply_budget()
        return 0 if out.limit == NO_LIMIT else out.limit

    def _reply_budget(self) -> int:
        """How big the output queued until the next flush may grow (NO_LIMIT if unlimited):
        what the hard limit leaves after the transport's pending bytes, but never less than
        proto-max-bulk-len plus framing, so that any value the server accepted can be read.
        (Computed at the first reply after every flush: output_limit() is inlined.)"""
        limits = self.config["client-output-buffer-limit"]
        hard = (limits["pubsub"] if self.subscriber.active else limits["normal"])[0]
        if not hard:
            return NO_LIMIT
        pending = self.transport.get_write_buffer_size() if self.transport is not None else 0
        return max(hard + self.exempt - pending,
                   int(self.config["proto-max-bulk-len"]) + REPLY_FRAMING)

    def elements_budget(self) -> int:
        """The budget of a reply of many elements whose number the client chose (random picks
        with repeats, a list's range; 0: no limit): what the hard limit leaves after the
        output pending, without `_reply_budget`'s floor, which lets one big value through,
        not many small ones (Redis closes such a client once its output passes the limit)."""
        limits = self.config["client-output-buffer-limit"]
        hard = (limits["pubsub"] if self.subscriber.active else limits["normal"])[0]
        if not hard:
            return 0
        pending = self.transport.get_write_buffer_size() if self.transport is not None else 0
        return max(hard + self.exempt - pending, 1)

    def release_held(self, synced_lsn: int) -> None:
        held = self.held
        out = self.out
        while held and held[0][0] <= synced_lsn:
            data = held.popleft()[1]
            if type(data) is ReplyBuffer:
                out.extend_buffer(data)
            else:
                out += data
        self.flush()

    def flush(self) -> None:
        """Hand the queued replies to the transport (their records written to the OS first),
        then check the output limits. A small output leaves as a bytes copy and the buffer is
        kept for the next replies (the transport takes bytes as they are, where it would wrap
        a bytearray in a memoryview and the connection would need a new buffer); a big one is
        handed over as it is, its big bulks by reference."""
        transport = self.transport
        if transport is None or self.closed:
            return
        out = self.out
        if out:
            marks = self.marks
            if marks:
                # Before replies of write commands leave, their records go to the OS (the
                # journal buffers them in deferred mode: one write() per batch).
                journal = self.journal
                last = marks[-1][2]  # LSNs grow: the last mark is the highest
                if last > journal.written_lsn:  # type: ignore[union-attr]
                    self.server.flush_aof()
                if last <= journal.written_lsn:  # type: ignore[union-attr]
                    marks.clear()
                else:
                    self.refuse_unwritten()
                    out = self.out
            batch = len(out) + out.big_size
            if out.big:  # big bulks go to the transport as they are, not copied into out
                self.out = self._new_output()
                for part in out.parts():
                    transport.write(part)
            elif batch > COPY_OUT_BYTES:
                self.out = self._new_output()
                transport.write(out)
            else:
                data = bytes(out)
                del out[:]
                out.limit = 0  # the next reply's budget counts what this flush queued
                transport.write(data)
            self.last_interaction = time.monotonic()  # Redis counts writes too (`timeout`)
            server = self.server
            server.net_output_bytes += batch
            server.writes_processed += 1
            self._check_output_limit(batch)
        if self.closing and not self.held and not self.busy:
            self.close()

    def refuse_unwritten(self) -> None:
        """A record that could not be written is not acknowledged: its reply becomes the
        MISCONF error (`marks`: the offsets of the write replies in the output)."""
        marks, self.marks = self.marks, []
        journal = self.journal
        written = journal.written_lsn  # type: ignore[union-attr]
        error = b"-" + (journal.error  # type: ignore[union-attr]
                        or "MISCONF Errors writing to the AOF file").encode() + b"\r\n"
        out = self.out.materialized() if self.out.big else self.out  # offsets are size()'s
        rebuilt, prev = self._new_output(), 0
        for start, end, lsn in marks:
            rebuilt += out[prev:start]
            rebuilt += error if lsn > written else out[start:end]
            prev = end
        rebuilt += out[prev:]
        self.out = rebuilt

    # --- Pub/Sub messages ----------------------------------------------------------------------

    def _deliver(self, push: Push) -> None:
        """A message or confirmation for this connection (engine lock held, any thread): queued
        in command order on the loop thread, handed to the loop from any other. A message this
        connection's own running command published waits until that command's reply is queued
        (its (un)subscribe confirmations are the reply: they go at once)."""
        if threading.get_ident() == self.server.loop_thread:
            if self.executing and push.items[0] in MESSAGE_KINDS:
                self.deferred.append(push)
                return
            self._push(push)
        else:
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody to deliver to
                self.server.loop.call_soon_threadsafe(self._push, push)

    def _push(self, push: Push) -> None:
        if self.closed or self.closing:  # after QUIT's +OK nothing more is sent, as in Redis
            return
        self.reply(push)
        if not self.push_flush_due:  # one flush for every message of this loop pass
            self.push_flush_due = True
            self.server.loop.call_soon(self._flush_pushes)

    def _push_deferred(self) -> None:
        deferred, self.deferred = self.deferred, []
        for push in deferred:
            self._push(push)

    def _flush_pushes(self) -> None:
        self.push_flush_due = False
        self.flush()  # the output limits are checked here: a slow subscriber is cut off

    # --- blocked reads and deferred replies --------------------------------------------------

    def _block(self, waiter: Waiter, lsn: int) -> None:
        self.busy = True
        self.waiting = waiter
        loop = self.server.loop
        if waiter.timeout_ms:
            deadline = time.monotonic() + waiter.timeout_ms / 1000
            self.timers.append(loop.call_later(waiter.timeout_ms / 1000, self._timed_out, waiter,
                                               deadline))
        if waiter.wake_at is not None:
            self._schedule_poll(waiter)
        if lsn:  # the blocked command's own effects (consumer creation): write them now
            self.server.flush_aof()

    def _schedule_poll(self, waiter: Waiter) -> None:
        delay = max((waiter.wake_at or 0) - self.engine.clock(), 0) / 1000 + 0.001
        self.timers.append(self.server.loop.call_later(delay, self._poll, waiter))

    def _poll(self, waiter: Waiter) -> None:
        if self.waiting is not waiter or waiter.done:
            return
        if not self.engine.waiting.poll(waiter) and waiter.wake_at is not None:
            self._schedule_poll(waiter)

    def _timed_out(self, waiter: Waiter, deadline: float) -> None:
        """The wait's time is up: the null reply. Not before `deadline` (a loop's timer may
        fire early by up to its clock's granularity, uvloop's a millisecond: a client timing
        BLPOP ... 1 would see it answer in under a second, which Redis never does)."""
        early = deadline - time.monotonic()
        if early > 0:
            self.timers.append(self.server.loop.call_later(early, self._timed_out, waiter,
                                                           deadline))
            return
        if self.waiting is waiter and self.engine.waiting.cancel(waiter, NULL_ARRAY):
            self._unblock(waiter)

    def _notify(self, waiter: Waiter) -> None:
        """The engine served a blocked read (engine lock held): continue on the loop."""
        self.server.call_soon(self._unblock, waiter)

    def _unblock(self, waiter: Waiter) -> None:
        if self.waiting is not waiter:
            return
        self.waiting = None
        self.busy = False
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        if self.closed:
            return
        result = waiter.result
        if self.late_reply_muted:
            self.late_reply_muted = False
            result = NO_REPLY
        self.reply(result, waiter.lsn)
        self._resume()

    def _later(self, later: Later) -> None:
        self.busy = True
        if later.start is not None:  # a wait that needs no thread (WAIT, WAITAOF)
            later.start(lambda value: self.server.call_soon(self._later_result, value))
            return
        future = self.server.loop.run_in_executor(None, _call_catching, later.wait)
        future.add_done_callback(self._later_done)

    def _later_done(self, future: asyncio.Future) -> None:
        self._later_result(future.result())

    def _later_result(self, result: Any) -> None:
        self.busy = False
        if isinstance(result, ReplyError):  # SAVE's compaction failed: a failed call
            self.engine.refusals.late_error(self.session, result)
        if self.closed:
            return
        if self.late_reply_muted:
            self.late_reply_muted = False
            result = NO_REPLY
        self.reply(result)
        self._resume()

    def _resume(self) -> None:
        if self.reading_paused and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        self.process()

    # --- limits ----------------------------------------------------------------------------

    def _check_input_backlog(self) -> None:
        """A blocked client keeps sending: stop reading (TCP pushes back) rather than buffer."""
        if not self.reading_paused and self.parser.pending_bytes() > READ_PAUSE_BYTES:
            self.reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def _query_buffer_exceeded(self) -> None:
        log.warning("Closing client that reached max query buffer length: id=%d addr=%s",
                    self.id, self.addr)
        self.server.query_buffer_disconnections += 1
        self.abort()

    def _check_output_limit(self, batch: int = 0) -> None:
        """The limits after a flush of `batch` bytes. A batch bigger than the hard limit (one
        big reply: the encoding stopped anything bigger than proto-max-bulk-len plus framing)
        was let through: until the output drains below the limit again, the limits apply to
        what is queued on top of it (`exempt`)."""
        limits = self.config["client-output-buffer-limit"]  # (output_limit(), inlined)
        size = self.transport.get_write_buffer_size()  # type: ignore[union-attr]
        if (not size and not self.exempt and self.soft_limit_since is None
                and batch <= _lowest_limit(limits)):
            return  # nothing pending, nothing exempt: no limit can be reached or be counting
        hard, soft, soft_seconds = limits["pubsub"] if self.subscriber.active \
            else limits["normal"]
        if not self.authenticated:
            # Before AUTH a client gets only short errors; one that sends and never reads must
            # not make the server buffer its replies without bound (the limits default to none).
            hard = min(hard, UNAUTH_OUTPUT_LIMIT) if hard else UNAUTH_OUTPUT_LIMIT
        if not (hard or soft):
            return
        if batch > (hard or soft):
            self.exempt = max(self.exempt, batch)
        elif size < (hard or soft):
            self.exempt = 0
        counted = size - self.exempt
        if hard and counted >= hard:
            self._output_exceeded(size)
        elif soft and counted >= soft:
            now = time.monotonic()
            if self.soft_limit_since is None:
                self.soft_limit_since = now
            elif now - self.soft_limit_since >= soft_seconds:
                self._output_exceeded(size)
        else:
            self.soft_limit_since = None

    def output_limit(self) -> tuple[int, int, int]:
        """(hard, soft, soft seconds) of this client's class: `pubsub` while it has a
        subscription (Redis's getClientType), else `normal`; 0 means no limit."""
        limits = self.config["client-output-buffer-limit"]
        return limits["pubsub"] if self.subscriber.active else limits["normal"]

    def _output_exceeded(self, size: int) -> None:
        log.warning("Client id=%d addr=%s closed for overcoming of output buffer limits "
                    "(%d bytes pending).", self.id, self.addr, size)
        self.server.output_buffer_disconnections += 1
        self.abort()

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close after what was written is sent."""
        if self.transport is not None and not self.closed:
            self.transport.close()
        self._release()

    def abort(self) -> None:
        """Close now, dropping unsent output (limits, CLIENT KILL)."""
        if self.transport is not None and not self.closed:
            self.transport.abort()
        self._release()

    def _release(self) -> None:
        if self.closed and self.id not in self.server.clients:
            return
        self.closed = True
        self.server.clients.pop(self.id, None)
        for timer in self.timers:
            timer.cancel()
        self.timers.clear()
        waiter, self.waiting = self.waiting, None
        if waiter is not None:
            self.engine.waiting.cancel(waiter, None)
        with self.engine.lock:
            end_transaction(self.engine, self.session)
            self.engine.pubsub.drop(self.subscriber)
        if self.link is not None:
            self.link.detached()
            self.link = None
        self._drop_buffers()

    def _drop_buffers(self) -> None:
        """Free what the connection held, now: break the cycles (client <-> session <-> its
        command context, the bound wake-up method) and drop the parser's and the output's
        buffers, so reference counting frees them. The cyclic collector would, but the startup
        heap is frozen and full collections are rare: 450 MB a disconnected client had sent
        stayed resident until one ran."""
        self.parser.release()
        self.out = ReplyBuffer()  # (not a ClientOutput: it would keep this client alive)
        self.held.clear()
        self.marks = []
        session = self.session
        session.client = None
        session.ctx = None
        self._wake = _ignore_wake
        self.subscriber.deliver = _ignore_push

    # --- what CLIENT LIST / INFO read ------------------------------------------------------

    def info_fields(self) -> list[tuple[str, str]]:
        now = time.monotonic()
        session = self.session
        flags = "S" if self.link is not None else ""
        flags += "b" if self.waiting is not None else ""
        flags += "x" if session.multi is not None else ""
        flags += "P" if self.subscriber.total() else ""
        flags = flags or "N"
        return [
            ("id", str(self.id)), ("addr", self.addr), ("laddr", self.laddr),
            ("fd", str(self.fd)), ("name", session.name.decode("utf-8", "replace")),
            ("age", str(int(now - self.created))),
            ("idle", str(int(now - self.last_interaction))),
            ("flags", flags), ("db", str(session.db)), ("sub", str(len(self.subscriber.channels))),
            ("psub", str(len(self.subscriber.patterns))),
            ("ssub", str(len(self.subscriber.shard_channels))), ("multi", str(-1 if session.multi is None else len(session.multi))),
            ("qbuf", str(self.parser.pending_bytes())), ("qbuf-free", "0"),
            ("argv-mem", "0"), ("multi-mem", "0"), ("rbs", "0"), ("rbp", "0"),
            ("obl", str(len(self.out))), ("oll", str(len(self.held))),
            ("omem", str(self.transport.get_write_buffer_size() if self.transport else 0)),
            ("tot-mem", "0"), ("events", "r"),
            ("cmd", session.lastcmd or "NULL"),
            ("user", session.user.name.decode("utf-8", "replace")
             if session.user is not None else "default"),
            ("redir", "-1"), ("resp", str(self.protocol)),
            ("lib-name", self.lib_name.decode("utf-8", "replace")),
            ("lib-ver", self.lib_ver.decode("utf-8", "replace")),
        ]

    def info_line(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.info_fields())


def as_protocol(client: Client) -> asyncio.BaseProtocol:
    """The loop's type for a protocol: Client has its methods without subclassing it."""
    return cast(asyncio.BaseProtocol, client)


def listening_sockets(srv: asyncio.AbstractServer) -> list[socket.socket]:
    """A listening server's sockets. (uvloop gives a list where asyncio's type says a tuple,
    which the compiled build would refuse: read as Any, copied into a list.)"""
    sockets: Any = getattr(srv, "sockets", None)
    return list(sockets or ())


def _noauth(name: str) -> str:
    return NOAUTH


class BusyTransport:
    """The transport of a connection accepted while a script was busy (the loop stalled),
    until the loop takes the socket over (Server._hand_over): replies are sent straight to
    the socket, what does not fit waits for the loop's own transport."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = bytearray()
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        with contextlib.suppress(OSError):
            if name == "socket":
                return self.sock
            if name == "peername":
                return self.sock.getpeername()
            if name == "sockname":
                return self.sock.getsockname()
        return default

    def write(self, data: Any) -> None:
        if self.closed:
            return
        if not self.pending:
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.abort()
                return
            data = memoryview(data)[sent:]
        self.pending += data

    def get_write_buffer_size(self) -> int:
        return len(self.pending)

    def pause_reading(self) -> None:
        """(Nothing is read from this socket but by serve_while_busy.)"""

    def resume_reading(self) -> None:
        """(As pause_reading.)"""

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        """Close after what is pending is sent, as far as the socket takes it now."""
        if self.pending and not self.closed:
            with contextlib.suppress(OSError):
                self.sock.send(self.pending)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        self.pending.clear()
        self.sock.close()

    def hand_over(self, transport: asyncio.Transport) -> None:
        """The loop's transport takes the connection: what is pending goes out through it."""
        if self.pending:
            transport.write(bytes(self.pending))
            self.pending.clear()


class ReplySwitch:
    """CLIENT REPLY OFF / SKIP on one connection (Redis's CLIENT_REPLY_OFF, _SKIP_NEXT and
    _SKIP flags): OFF drops every reply until ON; SKIP drops the next command's. Pub/Sub
    messages are always sent (Redis 7.2+ lets pushes through)."""

    __slots__ = ("off", "skip_next", "skip")

    def __init__(self) -> None:
        self.off = False
        self.skip_next = False  # set by CLIENT REPLY SKIP: the command after it is skipped
        self.skip = False  # the command running now is skipped

    def set(self, mode: bytes) -> bool:
        """Apply CLIENT REPLY `mode` (on, off or skip, lowercase); True when back to ON."""
        if mode == b"on":
            return True
        if mode == b"off":
            self.off = True
        elif not self.off:
            self.skip_next = True
        return False

    def command_done(self) -> bool:
        """A command finished: whether its reply is dropped; then SKIP moves on (resetClient:
        this command's skip ends, a SKIP it set applies to the next one)."""
        muted = self.off or self.skip
        self.skip, self.skip_next = self.skip_next, False
        return muted


def _lowest_limit(limits: Mapping[str, tuple[int, int, int]]) -> int:
    """The lowest output limit any client can have under these client-output-buffer-limit
    settings: a flush no bigger than this with nothing left pending reaches none. Found once per
    settings object (CONFIG SET replaces it, never changes it)."""
    if limits is not _LOWEST[0]:
        _LOWEST[:] = [limits, min([n for cls in ("normal", "pubsub") for n in limits[cls][:2] if n]
                                  + [UNAUTH_OUTPUT_LIMIT])]
    return _LOWEST[1]  # type: ignore[no-any-return]


_LOWEST: list[Any] = [None, 0]  # (the settings object, its lowest limit)


def _ignore_wake(waiter: Waiter) -> None:
    """A released client's wake-up: nothing to wake (its bound method would keep it alive)."""


def _ignore_push(push: Push) -> None:
    """A released client's message callback: nothing to deliver to."""


def set_keepalive(sock: socket.socket, interval: int) -> None:
    """Redis's anetKeepAlive for `tcp-keepalive` seconds (0: leave keepalive off): probes
    start after `interval` idle seconds, every interval/3 seconds (at least 1), and the peer is
    declared dead after KEEPALIVE_PROBES unanswered ones."""
    if interval <= 0:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # Linux; elsewhere the system's defaults apply
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, interval)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(interval // 3, 1))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)


def idle_clients(clients: Iterable[Client], timeout: int, now: float) -> list[Client]:
    """Redis's clientsCronHandleTimeout: clients idle longer than `timeout` seconds, except
    blocked ones (a blocked read has its own timeout; a SAVE's wait is the server's) and
    subscribers (they only listen). A client inside MULTI is not spared, as in Redis."""
    if timeout <= 0:
        return []
    return [c for c in clients
            if not c.busy and not c.subscriber.active and now - c.last_interaction > timeout]


def _call_catching(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except ReplyError as err:
        return err


def _format_addr(addr: Any) -> str:
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = addr[0]
        return f"[{host}]:{addr[1]}" if ":" in host else f"{host}:{addr[1]}"
    return str(addr or "")


class Server:
    """Accepts clients for one engine; see the module docstring."""

    def __init__(self, engine: Engine, host: str = "127.0.0.1", port: int = 6390,
                 sockets: list[socket.socket] | None = None,
                 tls_sockets: list[socket.socket] | None = None) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        # Listening sockets bound before the engine opened (`streamkeep serve`: a busy port is
        # found before a data directory is made); None: start() binds host and port itself.
        self.sockets = sockets
        # The TLS port's (tls-port): bound here or given, kept for the server's life, each
        # listened on through a duplicate, so that a new TLS context (CONFIG SET of a tls-*
        # setting) takes over the same socket with no moment where connections are refused.
        self.tls_sockets = tls_sockets
        self.tls_port = int(engine.config.get("tls-port") or 0)
        self.tls_context: Any = None  # ssl.SSLContext, made at start
        self.tls_servers: list[asyncio.base_events.Server] = []
        self.tls_handshake_seconds = TLS_HANDSHAKE_SECONDS
        self.clients: dict[int, Client] = {}
        self._client_ids = 0
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.loop_thread = 0
        self.servers: list[asyncio.base_events.Server] = []
        self.started = time.time()
        self.stopping: asyncio.Event | None = None
        self.shutdown_save = False
        self.is_local: Callable[[str | None], bool] = is_loopback  # tests may swap it
        self.client_factory: Callable[[Server], Client] = Client  # tests may swap it too
        # The group fsync replies wait for (appendfsync always).
        self.sync_waiting: set[Client] = set()
        self.sync_target = 0
        self.sync_running = False
        self.connections_received = 0
        self.rejected_connections = 0
        # A shutdown signal arrived: a busy script looks at this (the loop cannot run then).
        self.stop_signalled = False
        # While a script is busy: duplicates of the listening sockets, and the connections
        # accepted through them, for the loop to take over (serve_while_busy).
        self._busy_listeners: list[socket.socket] = []
        self._adopted: list[tuple[Client, socket.socket]] = []
        # INFO stats' network figures: bytes read from and written to clients (replication's
        # own are the replication service's), read and write calls, clients closed at a limit.
        self.net_input_bytes = 0
        self.net_output_bytes = 0
        self.reads_processed = 0
        self.writes_processed = 0
        self.query_buffer_disconnections = 0
        self.output_buffer_disconnections = 0
        # The clients whose replies leave at the end of this loop pass (flush_later).
        self.flush_queue: list[Client] = []
        engine.server = self

    def reset_stats(self) -> None:
        """CONFIG RESETSTAT: the server's counters to zero."""
        self.connections_received = self.rejected_connections = 0
        self.net_input_bytes = self.net_output_bytes = 0
        self.reads_processed = self.writes_processed = 0
        self.query_buffer_disconnections = self.output_buffer_disconnections = 0

    def stats_sample(self) -> dict[str, int]:
        """The counters behind INFO's instantaneous rates (engine.exec.stats.sample)."""
        received, sent = (self.engine.replication.traffic()
                          if self.engine.replication is not None else (0, 0))
        return {"net_input": self.net_input_bytes, "net_output": self.net_output_bytes,
                "net_repl_input": received, "net_repl_output": sent}

    def engine_version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("streamkeep")
        except PackageNotFoundError:
            return "dev"

    # --- sessions and ids ------------------------------------------------------------------

    def next_client_id(self) -> int:
        self._client_ids += 1
        return self._client_ids

    def new_session(self, client: Client) -> Session:
        from streamkeep.engine.runtime.core import Session

        session = Session()
        session.client = client
        return session

    def call_soon(self, fn: Callable[..., Any], *args: Any) -> None:
        if threading.get_ident() == self.loop_thread:
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    # Settings live in the engine's config (CONFIG GET/SET, the config file): read them there.

    @property
    def requirepass(self) -> str:
        return str(self.engine.config.get("requirepass") or "")

    def default_needs_no_password(self) -> bool:
        """The default user is enabled with nopass: protected mode then refuses non-local
        clients (Redis's rule, with users)."""
        users = self.engine.acl
        if users is None:
            return not self.requirepass
        default = users.get(b"default")
        return bool(default is not None and default.enabled and "nopass" in default.flags)

    def disconnect_user(self, name: bytes) -> None:
        """Close the connections authenticated as `name` (its user deleted, as Redis does),
        after the reply in hand."""
        for client in list(self.clients.values()):
            user = client.session.user
            if user is not None and user.name == name:
                client.closing = True
                if not client.executing:
                    client.close()

    @property
    def maxclients(self) -> int:
        return int(self.engine.config["maxclients"])

    @property
    def protected_mode(self) -> bool:
        return bool(self.engine.config["protected-mode"])

    @property
    def idle_timeout(self) -> int:
        return int(self.engine.config["timeout"])

    @property
    def tcp_keepalive(self) -> int:
        return int(self.engine.config["tcp-keepalive"])

    @property
    def proto_max_bulk_len(self) -> int:
        return int(self.engine.config["proto-max-bulk-len"])

    @property
    def query_buffer_limit(self) -> int:
        return int(self.engine.config["client-query-buffer-limit"])

    @property
    def output_limit(self) -> tuple[int, int, int]:
        """(hard, soft, soft seconds) for normal clients; 0 means no limit."""
        return self.engine.config["client-output-buffer-limit"]["normal"]

    # --- group fsync for appendfsync always ------------------------------------------------

    def need_sync(self, client: Client, lsn: int) -> None:
        """`client` holds replies until an fsync covers `lsn` (0: it only waits its turn)."""
        journal = self.engine.journal
        if journal is None:
            client.release_held(1 << 62)
            return
        self.sync_waiting.add(client)
        self.sync_soon(lsn)

    def sync_soon(self, lsn: int) -> None:
        """An fsync round covering `lsn` runs at the end of this loop pass (or after the
        round already running)."""
        if lsn > self.sync_target:
            self.sync_target = lsn
        if not self.sync_running:
            self.sync_running = True
            # Let every client readable in this loop pass run its commands first: one fsync
            # then covers all of their records.
            self.loop.call_soon(self._start_sync)

    def _records_dropped(self) -> None:
        """The AOF dropped records and rolled the state back (engine lock held, any thread):
        every reply still waiting for one of them becomes MISCONF now, before writes resume
        and those LSNs are given to new records."""
        if threading.get_ident() != self.loop_thread:
            with contextlib.suppress(RuntimeError):  # the loop has closed: no client is left
                self.loop.call_soon_threadsafe(self._records_dropped)
            return
        for client in list(self.clients.values()):
            if client.marks:
                client.refuse_unwritten()

    def flush_later(self, client: Client) -> None:
        """`client`'s replies leave at the end of this loop pass, after every client the pass
        serves has run its commands (Redis's beforeSleep): the AOF records of all of them
        reach the OS in one write(), then each client's replies in one write of its own."""
        if client.flush_due:
            return
        client.flush_due = True
        queue = self.flush_queue
        if not queue:
            self.loop.call_soon(self._flush_clients)
        queue.append(client)

    def _flush_clients(self) -> None:
        queue, self.flush_queue = self.flush_queue, []
        self.flush_aof()
        for client in queue:
            client.flush_due = False
            client.flush()

    def flush_aof(self) -> None:
        """Write the journal's deferred records (one write() for everything buffered)."""
        journal = self.engine.journal
        if journal is not None and journal.pending:
            lock = self.engine.lock  # (acquire/release: half a `with` block's cost, per batch)
            lock.acquire()
            try:
                journal.flush_pending()
            finally:
                lock.release()

    def _start_sync(self) -> None:
        journal = self.engine.journal
        self.flush_aof()
        # What this round flushed: records appended while its fsync runs raise sync_target
        # and wait in the journal's buffer for the next round; they are not write failures.
        flushed = self.sync_target
        # Records that could not be written are not fsynced (their replies become errors).
        target = min(max(self.sync_target, journal.synced_lsn), journal.written_lsn) \
            if journal else 0
        if journal is None or target <= journal.synced_lsn:
            self._sync_done(None, flushed)
            return
        # The fsync on the loop's thread, as Redis's beforeSleep does it: a hand-off to the
        # group-commit thread and a wake-up back cost a sequential client more than the fsync
        # (a worker's write after write); the clients of one loop iteration share it.
        self._sync_done(_call_catching(lambda: journal.commit_now(target)), flushed)

    def _sync_done(self, error: ReplyError | None, flushed: int = 0) -> None:
        journal = self.engine.journal
        synced = journal.synced_lsn if journal is not None else 1 << 62
        if error is None and journal is not None and journal.written_lsn < flushed:
            error = ReplyError(journal.error or "MISCONF Errors writing to the AOF file")
        waiting, self.sync_waiting = self.sync_waiting, set()
        for client in waiting:
            if client.closed:
                continue
            if error is not None and client.held:
                # The fsync failed: these records may not be durable. Never acknowledge them.
                client.held = deque((lsn, b"-" + str(error).encode() + b"\r\n")
                                    if lsn > synced else (lsn, data)
                                    for lsn, data in client.held)
                client.release_held(1 << 62)
                continue
            client.release_held(synced)
            if client.held:
                self.sync_waiting.add(client)
        self.sync_running = False
        if self.sync_waiting:
            self.sync_running = True
            self.loop.call_soon(self._start_sync)

    # --- running ---------------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.loop_thread = threading.get_ident()
        if self.engine.journal is not None:
            # Every command runs on this thread: records can be buffered and written once per
            # batch of commands, before the batch's replies leave (Redis's AOF buffer). Under
            # the engine lock: a replica's follower (started by Engine.open) may be writing
            # records through the mapped tail this switch closes, and a record copied there
            # but not yet counted in the journal's size would be cut off the file.
            with self.engine.lock:
                self.engine.journal.set_deferred(True)
        self.stopping = asyncio.Event()
        from streamkeep.engine.commands.acl import users_of

        users_of(self.engine)  # the users (the aclfile's, the config's): a bad file stops the start
        self._fit_maxclients()
        self.engine.on_config(["maxclients"], self._maxclients_changed)
        self.engine.replay.rollback_hooks.append(self._records_dropped)
        self.loop.call_later(IDLE_CHECK_SECONDS, self._close_idle_clients)
        self.loop.call_later(ACTIVE_EXPIRE_SECONDS, self._active_expire)
        if self.sockets is not None:
            for sock in self.sockets:
                self.servers.append(await self.loop.create_server(self._accepted, sock=sock,
                                                                  backlog=511))
        # Plain TCP unless TLS only (tls-port with port 0, as Redis has it).
        plain_hosts = [] if self.sockets is not None or (self.tls_port and not self.port) \
            else self.host.split() or ["127.0.0.1"]
        for host in plain_hosts:
            srv = await self.loop.create_server(self._accepted, host, self.port,
                                                reuse_address=True, backlog=511)
            self.servers.append(srv)
            if self.port == 0:  # tests ask for any free port
                self.port = listening_sockets(srv)[0].getsockname()[1]
        if self.tls_port or self.tls_sockets:
            await self._start_tls()
        if self.engine.replication is not None:  # (once the port is known: replicas say it)
            self.engine.replication.serve(self)
        if self.engine.config.get("cluster-enabled"):  # (its address too: a node announces it)
            from streamkeep.engine.services.cluster_node import attach as attach_cluster

            with self.engine.lock:
                attach_cluster(self.engine, self.port, self.tls_port)

    def _fit_maxclients(self) -> None:
        """At start, as Redis does: make room for maxclients plus the server's own files in
        the open-files limit, or lower maxclients to what the limit allows (and say so), so
        clients can never take the descriptors the AOF and snapshots need."""
        config = self.engine.config
        adjustment = adjust_open_files_limit(int(config["maxclients"]))
        for line in adjustment.warnings:
            log.warning("%s", line)
        for line in adjustment.notices:
            log.info("%s", line)
        if adjustment.fatal is not None:
            # A library must not exit its host process: `streamkeep serve` turns this into
            # its exit status (tools/serve.py).
            raise DescriptorLimitError(adjustment.fatal)
        config["maxclients"] = adjustment.maxclients

    def _maxclients_changed(self) -> None:
        """CONFIG SET maxclients (engine lock held): Redis's updateMaxclients. Raising it
        raises the open-files limit too; if the limit cannot follow, the change is refused
        (config_set restores the old value) with the figure that would fit."""
        wanted = int(self.engine.config["maxclients"])
        fits = adjust_open_files_limit(wanted)
        if fits.fatal is not None or fits.maxclients != wanted:
            raise ConfigError("maxclients", "The operating system is not able to handle the "
                              f"specified number of clients, try with {fits.maxclients}")

    def _close_idle_clients(self) -> None:
        """Once a second: close the clients idle longer than `timeout` (a no-op when it is 0;
        one pass over the clients otherwise, a few milliseconds at 10,000 clients)."""
        if self.stopping is None or self.stopping.is_set():
            return
        for client in idle_clients(self.clients.values(), self.idle_timeout, time.monotonic()):
            log.debug("Closing idle client id=%d addr=%s", client.id, client.addr)
            client.close()
        self.loop.call_later(IDLE_CHECK_SECONDS, self._close_idle_clients)

    def _active_expire(self) -> None:
        """Ten times a second (Redis's default hz): the engine's active expiry cycle, its
        DEL records written at once (no client batch may follow to flush them) and, under
        `always`, fsynced by a round of their own: no client waits for them, and replicas are
        sent only what an fsync covered (without it a replica stayed behind until some client
        wrote again)."""
        if self.stopping is None or self.stopping.is_set():
            return
        if self.engine.expiry_cycle.run():
            self.flush_aof()
            journal = self.engine.journal
            if journal is not None and journal.sync_on_commit:
                self.sync_soon(journal.written_lsn)
        self.engine.monitoring.sample_stats(self.stats_sample())
        self.loop.call_later(ACTIVE_EXPIRE_SECONDS, self._active_expire)

    def _new_client(self) -> Client:
        self.connections_received += 1
        return self.client_factory(self)

    def _accepted(self) -> asyncio.BaseProtocol:
        """The listening sockets' protocol factory."""
        return as_protocol(self._new_client())

    def _accepted_tls(self) -> asyncio.BaseProtocol:
        """The TLS port's: the client is made at the accept, its connection_made called once
        the handshake is done (the loop drives it, for tls_handshake_seconds at most)."""
        client = self._new_client()
        client.tls = True
        return as_protocol(client)

    # --- TLS -------------------------------------------------------------------------------

    async def _start_tls(self) -> None:
        """Listen on the TLS port with the context the settings make (engine.services.tls);
        a context that cannot be made stops the start (TLSConfigError, its reason)."""
        from streamkeep.engine.services.tls import TLS_SETTINGS, server_context

        self.tls_context = server_context(self.engine.config)
        if self.tls_sockets is None:
            self.tls_sockets = bind_all(self.host, self.tls_port)
        if self.tls_port == 0:
            self.tls_port = self.tls_sockets[0].getsockname()[1]
        await self._listen_tls(self.tls_context)
        self.engine.on_config(TLS_SETTINGS, self._tls_settings_changed)

    async def _listen_tls(self, context: Any) -> None:
        """Accept TLS connections with `context` on the TLS sockets, then close the listeners
        of the context before (their connections keep it)."""
        old, self.tls_servers = self.tls_servers, []
        for sock in self.tls_sockets or ():
            self.tls_servers.append(await self.loop.create_server(
                self._accepted_tls, sock=sock.dup(), backlog=511, ssl=context,
                ssl_handshake_timeout=self.tls_handshake_seconds))
        for srv in old:
            srv.close()

    def _tls_settings_changed(self) -> None:
        """CONFIG SET of a tls-* setting (engine lock held, on the loop's thread): the new
        context is made now, so a bad file is refused with the setting; connections accepted
        from the next loop pass on use it (Redis's applyTlsCfg)."""
        from streamkeep.engine.services.tls import TLSConfigError, server_context

        try:
            context = server_context(self.engine.config)
        except TLSConfigError as err:
            log.warning("Failed to configure TLS: %s", err)
            raise ConfigError("tls", "Unable to update TLS configuration. Check server "
                              "logs.") from None
        self.tls_context = context
        self.loop.create_task(self._listen_tls(context))

    async def serve_forever(self) -> None:
        await self.start()
        await self.wait_stopped()

    def serve_while_busy(self, scripting: Any) -> None:
        """A script has run past busy-reply-threshold: its Lua hook calls this every so many
        instructions, and redis.call every few milliseconds (on the loop thread, engine lock
        held, the loop itself stalled). Accept new connections, read what the other clients
        sent straight from their sockets and answer each command as Redis does while busy
        (engine.runtime.refusals: BUSY; SCRIPT KILL, SHUTDOWN NOSAVE, AUTH, HELLO, MULTI...
        run), in order, through their normal output. The script's own client, a blocked
        client's queued commands and replicas' links wait."""
        running = scripting.running
        self._accept_while_busy()
        for client in list(self.clients.values()):
            if (client.closed or client.fd < 0 or client.busy or client.link is not None
                    or client.session is running.session or client.tls):
                # (a TLS client's socket carries records only OpenSSL may read: it waits)
                continue
            try:
                data = os.read(client.fd, 1 << 16)
            except OSError:  # nothing to read (EAGAIN) or a broken connection: the loop's
                data = b""
            parser = client.parser
            try:
                if data:
                    client.last_interaction = time.monotonic()
                    self.net_input_bytes += len(data)
                    self.reads_processed += 1
                    parser.feed(data)
                while not client.closing and (argv := parser.next()) is not None:
                    client._answer(self.engine.refusals.run_while_busy(client.session, tuple(argv),
                                                              client.busy_gate(argv)))
            except (QueryBufferLimit, ProtocolError):
                continue  # left for the loop, which closes the connection
            client.flush()

    def _accept_while_busy(self) -> None:
        """Connections made while the loop is stalled by a script: accepted here (so that a
        `redis-cli SCRIPT KILL` is answered), served by serve_while_busy, and handed to the
        loop once it runs again."""
        if not self._busy_listeners:
            for srv in self.servers:
                for sock in listening_sockets(srv):
                    listener = socket.socket(fileno=os.dup(sock.fileno()))
                    listener.setblocking(False)
                    self._busy_listeners.append(listener)
        for listener in self._busy_listeners:
            for _ in range(ACCEPT_WHILE_BUSY):
                try:
                    conn, _ = listener.accept()
                except OSError:  # none waiting (EAGAIN), or a failed accept: the loop's
                    break
                conn.setblocking(False)
                client = self._new_client()
                client.connection_made(BusyTransport(conn))  # type: ignore[arg-type]
                if not self._adopted:
                    self.loop.call_soon(self._hand_over)
                self._adopted.append((client, conn))

    def _hand_over(self) -> None:
        """The loop runs again: it takes over the connections accepted while it was stalled."""
        adopted, self._adopted = self._adopted, []
        for client, conn in adopted:
            if client.closed:
                conn.close()
                continue
            self.loop.create_task(self._connect_adopted(client, conn))

    async def _connect_adopted(self, client: Client, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: as_protocol(client), sock=conn)
        except OSError:
            client.abort()
            conn.close()

    async def wait_stopped(self) -> None:
        assert self.stopping is not None
        await self.stopping.wait()
        await self._stop()

    def request_shutdown(self, save: bool = False) -> None:
        """SHUTDOWN, SIGTERM, SIGINT, SIGHUP: stop accepting, finish the command in flight,
        close (a compaction under way is abandoned: its child killed, its files removed)."""
        self.shutdown_save = save
        if self.stopping is not None:
            self.stopping.set()

    async def _stop(self) -> None:
        for srv in self.servers:
            srv.close()
        for srv in self.tls_servers:
            srv.close()
        for sock in self.tls_sockets or ():
            sock.close()
        for listener in self._busy_listeners:
            listener.close()
        self._busy_listeners.clear()
        if self.engine.cluster is not None:  # (its links to the other nodes)
            from streamkeep.engine.services.cluster_node import detach as detach_cluster

            detach_cluster(self.engine)
        for client in list(self.clients.values()):
            client.flush()
            client.close()
        for srv in [*self.servers, *self.tls_servers]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(srv.wait_closed(), 2)
        await self.loop.run_in_executor(None, self._close_engine)

    def _close_engine(self) -> None:
        engine = self.engine
        if engine.journal is not None:
            with engine.lock:
                engine.journal.set_deferred(False)
        if self.shutdown_save and engine.datadir is not None:
            with contextlib.suppress(Exception):
                engine.compact(wait=True)
        engine.close()


def _note_signal(server: Server, sig: signal.Signals) -> None:
    """The loop runs its signal handlers on its own turn, which a busy script holds up: the
    signal is also noted at once in `server.stop_signalled`, which the script's busy check
    reads (the loop's own Python-level handler, which wakes it, still runs after)."""
    previous = signal.getsignal(sig)

    def note(signum: int, frame: Any) -> None:
        server.stop_signalled = True
        if callable(previous):
            previous(signum, frame)

    signal.signal(sig, note)


def install_loop_policy() -> str:
    """Use uvloop when it is installed; returns the loop's name."""
    try:
        import uvloop  # type: ignore[import-not-found]
    except ImportError:
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


def run_server(server: Server, ready: Callable[[Server], None] | None = None) -> None:
    """Run until SHUTDOWN, SIGTERM, SIGINT or SIGHUP (the main thread's signal handlers; a
    hang-up stops it too, where redis-server ignores one: a server started in a terminal
    goes with it, its compaction child and temporary files with it)."""

    async def main() -> None:
        await server.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # ignored since the start (`nohup`, a background job): left so
            # Only the main thread may install signal handlers: a server run in another thread
            # (the tests', an embedding application's) is stopped by request_shutdown instead.
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, server.request_shutdown)
                _note_signal(server, sig)
        if ready is not None:
            ready(server)
        await server.wait_stopped()

    asyncio.run(main())


__all__ = ["Client", "Server", "idle_clients", "install_loop_policy", "is_loopback",
           "run_server", "set_keepalive"]
