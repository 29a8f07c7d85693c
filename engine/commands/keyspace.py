"""Keyspace and connection commands: SELECT, DEL, UNLINK, EXISTS, TOUCH, TYPE, KEYS, SCAN,
DBSIZE, RENAME, RENAMENX, FLUSHDB, FLUSHALL, PING, ECHO, TIME, DUMP and RESTORE (of a value of any type
whose RDB codec is registered: snapshot.rdb_types).

Owns these commands' argument handling, replies and effects, and Redis's glob matcher
(`stringmatchlen`, used by KEYS and SCAN MATCH). A key holds a value of any registered type and
may have a TTL (engine.exec.keys: the keyspace's layout; engine.commands.expiry: how keys
expire): these commands see every type, RENAME carries the TTL, KEYS and SCAN skip expired keys.
Writes emit effects that reproduce exactly what changed (nothing when nothing changed) and
signal every removed or created key, so that blocked XREADGROUP clients re-run and see NOGROUP.
Must not touch: stream or group internals (values are moved or dropped whole), other commands'
modules, the blocking machinery beyond signalling keys.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from itertools import groupby
from typing import NamedTuple

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.keys import (
    already_expired,
    delete_key,
    key_count,
    key_type,
    live_keys,
    lookup,
    placed,
    read_hit,
    read_miss,
)
from streamkeep.engine.exec.notify import GENERIC, NEW, OVERWRITTEN, TYPE_CHANGED
from streamkeep.engine.exec.pubsub import in_resp2_subscribed
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.model.effects import (
    del_effect,
    flushall_effect,
    flushdb_effect,
    pexpireat_effect,
    rename_effect,
    restore_effect,
    set_effect,
)
from streamkeep.engine.model.ids import parse_u64
from streamkeep.engine.model.stream import new_stream
from streamkeep.engine.model.value_types import ValueType
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import NO_SUCH_KEY, SYNTAX, ReplyError, wrong_arity

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
SCAN_DEFAULT_COUNT = 10
GLOB_MAX_NESTING = 1000
ALL_KEYS = (1, -1, 1)


# --- glob matching (Redis util.c stringmatchlen) ---------------------------------------------------
#
# Redis backtracks at each '*'; a key of k bytes against a pattern of p bytes costs it O(p*k) per
# '*' and Python 40x that. Here a pattern compiles once (bounded cache) into its '*'-separated
# segments, each a fixed-length run of byte classes (one class per '?', literal or '[...]').
# Redis gives up on the whole match once a '*' has tried every start (skipLongerMatches), so the
# first segment is anchored at the key's start, the last at its end, and each middle one takes its
# leftmost full fit: bytes.find or a regex of single-byte classes (no quantifier, so no
# backtracking blow-up), both in C.

_ANY_BYTE = frozenset(range(256))
GLOB_CACHE_SIZE = 256
GLOB_CACHE_MAX_PATTERN = 4096  # longer patterns are compiled per call, never kept


def _signed(byte: int) -> int:
    """A pattern byte as C's (signed) `char` compares it in ranges."""
    return byte - 256 if byte >= 128 else byte


def _lower(byte: int) -> int:
    return byte + 32 if 65 <= byte <= 90 else byte


@functools.lru_cache(maxsize=512)  # 256 bytes x nocase: one shared set per byte
def _literal_class(byte: int, nocase: bool) -> frozenset[int]:
    if nocase:
        return frozenset(c for c in (byte, _lower(byte), byte - 32) if 0 <= c < 256 and _lower(c) == _lower(byte))
    return frozenset((byte,))


def _range_class(low: int, high: int, nocase: bool) -> set[int]:
    start, end = _signed(low), _signed(high)
    if start > end:
        start, end = end, start
    if nocase:
        start, end = _lower(start), _lower(end)
        return {c for c in range(256) if start <= _lower(_signed(c)) <= end}
    return {c for c in range(256) if start <= _signed(c) <= end}


