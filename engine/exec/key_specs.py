"""Key specs: where a command's keys are and how it uses them, and the finding of an argv's keys.

Owns `KeySpec` and its notation (`parse_key_specs`, which every declaration of the command table
goes through: engine.exec.table's `command(..., keys=...)`), the key finders Redis's commands
without usable specs have (`numkeys`; a command's own finder is declared beside it, XREAD's and
SET's), and the finding of an argv's keys with their flags as Redis's
getKeysFromCommandWithSpecs does (`key_positions`, `keys_and_flags`: the key specs first, and
where they fail, or a spec's flags vary with the arguments, the command's own finder), and the
legacy (first, last, step) range and movablekeys Redis derives from the specs (`legacy_range`).
COMMAND INFO renders the specs, COMMAND GETKEYS and GETKEYSANDFLAGS call `keys_and_flags`, ACL
checks keys with it (an `access` key needs read permission; `update`, `insert` and `delete` need
write permission), and a cluster routes a command by them.

Notation: a command's specs are separated by ";", each is its flags (Redis's: RO RW OW RM,
ACCESS UPDATE INSERT DELETE, NOT_KEY INCOMPLETE VARIABLE_FLAGS), then where the search begins
(`@2`: at argv[2]; `STREAMS@4`: after the keyword STREAMS, searched from argv[4], backwards for
a negative start; `@?`: unknown), then how the keys are found from there (`r<lastkey>,<step>,
<limit>`: a range; `n<numkeys index>,<first key>,<step>`: a key count; `?`: unknown). A spec of
flags alone is the common one key at argv[1] (`@1 r0,1,0`); "" declares no key spec.

Must not touch: the table's declarations (engine.exec.table reads this module, never the other
way), engine state.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from streamkeep.engine.exec.table import CommandSpec

# COMMAND INFO's key-spec flags: each notation word's reply spelling, in Redis's reply order.
FLAG_NAMES: Final = {"RO": "RO", "RW": "RW", "OW": "OW", "RM": "RM", "ACCESS": "access",
                     "UPDATE": "update", "INSERT": "insert", "DELETE": "delete",
                     "NOT_KEY": "not_key", "INCOMPLETE": "incomplete",
                     "VARIABLE_FLAGS": "variable_flags"}
FLAG_ORDER: Final = tuple(FLAG_NAMES.values())

Keys = list[tuple[int, frozenset[str]]]  # argv positions, each with its flags
KeyFinder = Callable[[Sequence[bytes]], Keys]  # Redis's getkeys_proc
NO_FLAGS: Final = frozenset[str]()
_DECIMAL: Final = re.compile(rb"-?[1-9][0-9]*|0")


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
        raise ValueError(f"command {name!r} declares a bad key spec {text!r}")
    keyword, _, start = rest[0].partition("@")
    index = 0 if start == "?" else int(start)
    find, numbers = {"r": "range", "n": "keynum", "?": "unknown"}[rest[1][0]], rest[1][1:]
    a, b, c = (int(n) for n in numbers.split(",")) if numbers else (0, 0, 0)
    return KeySpec(tuple(f for f in FLAG_ORDER if f in flags), index, keyword or None, find,
                   a, b, c, notes)


def parse_key_specs(name: str, text: str, notes: str | None = None) -> tuple[KeySpec, ...]:
    """A declaration's key specs (the notation above; `notes`, COMMAND INFO's, are the first
    spec's). ValueError naming the command for a spec that does not parse."""
    parts = [p for p in text.split(";") if p.strip()]
    return tuple(_parse_spec(name, p, notes if i == 0 else None) for i, p in enumerate(parts))


# --- key finders ---------------------------------------------------------------------------------


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


def numkeys(store: int, count_at: int, first: int) -> KeyFinder:
    """Redis's genericGetKeys, the finder of the commands that count their keys: `argv[count_at]`
    keys from `first`, then the destination `store` (if any), none when the count is out of
    range."""
    def keys(argv: Sequence[bytes]) -> Keys:
        num = _atoi(argv[count_at])
        if num < 1 or num > len(argv) - first:
            return []
        found = [(first + i, NO_FLAGS) for i in range(num)]
        return found + [(store, NO_FLAGS)] if store else found
    return keys


# --- an argv's keys ------------------------------------------------------------------------------


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


def _keys_from_specs(specs: tuple[KeySpec, ...], argv: Sequence[bytes],
                     not_keys: bool = False) -> Keys | None:
    """Redis's getKeysUsingKeySpecs: None when a spec is invalid for this argv (or incomplete);
    the specs flagged NOT_KEY too with `not_keys` (the sharded channels a cluster routes)."""
    found: Keys = []
    argc = len(argv)
    for ks in specs:
        if not not_keys and ks.has("not_key"):
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
            count = _strict_int(argv[first + ks.a])
            if count is None or count < 0:
                return None
            first += ks.b
            last = first + (count - 1) * step  # the step counted (redis/redis#14659: MSETEX)
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
    return spec.key_finder is not None or any(not ks.has("not_key") for ks in spec.key_specs)


def key_positions(spec: CommandSpec, argv: Sequence[bytes]) -> Keys:
    """The positions in argv (argv[0] the command's name) of its keys, each with its key-spec
    flags, as Redis's getKeysFromCommandWithSpecs finds them."""
    specs = spec.key_specs
    real = any(not ks.has("not_key") for ks in specs)
    variable = any(ks.has("variable_flags") for ks in specs)
    if real and not variable:
        found = _keys_from_specs(specs, argv)
        if found is not None:
            return found
    finder = spec.key_finder
    return finder(argv) if finder is not None else []


def slot_positions(spec: CommandSpec, argv: Sequence[bytes]) -> Keys:
    """The positions a cluster node hashes to route argv: its keys, or a sharded Pub/Sub
    command's channels (whose specs are NOT_KEY: not keys to ACL or GETKEYS, but slots all
    the same)."""
    if spec.key_specs and all(ks.has("not_key") for ks in spec.key_specs):
        return _keys_from_specs(spec.key_specs, argv, not_keys=True) or []
    return key_positions(spec, argv)


def keys_and_flags(spec: CommandSpec, argv: Sequence[bytes]) -> list[tuple[bytes, frozenset[str]]]:
    """Each key of argv (argv[0] the command's name, argv[1] a subcommand's) with its key-spec
    flags (reply spellings: "RW", "access", ...), in Redis's order."""
    return [(argv[i], flags) for i, flags in key_positions(spec, argv)]


def legacy_range(specs: tuple[KeySpec, ...]) -> tuple[tuple[int, int, int], bool]:
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


__all__ = ["FLAG_NAMES", "FLAG_ORDER", "NO_FLAGS", "KeyFinder", "KeySpec", "Keys", "has_keys",
           "key_positions", "keys_and_flags", "legacy_range", "numkeys", "parse_key_specs",
           "slot_positions"]
