"""Following a redis-server primary: what a Follower does once the handshake showed it is Redis.

Owns the Redis side of a follower's link: PSYNC with Redis's history id and byte offset (a
partial sync after a lost link where the primary's backlog still holds it, a full one
otherwise), the full sync's RDB (disk or diskless transfer) written beside the data, read with
snapshot.rdb and loaded through the engine (replication.redis_commands: FLUSHALL, then every
stream and string RESTOREd with its TTL, expired or not, as a Redis replica loads it; every
other key counted by type), the command stream applied in order, logged
to this node's AOF like any client's writes (so it restarts from disk and its own replicas
follow it), REPLCONF ACK with the offset every second and on GETACK, and what INFO reports about
it. The history id and offset are saved beside the data (POSITION_FILE) with the LSN of this
node's last record at that moment, every second and when the link ends: a restart whose log
ends at that very LSN continues by a partial sync; any other (a crash lost the log's tail, or
records came after the save) begins with a full one.
Must not touch: the bytes of the link (replication.redis_link), what a command does (the
engine), the streamkeep record protocol (replication.follower).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from typing import TYPE_CHECKING

from streamkeep.engine.wire.errors import StorageError
from streamkeep.replication import redis_link
from streamkeep.replication.redis_commands import RedisApplier
from streamkeep.snapshot.rdb import RdbError, describe_skipped, read_rdb_contents

if TYPE_CHECKING:
    from streamkeep.engine.exec.interfaces import Fields
    from streamkeep.replication.follower import Follower

log = logging.getLogger("streamkeep.replication")

ACK_SECONDS = 1.0
SYNC_FILE = "redis-sync.rdb.tmp"
POSITION_FILE = "redis-primary.json"  # {"replid", "offset", "lsn"}


class RedisFollowing:
    """A follower's state about its redis-server primary, kept across links."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self.applier = RedisApplier(follower.engine)
        self.replid: str | None = None  # the primary's history id (None: no sync yet)
        self.full_syncs = 0
        self.partial_syncs = 0
        self.rdb_size = 0
        self._pending: tuple[str, int] | None = None  # a full sync's history id and offset
        self._tmp: str | None = None
        self._tmp_fd = -1
        self._load_position()

    # --- the position, across restarts ---------------------------------------------------------

    def _position_path(self) -> str:
        return os.path.join(self.follower.datadir.path, POSITION_FILE)

    def _load_position(self) -> None:
        """The saved position, if this directory's log still ends where it was saved."""
        fs, path = self.follower.datadir.fs, self._position_path()
        try:
            saved = json.loads(fs.read_file(path)) if fs.exists(path) else None
            if saved is None:
                return
            replid, offset, lsn = str(saved["replid"]), int(saved["offset"]), int(saved["lsn"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("%s unreadable (%s): the first sync is a full one", path, err)
            return
        if lsn == self.follower.datadir.journal.lsn:
            self.replid, self.applier.offset = replid, offset

    def save_position(self) -> None:
        """Save the history id and offset with the LSN they go with (follower thread)."""
        if self.replid is None or self.applier.multi is not None:
            return
        f = self.follower
        with f.engine.lock:
            lsn = f.datadir.journal.lsn
        fs, path = f.datadir.fs, self._position_path()
        data = json.dumps({"replid": self.replid, "offset": self.applier.offset, "lsn": lsn})
        tmp = path + ".tmp"
        with contextlib.suppress(OSError):
            if fs.exists(tmp):
                fs.unlink(tmp)
            fd = fs.open_write_new(tmp)
            try:
                fs.write(fd, data.encode())
            finally:
                fs.close(fd)
            fs.rename(tmp, path)

    # --- the link ------------------------------------------------------------------------------

    def run(self, sock: socket.socket) -> None:
        """After the handshake: PSYNC, then the primary's stream until the link is lost or the
        follower stops."""
        f = self.follower
        self.applier.abandon()
        sock.sendall(redis_link.psync(self.replid, self.applier.offset))
        decoder = redis_link.RedisLinkDecoder()
        f.state = "sync"
        announced = f.announced_port
        next_ack = 0.0

        def received(data: bytes) -> None:
            nonlocal next_ack
            decoder.push(data)
            next_ack = self._handle(sock, decoder, next_ack)

        def tick(now: float) -> None:
            nonlocal next_ack
            if f.link_up and now >= next_ack:
                if f.listening_port() != announced:
                    # Redis replies to a REPLCONF on a live link, in the stream: tell it the
                    # port the server now listens on by a reconnection (a partial sync).
                    raise ConnectionError("reconnecting to announce the listening port")
                sock.sendall(redis_link.ack(self.applier.offset))
                next_ack = now + ACK_SECONDS
                self.save_position()

        try:
            f.receive(sock, received, tick)
        finally:
            self._abandon_sync()
            if f.link_up:
                f.flush_log()
                self.save_position()

    def _handle(self, sock: socket.socket, decoder: redis_link.RedisLinkDecoder,
                next_ack: float) -> float:
        f = self.follower
        applier = self.applier
        try:
            for event in decoder.events():
                if f.stopping():
                    break
                if type(event) is redis_link.Commands:
                    f.unsynced = True
                    if applier.apply_many(event.commands):
                        f.flush_log()
                        sock.sendall(redis_link.ack(applier.offset))
                elif type(event) is redis_link.RdbData:
                    self._rdb_data(event.data)
                elif type(event) is redis_link.FullResync:
                    self._full_resync(event)
                elif type(event) is redis_link.RdbStart:
                    self.rdb_size = event.size
                elif type(event) is redis_link.RdbEnd:
                    self._rdb_end()
                    next_ack = 0.0  # a diskless primary starts the stream on the first ACK
                elif type(event) is redis_link.Continue:
                    self._continued(event.replid)
        finally:
            f.flush_log()
        return next_ack

    # --- syncs ---------------------------------------------------------------------------------

    def _continued(self, replid: str | None) -> None:
        if replid is not None:
            self.replid = replid  # the primary's history continues under a new id
        self.partial_syncs += 1
        log.info("replication from redis-server %s:%d: partial sync from offset %d",
                 self.follower.host, self.follower.port, self.applier.offset + 1)
        self.follower.online()

    def _full_resync(self, event: redis_link.FullResync) -> None:
        f = self.follower
        log.info("replication from redis-server %s:%d: full sync (RDB at offset %d)", f.host,
                 f.port, event.offset)
        self._pending = (event.replid, event.offset)
        f.sync_read = 0
        self._tmp = os.path.join(f.datadir.path, SYNC_FILE)
        fs = f.datadir.fs
        if fs.exists(self._tmp):
            fs.unlink(self._tmp)
        self._tmp_fd = fs.open_write_new(self._tmp)

    def _rdb_data(self, data: bytes) -> None:
        if self._tmp_fd < 0:
            raise StorageError("RDB bytes without a full sync")
        self.follower.datadir.fs.write(self._tmp_fd, data)
        self.follower.sync_read += len(data)

    def _rdb_end(self) -> None:
        f = self.follower
        fs = f.datadir.fs
        fs.close(self._tmp_fd)
        self._tmp_fd = -1
        assert self._tmp is not None and self._pending is not None
        try:
            version, _aux, keys, libraries, _end = read_rdb_contents(fs.read_file(self._tmp))
        except RdbError as err:
            raise StorageError(f"the primary's RDB cannot be read: {err}") from None
        # As a Redis replica loads its primary's RDB: keys already expired too (the
        # primary's DELs follow in the stream); its function libraries replace this node's.
        streams, entries, strings = self.applier.load(keys, version, replace_all=True)
        self.applier.apply([b"FUNCTION", b"FLUSH"], 0)
        for library in libraries:  # (a failure is the applier's, logged and counted)
            self.applier.apply([b"FUNCTION", b"LOAD", library.code], 0)
        skipped = describe_skipped(keys)
        del keys
        if skipped:  # (counted in INFO's redis_skipped_keys too)
            log.warning("replication from redis-server %s:%d: full sync (RDB %d) skipped the "
                        "keys of types streamkeep does not store: %s", f.host, f.port,
                        version, skipped)
        self.replid, self.applier.offset = self._pending
        self._pending = None
        self.full_syncs += 1
        f.unsynced = True
        f.flush_log()
        self._abandon_sync()
        log.info("replication from redis-server %s:%d: full sync done: %d stream(s), %d "
                 "entries, %d string(s), at offset %d", f.host, f.port, streams, entries,
                 strings, self.applier.offset)
        f.online()

    def _abandon_sync(self) -> None:
        """Drop a full sync's file (done with, or cut short)."""
        if self._tmp is None:
            return
        self.follower.drop_file(self._tmp, self._tmp_fd)
        self._tmp, self._tmp_fd = None, -1

    # --- reporting -----------------------------------------------------------------------------

    def info_fields(self) -> Fields:
        """INFO replication's fields about a redis-server primary."""
        a = self.applier
        return [
            ("master_protocol", "redis"),
            ("master_redis_replid", self.replid or "?"),
            ("redis_full_syncs", self.full_syncs),
            ("redis_partial_syncs", self.partial_syncs),
            ("redis_commands_applied", a.applied),
            ("redis_commands_failed", a.errors),
            ("redis_commands_skipped", a.skipped_total()),
            ("redis_skipped_commands", _counts(a.skipped_commands)),
            ("redis_skipped_keys", _counts(a.skipped_keys)),
            ("redis_expiries_loaded", a.expiries_kept),
        ]


def _counts(counter: dict[str, int]) -> str:
    return ",".join(f"{name}={n}" for name, n in sorted(counter.items()))
