"""The replica's side of replication: a thread that follows a primary's record stream.

Owns the connection to the primary (connect, the handshake, PSYNC with this directory's history
and last LSN and that record's CRC), receiving a full sync (the snapshot file written beside the
data, CRC-checked, loaded, then installed by the data directory in one switch), and the record
stream: every record CRC-checked and its LSN the next one (replication.link), logged to this
node's own AOF byte for byte with the same LSN and applied through the engine's apply path under
one lock hold (nobody sees a record applied and not logged, or half applied), so a restart
resumes with a partial sync and this node's own replicas get the same stream. ACKs (the LSN
applied, the LSN fsynced) every second and on GETACK; the primary's published messages delivered
to this node's subscribers (run as its session runs them: not logged). A lost link, a damaged record, a wrong
password or a primary that is not streamkeep: a log line, and a retry with backoff. Must not
touch: command semantics, the record format (aof.codec via replication.link), the primary side.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkeep.aof.backlog import open_after
from streamkeep.engine.exec.functions import adopt_functions
from streamkeep.engine.wire.errors import ReplyError, StorageError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ProtocolError, ReplyParser
from streamkeep.replication import link
from streamkeep.replication.incoming import TMP, IncomingSnapshot, Received
from streamkeep.replication.redis_follower import RedisFollowing
from streamkeep.snapshot.layout import file_checksum
from streamkeep.snapshot.reader import SnapshotError, file_chunks
from streamkeep.snapshot.services.load import load_snapshot

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore, Session
    from streamkeep.engine.services.datadir import DataDir

log = logging.getLogger("streamkeep.replication")

CONNECT_TIMEOUT = 5.0
RECV_BYTES = 1 << 20
ACK_SECONDS = 1.0
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 1.0


class Follower:
    """Follows one primary until stopped. `state` as ROLE shows it: connect, connecting, sync,
    connected."""

    def __init__(self, engine: EngineCore, datadir: DataDir, host: str, port: int,
                 listening_port: Callable[[], int], runid: str) -> None:
        self.engine = engine
        self.datadir = datadir
        self.host, self.port = host, port
        self.listening_port = listening_port
        self.runid = runid
        self.state = "connect"
        self.link_up = False
        self.received_bytes = 0  # from the primary (INFO's total_net_repl_input_bytes)
        self.last_io = time.monotonic()
        self.down_since = time.monotonic()
        self.decoder: link.LinkDecoder | None = None
        self.sync_read = 0
        self.last_error: str | None = None
        self.sock: socket.socket | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replica-follower", daemon=True)
        self._incoming: IncomingSnapshot | None = None  # a full sync's files, as they come
        # Part files a full sync cut short received whole: announced at the next attempt.
        self._kept: dict[str, Received] = {}
        self._holdings: dict[str, tuple[str, int, int]] = {}  # what this link announced
        self._syncing = False  # between FULLRESYNC and the snapshot's end
        self.unsynced = False
        self.announced_port = 0  # the listening port the current link told the primary
        self.publisher: Session | None = None  # delivers the primary's published messages
        # Set once a primary answered the handshake as a redis-server does: its history id,
        # offset and counters, kept across links (replication.redis_follower).
        self.redis: RedisFollowing | None = None
        self.protocol = ""  # "streamkeep" or "redis", once a handshake told

    def start(self) -> None:
        self._thread.start()

    def stop(self, join: bool = True) -> None:
        """Stop following. Once this returns nothing more is applied (the apply checks the
        flag under the engine lock); without `join` the thread ends on its own (the caller
        holds the engine lock, which the thread may be waiting for)."""
        self._stop.set()
        sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if join and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def reconnect(self) -> None:
        """Drop the link; the thread reconnects at once and continues by a partial sync."""
        sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _check_running(self) -> None:
        """(engine lock held) Refuse to change anything once stopped (REPLICAOF NO ONE ran)."""
        if self._stop.is_set():
            raise StorageError("stopped following")

    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def sync_size(self) -> int:
        if self.protocol == "redis" and self.redis is not None:
            return self.redis.rdb_size
        return self.decoder.snapshot_size if self.decoder is not None else 0

    @property
    def sync_in_progress(self) -> bool:
        return self.state == "sync"

    # --- the loop --------------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = BACKOFF_FIRST
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._session()
            except (OSError, StorageError, SnapshotError, ValueError, ProtocolError) as err:
                if not self._stop.is_set():
                    message = f"replication from {self.host}:{self.port}: {err}"
                    if message != self.last_error:
                        log.warning("%s; retrying", message)
                    self.last_error = message
            finally:
                self._abandon_sync()
                if self.link_up:
                    self.down_since = time.monotonic()
                self.link_up = False
                self.state = "connect"
                if self.sock is not None:
                    with contextlib.suppress(OSError):
                        self.sock.close()
                    self.sock = None
            if time.monotonic() - started > 5:  # it had worked for a while: retry soon
                backoff = BACKOFF_FIRST
            self._stop.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _session(self) -> None:
        self.state = "connecting"
        sock = self.sock = socket.create_connection((self.host, self.port), CONNECT_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        config = self.engine.config
        if config.get("tls-replication"):
            sock = self.sock = _over_tls(sock, config)
        if self._stop.is_set():
            return
        parser = ReplyParser()  # the handshake's replies (the project's RESP codec)
        self.announced_port = self.listening_port()
        for command in link.handshake(str(config["masterauth"]), self.announced_port,
                                      self.runid, str(config["replica-announce-ip"]),
                                      str(config.get("masteruser") or "")):
            sock.sendall(command)
            reply = self._read_reply(sock, parser)
            if isinstance(reply, ReplyError):
                text = reply.line
                if b"sk-runid" in command and "unrecognized" in text.lower():
                    break  # a redis-server: it knows every step but streamkeep's own
                raise StorageError(f"the primary refused the handshake: {text}")
        else:
            reply = None
        if parser.pending_bytes():
            raise StorageError("the primary sent more than the handshake's replies")
        if reply is not None:
            self.protocol = "redis"
            if self.redis is None:
                self.redis = RedisFollowing(self)
            self.redis.run(sock)
            return
        self.protocol = "streamkeep"
        self._announce_holdings(sock, parser)
        replid, lsn, crc = self._position()
        sock.sendall(link.psync(replid, lsn, crc))
        decoder = self.decoder = link.LinkDecoder(lsn)
        self.state = "sync"  # until the PSYNC reply says which
        next_ack = 0.0

        def received(data: bytes) -> None:
            decoder.push(data)
            self._handle(sock, decoder.events())

        def tick(now: float) -> None:
            nonlocal next_ack
            if self.link_up and now >= next_ack:
                self._ack(sock)
                next_ack = now + ACK_SECONDS

        self.receive(sock, received, tick)

    def receive(self, sock: socket.socket, received: Callable[[bytes], None],
                tick: Callable[[float], None]) -> None:
        """Read the primary's bytes until stopped: `received(data)` for each read, then
        `tick(now)` (ACKs are due from it), at least every quarter of an ACK interval. A
        closed connection, or `repl-timeout` seconds of silence, raise."""
        sock.settimeout(ACK_SECONDS / 4)
        while not self._stop.is_set():
            try:
                data = sock.recv(RECV_BYTES)
            except TimeoutError:
                data = None
            now = time.monotonic()
            if data == b"":
                raise ConnectionError("the primary closed the connection")
            if data:
                self.last_io = now
                self.received_bytes += len(data)
                received(data)
            elif now - self.last_io > (timeout := int(self.engine.config["repl-timeout"])):
                raise TimeoutError(f"nothing from the primary for {timeout} s")
            tick(now)

    def drop_file(self, path: str, fd: int) -> None:
        """A partial sync file dropped: its descriptor (if open, >= 0) closed, it unlinked."""
        fs = self.datadir.fs
        if fd >= 0:
            with contextlib.suppress(OSError):
                fs.close(fd)
        with contextlib.suppress(OSError):
            if fs.exists(path):
                fs.unlink(path)

    def _read_reply(self, sock: socket.socket, parser: ReplyParser) -> Any:
        sock.settimeout(CONNECT_TIMEOUT)
        while (reply := parser.next()) is NEED_MORE:
            data = sock.recv(4096)
            if not data:
                raise ConnectionError("the primary closed the connection during the handshake")
            parser.feed(data)
            if parser.pending_bytes() > link.MAX_LINE:
                raise StorageError("the primary's handshake reply is too long")
        return reply

    def _announce_holdings(self, sock: socket.socket, parser: ReplyParser) -> None:
        """Tell the primary which part files this replica holds (its snapshot's, and those a
        full sync cut short received whole), so that a full sync sends only the others. A
        primary that does not know the option gets nothing: it sends every file."""
        holdings: dict[str, tuple[str, int, int]] = {}
        snap = self.datadir.journal.manifest.snapshot
        for part in snap.parts if snap is not None else ():
            holdings[part.file] = (os.path.join(self.datadir.path, part.file), part.size,
                                   part.crc32)
        for name, received in list(self._kept.items()):
            try:  # still the bytes that arrived (nothing replaced the temp file meanwhile)
                crc = file_checksum(file_chunks(received.tmp))
            except (OSError, StorageError):
                crc = None
            if crc != received.crc32:
                del self._kept[name]
                continue
            holdings.setdefault(name, (received.tmp, received.size, received.crc32))
        self._holdings = {}
        if not holdings:
            return
        sock.sendall(link.have([(name, size, crc) for name, (_p, size, crc)
                                in sorted(holdings.items())][:link.MAX_HAVE]))
        if not isinstance(self._read_reply(sock, parser), ReplyError):
            self._holdings = holdings

    def _position(self) -> tuple[str, int, int | None]:
        """This directory's history, last LSN and that record's CRC (None if not in the log)."""
        datadir, journal = self.datadir, self.datadir.journal
        with self.engine.lock:  # everything applied is in the files, then read without it
            journal.flush_pending()
            lsn = journal.lsn
        position = open_after(datadir.fs, datadir.path, journal, lsn)
        crc = None
        if position is not None:
            crc = position.crc
            position.cursor.close()
        if lsn == 0:  # nothing yet: ask for everything, as Redis's "PSYNC ? -1"
            return "?", -1, None
        return datadir.history()[0], lsn, crc

    def _ack(self, sock: socket.socket) -> None:
        journal = self.datadir.journal
        port = self.listening_port()
        if port != self.announced_port:
            # The server started listening after the handshake: tell the primary on this link
            # (reconnecting for it cost a second PSYNC, a full one during the first sync).
            sock.sendall(link.announce_port(port))
            self.announced_port = port
        # What is written (not only applied): a crash now keeps at least this much.
        sock.sendall(link.ack(journal.written_lsn, journal.synced_lsn))

    # --- events ----------------------------------------------------------------------------------

    def _handle(self, sock: socket.socket, events: Iterator[Any]) -> None:
        """Act on each event as it is decoded (records applied batch by batch); under
        appendfsync always, one fsync for what one read brought."""
        try:
            self._each(sock, events)
        finally:
            self.flush_log()

    def flush_log(self) -> None:
        """Write what was applied since the last flush (one write() for a read's records);
        under appendfsync always, fsync it."""
        if not self.unsynced:
            return
        journal = self.datadir.journal
        with self.engine.lock:
            journal.flush_pending()
        if journal.policy == "always":
            journal.sync()
        self.unsynced = False

    def _each(self, sock: socket.socket, events: Iterator[Any]) -> None:
        for event in events:
            if type(event) is link.Records:
                self._apply(event)
            elif type(event) is link.GetAck:
                self.flush_log()
                self._ack(sock)
            elif type(event) is link.Published:
                self._deliver(event)
            elif type(event) is link.SnapshotData:
                self._snapshot_data(event.data)
            elif type(event) is link.Continue:
                self._continued(event.replid)
            elif type(event) is link.FullResync:
                self._full_resync(event)
            elif type(event) is link.SnapshotEnd:
                self._snapshot_end(event.ok)

    def _apply(self, batch: link.Records) -> None:
        journal = self.datadir.journal
        first, raw, records = batch.first_lsn, batch.raw, batch.records
        def log_them() -> None:
            self._check_running()
            journal.append_raw(raw, first, len(records), buffer=True)

        self.engine.replay.apply_many(records, before=log_them)
        self.unsynced = True

    def _deliver(self, event: link.Published) -> None:
        """A message the primary published: to this node's subscribers (and its own replicas'),
        as the primary's session runs it; nothing is logged."""
        if self.publisher is None:
            self.publisher = self.engine.primary_session()
        try:
            self.engine.submit(self.publisher, (event.command, event.channel, event.message))
        except ReplyError as err:  # (it cannot fail; a message is not worth the link)
            log.warning("replication from %s:%d: a published message was not delivered: %s",
                        self.host, self.port, err.line)

    def _continued(self, replid: str) -> None:
        repl_id, _id2, _offset2 = self.datadir.history()
        if replid != repl_id:  # the primary was promoted: its history continues ours
            with self.engine.lock:
                self._check_running()
                self.datadir.set_history(replid, repl_id, self.datadir.journal.lsn + 1)
        log.info("replication from %s:%d: partial sync from LSN %d", self.host, self.port,
                 self.datadir.journal.lsn + 1)
        self.online()

    def online(self) -> None:
        self.state = "connected"
        self.link_up = True
        self.last_error = None

    def _full_resync(self, event: link.FullResync) -> None:
        log.info("replication from %s:%d: full sync (snapshot at LSN %d)", self.host,
                 self.port, event.lsn)
        self.datadir.wait_no_compaction()
        self.replid, self.sync_lsn = event.replid, event.lsn
        self.sync_read = 0
        self._syncing = True

    def _snapshot_data(self, data: bytes) -> None:
        if self._incoming is None:
            self._incoming = IncomingSnapshot(self.datadir.fs, self.datadir.path,
                                              self.sync_lsn, self.sync_size, self._holdings)
        self._incoming.feed(data)
        self.sync_read += len(data)

    def _snapshot_end(self, ok: bool) -> None:
        if not ok:
            raise StorageError("the snapshot arrived damaged (CRC-32C mismatch)")
        fresh = type(self.engine)()
        files = [] if self._incoming is None else self._incoming.finish()
        if files:
            # The parts are read where they arrived, under their temp names.
            meta = load_snapshot(fresh, files[0].tmp, part_suffix=TMP)
            if meta.lsn != self.sync_lsn:
                raise StorageError(f"the snapshot covers LSN {meta.lsn}, the primary said "
                                   f"{self.sync_lsn}")
        with self.engine.lock:
            self._check_running()
            self.datadir.install_snapshot(
                files[0].tmp if files else None, self.sync_lsn, self.replid, fresh.keyspaces,
                files[0].crc32 if files else None, fresh.expires,
                parts=[(f.tmp, f.name, f.size, f.crc32) for f in files[1:]])
            adopt_functions(self.engine, fresh)  # the primary's function libraries
        self._incoming, self._syncing, self._kept = None, False, {}
        log.info("replication from %s:%d: full sync done at LSN %d", self.host, self.port,
                 self.sync_lsn)
        self.online()

    def _abandon_sync(self) -> None:
        """A full sync cut short: drop the partial file, let compactions run again."""
        if not self._syncing:
            return
        if self._incoming is not None:
            self._kept = {received.name: received for received in self._incoming.abandon()}
        self._incoming, self._syncing = None, False
        self.datadir.allow_compaction()


def _over_tls(sock: socket.socket, config: dict[str, Any]) -> socket.socket:
    """The link's socket after a TLS handshake with the primary (tls-replication): this
    server's client certificate, the primary's checked against tls-ca-cert-file/dir
    (engine.services.tls.client_context). A context that cannot be made, or a handshake that
    fails, is the attempt's error: the follower retries as after any failed connect."""
    from streamkeep.engine.services.tls import TLSConfigError, client_context

    try:
        context = client_context(config)
        return context.wrap_socket(sock)
    except (TLSConfigError, OSError) as err:
        sock.close()
        raise StorageError(f"TLS to the primary failed: {err}") from None
