"""The primary's side of replication: one Sender per attached replica, on the server's loop.

Owns answering PSYNC (partial sync when the replica's history is this one's and its LSN is still
in the segments; a full sync otherwise: the current snapshot, freshly compacted first if the log
after it is big, then the records after it), streaming the snapshot file and the segments' bytes
at the replica's own pace (aof.backlog: nothing is buffered for a replica beyond what its socket
takes, so a slow or stalled replica costs the primary neither memory nor time), GETACK, the
replicas' ACKs, dropping a replica that stops acknowledging (`repl-timeout`), and the messages
published here (PUBLISH, SPUBLISH): written on the stream of each replica that announced
`capa sk-publish` where the stream is at a record boundary (link.publish_frame), never to the
AOF nor counted in an offset; at most PUBLISH_QUEUE of them wait for a replica that is behind,
later ones are dropped for it (Pub/Sub delivers at most once). A snapshot
whose bytes differ from the checksum its manifest recorded is not sent: the replica is dropped
before the trailer, with an error naming the file. Must not
touch: the record format (aof.codec), command semantics, the replica's side (follower).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from streamkeep.aof.backlog import (
    BacklogCursor,
    BacklogGone,
    Position,
    open_after,
    open_snapshot,
)
from streamkeep.replication import bundle, link

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.engine.services.datadir import DataDir

log = logging.getLogger("streamkeep.replication")

CHUNK = 256 << 10  # bytes read from a file per write to the replica's socket
HIGH_WATER = 1 << 20  # stop reading while the socket's buffer holds this much
# A full sync builds a fresh snapshot first when the log after the current one is bigger than
# this and than the snapshot itself: replaying it on the replica would cost more than a build.
FRESH_SNAPSHOT_MIN_BYTES = 16 << 20
PUMP_DELAY = 0.005  # seconds a write from another thread waits for its pump (see below)
PUBLISH_QUEUE = 10_000  # published messages waiting for a replica to catch up, at most


class Sender:
    """One replica's connection, from PSYNC on. States as INFO shows them: `wait_bgsave` (a
    fresh snapshot is being built), `send_bulk` (the snapshot is being sent), `online`."""

    def __init__(self, primary: Primary, client: Any, listening_port: int) -> None:
        self.primary = primary
        self.client = client
        self.transport = client.transport
        self.ip = client.addr.rsplit(":", 1)[0]
        self.port = listening_port
        self.state = "wait_bgsave"
        self.ack_lsn = 0
        self.fack_lsn = 0
        self.last_ack = time.monotonic()
        self.cursor: BacklogCursor | None = None
        # The snapshot's files still to send (its own, then its parts), each (descriptor, size,
        # path, CRC-32 as the manifest recorded it or None), and what was read of the first:
        # a snapshot damaged on disk is never shipped as if it were sound.
        self.snap_files: list[tuple[int, int, str, int | None]] = []
        self.snap_left = 0
        self.snap_offset = 0  # in the file being sent
        self.snap_sent = 0  # bytes of the whole bulk
        self.snap_crc = 0
        self.snap_file_crc = 0
        self.want_getack = False
        self.caught_up = False
        self.closed = False
        self.publishes = False  # it announced `capa sk-publish`: published messages go to it
        # The part files it holds (REPLCONF sk-have): (name, size, CRC-32), sent as names only.
        self.have: frozenset[tuple[str, int, int]] = frozenset()
        # Messages published since the stream was last at a record boundary (appended by the
        # publishing thread under the engine lock, taken by the loop: a deque's append and
        # popleft are atomic).
        self.published: deque[bytes] = deque()
        self.published_dropped = 0

    # --- starting ------------------------------------------------------------------------------

    def start_partial(self, replid: str, cursor: BacklogCursor) -> None:
        self.cursor = cursor
        self.state = "online"
        self._write(link.continue_line(replid))
        self.pump()

    def start_full(self, replid: str, lsn: int,
                   files: list[tuple[int, int, str, int | None]],
                   cursor: BacklogCursor) -> None:
        """Send the snapshot's `files` (see `snap_files`; none: the empty state) as one bulk:
        a self-contained snapshot's one file as it is, a segmented one's as a bundle, in
        which the part files the replica holds are names alone."""
        self.cursor = cursor
        header = b""
        if len(files) > 1:
            held = frozenset(os.path.basename(path) for _fd, size, path, crc in files[1:]
                             if (os.path.basename(path), size, crc) in self.have)
            header = bundle.encode_header([(os.path.basename(path), size)
                                           for _fd, size, path, _crc in files], held)
            fs = self.primary.datadir.fs
            for fd, _size, path, _crc in files:
                if os.path.basename(path) in held:
                    with contextlib.suppress(OSError):
                        fs.close(fd)
            files = [f for f in files if os.path.basename(f[2]) not in held]
            if held:
                log.info("replica %s:%d: it holds %d of the snapshot's part files already: "
                         "not sending them", self.ip, self.port, len(held))
        self.snap_files = list(files)
        self.snap_left = files[0][1] if files else 0
        size = len(header) + sum(size for _fd, size, _path, _crc in files)
        self.state = "send_bulk"
        self._write(link.fullresync_line(replid, lsn) + link.snapshot_header(size))
        if header:
            self.snap_crc = link.crc32c(header, self.snap_crc)
            self.snap_sent += len(header)
            self._write(header)
        self.pump()

    # --- sending -------------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        """Onto the replica's socket, counted (INFO's total_net_repl_output_bytes)."""
        self.transport.write(data)
        self.primary.sent_bytes += len(data)

    def pump(self) -> None:
        """Write what the socket takes (on the loop): the snapshot's rest, then the records."""
        if self.closed or self.state == "wait_bgsave":
            return
        transport = self.transport
        # What is written now, read once (without the engine lock): the pump sends up to
        # there and stops, instead of chasing a writer that never pauses.
        segment, written = self.primary.datadir.journal.written_end
        sent = False  # records written to the replica by this pump
        try:
            while transport.get_write_buffer_size() < HIGH_WATER and not self.closed:
                if self.state == "send_bulk":
                    self._send_snapshot_piece()
                    continue
                assert self.cursor is not None
                data = self.cursor.read(CHUNK, segment, written)
                if not data:
                    self.caught_up = True
                    published = self.published
                    while published:  # after every record written before they were
                        self._write(published.popleft())
                    if self.want_getack or (sent and self.primary.ack_wanted > self.ack_lsn):
                        self.want_getack = False
                        self._write(link.GETACK)
                    return
                self.caught_up = False
                sent = True
                self._write(data)
        except BacklogGone as err:
            log.warning("replica %s:%d: %s; dropping it (it will sync in full)", self.ip,
                        self.port, err)
            self.drop()
        except OSError as err:
            log.error("replica %s:%d: reading the log failed: %s", self.ip, self.port, err)
            self.drop()

    def _send_snapshot_piece(self) -> None:
        fs = self.primary.datadir.fs
        if self.snap_files:
            fd, _size, path, expected = self.snap_files[0]
            if self.snap_left:
                data = fs.pread(fd, min(CHUNK, self.snap_left), self.snap_offset)
                if not data:
                    raise OSError(f"{path}: the snapshot file ended early")
                self.snap_offset += len(data)
                self.snap_left -= len(data)
                self.snap_sent += len(data)
                self.snap_crc = link.crc32c(data, self.snap_crc)
                self.snap_file_crc = zlib.crc32(data, self.snap_file_crc)
                self._write(data)
                if self.snap_left:
                    return
            if expected is not None and self.snap_file_crc != expected:
                # Its trailer withheld, the replica drops what it received and loads nothing.
                log.error("replica %s:%d: not sending %s: the file is damaged (its checksum is "
                          "%08x, the manifest recorded %08x); dropping the replica", self.ip,
                          self.port, path, self.snap_file_crc, expected)
                self.drop()
                return
            self.snap_files.pop(0)
            with contextlib.suppress(OSError):
                fs.close(fd)
            self.snap_offset = self.snap_file_crc = 0
            self.snap_left = self.snap_files[0][1] if self.snap_files else 0
            if self.snap_files:
                return
        self._write(link.snapshot_trailer(self.snap_crc))
        self.state = "online"
        log.info("replica %s:%d: snapshot sent (%d bytes); streaming records", self.ip,
                 self.port, self.snap_sent)

    def getack(self) -> None:
        """Ask for an ACK: at once if the stream is at a record boundary, else when it is."""
        if self.state != "online" or self.closed:
            return
        if self.caught_up:
            self._write(link.GETACK)
        else:
            self.want_getack = True

    def publish(self, frame: bytes) -> None:
        """A published message for this replica (engine lock held, any thread): written at the
        next record boundary the pump reaches."""
        if len(self.published) < PUBLISH_QUEUE:
            self.published.append(frame)
            return
        self.published_dropped += 1
        if self.published_dropped == 1:
            log.warning("replica %s:%d: %d published messages wait for it to catch up; "
                        "dropping the next ones for it", self.ip, self.port, PUBLISH_QUEUE)

    def keepalive(self) -> None:
        """While a fresh snapshot is built: a newline, as Redis sends (the replica skips it)."""
        if self.state == "wait_bgsave" and not self.closed:
            self._write(link.KEEPALIVE)

    def on_ack(self, lsn: int, fack: int) -> None:
        self.ack_lsn = max(self.ack_lsn, lsn)
        self.fack_lsn = max(self.fack_lsn, fack)
        self.last_ack = time.monotonic()

    # --- ending --------------------------------------------------------------------------------

    def _close_snapshot(self) -> None:
        files, self.snap_files = self.snap_files, []
        for fd, _size, _path, _crc in files:
            with contextlib.suppress(OSError):
                self.primary.datadir.fs.close(fd)

    def drop(self) -> None:
        """Close the connection (the replica reconnects)."""
        if not self.closed:
            self.client.abort()
        self.detached()

    def detached(self) -> None:
        """The connection is gone: release the files."""
        if self.closed:
            return
        self.closed = True
        self._close_snapshot()
        if self.cursor is not None:
            self.cursor.close()
        self.primary.remove(self)


