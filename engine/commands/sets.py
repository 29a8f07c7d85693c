"""Set commands: SADD, SREM, SMEMBERS, SISMEMBER, SMISMEMBER, SCARD, SPOP, SRANDMEMBER, SMOVE,
SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE and SSCAN.

Owns these commands' parsing (Redis's t_set.c, option for option and error line for error
line), replies (a set reply, RESP3 `~`, where Redis sends one), effects and keyspace events.
Values are `RSet`s (engine.model.sets) in the selected database's SET keyspace; their encodings
and conversions are the model's, under the engine's one `SetLimits` (`engine.limits[SET.slot]`,
kept in step with the set-max-* settings).

Effects: SADD logs itself with every member it was given (the member count decides a
conversion before anything is added, so replay needs them all); SREM logs the members it
removed; SMOVE and the *STORE commands log themselves (deterministic over the same state); SPOP
logs `SREM key member ...` of what it popped (in batches of at most 1024 members, as Redis
propagates), `DEL key` when it popped everything, and, when popping left the set in a new
encoding that SREM would not give (a hashtable's few survivors moved into a listpack), the
`RESTORE` of the value left (and its TTL as PEXPIREAT). Nothing changed: nothing logged. An
emptied set is deleted (`del` after the command's own event); a created key notifies `new`.

Must not touch: other types' values (a key of another type is WRONGTYPE; a *STORE destination
of another type is replaced whole), the set's internals (through RSet's API only).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from typing import Final

from streamkeep.engine.commands.keyspace import parse_element_scan, replacing_events, stringmatchlen
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.key_specs import numkeys
from streamkeep.engine.exec.keys import (
    delete_key,
    drop_other_types,
    read_value,
    removed_from,
    value_at,
)
from streamkeep.engine.exec.notify import GENERIC, NEW
from streamkeep.engine.exec.notify import SET as SET_EVENTS
from streamkeep.engine.exec.reply_budget import random_picks
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    as_sent_effect,
    del_effect,
    pexpireat_effect,
    restore_effect,
    sadd_effect,
    srem_effect,
)
from streamkeep.engine.model.ids import parse_u64
from streamkeep.engine.model.sets import RSet, SetLimits
from streamkeep.engine.model.value_types import SET
from streamkeep.engine.wire.args import LLONG_MAX, is_word, parse_int_range, parse_positive
from streamkeep.engine.wire.errors import SYNTAX, ReplyError
from streamkeep.engine.wire.reply import RespSet

SPOP_BATCH = 1024  # members per SREM effect of one SPOP, as Redis propagates them
_LISTPACK_SET_RDB = 11  # the first RDB version that writes a listpack set as one
_RNG = random.Random()  # SPOP's and SRANDMEMBER's picks (SPOP logs what it picked)

# Its keyspace and limits slot: a static read (`SET.slot` is an attribute lookup at each call).
_SLOT: Final = SET.slot


# --- shared helpers ------------------------------------------------------------------------------


def limits_of(ctx: Ctx) -> SetLimits:
    """The engine's one SetLimits (every set it makes holds it), made with the engine from the
    set-max-* settings; CONFIG SET updates it in place (engine.exec.settings)."""
    limits: SetLimits = ctx.engine.limits[_SLOT]
    return limits


def set_for_read(ctx: Ctx, key: bytes) -> RSet | None:
    """lookupKeyRead + checkType(OBJ_SET)."""
    value: RSet | None = read_value(ctx, key, SET)
    return value


def set_for_write(ctx: Ctx, key: bytes) -> RSet | None:
    """lookupKeyWrite + checkType(OBJ_SET)."""
    value: RSet | None = value_at(ctx, key, SET)
    if value is not None and value.limits is not limits_of(ctx):
        value.limits = limits_of(ctx)  # loaded or restored: the engine's from now on
    return value


# --- SADD / SREM ---------------------------------------------------------------------------------


@command("sadd", -3, "write denyoom fast", group="set", since="1.0.0",
         acl="set", keys="RW INSERT", logs=("SADD",),
         effect="SADD key member [member ...]",
         summary="Adds one or more members to a set. Creates the key if it doesn't exist.",
         syntax="key member...")
def sadd(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    members = argv[2:]
    s = set_for_write(ctx, key)
    if s is None:
        s = RSet.for_new_key(members[0], len(members), limits_of(ctx))
        ctx.space(_SLOT)[key] = s
        ctx.notify(NEW, b"new", key)
        before = ""
    else:
        before = s.encoding
    added = s.add_many(members)
    if added or s.encoding != before:  # (a conversion alone is a change replay must repeat)
        ctx.emit(sadd_effect(key, members))
    if added:
        ctx.signal(key)
        ctx.notify(SET_EVENTS, b"sadd", key)
    return added


@command("srem", -3, "write fast", group="set", since="1.0.0",
         acl="set", keys="RW DELETE", logs=("SREM",),
         effect="SREM key member [member ...]",
         summary="Removes one or more members from a set. Deletes the set if the last member "
                 "was removed.",
         syntax="key member...")
def srem(ctx: Ctx, argv: Argv) -> int:
    key = argv[1]
    s = set_for_write(ctx, key)
    if s is None:
        return 0
    removed: list[bytes] = []
    for member in argv[2:]:
        if s.remove(member):
            removed.append(member)
            if not len(s):
                break
    if removed:
        ctx.emit(srem_effect(key, removed))
        removed_from(ctx, key, s, SET_EVENTS, b"srem")
    return len(removed)


# --- SMOVE ---------------------------------------------------------------------------------------


@command("smove", 4, "write fast", group="set", since="1.0.0",
         acl="set", keys="RW ACCESS DELETE ; RW INSERT @2 r0,1,0", logs=("SMOVE",),
         effect="SMOVE source destination member",
         summary="Moves a member from one set to another.",
         syntax="source:key destination:key member")
def smove(ctx: Ctx, argv: Argv) -> int:
    src_key, dst_key, member = argv[1], argv[2], argv[3]
    src = set_for_write(ctx, src_key)
    if src is None:  # (a missing source: 0 whatever the destination holds)
        return 0
    dst = set_for_write(ctx, dst_key)
    if src is dst:
        return 1 if member in src else 0
    if not src.remove(member):
        return 0
    ctx.emit(as_sent_effect(argv))
    removed_from(ctx, src_key, src, SET_EVENTS, b"srem")
    if dst is None:
        dst = RSet.for_new_key(member, 1, limits_of(ctx))
        ctx.space(_SLOT)[dst_key] = dst
        ctx.notify(NEW, b"new", dst_key)
    ctx.signal(src_key)
    if dst.add(member):
        ctx.signal(dst_key)
        ctx.notify(SET_EVENTS, b"sadd", dst_key)
    return 1


# --- reads ---------------------------------------------------------------------------------------


@command("smembers", 2, "readonly", group="set", since="1.0.0",
         acl="set", keys="RO ACCESS",
         summary="Returns all members of a set.", syntax="key")
def smembers(ctx: Ctx, argv: Argv) -> RespSet:
    s = set_for_read(ctx, argv[1])
    return RespSet([] if s is None else s.members())


@command("sismember", 3, "readonly fast", group="set", since="1.0.0",
         acl="set", keys="RO",
         summary="Determines whether a member belongs to a set.", syntax="key member")
def sismember(ctx: Ctx, argv: Argv) -> int:
    s = set_for_read(ctx, argv[1])
    return 1 if s is not None and argv[2] in s else 0


@command("smismember", -3, "readonly fast", group="set", since="6.2.0",
         acl="set", keys="RO ACCESS",
         summary="Determines whether multiple members belong to a set.", syntax="key member...")
def smismember(ctx: Ctx, argv: Argv) -> list[int]:
    s = set_for_read(ctx, argv[1])
    if s is None:
        return [0] * (len(argv) - 2)
    return [1 if member in s else 0 for member in argv[2:]]


@command("scard", 2, "readonly fast", group="set", since="1.0.0",
         acl="set", keys="RO",
         summary="Returns the number of members in a set.", syntax="key")
def scard(ctx: Ctx, argv: Argv) -> int:
    s = set_for_read(ctx, argv[1])
    return 0 if s is None else len(s)


# --- SPOP ----------------------------------------------------------------------------------------


def _srem_batches(key: bytes, members: list[bytes]) -> Iterator[list[bytes]]:
    for at in range(0, len(members), SPOP_BATCH):
        yield [b"SREM", key, *members[at:at + SPOP_BATCH]]


def _spop_count(ctx: Ctx, key: bytes, count: int) -> RespSet:
    """spopWithCountCommand."""
    s = set_for_write(ctx, key)
    if s is None or count == 0:
        return RespSet([])
    size = len(s)
    ctx.notify(SET_EVENTS, b"spop", key)
    if count >= size:
        popped = s.pop_random(size, _RNG)
        delete_key(ctx, key)
        ctx.notify(GENERIC, b"del", key)
        ctx.emit(del_effect([key]))
        return RespSet(popped)
    before = s.encoding
    popped = s.pop_random(count, _RNG)
    if s.encoding == before:
        for effect in _srem_batches(key, popped):
            ctx.emit(effect)
    else:  # a new value in an encoding SREM does not give: log the value left
        _log_whole(ctx, key, s)
    ctx.signal(key)
    return RespSet(popped)


def _log_whole(ctx: Ctx, key: bytes, s: RSet) -> None:
    """`RESTORE key 0 payload REPLACE` of the set as it is (written in an RDB version that
    keeps a listpack set one), then its TTL, which RESTORE REPLACE drops."""
    from streamkeep.snapshot.rdb_types import dump_value_payload

    version = max(int(ctx.config.get("dump-rdb-version", 15)), _LISTPACK_SET_RDB)
    ctx.emit(restore_effect(key, dump_value_payload(s, version)))
    when = ctx.expires.get(key)
    if when is not None:
        ctx.emit(pexpireat_effect(key, when))


@command("spop", -2, "write fast", group="set", since="1.0.0",
         acl="set", keys="RW ACCESS DELETE", logs=("DEL", "PEXPIREAT", "RESTORE", "SREM"),
         summary="Returns one or more random members from a set after removing them. Deletes "
                 "the set if the last member was popped.",
         syntax="key [count:integer]")
def spop(ctx: Ctx, argv: Argv) -> object:
    if len(argv) == 3:
        return _spop_count(ctx, argv[1], parse_positive(argv[2]))
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    key = argv[1]
    s = set_for_write(ctx, key)
    if s is None:
        return None
    member = s.pop_random(1, _RNG)[0]
    ctx.emit(srem_effect(key, (member,)))
    removed_from(ctx, key, s, SET_EVENTS, b"spop")
    return member


# --- SRANDMEMBER ---------------------------------------------------------------------------------


@command("srandmember", -2, "readonly", group="set", since="1.0.0",
         acl="set", keys="RO ACCESS",
         summary="Get one or multiple random members from a set", syntax="key [count:integer]")
def srandmember(ctx: Ctx, argv: Argv) -> object:
    if len(argv) == 3:
        count = parse_int_range(argv[2], -LLONG_MAX, LLONG_MAX)
        s = set_for_read(ctx, argv[1])
        if s is None or count == 0:
            return []
        pick = s.random_members
        return random_picks(ctx, count, lambda k: pick(k, _RNG), pool=s.members, size=len(s),
                            rng=_RNG)
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    s = set_for_read(ctx, argv[1])
    if s is None:
        return None
    return s.random_member(_RNG)


# --- SINTER / SINTERCARD / SINTERSTORE -----------------------------------------------------------


def _sources(ctx: Ctx, keys: Iterable[bytes]) -> list[RSet | None]:
    """Every key's set (None for a missing key), WRONGTYPE for any of another type, each looked
    up as a read (Redis's set algebra reads its sources with lookupKeyRead)."""
    return [set_for_read(ctx, key) for key in keys]


def _intersection(sets: list[RSet], limit: int = 0) -> Iterator[bytes]:
    """The members of the smallest set that every other set holds, walked in its order (the
    others only tested: nothing is allocated but the result the caller keeps)."""
    first = sets[0]
    others = [s for s in sets[1:] if s is not first]
    found = 0
    for member in first:
        if all(member in s for s in others):
            yield member
            found += 1
            if limit and found >= limit:
                return


def _by_size(sets: list[RSet]) -> list[RSet]:
    return sorted(sets, key=len)


@command("sinter", -2, "readonly", group="set", since="1.0.0",
         acl="set", keys="RO ACCESS @1 r-1,1,0",
         summary="Returns the intersect of multiple sets.", syntax="key...")
def sinter(ctx: Ctx, argv: Argv) -> RespSet:
    sets = _sources(ctx, argv[1:])
    present = [s for s in sets if s is not None]
    if len(present) < len(sets):
        return RespSet([])
    return RespSet(list(_intersection(_by_size(present))))


@command("sintercard", -3, "readonly", group="set", since="7.0.0",
         acl="set", keys="RO ACCESS @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         summary="Returns the number of members of the intersect of multiple sets.",
         syntax="numkeys:integer key... [LIMIT limit:integer]")
def sintercard(ctx: Ctx, argv: Argv) -> int:
    numkeys = parse_int_range(argv[1], 1, LLONG_MAX, "numkeys should be greater than 0")
    if numkeys > len(argv) - 2:
        raise ReplyError("ERR Number of keys can't be greater than number of args")
    limit = 0
    at = 2 + numkeys
    while at < len(argv):
        if is_word(argv[at], b"limit") and at + 1 < len(argv):
            limit = parse_int_range(argv[at + 1], 0, LLONG_MAX, "LIMIT can't be negative")
            at += 2
        else:
            raise ReplyError(SYNTAX)
    sets = _sources(ctx, argv[2:2 + numkeys])
    present = [s for s in sets if s is not None]
    if len(present) < len(sets):
        return 0
    return sum(1 for _ in _intersection(_by_size(present), limit))


def _store(ctx: Ctx, argv: Argv, result: RSet | None, event: bytes) -> int:
    """A *STORE command's end: a non-empty result replaces whatever the destination held (its
    TTL goes), notifying new/overwritten/type_changed then `event`; an empty one deletes the
    destination (`del` if it existed). Logged as given when it changed something."""
    dst = argv[1]
    if result is not None and len(result):
        if ctx.engine.notify_flags:
            replacing_events(ctx, SET.name, dst)
        drop_other_types(ctx.engine, ctx.session.db, dst, _SLOT)
        ctx.space(_SLOT)[dst] = result
        ctx.expires.pop(dst, None)
        ctx.emit(as_sent_effect(argv))
        ctx.signal(dst)
        ctx.notify(SET_EVENTS, event, dst)
        return len(result)
    if delete_key(ctx, dst):
        ctx.emit(as_sent_effect(argv))
        ctx.notify(GENERIC, b"del", dst)
    return 0


@command("sinterstore", -3, "write denyoom", group="set", since="1.0.0",
         acl="set", keys="OW UPDATE ; RO ACCESS @2 r-1,1,0", logs=("SINTERSTORE",),
         effect="SINTERSTORE destination key [key ...]",
         summary="Stores the intersect of multiple sets in a key.",
         syntax="destination:key key...")
def sinterstore(ctx: Ctx, argv: Argv) -> int:
    sets = _sources(ctx, argv[2:])
    present = [s for s in sets if s is not None]
    result = None
    if len(present) == len(sets):
        ordered = _by_size(present)
        result = RSet.intersection_result(_intersection(ordered), ordered[0].encoding,
                                          limits_of(ctx))
    return _store(ctx, argv, result, b"sinterstore")


# --- SUNION / SDIFF and their STORE --------------------------------------------------------------


def _union_members(sets: list[RSet]) -> list[bytes]:
    """SUNION's reply: ascending integers when every set is an intset (Redis's result is one
    then), else each member once, in the order first met."""
    if all(s.encoding == "intset" for s in sets):
        values: set[int] = set()
        for s in sets:
            values.update(int(m) for m in s)
        return [b"%d" % v for v in sorted(values)]
    return list(dict.fromkeys(m for s in sets for m in s))


def _diff_members(first: RSet, others: list[RSet | None]) -> Iterator[bytes]:
    """The members of `first` no other set holds, in its order."""
    rest = [s for s in others if s is not None]
    for member in first:
        if not any(member in s for s in rest):
            yield member


def _diff_store(first: RSet, others: list[RSet | None], limits: SetLimits) -> RSet:
    """SDIFFSTORE's value, built as Redis builds it (the encoding depends on the way): the
    first set's members the others lack, added in turn, when that is the cheaper work; else
    the first set copied member by member, then the others' members removed."""
    work_one = len(first) * (1 + sum(s is not None for s in others)) // 2
    work_two = len(first) + sum(len(s) for s in others if s is not None)
    if work_one <= work_two:
        return RSet.from_members(_diff_members(first, others), limits)
    result = RSet.from_members(first, limits)
    for s in others:
        if s is None:
            continue
        for member in s:
            result.remove(member)
        if not len(result):
            break
    return result


def _same_key(keys: Argv) -> bool:
    """A later key names the first set (SDIFF of a set with itself is empty)."""
    return keys[0] in keys[1:]


@command("sunion", -2, "readonly", group="set", since="1.0.0",
         acl="set", keys="RO ACCESS @1 r-1,1,0",
         summary="Returns the union of multiple sets.", syntax="key...")
def sunion(ctx: Ctx, argv: Argv) -> RespSet:
    sets = [s for s in _sources(ctx, argv[1:]) if s is not None]
    return RespSet(_union_members(sets))


@command("sunionstore", -3, "write denyoom", group="set", since="1.0.0",
         acl="set", keys="OW UPDATE ; RO ACCESS @2 r-1,1,0", logs=("SUNIONSTORE",),
         effect="SUNIONSTORE destination key [key ...]",
         summary="Stores the union of multiple sets in a key.", syntax="destination:key key...")
def sunionstore(ctx: Ctx, argv: Argv) -> int:
    sets = [s for s in _sources(ctx, argv[2:]) if s is not None]
    result = RSet.from_members((m for s in sets for m in s), limits_of(ctx))
    return _store(ctx, argv, result, b"sunionstore")


@command("sdiff", -2, "readonly", group="set", since="1.0.0",
         acl="set", keys="RO ACCESS @1 r-1,1,0",
         summary="Returns the difference of multiple sets.", syntax="key...")
def sdiff(ctx: Ctx, argv: Argv) -> RespSet:
    sets = _sources(ctx, argv[1:])
    first = sets[0]
    if first is None or _same_key(argv[1:]):
        return RespSet([])
    return RespSet(list(_diff_members(first, sets[1:])))


@command("sdiffstore", -3, "write denyoom", group="set", since="1.0.0",
         acl="set", keys="OW UPDATE ; RO ACCESS @2 r-1,1,0", logs=("SDIFFSTORE",),
         effect="SDIFFSTORE destination key [key ...]",
         summary="Stores the difference of multiple sets in a key.",
         syntax="destination:key key...")
def sdiffstore(ctx: Ctx, argv: Argv) -> int:
    sets = _sources(ctx, argv[2:])
    first = sets[0]
    result = None
    if first is not None and not _same_key(argv[2:]):
        result = _diff_store(first, sets[1:], limits_of(ctx))
    return _store(ctx, argv, result, b"sdiffstore")


# --- SSCAN ---------------------------------------------------------------------------------------


@command("sscan", -3, "readonly", group="set", since="2.8.0",
         acl="set", keys="RO ACCESS",
         summary="Iterates over members of a set.",
         syntax="key cursor:integer [MATCH pattern:pattern] [COUNT count:integer]")
def sscan(ctx: Ctx, argv: Argv) -> list:
    cursor = parse_u64(argv[2])
    if cursor is None:
        raise ReplyError("ERR invalid cursor")
    s = set_for_read(ctx, argv[1])
    if s is None:
        return [b"0", []]
    count, pattern, _ = parse_element_scan(argv, novalues_allowed=False)
    cursor, members = s.scan(cursor, count)
    if pattern is not None:
        members = [m for m in members if stringmatchlen(pattern, m)]
    return [b"%d" % cursor, members]


__all__ = ["SPOP_BATCH", "limits_of", "set_for_read", "set_for_write"]
