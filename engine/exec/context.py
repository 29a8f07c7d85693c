"""What a command handler sees while it runs: the database, the command time, the effects it
emits, and whether it is being replayed.

Owns `Ctx` and `Block` (a handler's request to wait for keys). The time is read once per command
from the engine's injectable clock, so replies, effects and replay are deterministic. Must not
touch: the command table or I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamkeep.engine.exec.notify import keyspace_event

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState
    from streamkeep.engine.exec.pubsub import Subscriber
    from streamkeep.engine.exec.table import Argv
    from streamkeep.engine.model.stream import Stream


class Session:
    """Per-connection state: the selected database (the server gives each client one), the
    command context reused by each of its commands, its transaction (MULTI queue, WATCHed keys;
    see engine.transactions) and, on the server, the connection it belongs to (`client`)."""

    __slots__ = ("db", "ctx", "multi", "multi_failed", "watched", "dirty", "client", "name",
                 "lastcmd", "write_lsn", "from_primary", "subscriber", "user", "acl_generation",
                 "acl_unrestricted", "acl_plans", "readonly", "asking")

    def __init__(self, db: int = 0) -> None:
        self.db = db
        self.ctx: Ctx | None = None
        self.multi: list[tuple[Any, Argv]] | None = None  # queued (spec, argv) after MULTI
        self.multi_failed = False  # a command was refused while queueing: EXEC aborts
        self.watched: set[tuple[int, bytes]] = set()
        self.dirty = False  # a watched key changed: EXEC fails
        self.client: Any = None  # the server's connection object (None when embedded)
        self.name: bytes = b""  # CLIENT SETNAME
        self.lastcmd: str | None = None  # the last command's name (CLIENT LIST cmd=; None: NULL)
        self.write_lsn = 0  # the LSN of its last write's record (what WAIT and WAITAOF wait for)
        # A redis-server primary's command stream (replication.redis_commands): its writes pass
        # the read-only gate that refuses clients' writes on a replica.
        self.from_primary = False
        # Where its Pub/Sub messages go (engine.exec.pubsub): the server's connection gives
        # one, Engine.subscribe's session has one; None: SUBSCRIBE is refused.
        self.subscriber: Subscriber | None = None
        # The ACL user it is authenticated as (engine.exec.acl_model.User): every command it
        # runs is checked against its permissions (engine.runtime.acl_gate). None: no user,
        # nothing checked (an embedded engine's sessions, replication's own).
        self.user: Any = None
        # Whether that user may run anything (then no command is looked at), as of the
        # engine's acl_generation it was worked out at (-1: not yet).
        self.acl_unrestricted = False
        self.acl_generation = -1
        # Its user's quick answers by command (engine.runtime.acl_fast), for that generation.
        self.acl_plans: dict[str, Any] = {}
        # A cluster node's client flags (engine.exec.cluster): READONLY (reads of its primary's
        # slots served on a replica) and ASKING (its next command may use an importing slot).
        self.readonly = False
        self.asking = False


class Block:
    """Returned by a blocking handler that found nothing to serve.

    `argv` is the command to re-run when a key is signalled (with `$` already resolved);
    `wake_at` (engine-clock ms) asks for a re-run at that time even without a signal, for
    XREADGROUP CLAIM waiting for a pending entry to become idle enough."""

    __slots__ = ("keys", "timeout_ms", "argv", "wake_at", "ready", "rerun")

    def __init__(
        self, keys: Sequence[bytes], timeout_ms: int, argv: Argv, wake_at: int | None = None,
        ready: Callable[[], bool] | None = None,
        rerun: Callable[[Ctx, Argv], object] | None = None,
    ) -> None:
        self.keys = keys
        self.timeout_ms = timeout_ms
        self.argv = argv
        self.wake_at = wake_at
        self.ready = ready  # cheap test that a re-run could serve something (None: always)
        # The handler a re-run runs `argv` with, in place of its command's own (None: the
        # command's): it skips parsing the arguments again. The engine's one command path
        # runs it like any handler.
        self.rerun = rerun


class Later:
    """Returned by a handler whose reply needs a wait that must not hold the engine lock
    (SAVE waits for a compaction): the caller calls `wait()` outside the lock, the server in a
    worker thread, and replies with what it returns (or the ReplyError it raises).

    A Later may also offer `start(done)`: begin the wait without a thread and call `done(value)`
    (from any thread) when it ends. The server uses it when offered, so that many WAITs never
    hold its worker threads (which the fsyncs of `appendfsync always` need)."""

    __slots__ = ("wait", "start")

    def __init__(self, wait: Callable[[], Any],
                 start: Callable[[Callable[[Any], None]], None] | None = None) -> None:
        self.wait = wait
        self.start = start


class Ctx:
    """A client command's context. Its kind is its type, and the kinds differ only in the
    class attributes below, which the engine's one command path (EngineCore.run_command)
    reads: `ReplayCtx` for effects being applied (Redis's "must obey" clients), `RerunCtx`
    for a blocked command re-run after a wake-up, `MultiCtx` for EXEC's, a script's and a
    batch's commands, `BusyCtx` for a command answered while a script is busy.

    What the path leaves here for its caller: `lsn`, the LSN of the record it logged (0:
    none), and `nanos`, the time the handler took."""

    __slots__ = ("engine", "session", "db", "now", "effects", "lsn", "nanos")
    # Effects being applied: the handler only runs (no gate, expiry, timing or record).
    replaying = False
    # A blocked command's re-run: its call is counted once it is served, with all its runs'
    # time (engine.runtime.waiting), not by each run.
    rerun = False
    # EXEC's, a script's or a batch's command: blocking commands do not block, a refused
    # write is a failed call, and the effects join the caller's one record.
    in_multi = False
    # The keys a command names are expired before it runs (engine.exec.keys), but for
    # effects being applied and for the commands answered while a script is busy.
    lazy_expiry = True
    # The command's effects are logged as its own record when it ends (not for EXEC's,
    # a script's or a batch's commands, whose caller logs one record for them all).
    commits = True
    # What the ACL gate calls a refusal's context here (engine.runtime.acl_gate), in_multi's.
    acl_context = "toplevel"

    def __init__(self, engine: EngineState, session: Session, now: int) -> None:
        self.engine = engine
        self.session = session
        self.db: dict[bytes, Stream] = engine.dbs[session.db]
        self.now = now
        self.effects: list[list[bytes]] = []
        self.lsn = 0
        self.nanos = 0

    @property
    def strings(self) -> dict[bytes, bytes]:
        """The selected database's string values (its streams are `db`; a key is in one type's
        dict at most)."""
        return self.engine.strings[self.session.db]

    def space(self, slot: int) -> dict[bytes, Any]:
        """The selected database's values of the type at `slot` (engine.model.value_types)."""
        return self.engine.keyspaces[slot][self.session.db]

    @property
    def expires(self) -> dict[bytes, int]:
        """The selected database's TTLs: key -> absolute expiry time (engine-clock ms), for
        keys of either type (Redis's per-db `expires` dict)."""
        return self.engine.expires[self.session.db]

    @property
    def replies_in_resp(self) -> bool:
        """The reply goes to a connection (not to an embedded caller): stream reads may then
        write their entries as RESP straight from the nodes (reply.PackedEntries)."""
        return self.session.client is not None

    @property
    def reply_budget(self) -> int:
        """Bytes the connection's output limit leaves for this reply (0: no limit, or no
        connection). A command whose reply size the client chooses builds no more than this
        (engine.exec.reply_budget)."""
        client = self.session.client
        return 0 if client is None else client.reply_budget()

    @property
    def elements_budget(self) -> int:
        """Bytes the connection's output limit leaves for a reply of many elements whose number
        the client chose (0: no limit, or no connection): the hard limit, where `reply_budget`
        also lets one value as big as proto-max-bulk-len through."""
        client = self.session.client
        return 0 if client is None else client.elements_budget()

    def emit(self, effect: list[bytes]) -> None:
        self.effects.append(effect)

    def signal(self, key: bytes, db: int | None = None) -> None:
        """Wake clients blocked on `key` (in the selected db unless given) once this command
        finishes."""
        engine = self.engine
        if engine.waiters:
            engine.waiters.signal(self.session.db if db is None else db, key)

    def notify(self, cls: int, event: bytes, key: bytes) -> None:
        """notifyKeyspaceEvent for `key` of the selected database (engine.exec.notify): one
        test when the class is off."""
        if self.engine.notify_flags & cls:
            keyspace_event(self.engine, cls, event, key, self.session.db)

    @property
    def config(self) -> dict[str, Any]:
        return self.engine.config


