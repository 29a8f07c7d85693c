"""ACL: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, DRYRUN, GENPASS, LOG, SAVE, LOAD and
HELP, and the engine's ACL users: `users_of(engine)` makes them on first use (the default user's
password from requirepass, the config file's `user` lines, the ACL file), over the command table
(`TableCatalogue`, the model's `Catalogue`).

Owns these subcommands' argument handling and replies, shaped as Redis 7.2+ / 8.x's aclCommand
(src/acl.c), the ACL file's reading and writing (ACL LOAD / ACL SAVE, the start), and
`check_command`: a command line's keys (engine.exec.key_specs) and channels (PUBLISH,
SPUBLISH, SUBSCRIBE, SSUBSCRIBE, PSUBSCRIBE) checked against a user, which DRYRUN and the
permission gate share. The rules, replies and texts themselves are engine.exec.acl's. Connections
are closed only through the server's `disconnect_user(name)`, when the server has one (DELUSER
and ACL LOAD close the clients of the users they drop, as Redis does). Must not touch: stream
state, sockets, the sessions' users (the gate and AUTH set those).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from functools import cache
from typing import Any, Final

from streamkeep.engine.commands.command import find_command
from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.commands.read import parse_read_args
from streamkeep.engine.exec.acl import ConfiguredUserError, Denial, Users
from streamkeep.engine.exec.acl_model import c_string, check_channel
from streamkeep.engine.exec.categories import CATEGORIES, categories_of, commands_in
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.key_specs import keys_and_flags
from streamkeep.engine.exec.settings import USER_LINES, replace_file
from streamkeep.engine.exec.table import (
    ADMIN,
    Argv,
    CommandSpec,
    container,
    help_subcommand,
    resolve,
    subcommand,
)
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import (
    ReplyError,
    StreamkeepError,
    printable,
    subcommand_syntax,
    wrong_arity,
)
from streamkeep.engine.wire.reply import RespMap

log = logging.getLogger("streamkeep.acl")

NO_ACLFILE: Final = (
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify "
    "users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a "
    "Redis configuration file set) in order to store users in the Redis configuration.")
SAVE_FAILED: Final = ("ERR There was an error trying to save the ACLs. Please check the server "
                      "logs for more information")
USERS_AND_ACLFILE: Final = (
    "Configuring Redis with users defined in redis.conf and at the same setting an ACL file "
    "path is invalid. This setup is very likely to lead to configuration errors and security "
    "holes, please define either an ACL file or declare users directly in your redis.conf, but "
    "not both.")
CRITICAL: Final = "Critical error while loading ACLs. Exiting."
ABORTING: Final = "Aborting Redis startup because of ACL errors: "
LOG_DEFAULT_COUNT: Final = 10
ADMIN_SENTINEL: Final = ADMIN + " sentinel"
PLAIN: Final = "noscript loading stale sentinel"

# The commands whose arguments are channels ACL checks (getChannelsFromCommand): the first
# argument, or all of them; PSUBSCRIBE's are patterns. The unsubscribes' are never checked.
_CHANNELS: Final[dict[str, tuple[int | None, bool]]] = {
    "publish": (2, False), "spublish": (2, False), "subscribe": (None, False),
    "ssubscribe": (None, False), "psubscribe": (None, True)}


class AclStartupError(StreamkeepError, ValueError):
    """The ACL users could not be made (Redis exits at start): `str()` is what Redis logs."""


# --- the command table as the ACL model sees it -----------------------------------------------


class TableCatalogue:
    """The model's Catalogue over the command table (engine.exec.table), its categories
    engine.exec.categories'. Internal commands are not in it."""

    def categories(self) -> list[str]:
        return list(CATEGORIES)

    def commands_in(self, category: str) -> list[str]:
        return [spec.name for spec in commands_in(category)]

    def has_command(self, name: str) -> bool:
        return find_command(name.encode()) is not None

    def subcommands_of(self, name: str) -> list[str]:
        spec = find_command(name.encode())
        return [] if spec is None else [sub.name for sub in spec.subcommands.values()]

    def categories_of(self, name: str) -> list[str]:
        spec = find_command(name.encode())
        return [] if spec is None else [cat.removeprefix("@") for cat in categories_of(spec)]


