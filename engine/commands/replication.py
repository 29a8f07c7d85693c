"""Replication commands: REPLICAOF (SLAVEOF), ROLE, REPLCONF, PSYNC, SYNC, WAIT, WAITAOF.

Owns these commands' argument parsing, Redis's error lines, and the replies of an engine with no
replication attached (an in-memory engine: a primary with no replicas and no AOF). Everything
else goes through the `Replication` interface (engine.exec.interfaces; replication.service
implements it). Must not touch: sockets, files, the link's protocol.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.table import Argv, command
from streamkeep.engine.wire.args import is_word, parse_int, parse_int_range, parse_timeout_ms
from streamkeep.engine.wire.errors import ReplyError

WAIT_ON_REPLICA = ("ERR WAIT cannot be used with replica instances. Please also note that since "
                   "Redis 4.0 if a replica is configured to be writable (which is not the "
                   "default) writes to replicas are just local and are not propagated.")
WAITAOF_ON_REPLICA = ("ERR WAITAOF cannot be used with replica instances. Please also note that "
                      "writes to replicas are just local and are not propagated.")
WAITAOF_NO_AOF = "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."
NEEDS_DATADIR = "ERR replication needs a data directory (Engine.open(path) or streamkeep serve)"
POSITIVE = "value is out of range, must be positive"


def _replicaof(ctx: Ctx, argv: Argv) -> str:
    if ctx.engine.cluster is not None:  # (a node's primary is its topology's)
        raise ReplyError("ERR REPLICAOF not allowed in cluster mode.")
    host, port_arg = argv[1], argv[2]
    replication = ctx.engine.replication
    if is_word(host, b"no") and is_word(port_arg, b"one"):
        return replication.replicaof(None, 0) if replication is not None else "OK"
    port = parse_int(port_arg)
    if replication is None:
        raise ReplyError(NEEDS_DATADIR)
    if not 0 < port < 65536:
        raise ReplyError("ERR Invalid master port")
    return replication.replicaof(host.decode("utf-8", "replace"), port)


@command("replicaof", 3, "admin noscript stale no_async_loading", group="server", since="5.0.0",
         keys="",
         summary="Configures a server as replica of another, or promotes it to a "
                                "master.",
         syntax="<args: <host-port: host port:integer> | <no-one: NO ONE>>")
def replicaof(ctx: Ctx, argv: Argv) -> str:
    return _replicaof(ctx, argv)


@command("slaveof", 3, "admin noscript stale no_async_loading", group="server", since="1.0.0",
         keys="",
         summary="Sets a Redis server as a replica of another, or promotes it to "
                                "being a master.",
         syntax="<args: <host-port: host port:integer> | <no-one: NO ONE>>")
def slaveof(ctx: Ctx, argv: Argv) -> str:
    return _replicaof(ctx, argv)


@command("role", 1, "noscript loading stale fast sentinel", group="server", since="2.8.12",
         acl="admin dangerous", keys="",
         summary="Returns the replication role.")
def role(ctx: Ctx, argv: Argv) -> list[Any]:
    replication = ctx.engine.replication
    if replication is None:
        return [b"master", 0, []]
    return replication.role()


@command("replconf", -1, "admin noscript loading stale allow_busy", group="server", since="3.0.0",
         keys="",
         summary="An internal command for configuring the replication stream.",
         syntax="[<option value>...]")
def replconf(ctx: Ctx, argv: Argv) -> Any:
    replication = ctx.engine.replication
    if replication is None:
        raise ReplyError(NEEDS_DATADIR)
    if len(argv) % 2 == 0:
        raise ReplyError("ERR syntax error")
    return replication.replconf(ctx.session, argv)


@command("psync", -3, "admin noscript no_async_loading no_multi", group="server", since="2.8.0",
         keys="",
         summary="An internal command used in replication.", syntax="replicationid offset [crc]")
def psync(ctx: Ctx, argv: Argv) -> Any:
    replication = ctx.engine.replication
    if replication is None:
        raise ReplyError(NEEDS_DATADIR)
    return replication.psync(ctx.session, argv)


@command("sync", 1, "admin noscript no_async_loading no_multi", group="server", since="1.0.0",
         keys="",
         summary="An internal command used in replication.")
def sync(ctx: Ctx, argv: Argv) -> Any:
    replication = ctx.engine.replication
    if replication is None:
        raise ReplyError(NEEDS_DATADIR)
    return replication.psync(ctx.session, argv)


@command("wait", 3, "blocking", group="generic", since="3.0.0",
         acl="connection", keys="",
         summary="Blocks until the asynchronous replication of all preceding write commands "
                 "sent by the connection is completed.",
         syntax="numreplicas:integer timeout:integer")
def wait(ctx: Ctx, argv: Argv) -> Any:
    replication = ctx.engine.replication
    if ctx.engine.read_only is not None:
        raise ReplyError(WAIT_ON_REPLICA)
    numreplicas = parse_int(argv[1])
    timeout = parse_timeout_ms(argv[2], ctx.now)
    if replication is None:
        return 0
    # In MULTI or a script it never blocks (Redis's CLIENT_DENY_BLOCKING): the count now.
    return replication.wait(ctx.session, numreplicas, timeout, block=not ctx.in_multi)


@command("waitaof", 4, "blocking", group="generic", since="7.2.0",
         acl="connection", keys="",
         summary="Blocks until all of the preceding write commands sent by the connection are "
                 "written to the append-only file of the master and/or replicas.",
         syntax="numlocal:integer numreplicas:integer timeout:integer")
def waitaof(ctx: Ctx, argv: Argv) -> Any:
    numlocal = parse_int_range(argv[1], 0, (1 << 63) - 1, POSITIVE)
    numreplicas = parse_int_range(argv[2], 0, (1 << 63) - 1, POSITIVE)
    timeout = parse_timeout_ms(argv[3], ctx.now)
    if ctx.engine.read_only is not None:
        raise ReplyError(WAITAOF_ON_REPLICA)
    replication = ctx.engine.replication
    if replication is None:
        if numlocal:
            raise ReplyError(WAITAOF_NO_AOF)
        return [0, 0]
    return replication.waitaof(ctx.session, numlocal, numreplicas, timeout,
                               block=not ctx.in_multi)
