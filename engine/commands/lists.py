"""List commands: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX, LSET, LINSERT,
LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP and the blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH and
BLMPOP.

Owns these commands' parsing (Redis's t_list.c, option for option and error line for error
line, in its order: what is parsed before the key is looked up and what after), replies,
effects and keyspace events. Values are lists (engine.model.lists: a bare `bytearray` listpack
or a `QuickList`) in the selected database's LIST keyspace, under the engine's one `ListLimits`
(`engine.limits[LIST.slot]`, kept in step with list-max-listpack-size). A model call that converts
the encoding returns the new value, which is stored back under the key.

Effects, as Redis propagates these commands: the pushes log LPUSH / RPUSH (LPUSHX and RPUSHX
when the key was there), LSET, LINSERT, LREM and LTRIM themselves when they changed something; LPOP and RPOP log `LPOP key` (or `LPOP key n` with the
count popped); LMPOP and a served BLMPOP log `LPOP key n` / `RPOP key n`; a served BLPOP or
BRPOP logs `LPOP key` / `RPOP key`; LMOVE and a served BLMOVE log `LMOVE src dst from to`,
RPOPLPUSH and a served BRPOPLPUSH `RPOPLPUSH src dst`. So replay and replicas see exactly the
pop the client received, and a move moves the same element there.

Blocking: with nothing to serve, a blocking pop returns a `Block` on its keys, ready when one of
them holds a list (Redis serves a BLOCKED_LIST client only for a list key); the engine re-runs
it, first blocked first served, after the write that made a key ready, through the one command
path (engine.runtime.waiting). In MULTI and scripts it never blocks: the empty reply at once.

Must not touch: other types' values (a key of another type is WRONGTYPE), the list's internals
(through engine.model.lists only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from streamkeep.engine.exec.blocking import parse_timeout_s
from streamkeep.engine.exec.context import Ctx, block_on
from streamkeep.engine.exec.key_specs import numkeys
from streamkeep.engine.exec.keys import delete_key, read_value, value_at
from streamkeep.engine.exec.notify import GENERIC, NEW
from streamkeep.engine.exec.notify import LIST as LIST_EVENTS
from streamkeep.engine.exec.reply_budget import cut_reply
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model import lists
from streamkeep.engine.model.effects import as_sent_effect, linsert_effect, pop_effect, push_effect
from streamkeep.engine.model.lists import ListLimits, ListValue
from streamkeep.engine.model.value_types import LIST
from streamkeep.engine.wire.args import (
    LLONG_MAX,
    is_word,
    parse_int,
    parse_int_range,
    parse_positive,
)
from streamkeep.engine.wire.errors import NO_SUCH_KEY, SYNTAX, ReplyError, wrong_arity
from streamkeep.engine.wire.reply import NULL_ARRAY

OUT_OF_RANGE = "ERR index out of range"
RANK_ZERO = ("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second "
             "... or use negative to start from the end of the list")

# --- shared helpers ------------------------------------------------------------------------------

# Its keyspace and limits slot: a static read (`LIST.slot` is an attribute lookup at each call).
_SLOT: Final = LIST.slot


def limits_of(ctx: Ctx) -> ListLimits:
    """The engine's one ListLimits (CONFIG SET updates it in place: engine.exec.settings)."""
    limits: ListLimits = ctx.engine.limits[_SLOT]
    return limits


def list_for_read(ctx: Ctx, key: bytes) -> ListValue | None:
    """lookupKeyRead + checkType(OBJ_LIST)."""
    value: ListValue | None = read_value(ctx, key, LIST)
    return value


def list_for_write(ctx: Ctx, key: bytes) -> ListValue | None:
    """lookupKeyWrite + checkType(OBJ_LIST)."""
    value: ListValue | None = value_at(ctx, key, LIST)
    return value


def _store(ctx: Ctx, key: bytes, old: ListValue, new: ListValue) -> ListValue:
    """A converted value stored under its key."""
    if new is not old:
        ctx.space(_SLOT)[key] = new
    return new


def _created(ctx: Ctx, key: bytes) -> ListValue:
    """A new empty list under `key` (createListListpackObject + dbAdd)."""
    value = lists.new_list()
    ctx.space(_SLOT)[key] = value
    ctx.notify(NEW, b"new", key)
    return value


