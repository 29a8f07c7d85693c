"""Effects: the deterministic commands that reproduce a command's state change.

Owns the `Record` (one command execution's effects, its time and database: the atomic unit the
AOF logs and replicas apply) and the builders: every effect argv any handler emits is made by
one function of this module, so each shape is written once. Which commands an effect may be (the
effect vocabulary) and which effects each command logs are declared with the commands
(engine.exec.table: `effect_vocabulary`). The vocabulary is Redis's own (XADD with explicit IDs,
exact trims, the 14-argument XCLAIM, XGROUP SETID ... ENTRIESREAD, XCFGSET and XIDMPRECORD for
idempotent producers) plus three streamkeep commands, `SK.XCONSUMER` (a consumer's seen/active
times, which Redis lets drift), `SK.XTRIMIDS` (the exact entries a DELREF/ACKED trim removed) and
`SK.XIDMPDUP` (a stream's count of refused IDMP duplicates). Must not touch: engine state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, NamedTuple

from streamkeep.engine.model.ids import format_id

Effect = list[bytes]

# The texts of the small numbers, made once: a pop's ranks (ZPOPMIN's are 0 0) are mostly these,
# and `b"%d" % n` costs a formatting call per argument.
_SMALL_NUMBERS: Final[tuple[bytes, ...]] = tuple(b"%d" % n for n in range(1024))


def _number(n: int) -> bytes:
    """n's decimal text."""
    return _SMALL_NUMBERS[n] if 0 <= n < 1024 else b"%d" % n


class Record(NamedTuple):
    """Everything one command execution changed: applied all together or not at all.

    The fields are in the AOF payload's order, so a decoded payload tuple `(lsn, time_ms, db,
    effects)` is a record as it is: replay applies those tuples without building objects."""

    lsn: int  # assigned by the log; 0 while in memory only
    time_ms: int
    db: int
    effects: list[Effect] | tuple  # each effect an argv (list or tuple of bytes)


# --- stream entries ------------------------------------------------------------------------------


def xadd_effect(
    key: bytes, entry_id: bytes, fields: Sequence[bytes],
    trim_clause: Sequence[bytes] | None = None,
) -> Effect:
    """`XADD key [trim clause] id field value ...`: the entry with its resolved ID, and the
    exact clause (trim_maxlen_clause / trim_minid_clause) of the trim it ran, if any."""
    if trim_clause is None:  # every XADD without a trim: one list grown once
        return [b"XADD", key, entry_id, *fields]
    return [b"XADD", key, *trim_clause, entry_id, *fields]


def with_dbs(db: int, effects: Iterable[Sequence[bytes]]
             ) -> Iterator[tuple[int, Sequence[bytes]]]:
    """(database each effect applies in, effect) of a record whose command ran in `db`: a
    SELECT effect (only inside a transaction's record) runs in the database before it and
    switches the database of the effects after it. A malformed SELECT switches nothing (the
    inspector reads damaged logs through this too)."""
    for effect in effects:
        yield db, effect
        if bytes(effect[0]).upper() == b"SELECT":
            with contextlib.suppress(IndexError, ValueError):
                db = int(effect[1])


def xadd_effect_entry(effect: Sequence[bytes]) -> tuple[bytes, bytes, Sequence[bytes]]:
    """(key, entry ID, flat field/value list) of an XADD effect: the inverse of xadd_effect
    (its trim clause, when present, is always the three words `MAXLEN|MINID = value`)."""
    at = 5 if bytes(effect[2]).upper() in (b"MAXLEN", b"MINID") else 2
    return effect[1], effect[at], effect[at + 1:]


def trim_maxlen_clause(length: int) -> list[bytes]:
    """The exact trim clause that leaves `length` entries: `MAXLEN = length`."""
    return [b"MAXLEN", b"=", b"%d" % length]


def trim_minid_clause(min_id: int) -> list[bytes]:
    """The exact trim clause that removes the entries before `min_id`: `MINID = id`."""
    return [b"MINID", b"=", format_id(min_id)]


def xtrim_effect(key: bytes, trim_clause: Sequence[bytes]) -> Effect:
    """`XTRIM key MAXLEN = n | MINID = id`: a trim that removed a prefix."""
    return [b"XTRIM", key, *trim_clause]


def sk_xtrimids_effect(key: bytes, ids: Iterable[int]) -> Effect:
    """`SK.XTRIMIDS key id...`: the exact entries a trim removed when DELREF/ACKED let it skip
    some (no clause reproduces that)."""
    return [b"SK.XTRIMIDS", key, *map(format_id, ids)]


def xdel_effect(key: bytes, ids: Iterable[int]) -> Effect:
    return [b"XDEL", key, *map(format_id, ids)]


