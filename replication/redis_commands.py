"""A redis-server's commands applied through the engine: its replication stream and its AOF.

A redis-server sends its replicas, and writes to its AOF, the same RESP commands. Owns what
streamkeep does with them:
- applied through the engine, as a client's commands (so they are logged to this node's AOF and
  reach its own replicas): the writes streamkeep implements (the stream commands, the string
  commands, the TTL commands, DEL, UNLINK, RENAME, FLUSHDB, FLUSHALL, RESTORE of a value of a
  type streamkeep stores), as Redis 8 propagates them: a relative TTL already made absolute (SET ... PXAT,
  PEXPIREAT), INCRBYFLOAT as SET ... KEEPTTL, GETEX as PEXPIREAT or PERSIST, an expiry as the
  primary's DEL. A TTL already past is kept until that DEL arrives (the session is the
  primary's: nothing expires on its own here, as on a Redis replica);
- rewritten to what they amount to on a replica: MSETNX (propagated only when it set every
  key) as MSET, GETSET as SET;
- handled here: SELECT (the session's database), MULTI ... EXEC (one engine transaction: one
  record, all or nothing), PING and REPLCONF (nothing to apply);
- delivered, not logged: PUBLISH and SPUBLISH, which a redis-server propagates to its replicas
  (never to its AOF) so that their subscribers get the message too (and this node passes them
  on to its own replicas, as a Redis replica does);
- skipped: every other command (another type's: lists, hashes, sets, sorted sets; and the
  string writes streamkeep does not implement: SETBIT, BITFIELD, BITOP, the HyperLogLog ones,
  warned about once since the string they change then differs here), counted by name and
  never silently;
- the offset the applied commands reach: a transaction counts once its EXEC is applied, as
  Redis's replicas count it, so a link lost inside one resumes before its MULTI;
- a full sync's or an RDB file's keys: those of every type streamkeep stores (streams,
  strings, sorted sets, ...) RESTOREd exactly, with their TTLs (absolute, as the RDB holds
  them), the others counted by type. A key already expired is
  loaded or not as Redis's rdbLoad decides: a replica's full sync loads it (the primary's DEL
  follows), an RDB file imported as a primary's skips it, an AOF's RDB preamble loads it (the
  AOF's commands after it assume the exact keyspace).
Must not touch: sockets and files (the follower's and the import tool's), the RDB format
(snapshot.rdb), what a command does (the engine).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from streamkeep.engine.exec.table import lookup
from streamkeep.engine.wire.errors import ReplyError, StorageError
from streamkeep.replication.redis_link import command_size, is_getack
from streamkeep.snapshot.rdb import STREAM_TYPES, TYPE_NAMES, TYPE_STRING, RdbKey, payload_from
from streamkeep.snapshot.rdb_types import restorable_types

if TYPE_CHECKING:
    from streamkeep.engine.runtime.core import EngineCore

log = logging.getLogger("streamkeep.replication")

# Commands that change nothing streamkeep holds: not counted as skipped.
_NOTHING_TO_APPLY = frozenset((b"ping", b"replconf"))
_TRANSACTION = frozenset((b"multi", b"exec", b"discard"))
# What a replica may apply in their place: MSETNX is propagated only when it set every key, and
# GETSET drops the TTL as SET does.
_REWRITTEN = {b"msetnx": b"MSET", b"getset": b"SET"}
# String writes streamkeep does not implement: skipped like the others, with a warning the first
# time, since the string they changed differs here from then on.
_STRING_WRITES_SKIPPED = frozenset((b"setbit", b"bitfield", b"bitop", b"pfadd", b"pfmerge",
                                    b"pfcount", b"pfdebug"))

# Not writes, but run as the primary's replicas run them: the message reaches this node's
# subscribers (the engine logs nothing for them).
_DELIVERED = frozenset((b"publish", b"spublish"))
# Commands of any type's keys that streamkeep does not implement: skipped like the others, with
# a warning the first time, since they may have touched a stream.
_KEYSPACE_COMMANDS = frozenset((b"move", b"copy", b"swapdb"))
# Writes whose name and arity do not decide (a container's subcommand, RESTORE's payload type).
_DECIDED_EACH_TIME = frozenset((b"xgroup", b"restore"))
BATCH_BYTES = 8 << 20  # commands applied as one record: at most about this much of the stream
ERRORS_LOGGED = 10
NAMED_SKIPS = 100  # skipped commands counted by name (an AOF may hold any names)  # the first apply errors are logged one by one, then counted only


class RedisApplier:
    """Applies one redis-server's commands to an engine, in order."""

    def __init__(self, engine: EngineCore) -> None:
        self.engine = engine
        self.session = engine.primary_session()
        self.offset = 0  # the replication offset of the last command applied (outside MULTI)
        self.multi: list[list[bytes]] | None = None  # a transaction being received
        self.multi_bytes = 0
        self._writes: set[tuple[bytes, int]] = set()  # (name as sent, arity) known to apply
        self.applied = 0
        self.errors = 0
        self.last_error: str | None = None
        self.last_failed: tuple[bytes, ...] | None = None  # its command name and key
        self.skipped_commands: Counter[str] = Counter()
        self.skipped_keys: Counter[str] = Counter()  # by type, from full syncs / RDB files
        self.expired_keys = 0  # keys already expired in an RDB file imported: not loaded
        self.expiries_kept = 0  # keys loaded from an RDB with their TTL
        # keys of the other stored types (sorted sets, ...) loaded from an RDB, by type
        self.loaded_keys: Counter[str] = Counter()

    # --- the command stream ------------------------------------------------------------------

    def apply(self, argv: list[bytes], size: int) -> None:
        """One command of the stream, `size` bytes of it."""
        name = argv[0].lower()
        if self.multi is not None:
            self.multi_bytes += size
            if name == b"exec":
                self._exec()
            elif name == b"discard":
                self.offset += self.multi_bytes  # never applied: the offset moves on
                self.multi, self.multi_bytes = None, 0
            else:
                self.multi.append(argv)  # sorted at EXEC: a transaction cut off counts nothing
            return
        if name == b"multi":
            self.multi, self.multi_bytes = [], size
            return
        if self._wanted(argv):
            self._run(argv)
        self.offset += size

    def apply_many(self, commands: list[list[bytes]]) -> bool:
        """Commands of the stream in order, the plain ones between transactions applied as
        one batch (Batches.execute_batch: one lock hold, one record; a replica keeps up with a
        primary that pipelines). True if a REPLCONF GETACK was among them (acknowledge
        now)."""
        run: list[list[bytes]] = []
        run_bytes = 0
        getack = False
        for argv in commands:
            size = command_size(argv)
            name = argv[0].lower()
            if self.multi is not None or name in _TRANSACTION:
                self._run_batch(run, run_bytes)
                run, run_bytes = [], 0
                self.apply(argv, size)
                continue
            if name == b"replconf" and is_getack(argv):
                getack = True
            if self._wanted(argv):
                run.append(argv)
            run_bytes += size
            if run_bytes >= BATCH_BYTES:  # one record stays a reasonable size
                self._run_batch(run, run_bytes)
                run, run_bytes = [], 0
        self._run_batch(run, run_bytes)
        return getack

    def _run_batch(self, run: list[list[bytes]], size: int) -> None:
        if len(run) == 1:
            self._run(run[0])
        elif run:
            try:
                replies = self.engine.batches.execute_batch(self.session, list(map(tuple, run)))
            except ReplyError as err:  # MISCONF: refused whole, nothing of it applied
                self._check_storage()
                raise StorageError(f"a batch from the primary was refused: {err.line}") \
                    from None
            for argv, reply in zip(run, replies, strict=False):
                if isinstance(reply, ReplyError):
                    self._failed(argv, reply.line)
                else:
                    self.applied += 1
        self.offset += size

    def _wanted(self, argv: list[bytes]) -> bool:
        """Whether argv is a write streamkeep applies; counted as skipped if not."""
        name = argv[0].lower()
        if name == b"select" or name in _DELIVERED:
            return True
        if name in _NOTHING_TO_APPLY:
            return False
        if name in _REWRITTEN:  # (argv is the link's own list: rewritten in place)
            argv[0] = name = _REWRITTEN[name]
            name = name.lower()
        known = (argv[0], len(argv))
        if known in self._writes:  # decided before: what a pipelining primary repeats
            return True
        try:
            spec = lookup(argv)
        except ReplyError:
            spec = None
        if spec is None or not spec.is_write:
            text = name.decode("utf-8", "replace")
            if name in _KEYSPACE_COMMANDS and text not in self.skipped_commands:
                log.warning("skipped %s from the redis-server primary: streamkeep does not "
                            "implement it; if it moved or copied a stream or a string, this "
                            "replica's keys differ from the primary's from here (REPLICAOF "
                            "again to resync)", text.upper())
            if name in _STRING_WRITES_SKIPPED and text not in self.skipped_commands:
                log.warning("skipped %s from the redis-server primary: streamkeep does not "
                            "implement it; the string it changed differs here from the "
                            "primary's from now on", text.upper())
            if text not in self.skipped_commands and name not in _KEYSPACE_COMMANDS and \
                    name not in _STRING_WRITES_SKIPPED and \
                    len(self.skipped_commands) >= NAMED_SKIPS:
                text = "other"  # names beyond these are counted together: INFO stays short
            self.skipped_commands[text] += 1
            return False
        if name == b"restore" and len(argv) > 3 and argv[3][:1] and \
                argv[3][0] not in restorable_types():
            self.skipped_commands["restore"] += 1  # a value of another type
            return False
        if name not in _DECIDED_EACH_TIME:
            self._writes.add(known)
        return True

    def _run(self, argv: list[bytes] | tuple[bytes, ...]) -> object:
        try:
            reply, _lsn = self.engine.submit(self.session, tuple(argv))
        except ReplyError as err:
            self._failed(argv, err.line)
            return err
        self.applied += 1
        return reply

    def _exec(self) -> None:
        queued = [argv for argv in self.multi or () if self._wanted(argv)]
        self.multi = None
        if queued:
            self._run((b"MULTI",))
            for argv in queued:
                self._run(argv)
            replies = self._run((b"EXEC",))
            if isinstance(replies, list):
                for argv, reply in zip(queued, replies, strict=False):
                    if isinstance(reply, ReplyError):
                        self._failed(argv, reply.line)
        self.offset += self.multi_bytes
        self.multi_bytes = 0

    def abandon(self) -> None:
        """The link was lost: a transaction half received is dropped (the primary sends it
        again from the offset before its MULTI)."""
        self.multi, self.multi_bytes = None, 0
        if self.session.multi is not None:
            self._run((b"DISCARD",))

    def _check_storage(self) -> None:
        """A write refused because the AOF cannot be written (MISCONF) is not the command's
        failure: stop here, before the offset moves past it (the link is dropped and the
        primary sends it again)."""
        gate = self.engine.write_gate(self.session)  # (the primary's session: the AOF's)
        if gate is not None:
            raise StorageError(f"not applying the primary's commands: {gate}")

    def _failed(self, argv: list[bytes] | tuple[bytes, ...], line: str) -> None:
        self._check_storage()
        self.errors += 1
        command = b" ".join(a[:40] for a in argv[:3]).decode("utf-8", "replace")
        self.last_error = f"{command}: {line}"
        self.last_failed = tuple(bytes(a) for a in argv[:2])
        if self.errors <= ERRORS_LOGGED:
            log.warning("a command from the redis-server primary failed here (%s)",
                        self.last_error)

    # --- an RDB's keys -------------------------------------------------------------------------

    def load(self, keys: Iterable[RdbKey], version: int, replace_all: bool,
             skip_expired: bool = False) -> tuple[int, int, int]:
        """An RDB's keys of the types streamkeep stores (streams, strings, sorted sets, ...:
        `restorable_types`) RESTOREd with their TTLs (after FLUSHALL if `replace_all`: a full
        sync replaces everything), those of other stored types counted in `loaded_keys`; the
        other keys counted by type in `skipped_keys`. A key
        whose TTL is already past is skipped if `skip_expired` (as Redis's rdbLoad does for a
        primary loading an RDB file), loaded with its TTL otherwise (a replica's full sync, an
        AOF's preamble). Returns (streams, entries, strings) loaded."""
        if replace_all:
            self._run((b"FLUSHALL",))
        streams = entries = strings = 0
        now = int(time.time() * 1000)
        db = -1
        kept = restorable_types()
        for item in keys:
            if item.rdb_type not in kept:
                self.skipped_keys[TYPE_NAMES.get(item.rdb_type, f"type {item.rdb_type}")] += 1
                continue
            restore: tuple[bytes, ...] = (b"0",)
            if item.expire_ms is not None:
                if skip_expired and item.expire_ms < now:  # rdbLoad: `expiretime < now`
                    self.expired_keys += 1
                    continue
                self.expiries_kept += 1
                # RESTORE's 0 means no TTL and a negative one is refused: a time before 1970
                # is as past as 1 ms after it.
                restore = (b"%d" % max(item.expire_ms, 1), b"ABSTTL")
            if item.db != db:
                db = item.db
                self._run((b"SELECT", b"%d" % db))
            payload = payload_from(item.rdb_type, item.value, version)
            reply = self._run((b"RESTORE", item.key, restore[0], payload, b"REPLACE",
                               *restore[1:]))
            if isinstance(reply, ReplyError):
                continue
            if item.rdb_type == TYPE_STRING:
                strings += 1
                continue
            if item.rdb_type not in STREAM_TYPES:
                self.loaded_keys[TYPE_NAMES[item.rdb_type]] += 1
                continue
            streams += 1
            length = self._run((b"XLEN", item.key))
            entries += length if isinstance(length, int) else 0
        self._run((b"SELECT", b"0"))
        return streams, entries, strings

    def skipped_total(self) -> int:
        return sum(self.skipped_commands.values())