def _removed(ctx: Ctx, key: bytes, value: ListValue, event: bytes) -> None:
    """listElementsRemoved (and LREM's and LTRIM's tail): the event, then the key deleted when
    emptied (`del` after the event) or shrunk to a listpack when small enough, then the key
    signalled."""
    ctx.notify(LIST_EVENTS, event, key)
    if not lists.length(value):
        delete_key(ctx, key)
        ctx.notify(GENERIC, b"del", key)
        return
    _store(ctx, key, value, lists.shrink(value, limits_of(ctx)))
    ctx.signal(key)


def _bound(index: int, total: int) -> int:
    return index + total if index < 0 else index


def _inclusive_range(start: int, end: int, total: int) -> tuple[int, int] | None:
    """addListRangeReply's bounds: [start, stop) in range, None when empty."""
    start, end = _bound(start, total), _bound(end, total)
    start = max(start, 0)
    if start > end or start >= total:
        return None
    return start, min(end, total - 1) + 1


def _side(arg: bytes) -> bool:
    """getListPositionFromObjectOrReply: True for RIGHT (the tail), False for LEFT."""
    if is_word(arg, b"right"):
        return True
    if is_word(arg, b"left"):
        return False
    raise ReplyError(SYNTAX)


# --- pushes --------------------------------------------------------------------------------------


def _push(ctx: Ctx, argv: Argv, tail: bool, only_existing: bool) -> int:
    """pushGenericCommand."""
    key = argv[1]
    items = argv[2:]
    value = list_for_write(ctx, key)
    if value is None:
        if only_existing:
            return 0
        value = _created(ctx, key)
    value = _store(ctx, key, value, lists.push(value, items, tail, limits_of(ctx)))
    ctx.emit(push_effect(key, items, tail))
    ctx.signal(key)
    ctx.notify(LIST_EVENTS, b"rpush" if tail else b"lpush", key)
    return lists.length(value)


@command("lpush", -3, "write denyoom fast", group="list", since="1.0.0",
         acl="list", keys="RW INSERT", logs=("LPUSH",),
         effect="LPUSH key element [element ...]",
         summary="Prepends one or more elements to a list. Creates the key if it doesn't "
                 "exist.",
         syntax="key element...")
def lpush(ctx: Ctx, argv: Argv) -> int:
    return _push(ctx, argv, tail=False, only_existing=False)


@command("rpush", -3, "write denyoom fast", group="list", since="1.0.0",
         acl="list", keys="RW INSERT", logs=("RPUSH",),
         effect="RPUSH key element [element ...]",
         summary="Appends one or more elements to a list. Creates the key if it doesn't exist.",
         syntax="key element...")
def rpush(ctx: Ctx, argv: Argv) -> int:
    return _push(ctx, argv, tail=True, only_existing=False)


@command("lpushx", -3, "write denyoom fast", group="list", since="2.2.0",
         acl="list", keys="RW INSERT", logs=("LPUSH",),
         summary="Prepends one or more elements to a list only when the list exists.",
         syntax="key element...")
def lpushx(ctx: Ctx, argv: Argv) -> int:
    return _push(ctx, argv, tail=False, only_existing=True)


@command("rpushx", -3, "write denyoom fast", group="list", since="2.2.0",
         acl="list", keys="RW INSERT", logs=("RPUSH",),
         summary="Appends an element to a list only when the list exists.",
         syntax="key element...")
def rpushx(ctx: Ctx, argv: Argv) -> int:
    return _push(ctx, argv, tail=True, only_existing=True)


# --- pops ----------------------------------------------------------------------------------------


def _pop_range(ctx: Ctx, key: bytes, value: ListValue, count: int, tail: bool) -> list[bytes]:
    """Pop up to `count` elements from one end (their reply order), with the event, deletion
    or shrinking and the signal (the caller logs the effect)."""
    items = lists.pop_many(value, count, tail)
    _removed(ctx, key, value, b"rpop" if tail else b"lpop")
    return items


def _pop(ctx: Ctx, argv: Argv, tail: bool) -> object:
    """popGenericCommand."""
    if len(argv) > 3:
        raise wrong_arity("rpop" if tail else "lpop")
    has_count = len(argv) == 3
    count = parse_positive(argv[2]) if has_count else 0
    key = argv[1]
    value = list_for_write(ctx, key)
    if value is None:
        return NULL_ARRAY if has_count else None
    if has_count and not count:
        return []
    if not has_count:
        item = lists.pop(value, tail)
        ctx.emit(pop_effect(key, tail))
        _removed(ctx, key, value, b"rpop" if tail else b"lpop")
        return item
    items = _pop_range(ctx, key, value, count, tail)
    ctx.emit(pop_effect(key, tail, len(items)))
    return items


