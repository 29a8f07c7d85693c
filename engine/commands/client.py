"""CLIENT: ID, GETNAME, GETREDIR (-1: no client-side caching), SETNAME, SETINFO, INFO, LIST,
KILL, UNBLOCK, NO-EVICT, NO-TOUCH, REPLY, HELP.

Owns these subcommands' argument handling and replies, shaped as Redis's (src/networking.c).
Handlers run with the engine lock held on the server's event-loop thread, so they only read the
server's `Client` objects and set flags on them; a connection is closed by scheduling
`Client.abort` (`server.call_soon`), never from a handler. Must not touch: stream state, sockets.

On an embedded engine (`ctx.session.client` None) CLIENT ID is 0, CLIENT LIST/INFO describe no
connection, CLIENT KILL finds none and CLIENT REPLY OFF/SKIP are refused (every call returns
its reply). CLIENT REPLY sets the connection's mode (the server's `ReplySwitch` drops the
replies); OFF and SKIP themselves are not answered, as in Redis.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from streamkeep.engine.commands.connection import (
    BAD_NAME,
    valid_client_name,
)
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.table import (
    ADMIN,
    Argv,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError, printable
from streamkeep.engine.wire.reply import NO_REPLY, NULL_ARRAY, Verbatim

if TYPE_CHECKING:
    from streamkeep.engine.exec.engine_state import EngineState



# --- CLIENT ------------------------------------------------------------------------------------

UNBLOCKED = "UNBLOCKED client unblocked via CLIENT UNBLOCK"


def server_clients(engine: EngineState) -> list[Any]:
    """The server's connections (none on an embedded engine)."""
    server = engine.server
    return list(server.clients.values()) if server is not None else []


CLIENT = container("client", "A container for client connection commands.", group="connection",
                   since="2.4.0")
CLIENT_TYPES = {b"normal": "normal", b"slave": "replica", b"replica": "replica",
                b"pubsub": "pubsub", b"master": "master"}


def _client_type(arg: bytes) -> str:
    kind = CLIENT_TYPES.get(arg.lower())
    if kind is None:
        raise ReplyError(f"ERR Unknown client type '{printable(arg)}'")
    return kind


def _kill(ctx: Ctx, client: Any) -> None:
    """Close `client`: the caller itself after its reply is sent (as Redis does); another one
    at once, dropping its unsent output, once this command has released the engine lock."""
    client.closing = True  # it runs no further command
    if client is not ctx.session.client:
        ctx.engine.server.call_soon(client.abort)


@subcommand(CLIENT, "id", 2, "noscript loading stale", since="5.0.0",
            acl="connection", keys="",
            summary="Returns the unique client ID of the connection.")
def client_id(ctx: Ctx, argv: Argv) -> int:
    client = ctx.session.client
    return client.id if client is not None else 0


@subcommand(CLIENT, "getname", 2, "noscript loading stale", since="2.6.9",
            acl="connection", keys="",
            summary="Returns the name of the connection.")
def client_getname(ctx: Ctx, argv: Argv) -> bytes | None:
    return ctx.session.name or None


@subcommand(CLIENT, "getredir", 2, "noscript loading stale", since="6.0.0",
            acl="connection", keys="",
            summary="Returns the client ID to which the connection's tracking notifications "
                    "are redirected.")
def client_getredir(ctx: Ctx, argv: Argv) -> int:
    return -1  # Redis's reply while tracking is off: streamkeep has no client-side caching


@subcommand(CLIENT, "setname", 3, "noscript loading stale", since="2.6.9",
            acl="connection", keys="",
            summary="Sets the connection name.", syntax="connection-name")
def client_setname(ctx: Ctx, argv: Argv) -> str:
    if not valid_client_name(argv[2]):
        raise ReplyError(BAD_NAME)
    ctx.session.name = argv[2]
    return "OK"


@subcommand(CLIENT, "setinfo", 4, "noscript loading stale", since="7.2.0",
            acl="connection", keys="",
            summary="Sets information specific to the client or connection.",
            syntax="<attr: LIB-NAME libname | LIB-VER libver>")
