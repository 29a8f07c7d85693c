"""COMMAND: COUNT, INFO, DOCS, LIST, GETKEYS and the bare command, introspecting the table.

Owns the replies Redis shapes from its command table (flags, ACL categories, key specs, docs,
movable keys); the table itself is engine.exec.table's. Must not touch: engine state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.table import (
    COMMANDS,
    NO_KEYS,
    Argv,
    CommandSpec,
    Flag,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.wire.args import is_word
from streamkeep.engine.wire.argspec import Arg
from streamkeep.engine.wire.errors import SYNTAX, ReplyError
from streamkeep.engine.wire.reply import RespMap, RespSet

# --- COMMAND -----------------------------------------------------------------------------------

# COMMAND INFO's flags, in Redis's order (Flag's own); sentinel and may_replicate (PUBLISH's)
# are never reported: Redis hides them.
REPLY_FLAGS = tuple(flag for flag in Flag if flag not in (Flag.SENTINEL, Flag.MAY_REPLICATE))
ACL_ORDER = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
             "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
             "dangerous", "connection", "transaction", "scripting")
GROUP_CATEGORY = {"generic": "keyspace", "stream": "stream", "connection": "connection",
                  "transactions": "transaction", "pubsub": "pubsub",
                  "sorted_set": "sortedset", "set": "set",
                  "hash": "hash"}
KEYSPACE_SERVER_COMMANDS = frozenset({"dbsize", "flushdb", "flushall"})
DANGEROUS = frozenset({"keys", "flushdb", "flushall", "info", "debug", "shutdown"})


def _stream_keys(argv: Argv | list[bytes]) -> list[int]:
    """XREAD/XREADGROUP: the keys are the first half of what follows STREAMS."""
    for i in range(1, len(argv)):
        if is_word(argv[i], b"streams"):
            rest = len(argv) - i - 1
            return list(range(i + 1, i + 1 + rest // 2))
    return []


def _numkeys_keys(argv: Argv | list[bytes]) -> list[int]:
    """EVAL and its kin: `numkeys` keys after the script."""
    try:
        numkeys = int(argv[2])
    except (IndexError, ValueError):
        return []
    return list(range(3, 3 + max(0, min(numkeys, len(argv) - 3))))


def _msetex_keys(argv: Argv | list[bytes]) -> list[int]:
    """MSETEX: `numkeys` keys after it, every other argument (a value follows each)."""
    try:
        numkeys = int(argv[1])
    except (IndexError, ValueError):
        return []
    return list(range(2, 2 + 2 * max(0, min(numkeys, (len(argv) - 2) // 2)), 2))


def _numkeys_at(at: int, before: tuple[int, ...] = ()) -> Callable[[Argv | list[bytes]], list[int]]:
    """The sorted set commands' keys: `numkeys` at position `at`, that many keys after it, and
    the fixed key positions `before` (a STORE command's destination)."""
    def keys(argv: Argv | list[bytes]) -> list[int]:
        try:
            numkeys = int(argv[at])
        except (IndexError, ValueError):
            return list(before)
        return [*before, *range(at + 1, at + 1 + max(0, min(numkeys, len(argv) - at - 1)))]
    return keys


# Commands whose keys no (first, last, step) range describes: how to find them.
MOVABLE_KEYS: dict[str, Callable[[Argv | list[bytes]], list[int]]] = {
    "xread": _stream_keys, "xreadgroup": _stream_keys,
    "eval": _numkeys_keys, "evalsha": _numkeys_keys, "eval_ro": _numkeys_keys,
    "evalsha_ro": _numkeys_keys, "fcall": _numkeys_keys, "fcall_ro": _numkeys_keys,
    "msetex": _msetex_keys,
    "zunion": _numkeys_at(1), "zinter": _numkeys_at(1), "zdiff": _numkeys_at(1),
    "zintercard": _numkeys_at(1), "zmpop": _numkeys_at(1), "bzmpop": _numkeys_at(2),
    "sintercard": _numkeys_at(1), "lmpop": _numkeys_at(1), "blmpop": _numkeys_at(2),
    "zunionstore": _numkeys_at(2, (1,)), "zinterstore": _numkeys_at(2, (1,)),
    "zdiffstore": _numkeys_at(2, (1,)),
}


def visible_commands() -> list[CommandSpec]:
    """Every command a client may run (effect-only ones are never listed)."""
    return [spec for spec in COMMANDS.values() if not spec.internal]


def find_command(name: bytes) -> CommandSpec | None:
    """By name, case-insensitively; "container|sub" names a subcommand."""
    parent, _, sub = name.lower().partition(b"|")
    spec = COMMANDS.get(parent)
    if spec is None or spec.internal:
        return None
    if sub:
        return spec.subcommands.get(sub)
    return spec


def _flags(spec: CommandSpec) -> RespSet:
    flags = set(spec.flags)
    if spec.name in MOVABLE_KEYS:
        flags.add(Flag.MOVABLEKEYS)
    return RespSet([flag.value for flag in REPLY_FLAGS if flag in flags])


def acl_categories(spec: CommandSpec) -> list[str]:
    """Redis's implicit categories from the flags, plus the group's (containers: none)."""
    cats: set[str] = set()
    flags, top = spec.flags, spec.name.split("|", 1)[0]
    if Flag.WRITE in flags:
        cats.add("write")
    if Flag.READONLY in flags:
        cats.add("read")
    if Flag.ADMIN in flags:
        cats.update(("admin", "dangerous"))
    if Flag.BLOCKING in flags:
        cats.add("blocking")
    cats.add("fast" if Flag.FAST in flags else "slow")
    if not spec.subcommands and spec.group in GROUP_CATEGORY:
        cats.add(GROUP_CATEGORY[spec.group])
    if spec.name in KEYSPACE_SERVER_COMMANDS:
        cats.add("keyspace")
    if top in DANGEROUS:
        cats.add("dangerous")
    if top == "command":
        cats.add("connection")
    return ["@" + c for c in ACL_ORDER if c in cats]


def _key_specs(spec: CommandSpec) -> RespSet:
    """Key specs from the table's key positions (Redis's own are finer-grained)."""
    if spec.name in ("xread", "xreadgroup"):
        flags = ["RW", "access"] if spec.is_write else ["RO", "access"]
        return RespSet([RespMap([
            (b"flags", RespSet(flags)),
            (b"begin_search", RespMap([(b"type", b"keyword"), (b"spec", RespMap(
                [(b"keyword", b"STREAMS"), (b"startfrom", 1)]))])),
            (b"find_keys", RespMap([(b"type", b"range"), (b"spec", RespMap(
                [(b"lastkey", -1), (b"keystep", 1), (b"limit", 2)]))])),
        ])])
    if spec.first_key <= 0:
        return RespSet([])
    flags = ["RW", "update"] if spec.is_write else ["RO", "access"]
    last = spec.last_key - spec.first_key if spec.last_key >= 0 else spec.last_key
    return RespSet([RespMap([
        (b"flags", RespSet(flags)),
        (b"begin_search", RespMap([(b"type", b"index"),
                                   (b"spec", RespMap([(b"index", spec.first_key)]))])),
        (b"find_keys", RespMap([(b"type", b"range"), (b"spec", RespMap(
            [(b"lastkey", last), (b"keystep", spec.key_step), (b"limit", 0)]))])),
    ])])


def command_info(spec: CommandSpec) -> list[Any]:
    """A COMMAND INFO entry, Redis 7's ten fields."""
    subs: Any = [command_info(s) for s in spec.subcommands.values()] if spec.subcommands \
        else RespSet([])
    return [spec.name.encode(), spec.arity, _flags(spec), spec.first_key, spec.last_key,
            spec.key_step, RespSet(acl_categories(spec)), RespSet([]), _key_specs(spec), subs]


def command_docs(spec: CommandSpec) -> RespMap:
    """A COMMAND DOCS entry: summary, since, group, arguments, subcommands (bulk strings,
    argument flags as simple strings: redis-cli's help reader asserts those types)."""
    items: list[tuple[Any, Any]] = [(b"summary", spec.summary.encode()),
                                    (b"since", spec.since.encode()),
                                    (b"group", spec.group.encode())]
    if spec.args:
        keys = iter(range(len(spec.args)))  # each top-level key argument: its key spec
        items.append((b"arguments", [_arg_docs(a, keys) for a in spec.args]))
    if spec.subcommands:
        items.append((b"subcommands", RespMap([(s.name.encode(), command_docs(s))
                                                for s in spec.subcommands.values()])))
    return RespMap(items)


def _arg_docs(arg: Arg, key_specs: Iterator[int]) -> RespMap:
    items: list[tuple[Any, Any]] = [(b"name", arg.name.encode()), (b"type", arg.type.encode())]
    if arg.type not in ("pure-token", "oneof", "block"):
        items.append((b"display_text", arg.name.encode()))
    if arg.type == "key":
        items.append((b"key_spec_index", next(key_specs, 0)))
    if arg.token:
        items.append((b"token", arg.token.encode()))
    flags = [f for f, on in (("optional", arg.optional), ("multiple", arg.multiple)) if on]
    if flags:
        items.append((b"flags", RespSet(flags)))
    if arg.arguments:
        items.append((b"arguments", [_arg_docs(a, key_specs) for a in arg.arguments]))
    return RespMap(items)


def command_all(ctx: Ctx, argv: Argv) -> list[Any]:
    return [command_info(spec) for spec in visible_commands()]


COMMAND = container("command", "Returns detailed information about all commands.",
                    group="server", since="2.8.13", handler=command_all, flags="loading stale")


@subcommand(COMMAND, "count", 2, "loading stale", keys=NO_KEYS, since="2.8.13",
            summary="Returns a count of commands.")
def command_count(ctx: Ctx, argv: Argv) -> int:
    return len(visible_commands())


@subcommand(COMMAND, "info", -2, "loading stale", keys=NO_KEYS, since="2.8.13",
            summary="Returns information about one, multiple or all commands.",
            syntax="[command-name...]")
def command_info_cmd(ctx: Ctx, argv: Argv) -> list[Any]:
    if len(argv) == 2:
        return command_all(ctx, argv)
    out: list[Any] = []
    for name in argv[2:]:
        spec = find_command(name)
        out.append(command_info(spec) if spec is not None else None)
    return out


@subcommand(COMMAND, "docs", -2, "loading stale", keys=NO_KEYS, since="7.0.0",
            summary="Returns documentary information about one, multiple or all commands.",
            syntax="[command-name...]")
def command_docs_cmd(ctx: Ctx, argv: Argv) -> RespMap:
    if len(argv) == 2:
        specs = visible_commands()
    else:
        specs = [s for s in map(find_command, argv[2:]) if s is not None]
    return RespMap([(spec.name.encode(), command_docs(spec)) for spec in specs])


def _all_names(specs: Iterable[CommandSpec]) -> Iterable[CommandSpec]:
    for spec in specs:
        yield spec
        yield from _all_names(spec.subcommands.values())


def _in_category(category: str) -> Callable[[CommandSpec], bool]:
    return lambda spec: category in acl_categories(spec)


def _matching(pattern: bytes) -> Callable[[CommandSpec], bool]:
    return lambda spec: stringmatchlen(pattern, spec.name.encode(), nocase=True)


@subcommand(COMMAND, "list", -2, "loading stale", keys=NO_KEYS, since="7.0.0",
            summary="Returns a list of command names.",
            syntax="[filterby: FILTERBY <MODULE module-name | ACLCAT category "
                   "| PATTERN pattern:pattern>]")
def command_list(ctx: Ctx, argv: Argv) -> list[bytes]:
    keep: Callable[[CommandSpec], bool] = lambda spec: True  # noqa: E731
    i = 2
    while i < len(argv):
        if is_word(argv[i], b"filterby") and len(argv) - 1 - i == 2:
            kind, arg = argv[i + 1], argv[i + 2]
            if is_word(kind, b"module"):
                keep = lambda spec: False  # noqa: E731 - no modules
            elif is_word(kind, b"aclcat"):
                keep = _in_category("@" + arg.decode("utf-8", "replace").lower())
            elif is_word(kind, b"pattern"):
                keep = _matching(arg)
            else:
                raise ReplyError(SYNTAX)
            i += 3
        else:
            raise ReplyError(SYNTAX)
    return [spec.name.encode() for spec in _all_names(visible_commands()) if keep(spec)]


def command_keys(spec: CommandSpec, argv: Argv | list[bytes]) -> list[int]:
    """Positions of the keys in argv (COMMAND GETKEYS), from the table's key range."""
    finder = MOVABLE_KEYS.get(spec.name)
    if finder is not None:
        return finder(argv)
    if spec.first_key <= 0:
        return []
    last = spec.last_key if spec.last_key >= 0 else len(argv) + spec.last_key
    return [i for i in range(spec.first_key, last + 1, max(spec.key_step, 1)) if i < len(argv)]


@subcommand(COMMAND, "getkeys", -4, "loading stale", keys=NO_KEYS, since="2.8.13",
            summary="Extracts the key names from an arbitrary command.", syntax="command [arg...]")
def command_getkeys(ctx: Ctx, argv: Argv) -> list[bytes]:
    target = argv[2:]
    spec = COMMANDS.get(target[0].lower())
    if spec is not None and spec.internal:
        spec = None
    if spec is not None and spec.subcommands and len(target) > 1:
        spec = spec.subcommands.get(target[1].lower())
    if spec is None:
        raise ReplyError("ERR Invalid command specified")
    if spec.first_key <= 0 and spec.name not in MOVABLE_KEYS:
        raise ReplyError("ERR The command has no key arguments")
    n = len(target)
    if (spec.arity > 0 and spec.arity != n) or n < -spec.arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    positions = command_keys(spec, target)
    if not positions:
        raise ReplyError("ERR Invalid arguments specified for command")
    return [target[i] for i in positions]


help_subcommand(COMMAND, [
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
])
