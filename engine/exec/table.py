"""The command table: every command declared once, beside its handler.

Owns `CommandSpec` (everything the server knows of a command, from its one declaration), the
command flags (`Flag`, Redis's own), the `command`/`container`/`subcommand` declarators and
`lookup`, which turns an argv into the spec to run or the exact Redis error (unknown command,
unknown subcommand, wrong arity). A declaration holds a command's arity, flags, ACL categories
(`acl`: those beyond what its flags imply, engine.exec.categories), key specs (`keys`, with its
key finder and notes: engine.exec.key_specs; a cluster routes by them), the effects its handler
may log (`logs`: names in the effect vocabulary) and, for a command that is itself an effect,
the shape effects give it (`effect`), its COMMAND DOCS entry (`summary`, `group`, `since`,
`syntax`: engine.wire.argspec's notation). Everything else is derived from the table: COMMAND
INFO and DOCS, ACL CAT, COMMAND GETKEYS, the effect vocabulary (`effect_vocabulary`), the legacy
key range. The embedded API, the server, COMMAND and the docs all read this table. Must not
touch: engine state. Command modules register themselves on import; `engine.commands` imports
them all.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from streamkeep.engine.exec.key_specs import KeyFinder, KeySpec, legacy_range, parse_key_specs
from streamkeep.engine.wire.argspec import Arg, parse_syntax
from streamkeep.engine.wire.errors import unknown_command, unknown_subcommand, wrong_arity
from streamkeep.engine.wire.reply import help_reply

# A command line as handlers receive it: the engine passes tuples (immutable, and the slices
# XADD stores are tuples too); lists are accepted wherever only reading is needed.
Argv = tuple[bytes, ...]
Handler = Callable[[Any, Argv], Any]
ADMIN = "admin noscript loading stale"  # the flags Redis gives its admin commands
# `logs=ANY_EFFECTS`: a command that runs others (EXEC, a script) logs what they log.
ANY_EFFECTS: Final = ("*",)


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
    """One command or subcommand, as its declaration made it (see the module docstring)."""

    name: str  # lowercase full name: "xadd", "xgroup|create"
    arity: int  # Redis convention: N exact, -N at least N (command name included)
    flags: frozenset[Flag]
    handler: Handler | None
    acl: frozenset[str] = frozenset()  # ACL categories beyond the flags' (engine.exec.categories)
    key_specs: tuple[KeySpec, ...] = ()
    key_finder: KeyFinder | None = None  # Redis's getkeys_proc, where the key specs fall short
    # The effect vocabulary names the handler may log (beyond lazy expiry's DELs, which the
    # engine logs before any command); None: whatever the commands it runs log (EXEC, scripts).
    logs: frozenset[str] | None = frozenset()
    # As an effect: the shape effects give it, its name included ("FLUSHDB", "XDEL key id
    # [id ...]"); "" if it is none.
    effect: str = ""
    summary: str = ""
    group: str = "stream"
    since: str = "5.0.0"
    internal: bool = False  # effect-only vocabulary: applied by replay, refused to clients
    subcommands: dict[bytes, CommandSpec] = field(default_factory=dict)
    args: tuple[Arg, ...] = ()  # its syntax (engine.argspec), for COMMAND DOCS
    is_write: bool = field(init=False, repr=False, compare=False)  # Flag.WRITE, worked out once
    is_blocking: bool = field(init=False, repr=False, compare=False)
    is_asking: bool = field(init=False, repr=False, compare=False)  # Flag.ASKING
    # COMMAND INFO's legacy (first key, last key, step) and movablekeys, from the key specs.
    first_key: int = field(init=False, repr=False, compare=False)
    last_key: int = field(init=False, repr=False, compare=False)
    key_step: int = field(init=False, repr=False, compare=False)
    movable_keys: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.is_write = Flag.WRITE in self.flags
        self.is_blocking = Flag.BLOCKING in self.flags
        self.is_asking = Flag.ASKING in self.flags
        (self.first_key, self.last_key, self.key_step), self.movable_keys = \
            legacy_range(self.key_specs)


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


def _logs(name: str, logs: tuple[str, ...]) -> frozenset[str] | None:
    if logs == ANY_EFFECTS:
        return None
    for word in logs:
        if not word or word != word.upper():
            raise ValueError(f"command {name!r} declares a bad effect name {word!r}")
    return frozenset(logs)


def _spec(name: str, arity: int, flags: str, handler: Handler | None, *, acl: str, keys: str,
          key_finder: KeyFinder | None, key_notes: str | None, logs: tuple[str, ...],
          effect: str, summary: str, group: str, since: str, internal: bool = False,
          syntax: str = "") -> CommandSpec:
    """A declaration's spec; ValueError naming the command for anything malformed (a flag, a
    key spec, an effect name or shape): a declaration fails at import, never later."""
    spelled = name.upper().replace("|", " ")
    if effect and effect.split(" [")[0].split(" <")[0] != spelled and \
            not effect.startswith(spelled + " "):
        raise ValueError(f"command {name!r} declares an effect shape that is not its own: "
                         f"{effect!r}")
    return CommandSpec(
        name, arity, parse_flags(name, flags), handler, acl=frozenset(acl.split()),
        key_specs=parse_key_specs(name, keys, key_notes), key_finder=key_finder,
        logs=_logs(name, logs), effect=effect, summary=summary, group=group, since=since,
        internal=internal, args=parse_syntax(syntax),
    )


def command(
    name: str,
    arity: int,
    flags: str = "",
    *,
    keys: str,
    acl: str = "",
    key_finder: KeyFinder | None = None,
    key_notes: str | None = None,
    logs: tuple[str, ...] = (),
    effect: str = "",
    summary: str = "",
    group: str = "stream",
    since: str = "5.0.0",
    internal: bool = False,
    syntax: str = "",
) -> Callable[[Handler], Handler]:
    """Declare a command and its handler `handler(ctx, argv) -> reply` (the fields: the module
    docstring and CommandSpec). `keys` is required ("" for a command without keys), so a new
    command says where its keys are."""
    spec = _spec(name, arity, flags, None, acl=acl, keys=keys, key_finder=key_finder,
                 key_notes=key_notes, logs=logs, effect=effect, summary=summary, group=group,
                 since=since, internal=internal, syntax=syntax)

    def register(handler: Handler) -> Handler:
        spec.handler = handler
        _register(spec)
        return handler

    return register


def container(
    name: str, summary: str, group: str = "stream", since: str = "5.0.0",
    handler: Handler | None = None, flags: str = "", acl: str = "",
) -> CommandSpec:
    """Declare a command made of subcommands (XGROUP, XINFO). With `handler`, the command alone
    (no subcommand) runs it, as COMMAND does (arity -1); it is never fast-dispatched."""
    spec = _spec(name, -2 if handler is None else -1, flags, None, acl=acl, keys="",
                 key_finder=None, key_notes=None, logs=(), effect="", summary=summary,
                 group=group, since=since)
    _register(spec)
    spec.handler = handler  # after _register: the fast path must not see a container
    return spec


def subcommand(
    parent: CommandSpec,
    name: str,
    arity: int,
    flags: str = "",
    *,
    keys: str,
    acl: str = "",
    key_finder: KeyFinder | None = None,
    key_notes: str | None = None,
    logs: tuple[str, ...] = (),
    effect: str = "",
    summary: str = "",
    since: str = "5.0.0",
    syntax: str = "",
) -> Callable[[Handler], Handler]:
    """Declare `<parent> <name>` and its handler, as `command` declares a command."""
    spec = _spec(f"{parent.name}|{name}", arity, flags, None, acl=acl, keys=keys,
                 key_finder=key_finder, key_notes=key_notes, logs=logs, effect=effect,
                 summary=summary, group=parent.group, since=since, syntax=syntax)

    def register(handler: Handler) -> Handler:
        spec.handler = handler
        parent.subcommands[name.encode()] = spec
        return handler

    return register


def help_subcommand(
    parent: CommandSpec, lines: list[str], flags: str = "loading stale", since: str = "5.0.0",
    acl: str = "",
) -> None:
    """Declare `<parent> HELP`: Redis's help reply (addReplyHelp) listing `lines`."""

    def help_handler(ctx: Any, argv: Argv) -> list[str]:
        return help_reply(argv[0], lines)

    subcommand(parent, "help", 2, flags, keys="", acl=acl, since=since,
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


# --- the effect vocabulary -----------------------------------------------------------------------


class EffectCommand(NamedTuple):
    """One command (or container subcommand) an effect may be, and the exact shape it takes."""

    name: str  # as effects spell it, upper case; a subcommand after its container: "XGROUP SETID"
    syntax: str  # the arguments effects give it (redis.io notation), the name included
    streamkeep_only: bool = False  # SK.*: not a Redis command (an export must translate it)
    switches_db: bool = False  # SELECT: changes no data, selects the database of what follows


def effect_vocabulary() -> dict[str, EffectCommand]:
    """Every command an effect may be (each declaration with an `effect` shape), by its name as
    effects spell it: the AOF's, the snapshot tail's and the replication stream's whole
    language. Replicas (which apply these and nothing else), the offline AOF inspector (which
    names and checks records by it) and the RESP export (which writes the Redis ones as they are
    and must translate the `streamkeep_only` ones, the internal commands) rely on it; an effect
    outside it is a bug of the command that emitted it. Complete once `engine.commands` is
    imported, as for the rest of the table."""
    vocabulary = {}
    for spec in COMMANDS.values():
        for each in (spec, *spec.subcommands.values()):
            if each.effect:
                name = each.name.upper().replace("|", " ")
                # (SELECT is the one effect that changes no data: inside a transaction's record
                # it selects the database of the effects after it.)
                vocabulary[name] = EffectCommand(name, each.effect, each.internal,
                                                 each.name == "select")
    return dict(sorted(vocabulary.items()))


def effect_command(effect: Sequence[bytes]) -> str:
    """The vocabulary name an effect argv is spelled with ("XGROUP SETID" for a subcommand of
    a container); not checked against the vocabulary (see `effect_vocabulary`)."""
    name = bytes(effect[0]).upper().decode("ascii", "replace")
    spec = COMMANDS.get(name.lower().encode())
    if spec is not None and spec.subcommands and len(effect) > 1:
        name += " " + bytes(effect[1]).upper().decode("ascii", "replace")
    return name
