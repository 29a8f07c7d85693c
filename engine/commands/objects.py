"""Commands that see a key's value whatever its type: OBJECT (ENCODING, REFCOUNT, IDLETIME,
FREQ), MEMORY USAGE and COPY.

Owns these commands' parsing, replies and effects. What they know of a value comes from its
type's registration (engine.model.value_types: OBJECT ENCODING's word, the memory estimate, the
in-memory copy); a type without an in-memory copy (streams: nodes, groups, cold nodes) is copied
through its DUMP payload (snapshot.rdb), the codec RESTORE reads. COPY is logged as itself: it
is deterministic, so replay and replicas make the same copy. Must not touch: any type's
internals, the command table beyond its declarations.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.commands.keyspace import parse_db_index
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import key_type, lookup, placed, read_hit, read_miss
from streamkeep.engine.exec.notify import GENERIC, NEW, OVERWRITTEN, TYPE_CHANGED, keyspace_event
from streamkeep.engine.exec.table import Argv, command, container, help_subcommand, subcommand
from streamkeep.engine.model.stream import new_stream
from streamkeep.engine.model.value_types import STREAM, STRING, TYPES, ValueType
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError

SHARED_INTEGERS = 10_000  # OBJ_SHARED_INTEGERS: 0..9999 are one shared object each
SHARED_REFCOUNT = (1 << 31) - 1  # OBJ_SHARED_REFCOUNT, what REFCOUNT says of a shared object
LFU_NOT_SELECTED = ("ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
                    "Please note that when switching between policies at runtime LRU and LFU "
                    "data will take some time to adjust.")
LFU_SELECTED = ("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note "
                "that when switching between policies at runtime LRU and LFU data will take "
                "some time to adjust.")
DICT_ENTRY_BYTES = 24  # a keyspace entry (key pointer, value pointer, next)


def _object_lookup(ctx: Ctx, key: bytes) -> tuple[ValueType, Any] | None:
    """objectCommandLookup: a read lookup counted in the keyspace hits and misses, without
    the `keymiss` event (Redis's LOOKUP_NONOTIFY)."""
    found = lookup(ctx, key)
    if found is None:
        if not ctx.replaying:
            ctx.engine.stats.keyspace_misses += 1
        return None
    read_hit(ctx)
    return found


def _lfu_policy(ctx: Ctx) -> bool:
    return "lfu" in str(ctx.engine.config.get("maxmemory-policy", "noeviction"))


# --- OBJECT ----------------------------------------------------------------------------------------

OBJECT = container("object", "A container for object introspection commands.", group="generic",
                   since="2.2.3")


@subcommand(OBJECT, "encoding", 3, "readonly", since="2.2.3",
            acl="keyspace", keys="RO @2 r0,1,0",
            summary="Returns the internal encoding of a "
            "Redis object.",
            syntax="key")
def object_encoding(ctx: Ctx, argv: Argv) -> bytes | None:
    found = _object_lookup(ctx, argv[2])
    return None if found is None else found[0].encoding(found[1]).encode()


@subcommand(OBJECT, "refcount", 3, "readonly", since="2.2.3",
            acl="keyspace", keys="RO @2 r0,1,0",
            summary="Returns the reference count of a value "
            "of a key.",
            syntax="key")
def object_refcount(ctx: Ctx, argv: Argv) -> int | None:
    found = _object_lookup(ctx, argv[2])
    if found is None:
        return None
    vt, value = found
    # Redis shares the objects of the integers 0..9999 (unless an LRU or LFU policy needs an
    # access time per object).
    if vt is STRING and vt.encoding(value) == "int" and 0 <= int(value) < SHARED_INTEGERS \
            and "lru" not in str(ctx.engine.config.get("maxmemory-policy", "")) \
            and not _lfu_policy(ctx):
        return SHARED_REFCOUNT
    return 1


@subcommand(OBJECT, "idletime", 3, "readonly", since="2.2.3",
            acl="keyspace", keys="RO @2 r0,1,0",
            summary="Returns the time since the last access "
            "to a Redis object.",
            syntax="key")
def object_idletime(ctx: Ctx, argv: Argv) -> int | None:
    """Seconds since the key was last touched, from its LRU clock (engine.exec.eviction keeps
    the clocks under an LRU or LFU policy; under any other, the time since the policy was
    set)."""
    found = _object_lookup(ctx, argv[2])
    if found is None:
        return None
    if _lfu_policy(ctx):
        raise ReplyError(LFU_SELECTED)
    return ctx.engine.eviction.idle_ms(ctx.session.db, argv[2], ctx.now) // 1000


@subcommand(OBJECT, "freq", 3, "readonly", since="4.0.0",
            acl="keyspace", keys="RO @2 r0,1,0",
            summary="Returns the logarithmic access frequency "
            "counter of a Redis object.",
            syntax="key")
def object_freq(ctx: Ctx, argv: Argv) -> int | None:
    found = _object_lookup(ctx, argv[2])
    if found is None:
        return None
    if not _lfu_policy(ctx):
        raise ReplyError(LFU_NOT_SELECTED)
    return ctx.engine.eviction.frequency(ctx.session.db, argv[2])


help_subcommand(OBJECT, [
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
], since="2.2.3", acl="keyspace")


# --- MEMORY USAGE ----------------------------------------------------------------------------------

MEMORY = container("memory", "A container for memory diagnostics commands.", group="server",
                   since="4.0.0")


@subcommand(MEMORY, "usage", -3, "readonly", since="4.0.0",
            keys="RO @2 r0,1,0",
            summary="Estimates the memory usage of a key.", syntax="key [SAMPLES count:integer]")
def memory_usage(ctx: Ctx, argv: Argv) -> int | None:
    """The value's estimate (its type's), plus the key's name and its keyspace entry. SAMPLES
    is checked and ignored: the estimates count every element, they sample nothing."""
    i = 3
    while i < len(argv):
        if is_word(argv[i], b"samples") and i + 1 < len(argv):
            if parse_int(argv[i + 1]) < 0:
                raise ReplyError(SYNTAX)
            i += 2
        else:
            raise ReplyError(SYNTAX)
    found = lookup(ctx, argv[2])
    if found is None:
        return None
    vt, value = found
    key = argv[2]
    return vt.memory_usage(value) + ((len(key) + 3 + 7) & ~7) + DICT_ENTRY_BYTES


help_subcommand(MEMORY, [
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
], since="4.0.0")


# --- COPY ------------------------------------------------------------------------------------------


def _copy_options(ctx: Ctx, argv: Argv) -> tuple[int, bool]:
    """copyCommand's options: the destination database (default: the selected one) and
    REPLACE."""
    db, replace = ctx.session.db, False
    i = 3
    while i < len(argv):
        if is_word(argv[i], b"replace"):
            replace = True
        elif is_word(argv[i], b"db") and i + 1 < len(argv):
            db = parse_db_index(argv[i + 1])
            if not 0 <= db < len(ctx.engine.dbs):
                raise ReplyError("ERR DB index is out of range")
            i += 1
        else:
            raise ReplyError(SYNTAX)
        i += 1
    return db, replace


def duplicate(ctx: Ctx, vt: ValueType, value: Any) -> Any:
    """A value equal to `value` sharing nothing with it: its type's copy, or a round trip
    through its DUMP payload for a type without one (a stream: its nodes, groups and PEL)."""
    if vt.copy is not None:
        return vt.copy(value)
    from streamkeep.snapshot.rdb import dump_payload, load_payload

    assert vt is STREAM  # (the only type copied through its payload)
    version = int(ctx.engine.config["dump-rdb-version"])
    return load_payload(dump_payload(value, version), new_stream(ctx.engine.residency))


@command("copy", -3, "write denyoom", group="generic", since="6.2.0",
         acl="keyspace", keys="RO ACCESS ; OW UPDATE @2 r0,1,0", logs=("COPY",),
         effect="COPY source destination [DB destination-db] [REPLACE]",
         summary="Copies the value of a key to a new key.",
         syntax="source:key destination:key [DB destination-db:integer] [REPLACE]")
def copy(ctx: Ctx, argv: Argv) -> int:
    src, dst = argv[1], argv[2]
    dst_db, replace = _copy_options(ctx, argv)
    here = ctx.session.db
    if ctx.engine.cluster is not None and (here != 0 or dst_db != 0):
        raise ReplyError("ERR Copying to another database is not allowed in cluster mode")
    if dst_db == here and src == dst:
        raise ReplyError("ERR source and destination objects are the same")
    found = lookup(ctx, src)
    if found is None:
        read_miss(ctx, src)
        return 0
    read_hit(ctx)
    vt, value = found
    engine = ctx.engine
    expires = engine.expires[dst_db]
    existed = _type_in(ctx, dst_db, dst)
    if existed is not None and not replace:
        return 0
    when = ctx.expires.get(src)
    copied = duplicate(ctx, vt, value)
    if existed is not None:
        for space in engine.keyspaces:
            space[dst_db].pop(dst, None)
        expires.pop(dst, None)
    engine.keyspaces[vt.slot][dst_db][dst] = copied
    placed(engine, dst_db, dst, vt, copied)
    if when is not None:
        expires[dst] = when
    ctx.signal(dst, dst_db)
    if dst_db != here:  # (a record's effects touch WATCHed keys of its own database)
        engine.watches.touch(dst_db, dst)
    ctx.emit(list(argv))
    if engine.notify_flags:
        _copy_events(ctx, vt, dst_db, dst, existed)
    return 1


def _type_in(ctx: Ctx, db: int, key: bytes) -> str | None:
    """TYPE's word for `key` of database `db`, or None."""
    if db == ctx.session.db:
        return key_type(ctx, key)
    for vt, space in zip(TYPES, ctx.engine.keyspaces, strict=True):
        if key in space[db]:
            return vt.name
    return None


def _copy_events(ctx: Ctx, vt: ValueType, db: int, dst: bytes, existed: str | None) -> None:
    """As RENAME's destination (the key is deleted and added again): `new`, then for a key
    that existed `overwritten` (and `type_changed`), then `copy_to`, in the destination's
    database."""
    engine = ctx.engine
    keyspace_event(engine, NEW, b"new", dst, db)
    if existed is not None:
        keyspace_event(engine, OVERWRITTEN, b"overwritten", dst, db)
        if existed != vt.name:
            keyspace_event(engine, TYPE_CHANGED, b"type_changed", dst, db)
    keyspace_event(engine, GENERIC, b"copy_to", dst, db)