@cache
def table_catalogue() -> TableCatalogue:
    return TableCatalogue()


def _match(pattern: bytes, subject: bytes) -> bool:
    return stringmatchlen(pattern, subject)


# --- the engine's users -----------------------------------------------------------------------


def users_of(engine: Any) -> Users:
    """The engine's ACL users (engine.acl), made on first use as Redis makes them at start:
    the default user (its password requirepass's), the config file's `user` lines in order,
    or the users of the ACL file. AclStartupError (Redis's log lines) when those are refused:
    a server should call this before it accepts clients. Registers the requirepass hook."""
    users = engine.acl
    if users is None:
        users = make_users(engine)
        engine.acl = users
        users.on_change = lambda: _bump(engine)
        _bump(engine)
        engine.on_config(["requirepass"], lambda: users.set_default_password(
            engine.config["requirepass"]))
    return users


def make_users(engine: Any) -> Users:
    """A new Users from the engine's settings (see users_of); AclStartupError if refused."""
    config = engine.config
    users = Users(table_catalogue(), _match,
                  pubsub_default_all=config["acl-pubsub-default"] == "allchannels",
                  log_max_len=config["acllog-max-len"])
    users.set_default_password(config["requirepass"])
    lines = config.get(USER_LINES, ())
    aclfile = config["aclfile"]
    if aclfile and lines:
        raise AclStartupError(USERS_AND_ACLFILE)
    try:
        users.load_configured([[_raw(w) for w in line] for line in lines])
    except ConfiguredUserError as err:
        raise AclStartupError(f"{err}\n{CRITICAL}") from None
    if aclfile:
        try:
            users.load_aclfile(read_aclfile(aclfile), aclfile)
        except ReplyError as err:
            raise AclStartupError(ABORTING + str(err).removeprefix("ERR ")) from None
    return users


def _raw(word: str | bytes) -> bytes:
    return word if isinstance(word, bytes) else word.encode("utf-8", "surrogateescape")


def read_aclfile(path: str) -> bytes:
    """The ACL file's bytes; ReplyError with ACLLoadFromFile's line if it cannot be opened."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise ReplyError(f"ERR Error loading ACLs, opening file '{path}': "
                         f"{os.strerror(err.errno or 5)}") from None


def write_aclfile(path: str, text: bytes) -> None:
    """ACLSaveToFile: a temp file beside it, written, fsynced, renamed over it, the directory
    fsynced (engine.exec.settings.replace_file). OSError on failure."""
    replace_file(path, text, sync_directory=True)


def _bump(engine: Any) -> None:
    """The users changed: every session looks at its user's permissions again."""
    engine.acl_generation += 1


def disconnect(engine: Any, names: Sequence[bytes]) -> None:
    """Close the connections authenticated as these users (the server's disconnect_user; an
    embedded engine has none)."""
    server = engine.server
    close = getattr(server, "disconnect_user", None) if server is not None else None
    if close is not None:
        for name in names:
            close(name)


# --- checking a command line ------------------------------------------------------------------


def channels_of(spec: CommandSpec, argv: Sequence[bytes]) -> tuple[list[bytes], bool]:
    """The channels ACL checks in a command line (getChannelsFromCommand's publish and
    subscribe ones) and whether they are patterns."""
    found = _CHANNELS.get(spec.name)
    if found is None:
        return [], False
    end, pattern = found
    return list(argv[1:end]), pattern


def check_command(users: Users, user: Any, spec: CommandSpec,
                  argv: Sequence[bytes]) -> Denial | None:
    """ACLCheckAllUserCommandPerm: whether `user` may run `spec` (found and arity-checked)
    with argv (argv[0] the command's name): its command bit or first-arg, its keys with their
    key-spec flags, its channels. None when allowed, else the Denial to reply and log."""
    channels, pattern = channels_of(spec, argv)
    keys = _read_keys(spec, argv) if spec.name in _READS else keys_and_flags(spec, argv)
    return users.check(user, spec.name, keys, channels, pattern,
                       argv[1] if len(argv) > 1 else None)


