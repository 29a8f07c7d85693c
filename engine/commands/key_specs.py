"""The command table's key specs, by name: where each command's keys are and how it uses them.

Owns `DECLARED` (every command's and subcommand's key specs in a compact notation, below),
`KEYLESS` (the commands that have none), `NOTES` and `keys_and_flags`, which finds an argv's keys
with their flags as Redis's getKeysFromCommandWithSpecs does: the key specs first, and where they
fail (or a spec's flags vary with the arguments, SET's) the command's own key finder (Redis's
getkeys_proc: XREAD's, the numkeys commands', SET's). COMMAND INFO renders the specs, COMMAND
GETKEYS and GETKEYSANDFLAGS call `keys_and_flags`, ACL checks keys with it (an `access` key needs
read permission; `update`, `insert` and `delete` need write permission).

The data follows Redis 8.x: redis-server 7.0.15's COMMAND INFO for the commands it has (checked
by tests/differential/test_command_acl_metadata.py, which lists where 8.x differs) and Redis's
src/commands/*.json for the later ones. Must not touch: the table's declarations
(engine.exec.table), engine state.

Notation: a command's specs are separated by ";", each is its flags (Redis's: RO RW OW RM,
ACCESS UPDATE INSERT DELETE, NOT_KEY INCOMPLETE VARIABLE_FLAGS), then where the search begins
(`@2`: at argv[2]; `STREAMS@4`: after the keyword STREAMS, searched from argv[4], backwards for
a negative start; `@?`: unknown), then how the keys are found from there (`r<lastkey>,<step>,
<limit>`: a range; `n<numkeys index>,<first key>,<step>`: a key count; `?`: unknown). A spec of
flags alone is the common one key at argv[1] (`@1 r0,1,0`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from streamkeep.engine.exec.table import CommandSpec

# COMMAND INFO's key-spec flags: each notation word's reply spelling, in Redis's reply order.
FLAG_NAMES: Final = {"RO": "RO", "RW": "RW", "OW": "OW", "RM": "RM", "ACCESS": "access",
                     "UPDATE": "update", "INSERT": "insert", "DELETE": "delete",
                     "NOT_KEY": "not_key", "INCOMPLETE": "incomplete",
                     "VARIABLE_FLAGS": "variable_flags"}
FLAG_ORDER: Final = tuple(FLAG_NAMES.values())

DECLARED: Final[dict[str, str]] = {
    "append": "RW INSERT", "blmove": "RW ACCESS DELETE ; RW INSERT @2 r0,1,0",
    "blmpop": "RW ACCESS DELETE @2 n0,1,1", "blpop": "RW ACCESS DELETE @1 r-2,1,0",
    "brpop": "RW ACCESS DELETE @1 r-2,1,0",
    "brpoplpush": "RW ACCESS DELETE ; RW INSERT @2 r0,1,0",
    "bzmpop": "RW ACCESS DELETE @2 n0,1,1", "bzpopmax": "RW ACCESS DELETE @1 r-2,1,0",
    "bzpopmin": "RW ACCESS DELETE @1 r-2,1,0", "copy": "RO ACCESS ; OW UPDATE @2 r0,1,0",
    "decr": "RW ACCESS UPDATE", "decrby": "RW ACCESS UPDATE", "del": "RM DELETE @1 r-1,1,0",
    "delex": "RW DELETE", "digest": "RO ACCESS", "dump": "RO ACCESS",
    "eval": "RW ACCESS UPDATE @2 n0,1,1", "eval_ro": "RO ACCESS @2 n0,1,1",
    "evalsha": "RW ACCESS UPDATE @2 n0,1,1", "evalsha_ro": "RO ACCESS @2 n0,1,1",
    "exists": "RO @1 r-1,1,0", "expire": "RW UPDATE", "expireat": "RW UPDATE",
    "expiretime": "RO ACCESS", "fcall": "RW ACCESS UPDATE @2 n0,1,1",
    "fcall_ro": "RO ACCESS @2 n0,1,1", "get": "RO ACCESS", "getdel": "RW ACCESS DELETE",
    "getex": "RW ACCESS UPDATE", "getrange": "RO ACCESS", "getset": "RW ACCESS UPDATE",
    "hdel": "RW DELETE", "hexists": "RO", "hexpire": "RW UPDATE", "hexpireat": "RW UPDATE",
    "hexpiretime": "RO ACCESS", "hget": "RO ACCESS", "hgetall": "RO ACCESS",
    "hgetdel": "RW ACCESS DELETE", "hgetex": "RW ACCESS UPDATE", "hincrby": "RW ACCESS UPDATE",
    "hincrbyfloat": "RW ACCESS UPDATE", "hkeys": "RO ACCESS", "hlen": "RO", "hmget": "RO ACCESS",
    "hmset": "RW UPDATE", "hpersist": "RW UPDATE", "hpexpire": "RW UPDATE",
    "hpexpireat": "RW UPDATE", "hpexpiretime": "RO ACCESS", "hpttl": "RO ACCESS",
    "hrandfield": "RO ACCESS", "hscan": "RO ACCESS", "hset": "RW UPDATE", "hsetex": "RW UPDATE",
    "hsetnx": "RW INSERT", "hstrlen": "RO", "httl": "RO ACCESS", "hvals": "RO ACCESS",
    "incr": "RW ACCESS UPDATE", "incrby": "RW ACCESS UPDATE", "incrbyfloat": "RW ACCESS UPDATE",
    "increx": "RW ACCESS UPDATE", "lcs": "RO ACCESS @1 r1,1,0", "lindex": "RO ACCESS",
    "linsert": "RW INSERT", "llen": "RO", "lmove": "RW ACCESS DELETE ; RW INSERT @2 r0,1,0",
    "lmpop": "RW ACCESS DELETE @1 n0,1,1", "lpop": "RW ACCESS DELETE", "lpos": "RO ACCESS",
    "lpush": "RW INSERT", "lpushx": "RW INSERT", "lrange": "RO ACCESS", "lrem": "RW DELETE",
    "lset": "RW UPDATE", "ltrim": "RW DELETE", "memory|usage": "RO @2 r0,1,0",
    "mget": "RO ACCESS @1 r-1,1,0", "mset": "OW UPDATE @1 r-1,2,0",
    "msetex": "OW UPDATE @1 n0,1,2", "msetnx": "OW INSERT @1 r-1,2,0",
    "object|encoding": "RO @2 r0,1,0", "object|freq": "RO @2 r0,1,0",
    "object|idletime": "RO @2 r0,1,0", "object|refcount": "RO @2 r0,1,0", "persist": "RW UPDATE",
    "pexpire": "RW UPDATE", "pexpireat": "RW UPDATE", "pexpiretime": "RO ACCESS",
    "psetex": "OW UPDATE", "pttl": "RO ACCESS",
    "rename": "RW ACCESS DELETE ; OW UPDATE @2 r0,1,0",
    "renamenx": "RW ACCESS DELETE ; OW INSERT @2 r0,1,0", "restore": "OW UPDATE",
    "rpop": "RW ACCESS DELETE", "rpoplpush": "RW ACCESS DELETE ; RW INSERT @2 r0,1,0",
    "rpush": "RW INSERT", "rpushx": "RW INSERT", "sadd": "RW INSERT", "scard": "RO",
    "sdiff": "RO ACCESS @1 r-1,1,0", "sdiffstore": "OW UPDATE ; RO ACCESS @2 r-1,1,0",
    "set": "RW ACCESS UPDATE VARIABLE_FLAGS", "setex": "OW UPDATE", "setnx": "OW INSERT",
    "setrange": "RW UPDATE", "sinter": "RO ACCESS @1 r-1,1,0",
    "sintercard": "RO ACCESS @1 n0,1,1", "sinterstore": "OW UPDATE ; RO ACCESS @2 r-1,1,0",
    "sismember": "RO", "smembers": "RO ACCESS", "smismember": "RO ACCESS",
    "smove": "RW ACCESS DELETE ; RW INSERT @2 r0,1,0", "spop": "RW ACCESS DELETE",
    "spublish": "NOT_KEY", "srandmember": "RO ACCESS", "srem": "RW DELETE", "sscan": "RO ACCESS",
    "ssubscribe": "NOT_KEY @1 r-1,1,0", "strlen": "RO", "substr": "RO ACCESS",
    "sunion": "RO ACCESS @1 r-1,1,0", "sunionstore": "OW UPDATE ; RO ACCESS @2 r-1,1,0",
    "sunsubscribe": "NOT_KEY @1 r-1,1,0", "touch": "RO @1 r-1,1,0", "ttl": "RO ACCESS",
    "type": "RO", "unlink": "RM DELETE @1 r-1,1,0", "watch": "RO @1 r-1,1,0", "xack": "RW UPDATE",
    "xackdel": "RW UPDATE DELETE", "xadd": "RW UPDATE", "xautoclaim": "RW DELETE",
    "xcfgset": "RW UPDATE", "xclaim": "RW UPDATE", "xdel": "RW DELETE", "xdelex": "RW DELETE",
    "xgroup|create": "RW INSERT @2 r0,1,0", "xgroup|createconsumer": "RW INSERT @2 r0,1,0",
    "xgroup|delconsumer": "RW DELETE @2 r0,1,0", "xgroup|destroy": "RW DELETE @2 r0,1,0",
    "xgroup|setid": "RW UPDATE @2 r0,1,0", "xidmprecord": "RW UPDATE",
    "xinfo|consumers": "RO ACCESS @2 r0,1,0", "xinfo|groups": "RO ACCESS @2 r0,1,0",
    "xinfo|stream": "RO ACCESS @2 r0,1,0", "xlen": "RO", "xnack": "RW UPDATE",
    "xpending": "RO ACCESS", "xrange": "RO ACCESS", "xread": "RO ACCESS STREAMS@1 r-1,1,2",
    "xreadgroup": "RO ACCESS STREAMS@4 r-1,1,2", "xrevrange": "RO ACCESS", "xsetid": "RW UPDATE",
    "xtrim": "RW DELETE", "zadd": "RW UPDATE", "zcard": "RO", "zcount": "RO ACCESS",
    "zdiff": "RO ACCESS @1 n0,1,1", "zdiffstore": "OW UPDATE ; RO ACCESS @2 n0,1,1",
    "zincrby": "RW ACCESS UPDATE", "zinter": "RO ACCESS @1 n0,1,1",
    "zintercard": "RO ACCESS @1 n0,1,1", "zinterstore": "OW UPDATE ; RO ACCESS @2 n0,1,1",
    "zlexcount": "RO ACCESS", "zmpop": "RW ACCESS DELETE @1 n0,1,1", "zmscore": "RO ACCESS",
    "zpopmax": "RW ACCESS DELETE", "zpopmin": "RW ACCESS DELETE", "zrandmember": "RO ACCESS",
    "zrange": "RO ACCESS", "zrangebylex": "RO ACCESS", "zrangebyscore": "RO ACCESS",
    "zrangestore": "OW UPDATE ; RO ACCESS @2 r0,1,0", "zrank": "RO ACCESS", "zrem": "RW DELETE",
    "zremrangebylex": "RW DELETE", "zremrangebyrank": "RW DELETE",
    "zremrangebyscore": "RW DELETE", "zrevrange": "RO ACCESS", "zrevrangebylex": "RO ACCESS",
    "zrevrangebyscore": "RO ACCESS", "zrevrank": "RO ACCESS", "zscan": "RO ACCESS",
    "zscore": "RO ACCESS", "zunion": "RO ACCESS @1 n0,1,1",
    "zunionstore": "OW UPDATE ; RO ACCESS @2 n0,1,1",
}

# The commands and subcommands with no key spec (their keys, if any, are not keys: channels).
_KEYLESS = """
    acl acl|cat acl|deluser acl|dryrun acl|genpass acl|getuser acl|help acl|list acl|load
    acl|log acl|save acl|setuser acl|users acl|whoami auth bgrewriteaof bgsave client client|getname client|getredir client|help client|id
    client|info client|kill client|list client|no-evict client|no-touch client|reply
    client|setinfo client|setname client|unblock command command|count command|docs
    command|getkeys command|getkeysandflags command|help command|info command|list config
    config|get config|help config|resetstat config|rewrite config|set dbsize debug debug|digest
    debug|help discard echo exec flushall flushdb function function|delete function|dump
    function|flush function|help function|kill function|list function|load function|restore
    function|stats hello info keys lastsave latency latency|doctor latency|graph latency|help
    latency|histogram latency|history latency|latest latency|reset memory memory|help multi
    object object|help ping psubscribe psync publish pubsub pubsub|channels pubsub|help
    pubsub|numpat pubsub|numsub pubsub|shardchannels pubsub|shardnumsub punsubscribe quit
    replconf replicaof reset role save scan script script|exists script|flush script|help
    script|kill script|load select shutdown slaveof slowlog slowlog|get slowlog|help
    slowlog|len slowlog|reset subscribe sync time unsubscribe unwatch wait waitaof xgroup
    xgroup|help xinfo xinfo|help
