"""The command table: every command declared once (name, arity, flags, keys, handler, docs).

Owns `CommandSpec`, the command flags (`Flag`, Redis's own), the `command`/`subcommand`
declarators and `lookup`, which turns an argv into the spec to run or the exact Redis error
(unknown command, unknown subcommand, wrong arity). The embedded API, the server, COMMAND and the
docs all read this table. Must not touch: engine state. Command modules register themselves on
import; `engine.commands` imports them all.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from streamkeep.engine.wire.argspec import Arg, parse_syntax
from streamkeep.engine.wire.errors import unknown_command, unknown_subcommand, wrong_arity
from streamkeep.engine.wire.reply import help_reply

# A command line as handlers receive it: the engine passes tuples (immutable, and the slices
# XADD stores are tuples too); lists are accepted wherever only reading is needed.
Argv = tuple[bytes, ...]
Handler = Callable[[Any, Argv], Any]
ADMIN = "admin noscript loading stale"  # the flags Redis gives its admin commands
NO_KEYS = (0, 0, 0)  # first key, last key, step: a command that takes no key


class Flag(enum.StrEnum):
    """Redis's command flags (server.h's CMD_*), spelled and ordered as COMMAND INFO reports
    them; SENTINEL (a command Redis also serves in sentinel mode) and MAY_REPLICATE are never
    reported. Commands declare them as a space-separated string ("write denyoom fast"): a word
    that is not a member fails the declaration at import, so a typo cannot silently drop, say,
    the write check."""

    WRITE = "write"
    READONLY = "readonly"
    DENYOOM = "denyoom"
    MODULE = "module"
    ADMIN = "admin"
    PUBSUB = "pubsub"
    NOSCRIPT = "noscript"
    BLOCKING = "blocking"
    LOADING = "loading"
    STALE = "stale"
    SKIP_MONITOR = "skip_monitor"
    SKIP_SLOWLOG = "skip_slowlog"
    ASKING = "asking"
    FAST = "fast"
    NO_AUTH = "no_auth"
    MAY_REPLICATE = "may_replicate"
    NO_MANDATORY_KEYS = "no_mandatory_keys"
    NO_ASYNC_LOADING = "no_async_loading"
    NO_MULTI = "no_multi"
    MOVABLEKEYS = "movablekeys"  # computed from the key positions, never declared
    ALLOW_BUSY = "allow_busy"
    SENTINEL = "sentinel"


_DECLARABLE_FLAGS = {flag.value: flag for flag in Flag if flag is not Flag.MOVABLEKEYS}


def parse_flags(command_name: str, declared: str) -> frozenset[Flag]:
    """A declaration's space-separated flags as members; ValueError naming the command and
    the word for anything else."""
    flags = []
    for word in declared.split():
        flag = _DECLARABLE_FLAGS.get(word)
        if flag is None:
            raise ValueError(f"command {command_name!r} declares an unknown flag {word!r}")
        flags.append(flag)
    return frozenset(flags)


@dataclass(slots=True)
class CommandSpec:
    name: str  # lowercase full name: "xadd", "xgroup|create"
    arity: int  # Redis convention: N exact, -N at least N (command name included)
    flags: frozenset[Flag]
    handler: Handler | None
    first_key: int = 1
    last_key: int = 1
    key_step: int = 1
    summary: str = ""
    group: str = "stream"
    since: str = "5.0.0"
    internal: bool = False  # effect-only vocabulary: applied by replay, refused to clients
    subcommands: dict[bytes, CommandSpec] = field(default_factory=dict)
    args: tuple[Arg, ...] = ()  # its syntax (engine.argspec), for COMMAND DOCS
    is_write: bool = field(init=False, repr=False, compare=False)  # Flag.WRITE, worked out once
    is_blocking: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.is_write = Flag.WRITE in self.flags
        self.is_blocking = Flag.BLOCKING in self.flags


COMMANDS: Final[dict[bytes, CommandSpec]] = {}
_FAST: Final[dict[bytes, CommandSpec]] = {}  # lower, UPPER and Capitalised spellings


# The plain commands (not containers, not internal) by their common spellings: what an engine's
# dispatch table holds an entry for (engine.runtime.dispatch). Anything else goes through `lookup`.
FAST_DISPATCH: dict[bytes, CommandSpec] = {}


def _register(spec: CommandSpec) -> None:
    key = spec.name.encode()
    COMMANDS[key] = spec
    for spelling in (key, key.upper(), key.capitalize()):
        _FAST[spelling] = spec
        if spec.handler is not None and not spec.internal:
            FAST_DISPATCH[spelling] = spec


def command(
    name: str,
    arity: int,
    flags: str = "",
    keys: tuple[int, int, int] = (1, 1, 1),
    summary: str = "",
    group: str = "stream",
    since: str = "5.0.0",
    internal: bool = False,
    syntax: str = "",
) -> Callable[[Handler], Handler]:
    """Declare a command and its handler `handler(ctx, argv) -> reply`. `syntax` is its
    argument line as redis.io writes it (engine.argspec's notation), for COMMAND DOCS."""
    spec_flags = parse_flags(name, flags)  # a bad flag fails here, at import

    def register(handler: Handler) -> Handler:
        _register(
            CommandSpec(
                name, arity, spec_flags, handler, *keys,
                summary=summary, group=group, since=since, internal=internal,
                args=parse_syntax(syntax),
            )
        )
        return handler

    return register


def container(
    name: str, summary: str, group: str = "stream", since: str = "5.0.0",
    handler: Handler | None = None, flags: str = "",
) -> CommandSpec:
    """Declare a command made of subcommands (XGROUP, XINFO). With `handler`, the command alone
    (no subcommand) runs it, as COMMAND does (arity -1); it is never fast-dispatched."""
    spec = CommandSpec(name, -2 if handler is None else -1, parse_flags(name, flags), None,
                       0, 0, 0, summary=summary, group=group, since=since)
    _register(spec)
    spec.handler = handler  # after _register: the fast path must not see a container
    return spec


def subcommand(
    parent: CommandSpec,
    name: str,
    arity: int,
    flags: str = "",
    keys: tuple[int, int, int] = (2, 2, 1),
    summary: str = "",
    since: str = "5.0.0",
    syntax: str = "",
) -> Callable[[Handler], Handler]:
    full_name = f"{parent.name}|{name}"
    spec_flags = parse_flags(full_name, flags)  # a bad flag fails here, at import

    def register(handler: Handler) -> Handler:
        spec = CommandSpec(
            full_name, arity, spec_flags, handler, *keys,
            summary=summary, group=parent.group, since=since, args=parse_syntax(syntax),
        )
        parent.subcommands[name.encode()] = spec
        return handler

    return register


def help_subcommand(
    parent: CommandSpec, lines: list[str], flags: str = "loading stale", since: str = "5.0.0",
) -> None:
    """Declare `<parent> HELP`: Redis's help reply (addReplyHelp) listing `lines`."""

    def help_handler(ctx: Any, argv: Argv) -> list[str]:
        return help_reply(argv[0], lines)

    subcommand(parent, "help", 2, flags, keys=NO_KEYS, since=since,
               summary="Returns helpful text about the different subcommands.")(help_handler)


def command_names() -> list[str]:
    """Every command's and subcommand's full name a client may run ("xinfo", "xinfo|stream"),
    each container followed by its subcommands, in name order."""
    names = []
    for key in sorted(COMMANDS):
        spec = COMMANDS[key]
        if spec.internal:
            continue
        names.append(spec.name)
        names.extend(spec.subcommands[sub].name for sub in sorted(spec.subcommands))
    return names


def resolve(argv: Argv | list[bytes]) -> CommandSpec | None:
    """The command argv names whatever its arity (Redis's lookupCommand): None for an unknown
    command or subcommand; a container alone is the container. For refusals' statistics."""
    spec = _FAST.get(argv[0])  # (the usual spellings: no lowered copy of the name)
    if spec is None:
        spec = COMMANDS.get(argv[0].lower())
    if spec is None or spec.internal:
        return None
    if spec.subcommands and len(argv) > 1:
        return spec.subcommands.get(argv[1].lower())
    return spec


def lookup(argv: Argv | list[bytes], allow_internal: bool = False) -> CommandSpec:
    """The spec to run for argv, or ReplyError exactly as Redis rejects the command."""
    spec = _FAST.get(argv[0])
    if spec is None:
        spec = COMMANDS.get(argv[0].lower())
        if spec is None or (spec.internal and not allow_internal):
            raise unknown_command(argv)
    elif spec.internal and not allow_internal:
        raise unknown_command(argv)
    if spec.subcommands:
        if len(argv) < 2:
            if spec.handler is None:
                raise wrong_arity(spec.name)
            return spec
        sub = spec.subcommands.get(argv[1].lower())
        if sub is None:
            raise unknown_subcommand(argv)
        spec = sub
    n, arity = len(argv), spec.arity
    if (arity > 0 and n != arity) or n < -arity:
        raise wrong_arity(spec.name)
    return spec