@command("lpop", -2, "write fast", group="list", since="1.0.0",
         acl="list", keys="RW ACCESS DELETE", logs=("LPOP",),
         effect="LPOP key [count]",
         summary="Returns the first elements in a list after removing it. Deletes the list if "
                 "the last element was popped.",
         syntax="key [count:integer]")
def lpop(ctx: Ctx, argv: Argv) -> object:
    return _pop(ctx, argv, tail=False)


@command("rpop", -2, "write fast", group="list", since="1.0.0",
         acl="list", keys="RW ACCESS DELETE", logs=("RPOP",),
         effect="RPOP key [count]",
         summary="Returns and removes the last elements of a list. Deletes the list if the last "
                 "element was popped.",
         syntax="key [count:integer]")
def rpop(ctx: Ctx, argv: Argv) -> object:
    return _pop(ctx, argv, tail=True)


def _mpop_args(argv: Argv, numkeys_at: int) -> tuple[Sequence[bytes], bool, int]:
    """lmpopGenericCommand's parsing: (keys, tail, count)."""
    numkeys = parse_int_range(argv[numkeys_at], 1, LLONG_MAX, "numkeys should be greater than 0")
    where_at = numkeys_at + numkeys + 1
    if where_at >= len(argv):
        raise ReplyError(SYNTAX)
    tail = _side(argv[where_at])
    count = -1
    at = where_at + 1
    while at < len(argv):
        if count == -1 and is_word(argv[at], b"count") and at + 1 < len(argv):
            count = parse_int_range(argv[at + 1], 1, LLONG_MAX, "count should be greater than 0")
            at += 2
        else:
            raise ReplyError(SYNTAX)
    return argv[numkeys_at + 1:where_at], tail, (1 if count == -1 else count)


def _mpop_serve(ctx: Ctx, keys: Sequence[bytes], tail: bool, count: int) -> object:
    """mpopGenericCommand: the first non-empty list's pops as [key, [elements]], None when
    every key is missing (WRONGTYPE on the first key of another type before it)."""
    for key in keys:
        value = list_for_write(ctx, key)
        if value is None or not lists.length(value):
            continue
        items = _pop_range(ctx, key, value, count, tail)
        ctx.emit(pop_effect(key, tail, len(items)))
        return [key, items]
    return None


@command("lmpop", -4, "write", group="list", since="7.0.0",
         acl="list", keys="RW ACCESS DELETE @1 n0,1,1", key_finder=numkeys(0, 1, 2),
         logs=("LPOP", "RPOP"),
         summary="Returns multiple elements from a list after removing them. Deletes the list if "
                 "the last element was popped.",
         syntax="numkeys:integer key... <where: LEFT | RIGHT> [COUNT count:integer]")
def lmpop(ctx: Ctx, argv: Argv) -> object:
    keys, tail, count = _mpop_args(argv, 1)
    served = _mpop_serve(ctx, keys, tail, count)
    return NULL_ARRAY if served is None else served


# --- reads ---------------------------------------------------------------------------------------


@command("llen", 2, "readonly fast", group="list", since="1.0.0",
         acl="list", keys="RO",
         summary="Returns the length of a list.", syntax="key")
def llen(ctx: Ctx, argv: Argv) -> int:
    value = list_for_read(ctx, argv[1])
    return 0 if value is None else lists.length(value)


@command("lrange", 4, "readonly", group="list", since="1.0.0",
         acl="list", keys="RO ACCESS",
         summary="Returns a range of elements from a list.",
         syntax="key start:integer stop:integer")
def lrange(ctx: Ctx, argv: Argv) -> object:
    start, end = parse_int(argv[2]), parse_int(argv[3])
    value = list_for_read(ctx, argv[1])
    if value is None:
        return []
    bounds = _inclusive_range(start, end, lists.length(value))
    if bounds is None:
        return []
    items = lists.range_of(value, bounds[0], bounds[1], ctx.elements_budget)
    if items is None:
        # Past the connection's output limit: Redis would close it once its buffer passed the
        # limit; so does encoding a reply cut there, without building the elements first.
        return cut_reply(bounds[1] - bounds[0])
    return items