def _bracket_class(p: bytes, pi: int, nocase: bool) -> tuple[frozenset[int], int]:
    """The bytes matched by the class opening at p[pi] == '[' and the index of its last pattern
    byte, read as Redis reads it: `\\x` is x exactly (even with nocase), `a-z` a range of signed
    chars in either order, a '-' elsewhere itself; an unclosed class runs to the pattern's end."""
    plen = len(p)
    pi += 1
    negate = pi < plen and p[pi] == 0x5E  # ^
    if negate:
        pi += 1
    members: set[int] = set()
    while True:
        left = plen - pi
        if left >= 2 and p[pi] == 0x5C:  # backslash: the next byte literally
            pi += 1
            members.add(p[pi])
        elif left == 0:
            pi -= 1
            break
        elif p[pi] == 0x5D:  # ]
            break
        elif left >= 3 and p[pi + 1] == 0x2D:  # a-z
            members |= _range_class(p[pi], p[pi + 2], nocase)
            pi += 2
        else:
            members |= _literal_class(p[pi], nocase)
        pi += 1
    return (_ANY_BYTE - members if negate else frozenset(members)), pi


class _Segment:
    """A fixed-length run of byte classes between two '*' runs, with its C-speed finders: a
    literal searched with bytes.find (in the key's ASCII-lowered copy when every class is a
    letter's two cases, as with nocase), else a regex of single-byte classes."""

    __slots__ = ("length", "folded", "_literal", "_classes", "_compiled")

    def __init__(self, classes: list[frozenset[int]]) -> None:
        self.length = len(classes)
        self.folded = False  # search the key's lowered copy
        self._literal: bytes | None = None
        self._classes: list[frozenset[int]] | None = None  # until the regex is first needed
        self._compiled: re.Pattern[bytes] | None = None
        if all(len(c) == 1 for c in classes):
            self._literal = bytes(next(iter(c)) for c in classes)
        elif all(_foldable(c) for c in classes):
            self.folded = True
            self._literal = bytes(_lower(min(c)) for c in classes)
        else:
            self._classes = classes

    def _regex(self) -> re.Pattern[bytes]:
        """Compiled on first use: re.compile costs ~20 us per class, and a segment longer than
        every key (a hostile 100 KB pattern of '?') is never needed."""
        if self._compiled is None:
            assert self._classes is not None
            # A run of one class is `[...]{n}`: an exact count, so still nothing to backtrack.
            runs = ((_class_regex(c), sum(1 for _ in run)) for c, run in groupby(self._classes))
            self._compiled = re.compile(
                b"".join(rx if n == 1 or rx == _NEVER else b"%b{%d}" % (rx, n) for rx, n in runs),
                re.DOTALL)
            self._classes = None
        return self._compiled

    def matches_at(self, s: bytes, lowered: bytes, pos: int) -> bool:
        if self._literal is not None:
            return (lowered if self.folded else s).startswith(self._literal, pos)
        return self._regex().match(s, pos) is not None

    def find(self, s: bytes, lowered: bytes, pos: int) -> int:
        """The leftmost start >= pos where the whole segment fits in s, or -1."""
        if self._literal is not None:
            return (lowered if self.folded else s).find(self._literal, pos)
        found = self._regex().search(s, pos)
        return -1 if found is None else found.start()


# An uppercase letter -> both its cases: the only two-byte classes a lowered search can stand for.
_FOLDS = {upper: frozenset((upper, upper + 32)) for upper in range(65, 91)}


def _foldable(members: frozenset[int]) -> bool:
    """Whether the class is found as one byte of the key's lowered copy: a letter's two cases,
    or one byte that is no letter (lowering maps nothing else onto it)."""
    if len(members) == 1:
        return not chr(min(members)).isascii() or not chr(min(members)).isalpha()
    return len(members) == 2 and members == _FOLDS.get(min(members))


_NEVER = b"(?!)"  # a class no byte is in (a lookahead: not repeatable, and once is enough)


def _class_regex(members: frozenset[int]) -> bytes:
    if len(members) == 256:
        return b"."
    if not members:  # '[]' or '[^' plus every byte: nothing matches
        return _NEVER
    runs: list[bytes] = []  # consecutive bytes as one range: a short regex, compiled fast
    ordered = sorted(members)
    start = previous = ordered[0]
    for byte in [*ordered[1:], -1]:
        if byte != previous + 1:
            runs.append(b"\\x%02x" % start if start == previous
                        else b"\\x%02x-\\x%02x" % (start, previous))
            start = byte
        previous = byte
    return b"[" + b"".join(runs) + b"]"


def _compiled(pattern: bytes, nocase: bool) -> tuple[tuple[_Segment, ...], int]:
    """The pattern's segments and their total length (more than the key's: no match). Only
    patterns up to GLOB_CACHE_MAX_PATTERN bytes are cached, so no client can park big
    compiled patterns in the server beyond its own commands."""
    if len(pattern) <= GLOB_CACHE_MAX_PATTERN:
        return _compile_cached(pattern, nocase)
    return _with_total(_compile(pattern, nocase))


