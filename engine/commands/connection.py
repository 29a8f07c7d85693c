"""Connection and persistence commands: AUTH, HELLO, QUIT, RESET, SHUTDOWN, SAVE, BGSAVE,
BGREWRITEAOF, LASTSAVE, DEBUG.

Owns these commands' argument handling and replies. They act on the calling connection (the
server's `Client`, reached as `ctx.session.client`; None on an embedded engine, where they act on
the engine's own session) and on the data directory's compactor. Must not touch: stream state,
sockets (the server owns the connection; handlers only set flags it acts on after the reply).
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.exec.context import Ctx, Later
from streamkeep.engine.exec.interfaces import Persistence
from streamkeep.engine.exec.settings import REDIS_VERSION
from streamkeep.engine.exec.table import (
    Argv,
    command,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.exec.transactions import end_transaction
from streamkeep.engine.model.digest import state_digest
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, StorageError, storage_reply
from streamkeep.engine.wire.reply import NO_REPLY, RespMap

WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NO_PASSWORD = ("ERR AUTH <password> called without any password configured for the default "
               "user. Are you sure your configuration is correct?")
HELLO_NOAUTH = (
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "<proto> AUTH <user> <pass> option can be used to authenticate the client and select the "
    "RESP protocol version at the same time"
)
BAD_NAME = "ERR Client names cannot contain spaces, newlines or special characters."


def password_matches(given: bytes, expected: str) -> bool:
    """Constant time whatever the inputs share: both sides are hashed first, so neither the
    length nor a correct prefix of the password changes how long a failed AUTH takes."""
    import hashlib  # (here: every engine start would pay for OpenSSL's hashes)
    import hmac

    a = hashlib.sha256(given).digest()
    b = hashlib.sha256(expected.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(a, b)


def requirepass(ctx: Ctx) -> str:
    return str(ctx.engine.config.get("requirepass") or "")


def _set_authenticated(ctx: Ctx, value: bool) -> None:
    client = ctx.session.client
    if client is not None:
        client.authenticated = value
        client.parser.authenticated = value


def default_login(engine: Any, session: Any) -> bool:
    """A connection's start (and RESET): it is the default user, authenticated when that
    user is enabled and needs no password (Redis's rule). Returns whether it is."""
    users = engine.acl
    if users is None:
        return not str(engine.config.get("requirepass") or "")
    default = users.get(b"default")
    session.user = default
    session.acl_generation = -1
    return bool(default is not None and default.enabled and "nopass" in default.flags)


def _authenticate(ctx: Ctx, user: bytes | None, password: bytes, command: bytes) -> None:
    """AUTH's check (also HELLO ... AUTH): `user` None is AUTH's one-argument form (the
    default user). With users (a server's engine): the session becomes that user's; a
    failure is logged in ACL LOG. Without (an embedded engine): requirepass alone."""
    users = ctx.engine.acl
    if users is None:
        _authenticate_requirepass(ctx, user, password)
        return
    name = b"default" if user is None else user
    if user is None:
        default = users.get(b"default")
        if default is not None and "nopass" in default.flags:
            raise ReplyError(NO_PASSWORD)
    if not users.check_password(name, password):
        session = ctx.session
        client = session.client
        info = client.info_line().encode() if client is not None else b""
        users.log_auth_failure(name, info, ctx.engine.now(),
                               "multi" if session.multi is not None else "toplevel", command)
        raise ReplyError(WRONGPASS)
    ctx.session.user = users.get(name)
    ctx.session.acl_generation = -1
    _set_authenticated(ctx, True)


def _authenticate_requirepass(ctx: Ctx, user: bytes | None, password: bytes) -> None:
    expected = requirepass(ctx)
    if user is not None and user != b"default":
        raise ReplyError(WRONGPASS)
    if not expected:
        if user is None:
            raise ReplyError(NO_PASSWORD)
        _set_authenticated(ctx, True)  # the default user has no password: any one works
        return
    if not password_matches(password, expected):
        raise ReplyError(WRONGPASS)
    _set_authenticated(ctx, True)


def valid_client_name(name: bytes) -> bool:
    return all(0x21 <= c <= 0x7E for c in name)


@command("auth", -2, "noscript loading stale fast no_auth sentinel allow_busy", group="connection",
         since="1.0.0",
         acl="connection", keys="",
         summary="Authenticates the connection.", syntax="[username] password")
def auth(ctx: Ctx, argv: Argv) -> str:
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    if len(argv) == 3:
        _authenticate(ctx, argv[1], argv[2], b"auth")
    else:
        _authenticate(ctx, None, argv[1], b"auth")
    return "OK"


@command("hello", -1, "noscript loading stale fast no_auth sentinel allow_busy",
         group="connection", since="6.0.0",
         acl="connection", keys="",
         summary="Handshakes with the Redis server.",
         syntax="[arguments: protover:integer [AUTH username password] [SETNAME clientname]]")
def hello(ctx: Ctx, argv: Argv) -> RespMap:
    client = ctx.session.client
    protocol = client.protocol if client is not None else 2
    if len(argv) >= 2:
        try:
            protocol = parse_int(argv[1])
        except ReplyError:
            raise ReplyError("ERR Protocol version is not an integer or out of range") from None
        if protocol < 2 or protocol > 3:
            raise ReplyError("NOPROTO unsupported protocol version")
    name: bytes | None = None
    auth_args: tuple[bytes, bytes] | None = None
    j = 2
    while j < len(argv):
        more = len(argv) - j - 1
        if is_word(argv[j], b"auth") and more >= 2:
            auth_args = (argv[j + 1], argv[j + 2])
            j += 3
        elif is_word(argv[j], b"setname") and more >= 1:
            name = argv[j + 1]
            if not valid_client_name(name):
                raise ReplyError(BAD_NAME)
            j += 2
        else:
            raise ReplyError(
                f"ERR Syntax error in HELLO option '{argv[j].decode('utf-8', 'replace')}'")
    if auth_args is not None:
        _authenticate(ctx, *auth_args, b"hello")
    if client is not None and not client.authenticated:
        raise ReplyError(HELLO_NOAUTH)
    if name is not None:
        ctx.session.name = name
    if client is not None:
        client.protocol = protocol
    # Bulk strings, as Redis's addReplyBulkCString sends them (not simple strings).
    return RespMap([
        (b"server", b"redis"), (b"version", REDIS_VERSION.encode()), (b"proto", protocol),
        (b"id", client.id if client is not None else 0), (b"mode", b"standalone"),
        (b"role", b"replica" if ctx.engine.read_only else b"master"), (b"modules", []),
    ])


@command("quit", -1, "noscript loading stale fast no_auth allow_busy", group="connection",
         since="1.0.0",
         acl="connection", keys="",
         summary="Closes the connection.")
def quit_(ctx: Ctx, argv: Argv) -> str:
    client = ctx.session.client
    if client is not None:
        client.closing = True
    return "OK"


@command("reset", 1, "noscript loading stale fast no_auth allow_busy", group="connection",
         since="6.2.0",
         acl="connection", keys="",
         summary="Resets the connection.")
def reset(ctx: Ctx, argv: Argv) -> str:
    session = ctx.session
    end_transaction(ctx.engine, session)
    session.db = 0
    ctx.db = ctx.engine.dbs[0]
    session.name = b""
    if session.subscriber is not None:  # its subscriptions end, unconfirmed, as in Redis
        ctx.engine.pubsub.drop(session.subscriber)
    client = session.client
    if client is not None:
        client.protocol = 2
    _set_authenticated(ctx, default_login(ctx.engine, session))
    return "RESET"


@command("shutdown", -1, "admin noscript loading stale no_multi sentinel allow_busy",
         group="server", since="1.0.0",
         keys="",
         summary="Synchronously saves the database(s) to disk and shuts down the Redis server.",
         syntax="[NOSAVE | SAVE] [NOW] [FORCE] [ABORT]")
def shutdown(ctx: Ctx, argv: Argv) -> Any:
    save = nosave = abort = other = False
    for arg in argv[1:]:
        if is_word(arg, b"save"):
            save = True
        elif is_word(arg, b"nosave"):
            nosave = True
        elif is_word(arg, b"now") or is_word(arg, b"force"):
            other = True
        elif is_word(arg, b"abort"):
            abort = True
        else:
            raise ReplyError(SYNTAX)
    # Redis's shutdownCommand: ABORT takes no other flag, SAVE and NOSAVE exclude each other,
    # and ABORT cancels a shutdown in progress (ours never waits, so there is none): it must
    # never start one.
    if (abort and (save or nosave or other)) or (save and nosave):
        raise ReplyError(SYNTAX)
    if abort:
        raise ReplyError("ERR No shutdown in progress.")
    scripting = ctx.engine.scripting
    if scripting is not None and scripting.running is not None:
        # Sent while a script is busy (the server serves it from the script's hook): only
        # NOSAVE, which stops the script whatever it wrote, its writes discarded.
        from streamkeep.engine.exec.scripting import BUSY

        if not nosave:
            raise ReplyError(BUSY)
        scripting.shutdown_nosave()
    server = ctx.engine.server
    if server is None:
        raise ReplyError("ERR SHUTDOWN needs the network server (embedded: Engine.close())")
    server.request_shutdown(save)
    return NO_REPLY  # the connection closes as the server stops, as in Redis


# --- persistence -------------------------------------------------------------------------------


def _persistence(ctx: Ctx) -> Persistence:
    datadir = ctx.engine.datadir
    if datadir is None:
        raise ReplyError("ERR this engine keeps no data directory (it runs in memory)")
    return datadir


@command("save", 1, "admin noscript no_async_loading no_multi", group="server", since="1.0.0",
         keys="",
         summary="Synchronously saves the database(s) to disk.")
def save(ctx: Ctx, argv: Argv) -> Later:
    persistence = _persistence(ctx)

    def wait() -> str:
        try:
            persistence.compact(wait=True)
        except StorageError as err:
            raise storage_reply(err) from None
        return "OK"

    return Later(wait)


@command("bgsave", -1, "admin noscript no_async_loading", group="server", since="1.0.0",
         keys="",
         summary="Asynchronously saves the database(s) to disk.", syntax="[SCHEDULE]")
def bgsave(ctx: Ctx, argv: Argv) -> str:
    if len(argv) > 2 or (len(argv) == 2 and not is_word(argv[1], b"schedule")):
        raise ReplyError(SYNTAX)
    if not _start_background_save(_persistence(ctx)):
        if len(argv) == 2:
            return "Background saving scheduled"
        raise ReplyError("ERR Background save already in progress")
    return "Background saving started"


@command("bgrewriteaof", 1, "admin noscript no_async_loading", group="server", since="1.0.0",
         keys="",
         summary="Asynchronously rewrites the append-only file to disk.")
def bgrewriteaof(ctx: Ctx, argv: Argv) -> str:
    if not _start_background_save(_persistence(ctx)):
        raise ReplyError("ERR Background append only file rewriting already in progress")
    return "Background append only file rewriting started"


def _start_background_save(persistence: Persistence) -> bool:
    try:
        return persistence.start_background_save()
    except StorageError as err:
        raise storage_reply(err) from None


@command("lastsave", 1, "loading stale fast", group="server", since="1.0.0",
         acl="admin dangerous", keys="",
         summary="Returns the Unix timestamp of the last successful save to disk.")
def lastsave(ctx: Ctx, argv: Argv) -> int:
    return last_save_time(ctx.engine)


def last_save_time(engine: Any) -> int:
    """Seconds: the current snapshot's creation, else when the engine started."""
    datadir = engine.datadir
    saved_ms = datadir.last_save_ms() if datadir is not None else None
    return (saved_ms if saved_ms is not None else int(engine.started_ms)) // 1000


# --- DEBUG -------------------------------------------------------------------------------------

DEBUG = container("debug", "A container for debugging commands.", group="server", since="1.0.0",
                  acl="admin dangerous")


@subcommand(DEBUG, "digest", 2, "admin noscript loading stale",
            keys="",
            summary="Returns a digest of the whole dataset (streamkeep's state digest).")
def debug_digest(ctx: Ctx, argv: Argv) -> str:
    return state_digest(ctx.engine.dbs, ctx.engine.strings, ctx.engine.expires,
                        ctx.engine.keyspaces)


help_subcommand(DEBUG, [
    "DIGEST",
    "    Output a hex signature representing the current dataset (entries, stream",
    "    metadata, groups, PELs with delivery times and counts, consumers).",
], flags="admin noscript loading stale")