def client_setinfo(ctx: Ctx, argv: Argv) -> str:
    attr = argv[2].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        raise ReplyError(f"ERR Unrecognized option '{printable(argv[2])}'")
    if not valid_client_name(argv[3]):
        raise ReplyError(f"ERR {printable(argv[2])} cannot contain spaces, newlines or special "
                         "characters.")
    client = ctx.session.client
    if client is not None:
        setattr(client, "lib_name" if attr == b"lib-name" else "lib_ver", argv[3])
    return "OK"


@subcommand(CLIENT, "info", 2, "noscript loading stale", since="6.2.0",
            acl="connection", keys="",
            summary="Returns information about the connection.")
def client_info(ctx: Ctx, argv: Argv) -> Verbatim:
    client = ctx.session.client
    return Verbatim(client.info_line() + "\n" if client is not None else "")


@subcommand(CLIENT, "list", -2, ADMIN, since="2.4.0",
            acl="connection", keys="",
            summary="Lists open connections.",
            syntax="[client-type: TYPE <NORMAL | MASTER | REPLICA | PUBSUB>] "
                   "[ID client-id:integer...]")
def client_list(ctx: Ctx, argv: Argv) -> Verbatim:
    clients = server_clients(ctx.engine)
    if len(argv) == 4 and is_word(argv[2], b"type"):
        wanted = _client_type(argv[3])
        clients = [c for c in clients if _type_of(c) == wanted]
    elif len(argv) > 3 and is_word(argv[2], b"id"):
        by_id = {c.id: c for c in clients}
        ids = [parse_int(arg, "Invalid client ID") for arg in argv[3:]]
        clients = [by_id[i] for i in ids if i in by_id]
    elif len(argv) != 2:
        raise ReplyError(SYNTAX)
    return Verbatim("".join(c.info_line() + "\n" for c in clients))


@subcommand(CLIENT, "kill", -3, ADMIN, since="2.4.0",
            acl="connection", keys="",
            summary="Terminates open connections.",
            syntax="<filter: old-format | <new-format: [ID client-id:integer] "
                   "| [client-type: TYPE <NORMAL | MASTER | SLAVE | REPLICA | PUBSUB>] "
                   "| [USER username] | [ADDR addr] | [LADDR laddr] | [SKIPME <YES | NO>] "
                   "| [MAXAGE maxage:integer]>...>")
def client_kill(ctx: Ctx, argv: Argv) -> Any:
    clients = server_clients(ctx.engine)
    if len(argv) == 3:  # the old form: CLIENT KILL addr:port
        for client in clients:
            if client.addr.encode() == argv[2]:
                _kill(ctx, client)
                return "OK"
        raise ReplyError("ERR No such client")
    want_id: int | None = None
    want_type: str | None = None
    addr = laddr = want_user = None
    skipme = True
    max_age = 0
    i = 2
    while i < len(argv):
        opt, more = argv[i], len(argv) > i + 1
        value = argv[i + 1] if more else b""
        if is_word(opt, b"id") and more:
            want_id = parse_int(value, "client-id should be greater than 0")
            if want_id < 1:
                raise ReplyError("ERR client-id should be greater than 0")
        elif is_word(opt, b"type") and more:
            want_type = _client_type(value)
        elif is_word(opt, b"addr") and more:
            addr = value
        elif is_word(opt, b"laddr") and more:
            laddr = value
        elif is_word(opt, b"user") and more:
            users = ctx.engine.acl
            if (value != b"default" if users is None else users.get(value) is None):
                raise ReplyError(f"ERR No such user '{printable(value)}'")
            want_user = value
        elif is_word(opt, b"skipme") and more:
            if is_word(value, b"yes"):
                skipme = True
            elif is_word(value, b"no"):
                skipme = False
            else:
                raise ReplyError(SYNTAX)
        elif is_word(opt, b"maxage") and more:
            max_age = parse_int(value, "maxage is not an integer or out of range")
        else:
            raise ReplyError(SYNTAX)
        i += 2
    me = ctx.session.client
    now = time.monotonic()
    killed = 0
    for client in clients:
        if (want_id is not None and client.id != want_id) \
                or (want_type is not None and want_type != _type_of(client)) \
                or (addr is not None and client.addr.encode() != addr) \
                or (laddr is not None and client.laddr.encode() != laddr) \
                or (want_user is not None and _user_of(client) != want_user) \
                or (skipme and client is me) \
                or (max_age > 0 and now - client.created <= max_age):
            continue
        _kill(ctx, client)
        killed += 1
    return killed


