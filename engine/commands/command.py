"""COMMAND: COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS and the bare command.

Owns the replies Redis shapes from its command table (flags, ACL categories, key specs, docs,
movable keys), all from each command's one declaration in the command table (engine.exec.table;
its ACL categories as engine.exec.categories derives them, its key specs as engine.exec.key_specs
finds keys by them). Must not touch: engine state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec import key_specs
from streamkeep.engine.exec.categories import categories_of
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.table import (
    COMMANDS,
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
    if spec.movable_keys:  # (no (first, last, step) range describes its keys)
        flags.add(Flag.MOVABLEKEYS)
    return RespSet([flag.value for flag in REPLY_FLAGS if flag in flags])


def acl_categories(spec: CommandSpec) -> list[str]:
    """COMMAND INFO's ACL categories of `spec` ("@write", ...): engine.exec.categories'."""
    return categories_of(spec)


def _key_spec_reply(ks: key_specs.KeySpec) -> RespMap:
    """One key spec as Redis's addReplyCommandKeySpecs renders it."""
    if ks.index == 0:
        begin = RespMap([(b"type", b"unknown"), (b"spec", RespMap([]))])
    elif ks.keyword is None:
        begin = RespMap([(b"type", b"index"), (b"spec", RespMap([(b"index", ks.index)]))])
    else:
        begin = RespMap([(b"type", b"keyword"), (b"spec", RespMap(
            [(b"keyword", ks.keyword.encode()), (b"startfrom", ks.index)]))])
    if ks.find == "range":
        find = RespMap([(b"type", b"range"), (b"spec", RespMap(
            [(b"lastkey", ks.a), (b"keystep", ks.b), (b"limit", ks.c)]))])
    elif ks.find == "keynum":
        find = RespMap([(b"type", b"keynum"), (b"spec", RespMap(
            [(b"keynumidx", ks.a), (b"firstkey", ks.b), (b"keystep", ks.c)]))])
    else:
        find = RespMap([(b"type", b"unknown"), (b"spec", RespMap([]))])
    items: list[tuple[Any, Any]] = [(b"notes", ks.notes.encode())] if ks.notes else []
    items += [(b"flags", RespSet(list(ks.flags))), (b"begin_search", begin),
              (b"find_keys", find)]
    return RespMap(items)


def _key_specs(spec: CommandSpec) -> RespSet:
    """COMMAND INFO's key specs, as the command's declaration has them."""
    return RespSet([_key_spec_reply(ks) for ks in spec.key_specs])


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


def _arg_docs(arg: Arg, spec_index: Iterator[int]) -> RespMap:
    items: list[tuple[Any, Any]] = [(b"name", arg.name.encode()), (b"type", arg.type.encode())]
    if arg.type not in ("pure-token", "oneof", "block"):
        items.append((b"display_text", arg.name.encode()))
    if arg.type == "key":
        items.append((b"key_spec_index", next(spec_index, 0)))
    if arg.token:
        items.append((b"token", arg.token.encode()))
    flags = [f for f, on in (("optional", arg.optional), ("multiple", arg.multiple)) if on]
    if flags:
        items.append((b"flags", RespSet(flags)))
    if arg.arguments:
        items.append((b"arguments", [_arg_docs(a, spec_index) for a in arg.arguments]))
    return RespMap(items)


def command_all(ctx: Ctx, argv: Argv) -> list[Any]:
    return [command_info(spec) for spec in visible_commands()]


COMMAND = container("command", "Returns detailed information about all commands.", group="server",
                    since="2.8.13",
                    acl="connection", handler=command_all, flags="loading stale")


@subcommand(COMMAND, "count", 2, "loading stale", since="2.8.13",
            acl="connection", keys="",
            summary="Returns a count of commands.")
def command_count(ctx: Ctx, argv: Argv) -> int:
    return len(visible_commands())


@subcommand(COMMAND, "info", -2, "loading stale", since="2.8.13",
            acl="connection", keys="",
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


@subcommand(COMMAND, "docs", -2, "loading stale", since="7.0.0",
            acl="connection", keys="",
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


@subcommand(COMMAND, "list", -2, "loading stale", since="7.0.0",
            acl="connection", keys="",
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
    """Positions of the keys in argv (COMMAND GETKEYS), from the key specs
    (engine.exec.key_specs)."""
    return [i for i, _flags in key_specs.key_positions(spec, argv)]


def _getkeys(argv: Argv) -> tuple[Argv, list[tuple[int, frozenset[str]]]]:
    """COMMAND GETKEYS/GETKEYSANDFLAGS (Redis's getKeysSubcommandImpl): the target command line
    and its keys' positions with their flags, or Redis's error."""
    target = argv[2:]
    spec = COMMANDS.get(target[0].lower())
    if spec is not None and spec.internal:
        spec = None
    if spec is not None and spec.subcommands and len(target) > 1:
        spec = spec.subcommands.get(target[1].lower())
    if spec is None:
        raise ReplyError("ERR Invalid command specified")
    if not key_specs.has_keys(spec):
        raise ReplyError("ERR The command has no key arguments")
    n = len(target)
    if (spec.arity > 0 and spec.arity != n) or n < -spec.arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    found = key_specs.key_positions(spec, target)
    if not found and Flag.NO_MANDATORY_KEYS not in spec.flags:
        raise ReplyError("ERR Invalid arguments specified for command")
    return target, found


@subcommand(COMMAND, "getkeys", -4, "loading stale", since="2.8.13",
            acl="connection", keys="",
            summary="Extracts the key names from an arbitrary command.", syntax="command [arg...]")
def command_getkeys(ctx: Ctx, argv: Argv) -> list[bytes]:
    target, found = _getkeys(argv)
    return [target[i] for i, _flags in found]


@subcommand(COMMAND, "getkeysandflags", -4, "loading stale", since="7.0.0",
            acl="connection", keys="",
            summary="Extracts the key names and access flags for an arbitrary command.",
            syntax="command arg [arg...]")
def command_getkeysandflags(ctx: Ctx, argv: Argv) -> list[list[Any]]:
    target, found = _getkeys(argv)
    return [[target[i], RespSet([f for f in key_specs.FLAG_ORDER if f in flags])]
            for i, flags in found]


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
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
], acl="connection")