"""
KEYLESS: Final = frozenset(_KEYLESS.split())

# A key spec's notes (COMMAND INFO shows them), by the command's name: they are its first spec's.
_WORST = "We cannot tell how the keys will be used so we assume the worst, "
_TTL = "RW and UPDATE because it changes the TTL"
NOTES: Final[dict[str, str]] = {
    "eval": _WORST + "RW and UPDATE", "fcall": _WORST + "RW and UPDATE",
    "eval_ro": _WORST + "RO and ACCESS", "fcall_ro": _WORST + "RO and ACCESS",
    "getex": _TTL, "hgetex": _TTL, "set": "RW and ACCESS due to the optional `GET` argument",
    "xadd": "UPDATE instead of INSERT because of the optional trimming feature",
}


@dataclass(frozen=True, slots=True)
class KeySpec:
    """One key spec. `keyword` None: the search begins at argv[`index`] (an unknown begin when
    `index` is 0); else after `keyword`, searched from argv[`index`]. `find` is "range"
    (`a, b, c` = lastkey, keystep, limit), "keynum" (= numkeys index, first key, keystep) or
    "unknown"."""

    flags: tuple[str, ...]  # reply spellings, in FLAG_ORDER
    index: int
    keyword: str | None
    find: str
    a: int = 0
    b: int = 0
    c: int = 0
    notes: str | None = None

    def has(self, flag: str) -> bool:
        return flag in self.flags


def _parse_spec(name: str, text: str, notes: str | None) -> KeySpec:
    words = text.split()
    flags = {FLAG_NAMES[w] for w in words if w in FLAG_NAMES}
    rest = [w for w in words if w not in FLAG_NAMES] or ["@1", "r0,1,0"]
    if len(rest) != 2 or "@" not in rest[0]:
        raise ValueError(f"{name}: bad key spec {text!r}")
    keyword, _, start = rest[0].partition("@")
    index = 0 if start == "?" else int(start)
    find, numbers = {"r": "range", "n": "keynum", "?": "unknown"}[rest[1][0]], rest[1][1:]
    a, b, c = (int(n) for n in numbers.split(",")) if numbers else (0, 0, 0)
    return KeySpec(tuple(f for f in FLAG_ORDER if f in flags), index, keyword or None, find,
                   a, b, c, notes)


def _parse(name: str, text: str) -> tuple[KeySpec, ...]:
    parts = [p for p in text.split(";") if p.strip()]
    return tuple(_parse_spec(name, p, NOTES.get(name) if i == 0 else None)
                 for i, p in enumerate(parts))


SPECS: Final[dict[str, tuple[KeySpec, ...]]] = {
    **{name: () for name in KEYLESS},
    **{name: _parse(name, text) for name, text in DECLARED.items()},
}


def specs_of(spec: CommandSpec) -> tuple[KeySpec, ...]:
    """`spec`'s key specs, in Redis's order (KeyError for a command with no entry)."""
    return SPECS[spec.name]


# --- finding an argv's keys ----------------------------------------------------------------------

Keys = list[tuple[int, frozenset[str]]]  # argv positions, each with its flags
NO_FLAGS: Final = frozenset[str]()
_DECIMAL: Final = re.compile(rb"-?[1-9][0-9]*|0")


def _atoi(arg: bytes) -> int:
    """C's atoi: leading blanks, a sign, the digits up to the first other byte (0 for none)."""
    text = arg.lstrip(b" \t\n\v\f\r")
    sign = -1 if text[:1] == b"-" else 1
    if text[:1] in (b"-", b"+"):
        text = text[1:]
    digits = len(text) - len(text.lstrip(b"0123456789"))
    return sign * int(text[:digits]) if digits else 0