def _with_total(segments: tuple[_Segment, ...]) -> tuple[tuple[_Segment, ...], int]:
    return segments, sum(segment.length for segment in segments)


@functools.lru_cache(maxsize=GLOB_CACHE_SIZE)
def _compile_cached(pattern: bytes, nocase: bool) -> tuple[tuple[_Segment, ...], int]:
    return _with_total(_compile(pattern, nocase))


def _compile(pattern: bytes, nocase: bool) -> tuple[_Segment, ...]:
    """The pattern's segments, split at each run of '*' (so n stars-runs give n + 1 segments;
    only the first and last can be empty)."""
    segments: list[_Segment] = []
    classes: list[frozenset[int]] = []
    pi, plen = 0, len(pattern)
    while pi < plen:
        ch = pattern[pi]
        if ch == 0x2A:  # *
            if pi == 0 or pattern[pi - 1] != 0x2A or classes:
                segments.append(_Segment(classes))
                classes = []
            while pi + 1 < plen and pattern[pi + 1] == 0x2A:
                pi += 1
        elif ch == 0x5B:  # [
            members, pi = _bracket_class(pattern, pi, nocase)
            classes.append(members)
        elif ch == 0x3F:  # ?
            classes.append(_ANY_BYTE)
        else:
            if ch == 0x5C and plen - pi >= 2:
                pi += 1
            classes.append(_literal_class(pattern[pi], nocase))
        pi += 1
    segments.append(_Segment(classes))
    return tuple(segments)


