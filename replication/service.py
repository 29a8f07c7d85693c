"""Replication attached to an engine: its role, REPLICAOF, ROLE, INFO replication, WAIT.

Owns the node's role (a primary, or a read-only replica following one), switching it (REPLICAOF
host port, REPLICAOF NO ONE: the promotion that starts a new history and keeps the old one as
replid2 up to the promotion LSN, so the other replicas continue by a partial sync), the
connection-level REPLCONF/PSYNC handling that hands a replica's connection to a Sender, WAIT
and WAITAOF (replication.waits), and what INFO and ROLE report. It implements the engine's
`Replication` interface and registers its hooks: Pub/Sub's propagation and the server's start
(the once-a-second tick); its Primary hooks the journal's `on_written` (the senders pump) while
a replica is connected. Must not touch: the link's bytes
(replication.link), the files (aof/).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from streamkeep.aof.manifest import NO_REPL_ID, new_repl_id
from streamkeep.engine.exec.context import Later
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NO_REPLY
from streamkeep.replication import link
from streamkeep.replication.sender import Primary
from streamkeep.replication.waits import Wait, Waits

if TYPE_CHECKING:
    from streamkeep.engine.exec.interfaces import Fields
    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.engine.services.datadir import DataDir
    from streamkeep.replication.follower import Follower

log = logging.getLogger("streamkeep.replication")

READONLY = "READONLY You can't write against a read only replica."
MYSELF = "ERR REPLICAOF would make this node its own replica"
MAX_ANNOUNCED_IP = 256  # bytes; Redis's NET_HOST_STR_LEN (a hostname may be announced too)


def attach(engine: EngineCore, replicaof: tuple[str, int] | None) -> ReplicationService:
    """Give an engine with a data directory its replication (Engine.open calls it)."""
    service = ReplicationService(engine, engine.datadir)  # type: ignore[arg-type]
    engine.replication = service
    engine.add_info_section("replication", service.info_fields)
    if replicaof is None and engine.config.get("replicaof"):
        host, port = str(engine.config["replicaof"]).split()
        replicaof = (host, int(port))
    if replicaof is not None:
        service.follow(replicaof[0], int(replicaof[1]))
    return service


class ReplicationService:
    def __init__(self, engine: EngineCore, datadir: DataDir) -> None:
        self.engine = engine
        self.datadir = datadir
        self.primary = Primary(engine, datadir)
        self.primary.on_ack = self._check_waits
        self.follower: Follower | None = None
        self.received_before = 0  # bytes earlier followers received (of primaries since left)
        self.waits = Waits(self._call_later)
        self.server: Any = None
        self.refusals_logged: dict[str, float] = {}
        # Names this node on the link (REPLCONF sk-runid): a node told to follow itself, under
        # any address, is refused. Per engine, not per process: tests run several in one.
        self.runid = os.urandom(20).hex()
        self.closed = False
        engine.pubsub.propagate = self.primary.published

    # --- the server's hooks --------------------------------------------------------------------

    def serve(self, server: Any) -> None:
        """The network server started (on its loop): tick once a second."""
        self.server = server
        server.loop.call_later(1.0, self._tick)
        # A follower that connected before the server listened (Engine.open comes first) tells
        # the primary its port with its next ACK, on the same link (Follower._ack).

    def _tick(self) -> None:
        if self.closed or self.server is None or self.server.stopping.is_set():
            return
        self.primary.tick(int(self.engine.config["repl-timeout"]))
        self.server.loop.call_later(1.0, self._tick)

    def _call_later(self, delay: float, fn: Any) -> None:
        server = self.server
        if server is not None:
            server.call_soon(server.loop.call_later, delay, fn)

    def _listening_port(self) -> int:
        """The port this replica gives its primary: replica-announce-port, else the one its
        server listens on (0 before it listens): its TLS port under tls-replication, where
        Sentinel and the other replicas reach it, as a Redis replica announces it."""
        config = self.engine.config
        announced = int(config["replica-announce-port"])
        if announced:
            return announced
        server = self.engine.server
        if server is None:
            return 0
        if config.get("tls-replication") and getattr(server, "tls_port", 0):
            return int(server.tls_port)
        return int(server.port)

    # --- the role ------------------------------------------------------------------------------

    def follow(self, host: str, port: int) -> None:
        """Become a read-only replica of host:port (engine lock held, or at open)."""
        self.engine.read_only = READONLY
        old = self.follower
        if old is not None:
            old.stop(join=False)
            self.received_before += old.received_bytes
        self.primary.close()  # our replicas resync through us once we follow someone else
        # (a replica's side of the link, imported by a replica only)
        from streamkeep.replication.follower import Follower

        follower = self.follower = Follower(
            self.engine, self.datadir, host, port, self._listening_port, self.runid)
        follower.start()
        log.info("following %s:%d", host, port)

    def promote(self) -> None:
        """REPLICAOF NO ONE (engine lock held): stop following, start a new history that
        continues the old one up to this LSN."""
        follower, self.follower = self.follower, None
        if follower is None:
            return
        follower.stop(join=False)  # it applies nothing more: it checks under this lock
        self.received_before += follower.received_bytes
        self.engine.read_only = None
        repl_id, _id2, _offset2 = self.datadir.history()
        lsn = self.datadir.journal.lsn
        self.datadir.set_history(new_repl_id(), repl_id, lsn + 1)
        log.info("promoted to primary at LSN %d (the previous history %s continues as "
                 "replid2)", lsn, repl_id)

    def replicaof(self, host: str | None, port: int) -> str:
        if host is None:
            self.promote()
            return "OK"
        follower = self.follower
        if follower is not None and follower.host == host and follower.port == port:
            return "OK Already connected to specified master"
        if self._is_myself(host, port):
            raise ReplyError(MYSELF)
        self.follow(host, port)
        return "OK"

    def _is_myself(self, host: str, port: int) -> bool:
        server = self.engine.server
        if server is None or port != server.port:
            return False
        import socket  # (REPLICAOF's, not every engine start's)

        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, port)}
        except OSError:
            return False
        local = {"127.0.0.1", "::1", "0.0.0.0", "::"} | set(str(server.host).split())
        return bool(addresses & local)

    def primary_address(self) -> str:
        follower = self.follower
        return f"{follower.host} {follower.port}" if follower is not None else ""

    def role(self) -> list[Any]:
        follower = self.follower
        if follower is not None:
            state = {"connect": "connect", "connecting": "connecting", "sync": "sync",
                     "connected": "connected"}[follower.state]
            return [b"slave", follower.host.encode(), follower.port, state.encode(),
                    self._offset(follower)]
        return [b"master", self.datadir.journal.lsn,
                [[s.ip.encode(), str(s.port).encode(), str(s.ack_lsn).encode()]
                 for s in self.primary.online()]]

    def _offset(self, follower: Follower) -> int:
        """A replica's offset: the LSN it holds, or following a redis-server, Redis's byte
        offset (what the primary's INFO and WAIT compare)."""
        if follower.protocol == "redis" and follower.redis is not None:
            return follower.redis.applier.offset
        return self.datadir.journal.lsn

    # --- the link's commands (engine lock held, on the server's loop) ---------------------------

    def replconf(self, session: Any, argv: tuple[bytes, ...]) -> Any:
        client = session.client
        # What the connection announced so far (the server's Client keeps it: gone with it).
        state: dict[str, Any] = {}
        if client is not None:
            if client.handshake is None:
                client.handshake = state
            state = client.handshake
        for i in range(1, len(argv), 2):
            option, value = argv[i].lower(), argv[i + 1]
            if option == b"listening-port":
                if client is not None and client.link is not None:
                    # A linked replica announcing its port late (Follower._ack): no reply,
                    # the link carries only the primary's stream.
                    self.primary.set_port(client, parse_int(value))
                    return NO_REPLY
                state["port"] = parse_int(value)
            elif option == b"capa":
                state.setdefault("capa", set()).add(value.lower())
            elif option == b"sk-have":
                try:
                    state["have"] = link.parse_have(value)
                except link.LinkError as err:
                    raise ReplyError(f"ERR {err}") from None
            elif option == b"sk-runid":
                if value.decode(errors="replace") == self.runid:
                    raise ReplyError(MYSELF)
            elif option == b"ack":
                if client is None or client.link is None:
                    return NO_REPLY
                lsn = parse_int(value)
                fack = parse_int(argv[i + 3]) if len(argv) > i + 3 and \
                    is_word(argv[i + 2], b"fack") else lsn
                self.primary.ack(client, lsn, fack)
                return NO_REPLY
            elif option == b"ip-address":
                if len(value) >= MAX_ANNOUNCED_IP:
                    raise ReplyError("ERR REPLCONF ip-address provided by replica instance is "
                                     f"too long: {len(value)} bytes")
                state["ip"] = value.decode("utf-8", "replace")
            elif option in (b"getack", b"rdb-only", b"rdb-filter-only"):
                pass
            else:
                raise ReplyError("ERR Unrecognized REPLCONF option: "
                                 + argv[i].decode("utf-8", "replace"))
        return "OK"

    def psync(self, session: Any, argv: tuple[bytes, ...]) -> Any:
        client = session.client
        if client is None:
            raise ReplyError("ERR PSYNC needs a network connection")
        state = client.handshake or {}
        client.handshake = None
        if link.CAPA not in state.get("capa", set()):
            host = client.addr.rsplit(":", 1)[0]
            now = time.monotonic()
            if now - self.refusals_logged.get(host, -60.0) >= 60:  # it retries at once
                self.refusals_logged[host] = now
                log.warning("replica %s does not speak the record stream (is it "
                            "redis-server?); refused", client.addr)
            raise ReplyError(link.NOT_STREAMKEEP)
        if client.link is not None:
            raise ReplyError("ERR this connection is already a replica's")
        replid = argv[1].decode("utf-8", "replace") if len(argv) > 1 else "?"
        lsn, crc = -1, None
        if len(argv) > 2:
            lsn = parse_int(argv[2])
        if len(argv) > 3:
            try:
                crc = int(argv[3], 16)
            except ValueError:
                raise ReplyError("ERR PSYNC's record CRC must be hexadecimal") from None
        if lsn < 0:
            replid = "?"
        self.primary.psync(client, self.datadir.history(), replid, max(lsn, 0), crc,
                           int(state.get("port", 0)),
                           publishes=link.PUBLISH_CAPA in state.get("capa", set()),
                           have=state.get("have", frozenset()), ip=state.get("ip"))
        return NO_REPLY

    # --- WAIT, WAITAOF -------------------------------------------------------------------------

    def wait(self, session: Any, numreplicas: int, timeout_ms: int, block: bool = True) -> Any:
        target = session.write_lsn
        senders = self.primary.senders

        def count() -> int:
            return sum(1 for s in senders if s.state == "online" and s.ack_lsn >= target)

        if count() >= numreplicas or not block:
            return count()
        self.primary.ack_wanted = max(self.primary.ack_wanted, target)
        self.primary.getack_all()
        return self._later(Wait(self.waits, count, lambda: count() >= numreplicas,
                                timeout_ms, polled=False))

    def waitaof(self, session: Any, numlocal: int, numreplicas: int, timeout_ms: int,
                block: bool = True) -> Any:
        target = session.write_lsn
        journal = self.datadir.journal
        senders = self.primary.senders

        def counts() -> list[int]:
            local = int(journal.synced_lsn >= target)
            fsynced = sum(1 for s in senders if s.state == "online" and s.fack_lsn >= target)
            return [local, fsynced]

        def done() -> bool:
            local, fsynced = counts()
            return local >= min(numlocal, 1) and fsynced >= numreplicas

        if done() or not block:
            return counts()
        if numlocal and journal.synced_lsn < target:
            # Under everysec the next fsync is up to a second away: make it now, off the loop.
            threading.Thread(target=journal.sync, name="waitaof-fsync", daemon=True).start()
        self.primary.ack_wanted = max(self.primary.ack_wanted, target)
        self.primary.getack_all()
        return self._later(Wait(self.waits, counts, done, timeout_ms, polled=bool(numlocal)))

    def _later(self, wait: Wait) -> Later:
        # On the server a wait holds no thread; embedded, the caller's thread waits.
        return Later(wait.wait, wait.start if self.server is not None else None)

    def _check_waits(self) -> None:
        if self.waits.pending:
            self.waits.check()

    # --- INFO ----------------------------------------------------------------------------------

    def vouched_until(self, needed: int, seconds: float) -> float:
        if self.follower is not None:
            return 0.0
        acks = sorted((s.last_ack for s in self.primary.online()), reverse=True)
        return acks[needed - 1] + seconds if needed <= len(acks) else 0.0

    def info_fields(self) -> Fields:
        repl_id, repl_id2, offset2 = self.datadir.history()
        lsn = self.datadir.journal.lsn
        fields: Fields = []
        follower = self.follower
        if follower is None:
            fields.append(("role", "master"))
        else:
            now = time.monotonic()
            fields += [
                ("role", "slave"),
                ("master_host", follower.host),
                ("master_port", follower.port),
                ("master_link_status", "up" if follower.link_up else "down"),
                ("master_last_io_seconds_ago",
                 int(now - follower.last_io) if follower.link_up else -1),
                ("master_sync_in_progress", int(follower.sync_in_progress)),
                ("slave_read_repl_offset", self._offset(follower)),
                ("slave_repl_offset", self._offset(follower)),
            ]
            if follower.sync_in_progress:
                fields += [("master_sync_total_bytes", follower.sync_size),
                           ("master_sync_read_bytes", follower.sync_read),
                           ("master_sync_left_bytes",
                            max(follower.sync_size - follower.sync_read, 0)),
                           ("master_sync_last_io_seconds_ago", int(now - follower.last_io))]
            if not follower.link_up:
                fields.append(("master_link_down_since_seconds",
                               int(now - follower.down_since)))
            config = self.engine.config
            fields += [("slave_priority", config["replica-priority"]), ("slave_read_only", 1),
                       ("replica_announced", int(config["replica-announced"]))]
            if follower.protocol == "redis" and follower.redis is not None:
                fields += follower.redis.info_fields()
        senders = self.primary.senders
        fields.append(("connected_slaves", len(senders)))
        now = time.monotonic()
        for i, s in enumerate(senders):
            fields.append((f"slave{i}", f"ip={s.ip},port={s.port},state={s.state},"
                                        f"offset={s.ack_lsn},lag={int(now - s.last_ack)}"))
        fields += [
            ("master_failover_state", "no-failover"),
            ("master_replid", repl_id),
            ("master_replid2", repl_id2 if repl_id2 != NO_REPL_ID else NO_REPL_ID),
            ("master_repl_offset", lsn),
            ("second_repl_offset", offset2),
            # The backlog is the AOF segments: always on, as big as what they retain.
            ("repl_backlog_active", 1),
            ("repl_backlog_size", self.datadir.journal.aof_bytes),
            ("repl_backlog_first_byte_offset",
             self.datadir.journal.manifest.segments[0].first_lsn),
            ("repl_backlog_histlen",
             lsn - self.datadir.journal.manifest.segments[0].first_lsn + 1),
        ]
        return fields

    def primary_link_up(self) -> bool:
        follower = self.follower
        return follower is not None and follower.link_up

    def traffic(self) -> tuple[int, int]:
        follower = self.follower
        received = self.received_before + (follower.received_bytes if follower else 0)
        return received, self.primary.sent_bytes

    def stats_fields(self) -> Fields:
        primary = self.primary
        return [("sync_full", primary.sync_full), ("sync_partial_ok", primary.sync_partial_ok),
                ("sync_partial_err", primary.sync_partial_err)]

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        follower, self.follower = self.follower, None
        if follower is not None:
            follower.stop()
        self.waits.cancel_all()
        self.primary.shutdown()
        self.datadir.journal.on_written = None