@subcommand(CLIENT, "unblock", -3, "admin noscript loading stale sentinel", since="5.0.0",
            acl="connection", keys="",
            summary="Unblocks a client blocked by a blocking command from a different "
                    "connection.",
            syntax="client-id:integer [unblock-type: TIMEOUT | ERROR]")
def client_unblock(ctx: Ctx, argv: Argv) -> int:
    """A client waiting in a blocking command (a pop, a move, XREAD/XREADGROUP BLOCK) answered
    now: as if it timed out, or with the UNBLOCKED error. 1 when it was waiting, 0 otherwise
    (no such client, or not blocked on keys)."""
    if len(argv) > 4:
        raise ReplyError("ERR unknown subcommand or wrong number of arguments for 'unblock'. "
                         "Try CLIENT HELP.")
    error = False
    if len(argv) == 4:
        if is_word(argv[3], b"error"):
            error = True
        elif not is_word(argv[3], b"timeout"):
            raise ReplyError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    client_id = parse_int(argv[2])
    for client in server_clients(ctx.engine):
        if client.id != client_id:
            continue
        waiter = getattr(client, "waiting", None)
        if not isinstance(waiter, Waiter):
            return 0
        result: Any = ReplyError(UNBLOCKED) if error else NULL_ARRAY
        if not ctx.engine.cancel_wait(waiter, result):
            return 0
        if waiter.event is not None:
            waiter.event.set()
        if waiter.notify is not None:
            waiter.notify(waiter)
        return 1
    return 0


def _user_of(client: Any) -> bytes:
    user = client.session.user
    return user.name if user is not None else b"default"  # type: ignore[no-any-return]


def _type_of(client: Any) -> str:
    """A connection's class: a replica's after its PSYNC (the server's `link`), pubsub while
    it has a subscription, else normal."""
    if getattr(client, "link", None) is not None:
        return "replica"
    subscriber = getattr(client, "subscriber", None)
    return "pubsub" if subscriber is not None and subscriber.total() else "normal"


def _on_off(argv: Argv) -> str:
    if not (is_word(argv[2], b"on") or is_word(argv[2], b"off")):
        raise ReplyError(SYNTAX)
    return "OK"


@subcommand(CLIENT, "no-evict", 3, ADMIN, since="7.0.0",
            acl="connection", keys="",
            summary="Sets the client eviction mode of the connection.",
            syntax="<enabled: ON | OFF>")
def client_no_evict(ctx: Ctx, argv: Argv) -> str:
    return _on_off(argv)  # nothing is ever evicted


@subcommand(CLIENT, "no-touch", 3, "noscript loading stale", since="7.2.0",
            acl="connection", keys="",
            summary="Controls whether commands sent by the client affect the LRU/LFU of "
                    "accessed keys.",
            syntax="<enabled: ON | OFF>")
def client_no_touch(ctx: Ctx, argv: Argv) -> str:
    return _on_off(argv)  # no LRU/LFU is kept


@subcommand(CLIENT, "reply", 3, "noscript loading stale", since="3.2.0",
            acl="connection", keys="",
            summary="Instructs the server whether to reply to commands.",
            syntax="<action: ON | OFF | SKIP>")
def client_reply(ctx: Ctx, argv: Argv) -> object:
    mode = argv[2].lower()
    if mode not in (b"on", b"off", b"skip"):
        raise ReplyError(SYNTAX)
    client = ctx.session.client
    if client is None:
        if mode == b"on":
            return "OK"
        raise ReplyError("ERR CLIENT REPLY OFF and SKIP need a connection: an embedded engine "
                         "returns every reply")
    client.set_reply_mode(mode)
    return "OK" if mode == b"on" else NO_REPLY


help_subcommand(CLIENT, [
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [<client-id> ...]",
    "      Return clients of specified IDs only.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
], acl="connection")