def xsetid_effect(key: bytes, last_id: int, entries_added: int, max_deleted_id: int) -> Effect:
    """XSETID with all three values explicit: the stream's metadata as the command left it."""
    return [b"XSETID", key, format_id(last_id), b"ENTRIESADDED", b"%d" % entries_added,
            b"MAXDELETEDID", format_id(max_deleted_id)]


# --- idempotent producers -----------------------------------------------------------------------


def xcfgset_effect(key: bytes, duration: int, maxsize: int) -> Effect:
    """XCFGSET with both settings explicit: the stream's IDMP settings as the command left them
    (which creates the IDMP state on replay; the maps are cleared only if a value changed)."""
    return [b"XCFGSET", key, b"IDMP-DURATION", b"%d" % duration, b"IDMP-MAXSIZE",
            b"%d" % maxsize]


def xidmprecord_effect(key: bytes, pid: bytes, iid: bytes, entry_id: bytes) -> Effect:
    """`XIDMPRECORD key pid iid id`: producer `pid`'s idempotent ID `iid` made entry `id` (Redis
    8.8's own command for this; the record's time is the iid's recording time)."""
    return [b"XIDMPRECORD", key, pid, iid, entry_id]


def sk_xidmpdup_effect(key: bytes, duplicates: int) -> Effect:
    """`SK.XIDMPDUP key n`: the stream's lifetime count of refused duplicates is now n."""
    return [b"SK.XIDMPDUP", key, b"%d" % duplicates]


# --- consumer groups -----------------------------------------------------------------------------


def xack_effect(key: bytes, group: bytes, ids: Iterable[int]) -> Effect:
    return xack_ids_effect(key, group, map(format_id, ids))


def xack_ids_effect(key: bytes, group: bytes, idbs: Iterable[bytes]) -> Effect:
    """`xack_effect` of IDs already written as format_id writes them (an XACK's own
    arguments, when they are)."""
    return [b"XACK", key, group, *idbs]


def xclaim_effect(
    key: bytes, group: bytes, consumer: bytes, sid: int, delivery_time: int,
    delivery_count: int, last_id: int | None,
) -> Effect:
    """The XCLAIM Redis propagates for a delivery or a claim (absolute TIME, exact count)."""
    effect = [
        b"XCLAIM", key, group, consumer, b"0", format_id(sid), b"TIME", b"%d" % delivery_time,
        b"RETRYCOUNT", b"%d" % delivery_count, b"FORCE", b"JUSTID",
    ]
    if last_id is not None:
        effect += [b"LASTID", format_id(last_id)]
    return effect


def xnack_effect(key: bytes, group: bytes, sid: int, delivery_count: int) -> Effect:
    """The XNACK that releases `sid` with this exact delivery count: FAIL with RETRYCOUNT
    states the count whatever the mode was, FORCE recreates it if the PEL lacked it (the shape
    Redis 8.8's AOF rewrite gives released entries, per https://github.com/redis/librdb/pull/98,
    one ID each here)."""
    return [b"XNACK", key, group, b"FAIL", b"IDS", b"1", format_id(sid), b"RETRYCOUNT",
            b"%d" % delivery_count, b"FORCE"]