def stringmatchlen(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    """Redis's glob matcher, result for result (`*`, `?`, `[...]`, `[^...]`, ranges, `\\`,
    including its odd cases: an empty key matches only the empty pattern, a '*' never matches at
    the very end of a non-empty key unless nothing follows it, and more than 1000 nested '*' fail),
    in time bounded by pattern x key length and in practice near-linear."""
    if not string or not pattern:
        return not string and not pattern
    segments, fixed = _compiled(pattern, nocase)
    if fixed > len(string):  # every segment takes its length of the key, none overlap
        return False
    lowered = string.lower() if any(segment.folded for segment in segments) else string
    slen, first = len(string), segments[0]
    if len(segments) == 1:
        return slen == first.length and first.matches_at(string, lowered, 0)
    if slen < first.length or not first.matches_at(string, lowered, 0):
        return False
    return _match_after_star(segments, string, lowered, first.length)


def _match_after_star(segments: tuple[_Segment, ...], string: bytes, lowered: bytes,
                      si: int) -> bool:
    """Match from the '*' run after segments[0], the key matched up to `si`."""
    slen, last = len(string), len(segments) - 1
    for k in range(1, last + 1):
        if si == slen:  # the key is used up: only '*' may remain
            return k == last and segments[last].length == 0
        segment = segments[k]
        if segment.length == 0:  # a trailing '*' takes the rest
            return True
        if k > GLOB_MAX_NESTING:
            return False
        if k == last:
            start = slen - segment.length
            return start >= si and segment.matches_at(string, lowered, start)
        start = segment.find(string, lowered, si)
        if start < 0:
            return False
        si = start + segment.length
    return si == slen  # pragma: no cover - the loop always returns


def _matching(keys: Iterable[bytes], pattern: bytes | None) -> list[bytes]:
    """Keys matching `pattern`; None stands for exactly '*', which Redis does not even match
    (so it also takes the empty key, which stringmatchlen would refuse)."""
    if pattern is None:
        return list(keys)
    return [k for k in keys if stringmatchlen(pattern, k)]


# --- signalling ------------------------------------------------------------------------------------


def _signal_in(ctx: Ctx, db_index: int, key: bytes) -> None:
    """ctx.signal for a key of any database (FLUSHALL empties databases not selected)."""
    ctx.signal(key, db_index)


# --- SELECT ----------------------------------------------------------------------------------------


def parse_db_index(arg: bytes) -> int:
    """getIntFromObjectOrReply."""
    value = parse_int(arg)
    if value < INT_MIN or value > INT_MAX:
        raise ReplyError(
            f"ERR value is out of range, value must between {INT_MIN} and {INT_MAX}"
        )
    return value


@command("select", 2, "loading stale fast", group="connection", since="1.0.0",
         acl="connection", keys="",
         effect="SELECT index",
         summary="Changes the selected database.", syntax="index:integer")
def select(ctx: Ctx, argv: Argv) -> str:
    index = parse_db_index(argv[1])
    if index != 0 and ctx.engine.cluster is not None:  # (a cluster has database 0 only)
        raise ReplyError("ERR SELECT is not allowed in cluster mode")
    if index < 0 or index >= len(ctx.engine.dbs):
        raise ReplyError("ERR DB index is out of range")
    ctx.session.db = index
    ctx.db = ctx.engine.dbs[index]
    return "OK"


# --- DEL / UNLINK / EXISTS / TYPE / DBSIZE --------------------------------------------------------


def _delete_keys(ctx: Ctx, keys: Sequence[bytes]) -> int:
    removed = [key for key in keys if delete_key(ctx, key)]
    if removed:
        ctx.emit(del_effect(removed))
        if ctx.engine.notify_flags & GENERIC:
            for key in removed:
                ctx.notify(GENERIC, b"del", key)
    return len(removed)


@command("del", -2, "write", group="generic", since="1.0.0",
         acl="keyspace", keys="RM DELETE @1 r-1,1,0", logs=("DEL",),
         effect="DEL key [key ...]",
         summary="Deletes one or more keys.", syntax="key...")
def del_(ctx: Ctx, argv: Argv) -> int:
    return _delete_keys(ctx, argv[1:])


@command("unlink", -2, "write fast", group="generic", since="4.0.0",
         acl="keyspace", keys="RM DELETE @1 r-1,1,0", logs=("DEL",),
         summary="Asynchronously deletes one or more keys.", syntax="key...")
def unlink(ctx: Ctx, argv: Argv) -> int:
    return _delete_keys(ctx, argv[1:])


@command("exists", -2, "readonly fast", group="generic", since="1.0.0",
         acl="keyspace", keys="RO @1 r-1,1,0",
         summary="Determines whether one or more keys exist.", syntax="key...")
def exists(ctx: Ctx, argv: Argv) -> int:
    found = 0
    for key in argv[1:]:
        if key_type(ctx, key) is not None:
            read_hit(ctx)
            found += 1
        else:
            read_miss(ctx, key)
    return found


@command("touch", -2, "readonly fast", group="generic", since="3.2.1",
         acl="keyspace", keys="RO @1 r-1,1,0",
         summary="Returns the number of existing keys out of those specified after updating the "
                 "time they were last accessed.",
         syntax="key...")
def touch(ctx: Ctx, argv: Argv) -> int:
    """lookupKeyRead of each key (streamkeep keeps no access times: the count, the hits and
    misses, the keymiss events)."""
    return exists(ctx, argv)


@command("type", 2, "readonly fast", group="generic", since="1.0.0",
         acl="keyspace", keys="RO",
         summary="Determines the type of value stored at a key.", syntax="key")
def type_(ctx: Ctx, argv: Argv) -> str:
    kind = key_type(ctx, argv[1])
    if kind is None:
        read_miss(ctx, argv[1])
        return "none"
    read_hit(ctx)
    return kind


@command("dbsize", 1, "readonly fast", group="server", since="1.0.0",
         acl="keyspace", keys="",
         summary="Returns the number of keys in the database.")
def dbsize(ctx: Ctx, argv: Argv) -> int:
    return key_count(ctx.engine, ctx.session.db)


# --- KEYS / SCAN -----------------------------------------------------------------------------------


@command("keys", 2, "readonly", group="generic", since="1.0.0",
         acl="dangerous keyspace", keys="",
         summary="Returns all key names that match a pattern.", syntax="pattern:pattern")
def keys(ctx: Ctx, argv: Argv) -> list[bytes]:
    pattern = None if argv[1] == b"*" else argv[1]
    return _matching(sorted(live_keys(ctx)), pattern)


class ScanArgs:
    __slots__ = ("cursor", "count", "pattern", "type_name")

    def __init__(self, cursor: int) -> None:
        self.cursor = cursor
        self.count = SCAN_DEFAULT_COUNT
        self.pattern: bytes | None = None
        self.type_name: bytes | None = None


def _parse_scan(argv: Argv) -> ScanArgs:
    """parseScanCursorOrReply (string2ull) then scanGenericCommand's option loop."""
    cursor = parse_u64(argv[1])
    if cursor is None:
        raise ReplyError("ERR invalid cursor")
    args = ScanArgs(cursor)
    i = 2
    while i < len(argv):
        opt, has_value = argv[i], len(argv) - i >= 2
        if is_word(opt, b"count") and has_value:
            args.count = parse_int(argv[i + 1])
            if args.count < 1:
                raise ReplyError(SYNTAX)
        elif is_word(opt, b"match") and has_value:
            args.pattern = None if argv[i + 1] == b"*" else argv[i + 1]
        elif is_word(opt, b"type") and has_value:
            args.type_name = argv[i + 1]
        else:
            raise ReplyError(SYNTAX)
        i += 2
    return args


class ElementScanArgs(NamedTuple):
    """HSCAN's, SSCAN's and ZSCAN's options: COUNT (a hint), MATCH, NOVALUES (HSCAN only)."""

    page: int  # COUNT
    pattern: bytes | None
    no_values: bool


def parse_element_scan(argv: Argv, novalues_allowed: bool) -> ElementScanArgs:
    """The options after a key's SCAN cursor (argv[3:]), as Redis's scanGenericCommand reads
    them: NOVALUES is refused but for a hash."""
    count, pattern, no_values = SCAN_DEFAULT_COUNT, None, False
    at = 3
    while at < len(argv):
        has_value = len(argv) - at >= 2
        if is_word(argv[at], b"count") and has_value:
            count = parse_int(argv[at + 1])
            if count < 1:
                raise ReplyError(SYNTAX)
            at += 2
        elif is_word(argv[at], b"match") and has_value:
            pattern = None if argv[at + 1] == b"*" else argv[at + 1]
            at += 2
        elif is_word(argv[at], b"novalues"):
            if not novalues_allowed:
                raise ReplyError("ERR NOVALUES option can only be used in HSCAN")
            no_values = True
            at += 1
        else:
            raise ReplyError(SYNTAX)
    return ElementScanArgs(count, pattern, no_values)


def scan_position(key: bytes) -> int:
    """Where a key sits in SCAN order: a stable 64-bit hash, so a cursor (the next position)
    stays valid while keys come and go, as Redis's reverse-binary cursor does: every key present
    for the whole iteration is returned, keys added or removed meanwhile may or may not be."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _scan_page(db: Iterable[bytes], cursor: int, count: int) -> tuple[int, list[bytes]]:
    """Up to `count` keys from position `cursor` on (more when positions collide, so that a page
    never splits keys of one position), and the cursor after them (0 once past the last key)."""
    ahead = sorted((pos, key) for key in db if (pos := scan_position(key)) >= cursor)
    if len(ahead) <= count:
        return 0, [key for _pos, key in ahead]
    end = count
    while end < len(ahead) and ahead[end][0] == ahead[end - 1][0]:
        end += 1
    if end == len(ahead):
        return 0, [key for _pos, key in ahead]
    return ahead[end - 1][0] + 1, [key for _pos, key in ahead[:end]]


@command("scan", -2, "readonly", group="generic", since="2.8.0",
         acl="keyspace", keys="",
         summary="Iterates over the key names in the database.",
         syntax="cursor:integer [MATCH pattern:pattern] [COUNT count:integer] [TYPE type]")
def scan(ctx: Ctx, argv: Argv) -> list:
    args = _parse_scan(argv)
    cursor, page = _scan_page(live_keys(ctx), args.cursor, args.count)
    page = _matching(page, args.pattern)
    if args.type_name is not None:
        wanted = args.type_name.lower()
        page = [key for key in page if (key_type(ctx, key) or "").encode() == wanted]
    return [b"%d" % cursor, page]


# --- RENAME / RENAMENX -----------------------------------------------------------------------------


def _rename(ctx: Ctx, argv: Argv, nx: bool) -> bool:
    """renameGenericCommand: True when the key moved. Same-name renames touch nothing."""
    src, dst = argv[1], argv[2]
    found = lookup(ctx, src)
    if found is None:
        raise ReplyError(NO_SUCH_KEY)
    if src == dst or (nx and key_type(ctx, dst) is not None):
        return False
    vt = found[0]
    if ctx.engine.notify_flags:
        replacing_events(ctx, vt.name, dst, always_new=True)
    values = ctx.space(vt.slot)
    value = values.pop(src)
    when = ctx.expires.pop(src, None)
    delete_key(ctx, dst)
    values[dst] = value
    placed(ctx.engine, ctx.session.db, dst, vt, value)
    if when is not None:  # the TTL moves with the value
        ctx.expires[dst] = when
    ctx.signal(src)
    ctx.signal(dst)
    ctx.emit(rename_effect(src, dst))
    ctx.notify(GENERIC, b"rename_from", src)
    ctx.notify(GENERIC, b"rename_to", dst)
    return True


def replacing_events(ctx: Ctx, kind: str, dst: bytes, always_new: bool = False) -> None:
    """What a key given a value of type `kind` notifies before the command's own events (the
    destination of RENAME or COPY, RESTORE's key): `new` for a key that did not exist (for
    RENAME's and COPY's always: Redis deletes the destination and adds it again),
    `overwritten` (and `type_changed` when the value is of another type) for one that did.
    The key is in the selected database."""
    old = key_type(ctx, dst)
    if old is None or always_new:
        ctx.notify(NEW, b"new", dst)
    if old is not None:
        ctx.notify(OVERWRITTEN, b"overwritten", dst)
        if old != kind:
            ctx.notify(TYPE_CHANGED, b"type_changed", dst)


@command("rename", 3, "write", group="generic", since="1.0.0",
         acl="keyspace", keys="RW ACCESS DELETE ; OW UPDATE @2 r0,1,0", logs=("RENAME",),
         effect="RENAME key newkey",
         summary="Renames a key and overwrites the destination.", syntax="key newkey:key")
def rename(ctx: Ctx, argv: Argv) -> str:
    _rename(ctx, argv, nx=False)
    return "OK"


@command("renamenx", 3, "write fast", group="generic", since="1.0.0",
         acl="keyspace", keys="RW ACCESS DELETE ; OW INSERT @2 r0,1,0", logs=("RENAME",),
         summary="Renames a key only when the target key name doesn't exist.",
         syntax="key newkey:key")
def renamenx(ctx: Ctx, argv: Argv) -> int:
    return 1 if _rename(ctx, argv, nx=True) else 0


# --- FLUSHDB / FLUSHALL ----------------------------------------------------------------------------


def _check_flush_flags(argv: Argv) -> None:
    """getFlushCommandFlags: nothing, SYNC or ASYNC (all the same here: flushing is immediate)."""
    if len(argv) == 1:
        return
    if len(argv) == 2 and (is_word(argv[1], b"sync") or is_word(argv[1], b"async")):
        return
    raise ReplyError(SYNTAX)


def _flush_db(ctx: Ctx, db_index: int) -> int:
    engine = ctx.engine
    removed: list[bytes] = []
    for space in engine.keyspaces:
        removed.extend(space[db_index])
        space[db_index].clear()
    engine.expires[db_index].clear()
    for key in removed:
        _signal_in(ctx, db_index, key)
    return len(removed)


@command("flushdb", -1, "write", group="server", since="1.0.0",
         acl="dangerous keyspace", keys="", logs=("FLUSHDB",),
         effect="FLUSHDB",
         summary="Remove all keys from the current database.", syntax="[flush-type: ASYNC | SYNC]")
def flushdb(ctx: Ctx, argv: Argv) -> str:
    _check_flush_flags(argv)
    if _flush_db(ctx, ctx.session.db):
        ctx.emit(flushdb_effect())
    return "OK"


@command("flushall", -1, "write", group="server", since="1.0.0",
         acl="dangerous keyspace", keys="", logs=("FLUSHALL",),
         effect="FLUSHALL",
         summary="Removes all keys from all databases.", syntax="[flush-type: ASYNC | SYNC]")
def flushall(ctx: Ctx, argv: Argv) -> str:
    _check_flush_flags(argv)
    removed = sum(_flush_db(ctx, index) for index in range(len(ctx.engine.dbs)))
    if removed:
        ctx.emit(flushall_effect())
    return "OK"


# --- PING / ECHO / TIME ----------------------------------------------------------------------------


@command("ping", -1, "fast", group="connection", since="1.0.0",
         acl="connection", keys="",
         summary="Returns the server's liveliness response.", syntax="[message]")
def ping(ctx: Ctx, argv: Argv) -> str | bytes | list[bytes]:
    if len(argv) > 2:
        raise wrong_arity("ping")
    if in_resp2_subscribed(ctx.session):  # Redis answers a RESP2 subscriber like a message
        return [b"pong", b"" if len(argv) == 1 else argv[1]]
    return "PONG" if len(argv) == 1 else argv[1]


@command("echo", 2, "loading stale fast", group="connection", since="1.0.0",
         acl="connection", keys="",
         summary="Returns the given string.", syntax="message")
def echo(ctx: Ctx, argv: Argv) -> bytes:
    return argv[1]


@command("time", 1, "loading stale fast", group="server", since="2.6.0",
         keys="",
         summary="Returns the server time.")
def time_(ctx: Ctx, argv: Argv) -> list[bytes]:
    now = ctx.now
    return [b"%d" % (now // 1000), b"%d" % (now % 1000 * 1000)]


# --- DUMP / RESTORE (the RDB codec: snapshot.rdb) -------------------------------------------

_RESTORE_BAD_PAYLOAD = "ERR DUMP payload version or checksum are wrong"
# The RDB types of values streamkeep does not store (RESTORE names them); a type whose codec
# is registered and whose class is a value type is restored instead (`value_type_of`).
_RDB_TYPE_NAMES = {7: "module",
                   22: "hash in a layout of Redis 7.4's release candidates or Valkey 9",
                   28: "Redis array", 29: "templated hash", 30: "templated hash",
                   31: "templated hash", 32: "templated hash", 33: "rate limiter (GCRA)"}


def _refusal(kind: int) -> str:
    """RESTORE's line for a payload of a type streamkeep does not store."""
    from streamkeep.snapshot.rdb_types import stored_text

    return (f"ERR streamkeep stores {stored_text()} only: the payload holds a "
            f"{_RDB_TYPE_NAMES[kind]} (RDB type {kind})")