@command("lindex", 3, "readonly", group="list", since="1.0.0",
         acl="list", keys="RO ACCESS",
         summary="Returns an element from a list by its index.", syntax="key index:integer")
def lindex(ctx: Ctx, argv: Argv) -> object:
    value = list_for_read(ctx, argv[1])
    if value is None:
        return None
    return lists.get(value, parse_int(argv[2]))


@command("lpos", -3, "readonly", group="list", since="6.0.6",
         acl="list", keys="RO ACCESS",
         summary="Returns the index of matching elements in a list.",
         syntax="key element [RANK rank:integer] [COUNT num-matches:integer] "
                "[MAXLEN len:integer]")
def lpos(ctx: Ctx, argv: Argv) -> object:
    rank, count, maxlen = 1, -1, 0
    at = 3
    while at < len(argv):
        more = at + 1 < len(argv)
        if is_word(argv[at], b"rank") and more:
            rank = parse_int_range(argv[at + 1], -LLONG_MAX, LLONG_MAX)
            if rank == 0:
                raise ReplyError(RANK_ZERO)
        elif is_word(argv[at], b"count") and more:
            count = parse_int_range(argv[at + 1], 0, LLONG_MAX, "COUNT can't be negative")
        elif is_word(argv[at], b"maxlen") and more:
            maxlen = parse_int_range(argv[at + 1], 0, LLONG_MAX, "MAXLEN can't be negative")
        else:
            raise ReplyError(SYNTAX)
        at += 2
    value = list_for_read(ctx, argv[1])
    if value is None:
        return [] if count != -1 else None
    found = lists.positions(value, argv[2], rank, 1 if count == -1 else count, maxlen)
    if count != -1:
        return found
    return found[0] if found else None


# --- changes in place ----------------------------------------------------------------------------


@command("lset", 4, "write denyoom", group="list", since="1.0.0",
         acl="list", keys="RW UPDATE", logs=("LSET",),
         effect="LSET key index element",
         summary="Sets the value of an element in a list by its index.",
         syntax="key index:integer element")
def lset(ctx: Ctx, argv: Argv) -> str:
    key, item = argv[1], argv[3]
    value = list_for_write(ctx, key)
    if value is None:
        raise ReplyError(NO_SUCH_KEY)
    index = parse_int(argv[2])
    limits = limits_of(ctx)
    value = _store(ctx, key, value, lists.grow(value, (item,), limits))
    total = lists.length(value)
    at = _bound(index, total)
    if not 0 <= at < total:
        raise ReplyError(OUT_OF_RANGE)
    lists.set_at(value, at, item, limits)
    _store(ctx, key, value, lists.shrink(value, limits))
    ctx.emit(as_sent_effect(argv))
    ctx.signal(key)
    ctx.notify(LIST_EVENTS, b"lset", key)
    return "OK"


@command("linsert", 5, "write denyoom", group="list", since="2.2.0",
         acl="list", keys="RW INSERT", logs=("LINSERT",),
         effect="LINSERT key <BEFORE | AFTER> pivot element",
         summary="Inserts an element before or after another element in a list.",
         syntax="key <where: BEFORE | AFTER> pivot element")
def linsert(ctx: Ctx, argv: Argv) -> int:
    if is_word(argv[2], b"after"):
        after = True
    elif is_word(argv[2], b"before"):
        after = False
    else:
        raise ReplyError(SYNTAX)
    key, pivot, item = argv[1], argv[3], argv[4]
    value = list_for_write(ctx, key)
    if value is None:
        return 0
    limits = limits_of(ctx)
    value = _store(ctx, key, value, lists.grow(value, (item,), limits))
    if lists.insert(value, pivot, item, after, limits) < 0:
        return -1
    ctx.emit(linsert_effect(key, after, pivot, item))
    ctx.signal(key)
    ctx.notify(LIST_EVENTS, b"linsert", key)
    return lists.length(value)


@command("lrem", 4, "write", group="list", since="1.0.0",
         acl="list", keys="RW DELETE", logs=("LREM",),
         effect="LREM key count element",
         summary="Removes elements from a list. Deletes the list if the last element was "
                 "removed.",
         syntax="key count:integer element")
