"""MIGRATE and RESTORE-ASKING: keys moved to another server, as Redis moves a slot's keys.

Owns MIGRATE (each key's DUMP payload and remaining TTL sent to the target as RESTORE, or
RESTORE-ASKING to a cluster node, over one connection; the keys the target took deleted here
unless COPY, logged as DEL so the AOF and replicas agree) and RESTORE-ASKING (RESTORE that
runs on a cluster node importing the slot, as after ASKING). Like Redis's, MIGRATE waits for
the target within its timeout while the server waits: it moves keys a few at a time. Must
not touch: what a payload holds (engine.commands.keyspace's DUMP and RESTORE make and read
it), the routing of ASK (engine.exec.cluster).
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from streamkeep.engine.commands.expiry import pttl
from streamkeep.engine.commands.keyspace import del_, dump, restore
from streamkeep.engine.exec.key_specs import Keys
from streamkeep.engine.exec.table import command
from streamkeep.engine.wire.args import parse_int
from streamkeep.engine.wire.errors import SYNTAX, ProtocolError, ReplyError
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser, encode_command

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Ctx
    from streamkeep.engine.exec.table import Argv

CONNECT_ERROR: Final = "IOERR error or timeout connecting to the client"
READ_ERROR: Final = "IOERR error or timeout reading to target node"
MAX_REPLY_BYTES: Final = 1 << 20  # a target's replies to RESTOREs are short lines
NO_EXPIRY: Final = -1


def migrate_keys(argv: Sequence[bytes]) -> Keys:
    """Redis's migrateGetKeys: the key at argv[3], or with KEYS (argv[3] empty) the keys after
    it."""
    if len(argv) > 6 and argv[3] == b"":
        for i in range(6, len(argv)):
            if argv[i].upper() == b"KEYS":
                return [(j, frozenset({"RW", "access", "delete", "incomplete"}))
                        for j in range(i + 1, len(argv))]
    return [(3, frozenset({"RW", "access", "delete"}))]


class _Options:
    __slots__ = ("auth", "copy", "keys", "replace")

    def __init__(self) -> None:
        self.copy = self.replace = False
        self.auth: list[bytes] = []
        self.keys: list[bytes] = []


def _options(argv: Argv) -> _Options:
    found = _Options()
    i = 6
    while i < len(argv):
        opt = argv[i].upper()
        more = len(argv) - i - 1
        if opt == b"COPY":
            found.copy = True
        elif opt == b"REPLACE":
            found.replace = True
        elif opt == b"AUTH" and more >= 1:
            found.auth = [b"AUTH", argv[i + 1]]
            i += 1
        elif opt == b"AUTH2" and more >= 2:
            found.auth = [b"AUTH", argv[i + 1], argv[i + 2]]
            i += 2
        elif opt == b"KEYS":
            if argv[3] != b"":
                raise ReplyError("ERR When using MIGRATE KEYS option, the key argument must "
                                 "be set to the empty string")
            found.keys = list(argv[i + 1:])
            break
        else:
            raise ReplyError(SYNTAX)
        i += 1
    return found


@command("migrate", -6, "write", group="generic", since="2.6.0", acl="keyspace dangerous",
         keys="RW ACCESS DELETE @3 r0,1,0; RW ACCESS DELETE INCOMPLETE KEYS@-2 r-1,1,0",
         key_finder=migrate_keys, logs=("DEL",),
         summary="Atomically transfers a key from one Redis instance to another.",
         syntax="host port <key-selector: key | empty-string> destination-db:integer "
                "timeout:integer [COPY] [REPLACE] [authentication: AUTH auth-password | "
                "<AUTH2 username password>] [KEYS key...]")
def migrate(ctx: Ctx, argv: Argv) -> str:
    host = argv[1].decode("utf-8", "surrogateescape")
    port = parse_int(argv[2])
    db = parse_int(argv[4])
    timeout = parse_int(argv[5])
    found = _options(argv)
    timeout_s = (timeout if timeout > 0 else 1000) / 1000
    keys = found.keys or [argv[3]]
    items = []
    for key in keys:
        payload = dump(ctx, (b"DUMP", key))
        if payload is None:
            continue
        ttl = pttl(ctx, (b"PTTL", key))
        items.append((key, payload, ttl if ttl > 0 else 0))
    if not items:
        return "NOKEY"
    asking = ctx.engine.cluster is not None
    commands = [found.auth] if found.auth else []
    if not asking:
        commands.append([b"SELECT", str(db).encode()])
    for key, payload, ttl in items:
        restore_argv = [b"RESTORE-ASKING" if asking else b"RESTORE", key, str(ttl).encode(),
                        payload]
        if found.replace:
            restore_argv.append(b"REPLACE")
        commands.append(restore_argv)
    replies = _exchange(host, port, commands, timeout_s)
    failure = next((r for r in replies if isinstance(r, ReplyError)), None)
    taken = [key for (key, _payload, _ttl), reply in zip(items, replies[-len(items):],
                                                         strict=True)
             if not isinstance(reply, ReplyError)]
    if taken and not found.copy:
        del_(ctx, (b"DEL", *taken))
    if failure is not None:
        raise ReplyError(f"ERR Target instance replied with error: {failure.line}")
    return "OK"


def _exchange(host: str, port: int, commands: list[list[bytes]], timeout: float) -> list[object]:
    """Every command sent to host:port at once, then their replies read (an error reply an
    ErrorReply); ReplyError with Redis's IOERR lines when the target cannot be reached or
    does not answer within `timeout`. (An error reply is a ReplyError value, not raised.)"""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        raise ReplyError(CONNECT_ERROR) from None
    try:
        sock.settimeout(timeout)
        sock.sendall(b"".join(encode_command(c) for c in commands))
        parser = ReplyParser()
        replies: list[object] = []
        read = 0
        while len(replies) < len(commands):
            reply = parser.next()
            if reply is not NEED_MORE:
                replies.append(reply)
                continue
            data = sock.recv(65536)
            read += len(data)
            if not data or read > MAX_REPLY_BYTES * len(commands):
                raise ReplyError(READ_ERROR)
            parser.feed(data)
        return replies
    except (OSError, ProtocolError):
        raise ReplyError(READ_ERROR) from None
    finally:
        sock.close()


@command("restore-asking", -4, "write denyoom asking", group="server", since="3.0.0",
         acl="dangerous keyspace", keys="OW UPDATE", logs=("DEL", "PEXPIREAT", "RESTORE", "SET"),
         summary="An internal command for migrating keys in a cluster.",
         syntax="key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] "
                "[FREQ frequency]")
def restore_asking(ctx: Ctx, argv: Argv) -> str:
    """RESTORE, on a node importing the key's slot (as after ASKING): MIGRATE's."""
    return restore(ctx, argv)


__all__ = ["migrate", "migrate_keys", "restore_asking"]