@command("dump", 2, "readonly", group="generic", since="2.6.0",
         acl="keyspace", keys="RO ACCESS",
         summary="Returns a serialized representation of the value stored at a key.", syntax="key")
def dump(ctx: Ctx, argv: Argv) -> bytes | None:
    from streamkeep.snapshot.rdb import RdbError, dump_payload, dump_string_payload
    from streamkeep.snapshot.rdb_types import dump_value_payload

    version = int(ctx.engine.config["dump-rdb-version"])
    s = ctx.db.get(argv[1])
    if s is not None:
        read_hit(ctx)
        return dump_payload(s, version)
    value = ctx.strings.get(argv[1])
    if value is not None:
        read_hit(ctx)
        return dump_string_payload(value, version)
    found = lookup(ctx, argv[1])
    if found is None:
        read_miss(ctx, argv[1])
        return None
    read_hit(ctx)
    try:
        return dump_value_payload(found[1], version)
    except RdbError as err:  # (a value the configured version cannot hold: field expiry)
        raise ReplyError(f"ERR {err} (dump-rdb-version)") from None


def _restore_options(argv: Argv) -> tuple[bool, bool]:
    """(REPLACE, ABSTTL); IDLETIME and FREQ are checked and ignored (no eviction here)."""
    replace = absttl = False
    idle = freq = False
    i = 4
    while i < len(argv):
        opt = argv[i].upper()
        more = i + 1 < len(argv)
        if opt == b"REPLACE":
            replace = True
        elif opt == b"ABSTTL":
            absttl = True
        elif opt == b"IDLETIME" and more and not freq:
            i += 1
            if parse_int(argv[i]) < 0:
                raise ReplyError("ERR Invalid IDLETIME value, must be >= 0")
            idle = True
        elif opt == b"FREQ" and more and not idle:
            i += 1
            value = parse_int(argv[i])
            if not 0 <= value <= 255:
                raise ReplyError("ERR Invalid FREQ value, must be >= 0 and <= 255")
            freq = True
        else:
            raise ReplyError(SYNTAX)
        i += 1
    return replace, absttl