def new_deliveries_xclaim_effect(
    key: bytes, group: bytes, consumer: bytes, delivery_time: int, idbs: Sequence[bytes],
) -> Effect:
    """XREADGROUP `>`'s effect for the entries it delivered (ascending ID bytes `idbs`): one
    XCLAIM of them all, the state `xclaim_effect(key, group, consumer, sid, delivery_time, 1,
    sid)` of each in turn leaves (first delivery, count 1, the group's last ID the last entry),
    in one effect rather than one a message: a read of 100 logs one claim, not 100."""
    return [b"XCLAIM", key, group, consumer, b"0", *idbs, b"TIME", b"%d" % delivery_time,
            b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", idbs[-1]]


def claim_xclaim_pieces(
    key: bytes, group: bytes, consumer: bytes, delivery_time: int, last_id: int,
) -> tuple[Effect, Effect, Effect]:
    """A claim loop's per-entry effect in reusable pieces: the effect of claiming the entry
    whose ID bytes are `idb` with delivery count `n` is `[*head, idb, *middle, b"%d" % n,
    *tail]`, the same as `xclaim_effect(key, group, consumer, sid, delivery_time, n, last_id)`
    without a function call and two ID formattings per entry."""
    head = [b"XCLAIM", key, group, consumer, b"0"]
    middle = [b"TIME", b"%d" % delivery_time, b"RETRYCOUNT"]
    tail = [b"FORCE", b"JUSTID", b"LASTID", format_id(last_id)]
    return head, middle, tail


def xgroup_create_effect(key: bytes, group: bytes, last_id: int, entries_read: int) -> Effect:
    """XGROUP CREATE with the resolved ID, an explicit ENTRIESREAD, and MKSTREAM (harmless when
    the stream exists; needed when the command created it)."""
    return [b"XGROUP", b"CREATE", key, group, format_id(last_id), b"ENTRIESREAD",
            b"%d" % entries_read, b"MKSTREAM"]


def xgroup_setid_effect(key: bytes, group: bytes, last_id: int, entries_read: int,
                        last_idb: bytes | None = None) -> Effect:
    """`last_idb`: the ID's bytes when the caller has them (a read's last entry's)."""
    return [b"XGROUP", b"SETID", key, group,
            format_id(last_id) if last_idb is None else last_idb, b"ENTRIESREAD",
            b"%d" % entries_read]


def xgroup_destroy_effect(key: bytes, group: bytes) -> Effect:
    return [b"XGROUP", b"DESTROY", key, group]


def xgroup_createconsumer_effect(key: bytes, group: bytes, consumer: bytes) -> Effect:
    return [b"XGROUP", b"CREATECONSUMER", key, group, consumer]


def xgroup_delconsumer_effect(key: bytes, group: bytes, consumer: bytes) -> Effect:
    return [b"XGROUP", b"DELCONSUMER", key, group, consumer]


def sk_xconsumer_effect(key: bytes, group: bytes, consumer: bytes, seen: int,
                        active: int) -> Effect:
    """`SK.XCONSUMER key group consumer seen active`: pins the consumer's times (and creates
    it), which Redis's own propagation lets drift."""
    seen_b = b"%d" % seen
    # (mostly the same time: a read is both seen and active)
    return [b"SK.XCONSUMER", key, group, consumer, seen_b,
            seen_b if active == seen else b"%d" % active]


# --- keyspace ------------------------------------------------------------------------------------


def restore_effect(key: bytes, payload: bytes) -> Effect:
    """`RESTORE key 0 payload REPLACE`: the value as one DUMP payload (replay restores it)."""
    return [b"RESTORE", key, b"0", payload, b"REPLACE"]


def del_effect(keys: Iterable[bytes]) -> Effect:
    """`DEL key...`: the keys that existed (DEL and UNLINK both)."""
    return [b"DEL", *keys]


def set_effect(key: bytes, value: bytes, keep_ttl: bool = False,
               expires_at: int | None = None) -> Effect:
    """`SET key value`, `... KEEPTTL` or `... PXAT ms`: a relative or conditional SET logged as
    the absolute one it amounted to."""
    if expires_at is not None:
        return [b"SET", key, value, b"PXAT", b"%d" % expires_at]
    return [b"SET", key, value, b"KEEPTTL"] if keep_ttl else [b"SET", key, value]


def append_effect(key: bytes, tail: bytes) -> Effect:
    """`APPEND key tail`: APPEND logs itself (the tail, not the value it grew)."""
    return [b"APPEND", key, tail]


def setrange_effect(key: bytes, offset: int, value: bytes) -> Effect:
    """`SETRANGE key offset value`: SETRANGE logs itself (the command's size, not the value's)."""
    return [b"SETRANGE", key, b"%d" % offset, value]


def pexpireat_effect(key: bytes, expires_at: int) -> Effect:
    return [b"PEXPIREAT", key, b"%d" % expires_at]


def persist_effect(key: bytes) -> Effect:
    return [b"PERSIST", key]


def rename_effect(source: bytes, destination: bytes) -> Effect:
    """`RENAME key newkey` (RENAMENX too, once it moved the key)."""
    return [b"RENAME", source, destination]


def flushdb_effect() -> Effect:
    return [b"FLUSHDB"]


def flushall_effect() -> Effect:
    return [b"FLUSHALL"]


def select_effect(db: int) -> Effect:
    """`SELECT index`, in front of the effects of a transaction's command that ran in another
    database than the record's (or the previous SELECT's)."""
    return [b"SELECT", b"%d" % db]


# --- function libraries --------------------------------------------------------------------------


def function_load_effect(code: bytes) -> Effect:
    """`FUNCTION LOAD REPLACE code`: the library as loaded, whether or not it replaced one (the
    same state either way, so a replay never depends on what was there)."""
    return [b"FUNCTION", b"LOAD", b"REPLACE", code]


def function_delete_effect(library: bytes) -> Effect:
    return [b"FUNCTION", b"DELETE", library]


def function_flush_effect() -> Effect:
    return [b"FUNCTION", b"FLUSH"]


def function_restore_effect(payload: bytes, policy: bytes) -> Effect:
    """`FUNCTION RESTORE payload policy`, the policy spelled out (APPEND when none was given)."""
    return [b"FUNCTION", b"RESTORE", payload, policy.upper()]


def hset_effect(key: bytes, pairs: Iterable[tuple[bytes, bytes]]) -> Effect:
    """`HSET key field value ...`: the fields as the command left them."""
    effect = [b"HSET", key]
    for field, value in pairs:
        effect.append(field)
        effect.append(value)
    return effect


def hdel_effect(key: bytes, fields: Iterable[bytes]) -> Effect:
    """`HDEL key field ...`: the fields removed (by HDEL, HGETDEL or field expiry)."""
    return [b"HDEL", key, *fields]


def hincrby_effect(key: bytes, field: bytes, increment: int) -> Effect:
    return [b"HINCRBY", key, field, b"%d" % increment]


def hpexpireat_effect(key: bytes, when: int, fields: list[bytes]) -> Effect:
    """`HPEXPIREAT key ms FIELDS n field ...`: the fields given that absolute expiry time."""
    return [b"HPEXPIREAT", key, b"%d" % when, b"FIELDS", b"%d" % len(fields), *fields]


def hpersist_effect(key: bytes, fields: list[bytes]) -> Effect:
    """`HPERSIST key FIELDS n field ...`: the fields whose TTL was removed."""
    return [b"HPERSIST", key, b"FIELDS", b"%d" % len(fields), *fields]


def hsetex_effect(key: bytes, when: int | None, pairs: list[tuple[bytes, bytes]]) -> Effect:
    """`HSETEX key PXAT ms FIELDS n field value ...` (when given), else `... KEEPTTL ...`:
    fields set, with that absolute expiry or keeping the TTLs they had."""
    ttl = [b"KEEPTTL"] if when is None else [b"PXAT", b"%d" % when]
    effect = [b"HSETEX", key, *ttl, b"FIELDS", b"%d" % len(pairs)]
    for field, value in pairs:
        effect.append(field)
        effect.append(value)
    return effect


# --- sorted sets ---------------------------------------------------------------------------------


def zadd_effect(key: bytes, pairs: Iterable[tuple[bytes, bytes]]) -> Effect:
    """`ZADD key score member ...`: members set to these scores, each (member, score text). The
    text is the client's own where the score is the one it sent (a replay parses the same text
    to the same double, as the command did), else format_score's round-trip text (INCR's
    sum)."""
    effect = [b"ZADD", key]
    for member, score in pairs:
        effect.append(score)
        effect.append(member)
    return effect


def zrem_effect(key: bytes, members: Iterable[bytes]) -> Effect:
    """`ZREM key member ...`: the members removed."""
    return [b"ZREM", key, *members]


def zremrangebyrank_effect(key: bytes, first: int, last: int) -> Effect:
    """`ZREMRANGEBYRANK key first last`: the ranks a pop removed (absolute, inclusive)."""
    return [b"ZREMRANGEBYRANK", key, _number(first), _number(last)]


def as_sent_effect(argv: Sequence[bytes]) -> Effect:
    """A deterministic write logged as its client sent it (the name upper-cased): the sorted
    set range removals and STORE commands, whose result depends only on the state they read."""
    return [bytes(argv[0]).upper(), *argv[1:]]


# --- sets ----------------------------------------------------------------------------------------
# (SADD's and a push's arguments are the command's argv slice, a tuple: compiled, unpacking a
# tuple is a copy, where a generic sequence is iterated.)


def sadd_effect(key: bytes, members: tuple[bytes, ...]) -> Effect:
    """`SADD key member ...`: every member SADD was given (their count decides a conversion
    before anything is added, so a replay needs them all)."""
    return [b"SADD", key, *members]


def srem_effect(key: bytes, members: Iterable[bytes]) -> Effect:
    """`SREM key member ...`: the members removed (by SREM, or SPOP's picks)."""
    return [b"SREM", key, *members]


# --- lists ---------------------------------------------------------------------------------------


def push_effect(key: bytes, elements: tuple[bytes, ...], tail: bool) -> Effect:
    """`LPUSH` / `RPUSH key element ...`: a push as it was made (LPUSHX and RPUSHX too: the key
    was there)."""
    return [b"RPUSH" if tail else b"LPUSH", key, *elements]


def pop_effect(key: bytes, tail: bool, count: int | None = None) -> Effect:
    """`LPOP` / `RPOP key [count]`: the elements a pop took (a served blocking pop and LMPOP
    as the plain one), `count` as many as it took."""
    name = b"RPOP" if tail else b"LPOP"
    return [name, key] if count is None else [name, key, _number(count)]


def linsert_effect(key: bytes, after: bool, pivot: bytes, element: bytes) -> Effect:
    """`LINSERT key BEFORE | AFTER pivot element`, the side spelled in capitals."""
    return [b"LINSERT", key, b"AFTER" if after else b"BEFORE", pivot, element]