def lrem(ctx: Ctx, argv: Argv) -> int:
    count = parse_int_range(argv[2], -LLONG_MAX, LLONG_MAX)
    key = argv[1]
    value = list_for_write(ctx, key)
    if value is None:
        return 0
    removed = lists.remove(value, argv[3], count)
    if removed:
        ctx.emit(as_sent_effect(argv))
        _removed(ctx, key, value, b"lrem")
    return removed


@command("ltrim", 4, "write", group="list", since="1.0.0",
         acl="list", keys="RW DELETE", logs=("LTRIM",),
         effect="LTRIM key start stop",
         summary="Removes elements from both ends a list. Deletes the list if all elements were "
                 "trimmed.",
         syntax="key start:integer stop:integer")
def ltrim(ctx: Ctx, argv: Argv) -> str:
    start, end = parse_int(argv[2]), parse_int(argv[3])
    key = argv[1]
    value = list_for_write(ctx, key)
    if value is None:
        return "OK"
    total = lists.length(value)
    bounds = _inclusive_range(start, end, total)
    ltrim_n, rtrim_n = (total, 0) if bounds is None else (bounds[0], total - bounds[1])
    lists.trim(value, ltrim_n, rtrim_n)
    if ltrim_n + rtrim_n:
        ctx.emit(as_sent_effect(argv))
    _removed(ctx, key, value, b"ltrim")
    return "OK"


# --- moves ---------------------------------------------------------------------------------------


def _move(ctx: Ctx, src_key: bytes, dst_key: bytes, from_tail: bool, to_tail: bool,
          effect: list[bytes]) -> object:
    """lmoveGenericCommand: the element moved, None for a missing source."""
    src = list_for_write(ctx, src_key)
    if src is None:
        return None
    if not lists.length(src):  # (only an old RDB's empty list: Redis deletes empty lists)
        return None
    dst = list_for_write(ctx, dst_key)
    item = lists.pop(src, from_tail)
    # lmoveHandlePush
    if dst is None:
        dst = _created(ctx, dst_key)
    _store(ctx, dst_key, dst, lists.push(dst, (item,), to_tail, limits_of(ctx)))
    ctx.signal(dst_key)
    ctx.notify(LIST_EVENTS, b"rpush" if to_tail else b"lpush", dst_key)
    # (the source read again: when it is the destination, the push may have converted it)
    src = ctx.space(_SLOT)[src_key]
    ctx.emit(effect)
    _removed(ctx, src_key, src, b"rpop" if from_tail else b"lpop")
    return item


@command("lmove", 5, "write denyoom", group="list", since="6.2.0",
         acl="list", keys="RW ACCESS DELETE ; RW INSERT @2 r0,1,0", logs=("LMOVE",),
         effect="LMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT>",
         summary="Returns an element after popping it from one list and pushing it to another. "
                 "Deletes the list if the last element was moved.",
         syntax="source:key destination:key <wherefrom: LEFT | RIGHT> "
                "<whereto: LEFT | RIGHT>")
def lmove(ctx: Ctx, argv: Argv) -> object:
    from_tail, to_tail = _side(argv[3]), _side(argv[4])
    return _move(ctx, argv[1], argv[2], from_tail, to_tail, [b"LMOVE", *argv[1:5]])


@command("rpoplpush", 3, "write denyoom", group="list", since="1.2.0",
         acl="list", keys="RW ACCESS DELETE ; RW INSERT @2 r0,1,0", logs=("RPOPLPUSH",),
         effect="RPOPLPUSH source destination",
         summary="Returns the last element of a list after removing and pushing it to another "
                 "list. Deletes the list if the last element was popped.",
         syntax="source:key destination:key")
def rpoplpush(ctx: Ctx, argv: Argv) -> object:
    return _move(ctx, argv[1], argv[2], True, False, [b"RPOPLPUSH", argv[1], argv[2]])


# --- blocking ------------------------------------------------------------------------------------


def _block(ctx: Ctx, argv: Argv, keys: Sequence[bytes], timeout: int, empty: object) -> object:
    """Nothing to serve: `empty` in MULTI and scripts, else wait for a list on the keys."""
    return block_on(ctx, argv, keys, timeout, _SLOT, empty)


def _bpop(ctx: Ctx, argv: Argv, tail: bool) -> object:
    """blockingPopGenericCommand for BLPOP / BRPOP: [key, element]."""
    timeout = parse_timeout_s(argv[-1], ctx.now)
    keys = argv[1:-1]
    for key in keys:
        value = list_for_write(ctx, key)
        if value is None or not lists.length(value):
            continue
        item = lists.pop(value, tail)
        ctx.emit(pop_effect(key, tail))
        _removed(ctx, key, value, b"rpop" if tail else b"lpop")
        return [key, item]
    return _block(ctx, argv, keys, timeout, NULL_ARRAY)


