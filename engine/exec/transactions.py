"""Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.

Owns the queueing rule (which commands run at once inside MULTI and which are queued or refused),
these five commands, and the registry of WATCHed keys: a key counts as modified when a committed
record's effects touch it, so every way of changing state (including a blocked read served later,
or a command inside another client's EXEC) invalidates watches without each command having to
remember to. EXEC itself runs through the engine's `run_queued` (engine.runtime.batches), which
makes the whole transaction one record. Must not touch: command semantics, stream structures, I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.eviction import OOM
from streamkeep.engine.exec.keys import ALL_DATABASES, effect_keys
from streamkeep.engine.exec.table import ANY_EFFECTS, Argv, CommandSpec, Flag, command
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import NULL_ARRAY

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState

# Commands that run at once inside MULTI instead of being queued (Redis's processCommand list).
RUN_IN_MULTI = frozenset({"exec", "discard", "multi", "watch", "quit", "reset"})
# What MULTI still takes over maxmemory (Redis's processCommand: all else is refused with OOM).
ENDS_MULTI = frozenset({"exec", "discard", "quit", "reset"})
NOT_IN_MULTI = "ERR Command not allowed inside a transaction"
ALL_KEYS = (1, -1, 1)


def queue_in_multi(engine: EngineState, session: Session, spec: CommandSpec, argv: Argv) -> Any:
    """Inside MULTI: queue argv and return "QUEUED", raise the error that flags the transaction
    (EXEC then aborts), or return None for a command that runs now."""
    if engine.oom and spec.name not in ENDS_MULTI:  # over maxmemory: queueing grows it
        session.multi_failed = True
        raise ReplyError(OOM)
    if spec.name in RUN_IN_MULTI:
        return None
    if Flag.NO_MULTI in spec.flags:
        session.multi_failed = True
        raise ReplyError(NOT_IN_MULTI)
    if spec.is_write:  # refused at once, as Redis's processCommand refuses it (MISCONF, READONLY)
        gate = engine.write_gate(session)
        if gate is not None:
            session.multi_failed = True
            raise ReplyError(gate)
    session.multi.append((spec, argv))  # type: ignore[union-attr]
    return "QUEUED"


def end_transaction(engine: EngineState, session: Session) -> None:
    """Leave MULTI (if in it) and drop every WATCH: after EXEC, DISCARD, RESET, a disconnect."""
    session.multi = None
    session.multi_failed = False
    engine.watches.unwatch_all(session)
    session.dirty = False


class WatchRegistry:
    """Which sessions watch which (db, key); marks them dirty when a record touches the key."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[int, bytes], set[Session]] = {}

    def __bool__(self) -> bool:
        return bool(self.by_key)

    def watch(self, session: Session, db: int, key: bytes) -> None:
        k = (db, key)
        self.by_key.setdefault(k, set()).add(session)
        session.watched.add(k)

    def unwatch_all(self, session: Session) -> None:
        for k in session.watched:
            watchers = self.by_key.get(k)
            if watchers is not None:
                watchers.discard(session)
                if not watchers:
                    del self.by_key[k]
        session.watched.clear()

    def touch(self, db: int, key: bytes) -> None:
        watchers = self.by_key.get((db, key))
        if watchers:
            for session in watchers:
                session.dirty = True

    def touch_where(self, dbs: Iterable[int] | None) -> None:
        """Every watched key of these databases (None: all), as FLUSHDB/FLUSHALL touch them."""
        wanted = None if dbs is None else set(dbs)
        for (db, _key), watchers in self.by_key.items():
            if wanted is None or db in wanted:
                for session in watchers:
                    session.dirty = True

    def touch_effects(self, db: int, effects: Iterable[Any]) -> None:
        """Mark the keys a record's effects change (their key positions in the command table)."""
        for key_db, key in effect_keys(db, effects):
            if key is not None:
                self.touch(key_db, key)
            else:
                self.touch_where(None if key_db == ALL_DATABASES else (key_db,))


# --- the commands ----------------------------------------------------------------------------


@command("multi", 1, "noscript loading stale fast allow_busy", group="transactions", since="1.2.0",
         acl="transaction", keys="",
         summary="Starts a transaction.")
def multi(ctx: Ctx, argv: Argv) -> str:
    session = ctx.session
    if session.multi is not None:
        raise ReplyError("ERR MULTI calls can not be nested")
    session.multi = []
    session.multi_failed = False
    return "OK"


@command("exec", 1, "noscript loading stale skip_slowlog", group="transactions", since="1.2.0",
         acl="transaction", keys="", logs=ANY_EFFECTS,
         summary="Executes all commands in a transaction.")
def exec_(ctx: Ctx, argv: Argv) -> Any:
    session = ctx.session
    queued = session.multi
    if queued is None:
        raise ReplyError("ERR EXEC without MULTI")
    failed, dirty = session.multi_failed, session.dirty
    end_transaction(ctx.engine, session)
    if failed:
        raise ReplyError("EXECABORT Transaction discarded because of previous errors.")
    if dirty:
        return NULL_ARRAY
    return ctx.engine.run_queued(ctx, queued)


@command("discard", 1, "noscript loading stale fast allow_busy", group="transactions",
         since="2.0.0",
         acl="transaction", keys="",
         summary="Discards a transaction.")
def discard(ctx: Ctx, argv: Argv) -> str:
    if ctx.session.multi is None:
        raise ReplyError("ERR DISCARD without MULTI")
    end_transaction(ctx.engine, ctx.session)
    return "OK"


@command("watch", -2, "noscript loading stale fast allow_busy", group="transactions",
         since="2.2.0",
         acl="transaction", keys="RO @1 r-1,1,0",
         summary="Monitors changes to keys to determine the execution of a transaction.",
         syntax="key...")
def watch(ctx: Ctx, argv: Argv) -> str:
    session = ctx.session
    if session.multi is not None:
        raise ReplyError("ERR WATCH inside MULTI is not allowed")
    for key in argv[1:]:
        ctx.engine.watches.watch(session, session.db, key)
    return "OK"


@command("unwatch", 1, "noscript loading stale fast allow_busy", group="transactions",
         since="2.2.0",
         acl="transaction", keys="",
         summary="Forgets about watched keys of a transaction.")
def unwatch(ctx: Ctx, argv: Argv) -> str:
    ctx.engine.watches.unwatch_all(ctx.session)
    ctx.session.dirty = False
    return "OK"