class ReplayCtx(Ctx):
    __slots__ = ()
    replaying = True
    lazy_expiry = False
    commits = False  # the record being applied is logged already


class BusyCtx(Ctx):
    """A command answered while a script is busy (AUTH, MULTI, WATCH, SCRIPT KILL...): the
    script is changing the data, so no key it names is expired meanwhile."""

    __slots__ = ()
    lazy_expiry = False


class RerunCtx(Ctx):
    __slots__ = ()
    rerun = True


class MultiCtx(Ctx):
    """A command run by EXEC: blocking commands do not block (Redis's MULTI rule)."""

    __slots__ = ()
    in_multi = True
    commits = False
    acl_context = "exec"
    # EXEC's and a script's commands: their replies are collected (a script reads them as
    # values), not written to the connection one by one, so stream reads build plain entries.
    replies_in_resp = False


class ScriptCtx(MultiCtx):
    """A script's command (redis.call): as EXEC's, but a refusal by the ACL gate is the
    script's error, logged in the `lua` context."""

    __slots__ = ()
    acl_context = "lua"


class AnyKeyHolds:
    """A blocked pop's readiness: one of its keys holds a value of the type whose keyspace is
    slot `slot` (Redis re-runs a client blocked for a type, BLOCKED_LIST or BLOCKED_ZSET, only
    when a key of that type arrives). `key` names the test: the waiting machinery keeps the
    tests it found false during one pass by it."""

    __slots__ = ("space", "keys", "key")

    def __init__(self, ctx: Ctx, keys: Sequence[bytes], slot: int) -> None:
        self.space = ctx.space(slot)
        self.keys = tuple(keys)
        self.key: tuple[Any, ...] = (ctx.session.db, slot, self.keys)

    def __call__(self) -> bool:
        space = self.space
        return any(key in space for key in self.keys)


def block_on(ctx: Ctx, argv: Sequence[bytes], keys: Sequence[bytes], timeout_ms: int,
             slot: int, empty: object) -> object:
    """A blocking pop that found nothing to serve: `empty` at once in MULTI and scripts
    (Redis's CLIENT_DENY_BLOCKING), else a Block on `keys` until one holds a value of the
    type of keyspace `slot`."""
    if ctx.in_multi:
        return empty
    return Block(list(keys), timeout_ms, tuple(argv), None, AnyKeyHolds(ctx, keys, slot))