def _strict_int(arg: bytes) -> int | None:
    """Redis's string2ll: an exact decimal integer (no sign but '-', no leading zero), else None."""
    if _DECIMAL.fullmatch(arg) is None:
        return None
    value = int(arg)
    return value if -2**63 <= value < 2**63 else None


def _numkeys(store: int, count_at: int, first: int) -> Callable[[Sequence[bytes]], Keys]:
    """Redis's genericGetKeys: `argv[count_at]` keys from `first`, then the destination
    `store` (if any), none when the count is out of range."""
    def keys(argv: Sequence[bytes]) -> Keys:
        num = _atoi(argv[count_at])
        if num < 1 or num > len(argv) - first:
            return []
        found = [(first + i, NO_FLAGS) for i in range(num)]
        return found + [(store, NO_FLAGS)] if store else found
    return keys


def _xread_keys(argv: Sequence[bytes]) -> Keys:
    """Redis's xreadGetKeys: the options skipped to the STREAMS that is the option, then the
    first half of what follows it."""
    i, streams = 1, -1
    while i < len(argv):
        arg = argv[i].lower()
        if arg in (b"block", b"count"):
            i += 1
        elif arg == b"group":
            i += 2
        elif arg == b"streams":
            streams = i
            break
        elif arg != b"noack":
            break
        i += 1
    num = len(argv) - streams - 1 if streams != -1 else 0
    if streams == -1 or num == 0 or num % 2:
        return []
    return [(streams + 1 + i, NO_FLAGS) for i in range(num // 2)]


_SET_GET: Final = frozenset({"RW", "access", "update"})
_SET_PLAIN: Final = frozenset({"OW", "update"})


def _set_keys(argv: Sequence[bytes]) -> Keys:
    """Redis's setGetKeys: SET reads its key only with GET."""
    reads = any(arg.lower() == b"get" for arg in argv[3:])
    return [(1, _SET_GET if reads else _SET_PLAIN)]


# Redis's getkeys_proc, for the commands that have one: what finds the keys when the key specs
# cannot (or their flags vary with the arguments). Their flags are empty but for SET's.
KEY_FINDERS: Final[dict[str, Callable[[Sequence[bytes]], Keys]]] = {
    "xread": _xread_keys, "xreadgroup": _xread_keys, "set": _set_keys,
    **{name: _numkeys(0, 2, 3) for name in ("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall",
                                            "fcall_ro", "blmpop", "bzmpop")},
    **{name: _numkeys(0, 1, 2) for name in ("sintercard", "zunion", "zinter", "zdiff",
                                            "zintercard", "lmpop", "zmpop")},
    **{name: _numkeys(1, 2, 3) for name in ("zunionstore", "zinterstore", "zdiffstore")},
}


def _search_begin(ks: KeySpec, argv: Sequence[bytes]) -> int:
    """Where `ks`'s keys begin in argv; 0 when its keyword is absent, -1 for an unknown begin."""
    if ks.keyword is None:
        return ks.index if ks.index else -1
    argc, start = len(argv), ks.index
    begin = start if start > 0 else argc + start
    end = argc - 1 if start > 0 else 1
    keyword = ks.keyword.lower().encode()
    i = begin
    while i != end:
        if i >= argc or i < 1:
            break
        if argv[i].lower() == keyword:
            return i + 1
        i = i + 1 if begin <= end else i - 1
    return 0


def _keys_from_specs(specs: tuple[KeySpec, ...], argv: Sequence[bytes]) -> Keys | None:
    """Redis's getKeysUsingKeySpecs: None when a spec is invalid for this argv (or incomplete)."""
    found: Keys = []
    argc = len(argv)
    for ks in specs:
        if ks.has("not_key"):
            continue
        first = _search_begin(ks, argv)
        if first < 0:
            return None
        if first == 0:
            continue
        if ks.find == "range":
            step = ks.b
            if ks.a >= 0:
                last = first + ks.a
            elif not ks.c:
                last = argc + ks.a
            else:
                last = first + (int((argc - first) / ks.c) + ks.a)  # C's division
        elif ks.find == "keynum":
            step = ks.c
            if ks.a >= argc or first + ks.a >= argc:
                return None
            numkeys = _strict_int(argv[first + ks.a])
            if numkeys is None or numkeys < 0:
                return None
            first += ks.b
            last = first + (numkeys - 1) * step  # the step counted (redis/redis#14659: MSETEX)
        else:
            return None
        if last >= argc or last < first or first >= argc:
            return None
        flags = frozenset(ks.flags)
        found.extend((i, flags) for i in range(first, last + 1, step))
        if ks.has("incomplete"):
            return None
    return found


def has_keys(spec: CommandSpec) -> bool:
    """Redis's doesCommandHaveKeys: a key finder, or a key spec that is a key."""
    return spec.name in KEY_FINDERS or any(not ks.has("not_key") for ks in specs_of(spec))


def key_positions(spec: CommandSpec, argv: Sequence[bytes]) -> Keys:
    """The positions in argv (argv[0] the command's name) of its keys, each with its key-spec
    flags, as Redis's getKeysFromCommandWithSpecs finds them."""
    specs = specs_of(spec)
    real = any(not ks.has("not_key") for ks in specs)
    variable = any(ks.has("variable_flags") for ks in specs)
    if real and not variable:
        found = _keys_from_specs(specs, argv)
        if found is not None:
            return found
    finder = KEY_FINDERS.get(spec.name)
    return finder(argv) if finder is not None else []


def keys_and_flags(spec: CommandSpec, argv: Sequence[bytes]) -> list[tuple[bytes, frozenset[str]]]:
    """Each key of argv (argv[0] the command's name, argv[1] a subcommand's) with its key-spec
    flags (reply spellings: "RW", "access", ...), in Redis's order."""
    return [(argv[i], flags) for i, flags in key_positions(spec, argv)]


def _legacy(specs: tuple[KeySpec, ...]) -> tuple[tuple[int, int, int], bool]:
    """Redis's populateCommandLegacyRangeSpec: COMMAND INFO's (first, last, step) glued from the
    consecutive plain range specs, and whether the keys are movable (some spec is not one)."""
    if not specs:
        return (0, 0, 0), False
    if len(specs) == 1 and specs[0].keyword is None and specs[0].index and \
            specs[0].find == "range":
        only = specs[0]
        return (only.index, only.a + only.index if only.a >= 0 else only.a, only.b), \
            only.has("incomplete")
    movable, first, last, prev_last = False, 1 << 31, 0, 0
    for ks in specs:
        if ks.keyword is not None or not ks.index or ks.find != "range":
            movable = True
            continue
        if ks.b != 1 or (prev_last and prev_last != ks.index - 1):
            movable = True
            continue
        movable = movable or ks.has("incomplete")
        first = min(first, ks.index)
        last_abs = ks.a + ks.index if ks.a >= 0 else ks.a
        last = max(last % (1 << 32), last_abs % (1 << 32))  # C's unsigned comparison
        last = last - (1 << 32) if last >= 1 << 31 else last
        prev_last = last
    if first == 1 << 31:
        return (0, 0, 0), True
    return (first, last, 1), movable


# The commands whose keys no (first, last, step) range describes: COMMAND INFO's movablekeys.
MOVABLE: Final = frozenset(name for name, specs in SPECS.items() if _legacy(specs)[1])


def legacy_range(spec: CommandSpec) -> tuple[int, int, int]:
    """COMMAND INFO's first key, last key and step, as Redis derives them from the key specs."""
    return _legacy(specs_of(spec))[0]