_READS: Final = {"xread": False, "xreadgroup": True}
_READ_FLAGS: Final = frozenset({"RO", "access"})


def _read_keys(spec: CommandSpec, argv: Sequence[bytes]) -> list[tuple[bytes, frozenset[str]]]:
    """XREAD and XREADGROUP's keys as the command itself parses its options (GROUP's two
    names, COUNT, BLOCK, CLAIM, MAXCOUNT, MAXSIZE, NOACK), not as the key spec's keyword
    search finds them: a group or consumer named STREAMS, or an option Redis 8 added, would
    make that search check other arguments than the keys read (Redis fixed its own ACL check
    the same way). A line the command refuses is checked by its key specs (it then runs
    nothing)."""
    try:
        parsed = parse_read_args(tuple(argv), 0, _READS[spec.name])
    except ReplyError:
        return keys_and_flags(spec, argv)
    start = parsed.streams_at
    return [(key, _READ_FLAGS) for key in argv[start:start + parsed.nstreams]]


# --- ACL ---------------------------------------------------------------------------------------

ACL = container("acl", "A container for Access List Control commands.", group="server",
                since="6.0.0")


@subcommand(ACL, "setuser", -3, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Creates and modifies an ACL user and its rules.", syntax="username [rule...]")
def acl_setuser(ctx: Ctx, argv: Argv) -> str:
    users_of(ctx.engine).setuser(argv[2], argv[3:])
    drop_unpermitted_subscribers(ctx.engine, argv[2])
    return "OK"


def _channels_allowed(users: Users, user: Any, channels: Sequence[bytes],
                      patterns: bool) -> bool:
    """Every one of these channels (or patterns) is allowed by one of the user's selectors:
    its channel permissions only, whatever its commands (ACLUserCheckChannelPerm)."""
    return all(any(sel.allchannels or check_channel(sel.channels, channel, patterns,
                                                    users.match)
                   for sel in user.selectors) for channel in channels)


def drop_unpermitted_subscribers(engine: Any, name: bytes | None = None) -> None:
    """ACLKillPubsubClientsIfNeeded: a client subscribed to a channel (or a pattern) its user
    (`name`'s, or anyone's) may no longer use is disconnected, as Redis 7 does: it would
    otherwise go on receiving what its user may not read."""
    server = engine.server
    users = engine.acl
    if server is None or users is None:
        return
    for client in list(server.clients.values()):
        session = client.session
        user, subscriber = session.user, session.subscriber
        if user is None or subscriber is None or (name is not None and user.name != name):
            continue
        plain = [*subscriber.channels, *subscriber.shard_channels]
        if not (_channels_allowed(users, user, plain, False)
                and _channels_allowed(users, user, list(subscriber.patterns), True)):
            client.closing = True
            if not client.executing:
                client.close()


@subcommand(ACL, "getuser", 3, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Lists the ACL rules of a user.", syntax="username")
def acl_getuser(ctx: Ctx, argv: Argv) -> RespMap | None:
    return users_of(ctx.engine).getuser(argv[2])


@subcommand(ACL, "deluser", -3, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Deletes ACL users, and terminates their connections.", syntax="username...")
def acl_deluser(ctx: Ctx, argv: Argv) -> int:
    users = users_of(ctx.engine)
    names = argv[2:]
    existing = list(dict.fromkeys(n for n in names if users.get(n) is not None))
    deleted = users.deluser(names)
    disconnect(ctx.engine, existing)
    return deleted


@subcommand(ACL, "list", 2, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Dumps the effective rules in ACL file format.")
def acl_list(ctx: Ctx, argv: Argv) -> list[bytes]:
    return users_of(ctx.engine).list_lines()


@subcommand(ACL, "users", 2, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Lists all ACL users.")
def acl_users(ctx: Ctx, argv: Argv) -> list[bytes]:
    return users_of(ctx.engine).users()


@subcommand(ACL, "whoami", 2, PLAIN, since="6.0.0",
            keys="",
            summary="Returns the authenticated username of the current connection.")
def acl_whoami(ctx: Ctx, argv: Argv) -> bytes:
    """The session's user; a session without one (an embedded engine's) acts as `default`."""
    user = ctx.session.user
    return b"default" if user is None else bytes(user.name)


@subcommand(ACL, "cat", -2, PLAIN, since="6.0.0",
            keys="",
            summary="Lists the ACL categories, or the commands inside a category.",
            syntax="[category]")
def acl_cat(ctx: Ctx, argv: Argv) -> list[bytes]:
    users = users_of(ctx.engine)
    if len(argv) == 2:
        return users.categories()
    if len(argv) == 3:
        return users.commands_in_category(argv[2])
    raise subcommand_syntax(argv)


@subcommand(ACL, "dryrun", -4, ADMIN_SENTINEL, since="7.0.0",
            keys="",
            summary="Simulates the execution of a command by a user, without executing the "
                    "command.",
            syntax="username command [arg...]")
def acl_dryrun(ctx: Ctx, argv: Argv) -> str | bytes:
    users = users_of(ctx.engine)
    user = users.get(argv[2])
    if user is None:
        raise ReplyError(f"ERR User '{printable(argv[2])}' not found")
    line = argv[3:]
    spec = resolve(line)
    if spec is None:
        raise ReplyError(f"ERR Command '{printable(argv[3])}' not found")
    if (spec.arity > 0 and spec.arity != len(line)) or len(line) < -spec.arity:
        raise wrong_arity(spec.name)
    denial = check_command(users, user, spec, line)
    return "OK" if denial is None else denial.dryrun_text()


@subcommand(ACL, "genpass", -2, PLAIN, since="6.0.0",
            keys="",
            summary="Generates a pseudorandom, secure password that can be used to identify "
                    "ACL users.",
            syntax="[bits:integer]")
def acl_genpass(ctx: Ctx, argv: Argv) -> bytes:
    if len(argv) > 3:
        raise subcommand_syntax(argv)
    return Users.genpass(argv[2] if len(argv) == 3 else None)


@subcommand(ACL, "log", -2, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Lists recent security events generated due to ACL rejections.",
            syntax="[operation: count:integer | RESET]")
def acl_log(ctx: Ctx, argv: Argv) -> list[RespMap] | str:
    if len(argv) > 3:
        raise subcommand_syntax(argv)
    users = users_of(ctx.engine)
    count = LOG_DEFAULT_COUNT
    if len(argv) == 3:
        if c_string(argv[2]).lower() == b"reset":
            users.reset_log()
            return "OK"
        count = parse_int(argv[2])
    return users.log_entries(count, ctx.now)


@subcommand(ACL, "save", 2, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Saves the effective ACL rules in the configured ACL file.")
def acl_save(ctx: Ctx, argv: Argv) -> str:
    path = ctx.engine.config["aclfile"]
    if not path:
        raise ReplyError(NO_ACLFILE)
    try:
        write_aclfile(path, users_of(ctx.engine).dump_aclfile())
    except OSError as err:
        log.warning("Saving the ACL file for ACL SAVE: %s", err.strerror or err)
        raise ReplyError(SAVE_FAILED) from None
    return "OK"


@subcommand(ACL, "load", 2, ADMIN_SENTINEL, since="6.0.0",
            keys="",
            summary="Reloads the rules from the configured ACL file.")
def acl_load(ctx: Ctx, argv: Argv) -> str:
    path = ctx.engine.config["aclfile"]
    if not path:
        raise ReplyError(NO_ACLFILE)
    users = users_of(ctx.engine)
    replaced = users.load_aclfile(read_aclfile(path), path)
    disconnect(ctx.engine, replaced)
    drop_unpermitted_subscribers(ctx.engine)  # (the default user's may have changed too)
    return "OK"


help_subcommand(ACL, [
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
], flags="loading stale sentinel", since="6.0.0")