class Primary:
    """The replicas attached to this node, and how a PSYNC is answered."""

    def __init__(self, engine: EngineCore, datadir: DataDir) -> None:
        self.engine = engine
        self.datadir = datadir
        self.senders: list[Sender] = []
        self.sync_full = 0
        self.sync_partial_ok = 0
        self.sync_partial_err = 0
        self.sent_bytes = 0  # to replicas, since start (INFO's total_net_repl_output_bytes)
        self.pump_scheduled = False
        # The highest LSN a WAIT or WAITAOF waits for: a replica that is sent records while
        # its ACK is below it is asked for an ACK once they are sent (a WAIT pipelined right
        # behind its write would otherwise ask before the write reaches the replica, and
        # hear of it only at the next tick's GETACK).
        self.ack_wanted = 0
        self.on_ack: Any = None  # the waits' check, set by the service
        self.locator = ThreadPoolExecutor(1, thread_name_prefix="psync-locate")

    # --- PSYNC (engine lock held, on the loop) -------------------------------------------------

    def psync(self, client: Any, history: tuple[str, str, int], replid: str, lsn: int,
              crc: int | None, listening_port: int, publishes: bool = False,
              have: frozenset[tuple[str, int, int]] = frozenset(),
              ip: str | None = None) -> None:
        """Answer a PSYNC: the sender takes the connection over on the loop's next pass,
        after the replies already queued for it have left. `publishes`: the replica announced
        `capa sk-publish`; `ip`: the address it announced (REPLCONF ip-address), which INFO
        and ROLE list it under instead of the connection's."""
        sender = Sender(self, client, listening_port)
        sender.publishes, sender.have = publishes, have
        if ip:
            sender.ip = ip
        client.link = sender
        self.senders.append(sender)
        self.datadir.journal.on_written = self.records_written  # (hooked while replicas are)
        self.datadir.journal.flush_pending()  # what the replica asks about is in the files
        my_id, id2, offset2 = history
        if replid == my_id or (replid == id2 and lsn < offset2):
            # Finding its LSN reads a segment (up to 64 MB): off the loop and the engine lock,
            # one PSYNC at a time, so that no client stalls the others (or piles up buffers)
            # by asking again and again.
            self.locator.submit(self._locate, sender, my_id, replid, lsn, crc)
            return
        self._full_sync_instead(sender, replid)

    def _locate(self, sender: Sender, my_id: str, asked: str, lsn: int,
                crc: int | None) -> None:
        """(the locator thread) Where the records after `lsn` are; then on to the loop."""
        try:
            position = open_after(self.datadir.fs, self.datadir.path, self.datadir.journal,
                                  lsn)
        except OSError as err:
            log.warning("replica %s: cannot read the log after LSN %d: %s", sender.ip, lsn,
                        err)
            position = None
        self.engine.server.call_soon(self._located, sender, my_id, asked, lsn, crc, position)

    def _located(self, sender: Sender, my_id: str, asked: str, lsn: int, crc: int | None,
                 position: Position | None) -> None:
        """(on the loop) A partial sync if the replica's last record is ours, else a full one."""
        if sender.closed:
            if position is not None:
                position.cursor.close()
            return
        if position is not None and (crc is None or position.crc is None
                                     or position.crc == crc):
            self.sync_partial_ok += 1
            log.info("replica %s: partial sync from LSN %d", sender.client.addr, lsn + 1)
            sender.start_partial(my_id, position.cursor)
            return
        if position is not None:
            position.cursor.close()
            log.warning("replica %s: its record at LSN %d differs from ours (the histories "
                        "diverged there); full sync", sender.client.addr, lsn)
        with self.engine.lock:
            self._full_sync_instead(sender, asked)

    def _full_sync_instead(self, sender: Sender, asked: str) -> None:
        """(engine lock held) Count the refused partial sync (if one was asked) and start a
        full one."""
        if asked != "?":
            self.sync_partial_err += 1
        self.sync_full += 1
        self._full_sync(sender)

    def _full_sync(self, sender: Sender) -> None:
        """Send the current snapshot, or build a fresh one first (in the compaction child)
        when the log after it is big; the primary's clients never wait for either."""
        datadir = self.datadir
        status = datadir.status()
        fresh_needed = (datadir.journal.aof_bytes > FRESH_SNAPSHOT_MIN_BYTES
                        and datadir.journal.aof_bytes > status.aof_base_size)
        if fresh_needed and status.saving_since_ms is None:
            fresh_needed = datadir.start_background_save()
        if fresh_needed or status.saving_since_ms is not None:
            log.info("replica %s: full sync after the running compaction", sender.client.addr)
            self.engine.server.call_soon(self._await_snapshot, sender)
            return
        self._begin_full(sender)

    def _await_snapshot(self, sender: Sender) -> None:
        if sender.closed:
            return
        with self.engine.lock:
            if self.datadir.status().saving_since_ms is None:
                self._begin_full(sender)
                return
        sender.keepalive()
        self.engine.server.loop.call_later(0.1, self._await_snapshot, sender)

    def _begin_full(self, sender: Sender) -> None:
        """(engine lock held) Take the snapshot and the records after it; start on the loop."""
        self.datadir.journal.flush_pending()
        snap, fds, position = open_snapshot(self.datadir.fs, self.datadir.path,
                                            self.datadir.journal)
        lsn = snap.lsn if snap is not None else 0
        files: list[tuple[int, int, str, int | None]] = []
        if snap is not None:
            recorded = [(snap.size, snap.crc32), *((p.size, p.crc32) for p in snap.parts)]
            files = [(fd, size, os.path.join(self.datadir.path, name), crc)
                     for fd, name, (size, crc) in zip(fds, snap.files, recorded, strict=True)]
        replid = self.datadir.history()[0]
        log.info("replica %s: full sync from the snapshot at LSN %d (%d bytes in %d files)",
                 sender.client.addr, lsn, sum(f[1] for f in files), len(files))
        self.engine.server.call_soon(sender.start_full, replid, lsn, files, position.cursor)

    # --- the stream ----------------------------------------------------------------------------

    def published(self, command: bytes, channel: bytes, message: bytes) -> None:
        """A message published here (engine lock held, any thread): to every replica that
        takes them, after the records written so far (the journal's pending ones written
        first, so that none of them comes after it)."""
        takers = [s for s in self.senders if s.publishes and not s.closed]
        if not takers:
            return
        self.datadir.journal.flush_pending()
        frame = link.publish_frame(command, channel, message)
        for sender in takers:
            sender.publish(frame)
        self.schedule_pump()

    def records_written(self) -> None:
        """The journal wrote records (engine lock held, any thread): pump on the loop. (The
        journal's `on_written` while a replica is connected: none is made without one.)"""
        if self.senders:
            self.schedule_pump()

    def schedule_pump(self) -> None:
        """Pump every sender on the loop. From another thread (an embedded primary's callers,
        a replica's follower) the pump waits PUMP_DELAY, gathering what is written meanwhile:
        waking the loop for every write would make the writing thread and the loop trade the
        GIL at every record."""
        if self.senders and not self.pump_scheduled:
            self.pump_scheduled = True
            server = self.engine.server
            if threading.get_ident() == server.loop_thread:
                server.loop.call_soon(self.pump_all)
            else:
                # The loop has closed (the server stopped, its replicas' connections with it):
                # nothing to pump, and nothing raised into the thread that wrote.
                with contextlib.suppress(RuntimeError):
                    server.loop.call_soon_threadsafe(server.loop.call_later, PUMP_DELAY,
                                                     self.pump_all)

    def pump_all(self) -> None:
        self.pump_scheduled = False
        for sender in list(self.senders):
            sender.pump()

    def tick(self, timeout: int) -> None:
        """Once a second, on the loop: GETACK to every replica, drop the silent ones."""
        now = time.monotonic()
        for sender in list(self.senders):
            if sender.state == "online" and now - sender.last_ack > timeout:
                log.warning("replica %s:%d: no ACK for %d seconds; dropping it", sender.ip,
                            sender.port, timeout)
                sender.drop()
                continue
            if sender.state == "send_bulk":
                sender.last_ack = now  # it cannot ACK before it has the snapshot
            sender.getack()

    def getack_all(self) -> None:
        for sender in self.senders:
            sender.getack()

    def set_port(self, client: Any, port: int) -> None:
        """A linked replica's listening port, announced after its handshake."""
        sender = client.link
        if sender is not None:
            sender.port = port

    def ack(self, client: Any, lsn: int, fack: int) -> None:
        sender = client.link
        if sender is not None:
            sender.on_ack(lsn, fack)
            if self.on_ack is not None:
                self.on_ack()

    def remove(self, sender: Sender) -> None:
        if sender in self.senders:
            self.senders.remove(sender)
            if not self.senders:  # no call a record without a replica to pump
                self.datadir.journal.on_written = None
            log.info("replica %s:%d: disconnected", sender.ip, sender.port)

    def online(self) -> list[Sender]:
        return [s for s in self.senders if s.state == "online"]

    def close(self) -> None:
        """Drop every replica (they reconnect and resync). Called with the engine lock held
        (REPLICAOF): the connections close on the loop's next pass, which takes the lock."""
        server = self.engine.server
        for sender in list(self.senders):
            if server is not None:
                server.call_soon(sender.drop)
            else:
                sender.drop()

    def shutdown(self) -> None:
        """The engine is closing (its connections, replicas' included, are closed already):
        no more PSYNC lookups."""
        self.locator.shutdown(wait=False, cancel_futures=True)