@command("blpop", -3, "write blocking", group="list", since="2.0.0",
         acl="list", keys="RW ACCESS DELETE @1 r-2,1,0", logs=("LPOP",),
         summary="Removes and returns the first element in a list. Blocks until an element is "
                 "available otherwise. Deletes the list if the last element was popped.",
         syntax="key... timeout:double")
def blpop(ctx: Ctx, argv: Argv) -> object:
    return _bpop(ctx, argv, tail=False)


@command("brpop", -3, "write blocking", group="list", since="2.0.0",
         acl="list", keys="RW ACCESS DELETE @1 r-2,1,0", logs=("RPOP",),
         summary="Removes and returns the last element in a list. Blocks until an element is "
                 "available otherwise. Deletes the list if the last element was popped.",
         syntax="key... timeout:double")
def brpop(ctx: Ctx, argv: Argv) -> object:
    return _bpop(ctx, argv, tail=True)


def _bmove(ctx: Ctx, argv: Argv, from_tail: bool, to_tail: bool, timeout: int,
           effect: list[bytes]) -> object:
    """blmoveGenericCommand."""
    src = list_for_write(ctx, argv[1])
    if src is None:
        return _block(ctx, argv, argv[1:2], timeout, None)
    return _move(ctx, argv[1], argv[2], from_tail, to_tail, effect)


@command("blmove", 6, "write denyoom blocking", group="list", since="6.2.0",
         acl="list", keys="RW ACCESS DELETE ; RW INSERT @2 r0,1,0", logs=("LMOVE",),
         summary="Pops an element from a list, pushes it to another list and returns it. Blocks "
                 "until an element is available otherwise. Deletes the list if the last element "
                 "was moved.",
         syntax="source:key destination:key <wherefrom: LEFT | RIGHT> "
                "<whereto: LEFT | RIGHT> timeout:double")
def blmove(ctx: Ctx, argv: Argv) -> object:
    from_tail, to_tail = _side(argv[3]), _side(argv[4])
    timeout = parse_timeout_s(argv[5], ctx.now)
    return _bmove(ctx, argv, from_tail, to_tail, timeout, [b"LMOVE", *argv[1:5]])


@command("brpoplpush", 4, "write denyoom blocking", group="list", since="2.2.0",
         acl="list", keys="RW ACCESS DELETE ; RW INSERT @2 r0,1,0", logs=("RPOPLPUSH",),
         summary="Pops an element from a list, pushes it to another list and returns it. Block "
                 "until an element is available otherwise. Deletes the list if the last element "
                 "was popped.",
         syntax="source:key destination:key timeout:double")
def brpoplpush(ctx: Ctx, argv: Argv) -> object:
    timeout = parse_timeout_s(argv[3], ctx.now)
    return _bmove(ctx, argv, True, False, timeout, [b"RPOPLPUSH", argv[1], argv[2]])


@command("blmpop", -5, "write blocking", group="list", since="7.0.0",
         acl="list", keys="RW ACCESS DELETE @2 n0,1,1", key_finder=numkeys(0, 2, 3),
         logs=("LPOP", "RPOP"),
         summary="Pops the first element from one of multiple lists. Blocks until an element is "
                 "available otherwise. Deletes the list if the last element was popped.",
         syntax="timeout:double numkeys:integer key... <where: LEFT | RIGHT> "
                "[COUNT count:integer]")
def blmpop(ctx: Ctx, argv: Argv) -> object:
    keys, tail, count = _mpop_args(argv, 2)  # before the timeout, as Redis parses them
    timeout = parse_timeout_s(argv[1], ctx.now)
    served = _mpop_serve(ctx, keys, tail, count)
    if served is not None:
        return served
    return _block(ctx, argv, keys, timeout, NULL_ARRAY)


__all__ = ["blmove", "blmpop", "blpop", "brpop", "brpoplpush", "lindex", "linsert", "llen",
           "lmove", "lmpop", "lpop", "lpos", "lpush", "lpushx", "lrange", "lrem", "lset",
           "ltrim", "rpop", "rpoplpush", "rpush", "rpushx"]