@command("restore", -4, "write denyoom", group="generic", since="2.6.0",
         acl="dangerous keyspace", keys="OW UPDATE", logs=("DEL", "PEXPIREAT", "RESTORE", "SET"),
         effect="RESTORE key 0 payload REPLACE",
         summary="Creates a key from the serialized representation of a value.",
         syntax="key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] "
                "[FREQ frequency]")
def restore(ctx: Ctx, argv: Argv) -> str:
    from streamkeep.snapshot.rdb import (
        MAX_VERSION,
        STREAM_TYPES,
        TYPE_STRING,
        RdbError,
        check_payload,
        load_payload,
        payload_type,
    )
    from streamkeep.snapshot.rdb_types import value_type_of

    replace, absttl = _restore_options(argv)
    key, payload = argv[1], argv[3]
    ttl = parse_int(argv[2])
    if ttl < 0:
        raise ReplyError("ERR Invalid TTL value, must be >= 0")
    db = ctx.db
    if not replace and key_type(ctx, key) is not None:
        raise ReplyError("BUSYKEY Target key name already exists.")
    try:
        check_payload(payload, MAX_VERSION)
    except RdbError:
        raise ReplyError(_RESTORE_BAD_PAYLOAD) from None
    kind = payload_type(payload)
    when = (ttl if absttl else ctx.now + ttl) if ttl else None
    if kind == TYPE_STRING:
        return _restore_string(ctx, key, payload, when, replace)
    if kind not in STREAM_TYPES:
        vt = value_type_of(kind)
        if vt is not None:
            return _restore_value(ctx, key, payload, vt, when, replace)
        if kind in _RDB_TYPE_NAMES:
            raise ReplyError(_refusal(kind))
    if when is not None and already_expired(ctx, when):  # already expired: nothing made
        if replace and delete_key(ctx, key):
            ctx.emit(del_effect([key]))
            ctx.notify(GENERIC, b"del", key)
        return "OK"
    if not ctx.replaying:  # every payload is read whole, as Redis's deep sanitization reads it
        ctx.engine.stats.dump_payload_sanitizations += 1
    try:
        s = load_payload(payload, new_stream(ctx.engine.residency))
    except RdbError:
        raise ReplyError("ERR Bad data format") from None
    if ctx.engine.notify_flags:
        replacing_events(ctx, "stream", key)
    delete_key(ctx, key)
    db[key] = s
    ctx.signal(key)
    ctx.emit(restore_effect(key, payload))
    if when is not None:
        ctx.expires[key] = when
        ctx.emit(pexpireat_effect(key, when))
    ctx.notify(GENERIC, b"restore", key)
    return "OK"


