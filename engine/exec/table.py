"""The command table: every command declared once (name, arity, flags, keys, handler, docs).

Owns `CommandSpec`, the `command`/`subcommand` declarators and `lookup`, which turns an argv into
the spec to run or the exact Redis error (unknown command, unknown subcommand, wrong arity). The
embedded API, the server, COMMAND and the docs all read this table. Must not touch: engine state.
Command modules register themselves on import; `engine.commands` imports them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamkeep.engine.wire.argspec import Arg, parse_syntax
from streamkeep.engine.wire.errors import unknown_command, unknown_subcommand, wrong_arity
from streamkeep.engine.wire.reply import help_reply

# A command line as handlers receive it: the engine passes tuples (immutable, and the slices
# XADD stores are tuples too); lists are accepted wherever only reading is needed.
Argv = tuple[bytes, ...]
Handler = Callable[[Any, Argv], Any]
NO_KEYS = (0, 0, 0)  # first key, last key, step: a command that takes no key


@dataclass(slots=True)
class CommandSpec:
    name: str  # lowercase full name: "xadd", "xgroup|create"
    arity: int  # Redis convention: N exact, -N at least N (command name included)
    flags: frozenset[str]
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

    @property
    def is_write(self) -> bool:
        return "write" in self.flags

    @property
    def is_blocking(self) -> bool:
        return "blocking" in self.flags


COMMANDS: dict[bytes, CommandSpec] = {}
_FAST: dict[bytes, CommandSpec] = {}  # lower, UPPER and Capitalised spellings


# The dispatch fast path: plain (not container, not internal) commands by common spelling,
# with the argument-count bounds their arity allows. Anything else goes through `lookup`.
FAST_DISPATCH: dict[bytes, tuple[Handler, int, int, bool]] = {}  # handler, min, max, write


def _register(spec: CommandSpec) -> None:
    key = spec.name.encode()
    COMMANDS[key] = spec
    for spelling in (key, key.upper(), key.capitalize()):
        _FAST[spelling] = spec
        if spec.handler is not None and not spec.internal:
            bounds = (spec.arity, spec.arity) if spec.arity > 0 else (-spec.arity, 1 << 30)
            FAST_DISPATCH[spelling] = (spec.handler, *bounds, spec.is_write)


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

    def register(handler: Handler) -> Handler:
        _register(
            CommandSpec(
                name, arity, frozenset(flags.split()), handler, *keys,
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
    spec = CommandSpec(name, -2 if handler is None else -1, frozenset(flags.split()), None,
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
    def register(handler: Handler) -> Handler:
        spec = CommandSpec(
            f"{parent.name}|{name}", arity, frozenset(flags.split()), handler, *keys,
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