def _restore_string(ctx: Ctx, key: bytes, payload: bytes, when: int | None,
                    replace: bool) -> str:
    """RESTORE of a string payload: loaded first, then Redis's expiry check; logged as the
    SET it amounts to (`SET key value [PXAT ms]`), or a DEL for a time already past."""
    from streamkeep.snapshot.rdb import RdbError, load_string_payload

    try:
        value = load_string_payload(payload)
    except RdbError:
        raise ReplyError("ERR Bad data format") from None
    if when is not None and already_expired(ctx, when):
        if replace and delete_key(ctx, key):
            ctx.emit(del_effect([key]))
            ctx.notify(GENERIC, b"del", key)
        return "OK"
    if ctx.engine.notify_flags:
        replacing_events(ctx, "string", key)
    delete_key(ctx, key)
    ctx.strings[key] = value
    if when is not None:
        ctx.expires[key] = when
    ctx.signal(key)
    ctx.emit(set_effect(key, value, expires_at=when))
    ctx.notify(GENERIC, b"restore", key)
    return "OK"


def _restore_value(ctx: Ctx, key: bytes, payload: bytes, vt: ValueType, when: int | None,
                   replace: bool) -> str:
    """RESTORE of a payload of a registered type other than strings and streams (sorted sets,
    ...): the value loaded first (in the encoding Redis's loading gives it under the engine's
    limits for that type), then Redis's expiry check; stored in its type's keyspace, logged as
    the RESTORE itself and the expiry as PEXPIREAT."""
    from streamkeep.snapshot.rdb import RdbError
    from streamkeep.snapshot.rdb_types import load_value_payload

    if not ctx.replaying:  # read whole, as Redis's deep sanitization reads it
        ctx.engine.stats.dump_payload_sanitizations += 1
    try:
        value = load_value_payload(payload, ctx.engine.limits[vt.slot])
    except RdbError:
        raise ReplyError("ERR Bad data format") from None
    if when is not None and already_expired(ctx, when):  # already expired: nothing made
        if replace and delete_key(ctx, key):
            ctx.emit(del_effect([key]))
            ctx.notify(GENERIC, b"del", key)
        return "OK"
    if ctx.engine.notify_flags:
        replacing_events(ctx, vt.name, key)
    delete_key(ctx, key)
    ctx.space(vt.slot)[key] = value
    placed(ctx.engine, ctx.session.db, key, vt, value)
    ctx.signal(key)
    ctx.emit(restore_effect(key, payload))
    if when is not None:
        ctx.expires[key] = when
        ctx.emit(pexpireat_effect(key, when))
    ctx.notify(GENERIC, b"restore", key)
    return "OK"
