"""Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, the sharded
SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH (a space of their own, as in a Redis without cluster) and
PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB / HELP.

Owns these commands' argument handling and replies. The subscriptions are the engine's
registry (`ctx.engine.pubsub`, engine.exec.pubsub) and the calling session's subscriber
(`ctx.session.subscriber`: the server gives each connection one, `Engine.subscribe` its own
session one). The (un)subscribe commands reply through the subscriber, one confirmation per
channel as Redis does, and return NO_REPLY (inside EXEC: see `_change`). None of them emits an effect: Pub/Sub is not
logged, persisted or replayed. Must not touch: the keyspace, sockets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.pubsub import (
    CHANNELS,
    PATTERNS,
    SHARD_CHANNELS,
    Kind,
    Subscriber,
    subscribe_all,
    unsubscribe_all,
)
from streamkeep.engine.exec.table import (
    Argv,
    command,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.wire.errors import ReplyError, subcommand_syntax
from streamkeep.engine.wire.reply import NO_REPLY, Push

NO_SUBSCRIBER = ("ERR {} needs a connection that can receive messages: on an embedded engine "
                 "use Engine.subscribe")
HELP_LINES = [
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
]


def glob_match(pattern: bytes, channel: bytes) -> bool:
    """Pattern subscriptions and PUBSUB CHANNELS match as KEYS does (case-sensitive)."""
    return stringmatchlen(pattern, channel)


def _subscriber(ctx: Ctx, argv: Argv) -> Subscriber:
    sub = ctx.session.subscriber
    if sub is None:
        raise ReplyError(NO_SUBSCRIBER.format(argv[0].decode("utf-8", "replace").upper()))
    return sub


def _change(ctx: Ctx, argv: Argv, change: Callable[..., None], kind: Kind) -> Any:
    """Run a (un)subscribe `change`, its confirmations delivered to the subscriber as they
    come, in command order with its other replies. Inside EXEC the first confirmation is the
    command's reply instead (its element of EXEC's array, as in Redis). Any others are
    delivered at once, so they reach the client before EXEC's reply, where Redis writes them
    inside the array, past the length it announced: a quirk no client relies on, left for a
    reply value that encodes several replies in a row."""
    sub = _subscriber(ctx, argv)
    registry = ctx.engine.pubsub
    if not ctx.in_multi:
        change(registry, sub, argv[1:], kind, sub.deliver)
        return NO_REPLY
    if kind.shard:  # a transaction's client may not block, and Redis makes no exception here
        raise ReplyError(f"ERR {kind.subscribe.decode().upper()} isn't allowed for a DENY "
                         "BLOCKING client")
    confirmations: list[Push] = []
    change(registry, sub, argv[1:], kind, confirmations.append)
    for extra in confirmations[1:]:
        sub.deliver(extra)
    return confirmations[0]


@command("subscribe", -2, "pubsub noscript loading stale sentinel", group="pubsub", since="2.0.0",
         keys="",
         summary="Listens for messages published to channels.", syntax="channel [channel ...]")
def subscribe(ctx: Ctx, argv: Argv) -> Any:
    return _change(ctx, argv, subscribe_all, CHANNELS)


@command("psubscribe", -2, "pubsub noscript loading stale sentinel", group="pubsub", since="2.0.0",
         keys="",
         summary="Listens for messages published to channels that match one or more patterns.",
         syntax="pattern [pattern ...]")
def psubscribe(ctx: Ctx, argv: Argv) -> Any:
    return _change(ctx, argv, subscribe_all, PATTERNS)


@command("unsubscribe", -1, "pubsub noscript loading stale sentinel", group="pubsub",
         since="2.0.0",
         keys="",
         summary="Stops listening to messages posted to channels.",
         syntax="[channel [channel ...]]")
def unsubscribe(ctx: Ctx, argv: Argv) -> Any:
    return _change(ctx, argv, unsubscribe_all, CHANNELS)


@command("punsubscribe", -1, "pubsub noscript loading stale sentinel", group="pubsub",
         since="2.0.0",
         keys="",
         summary="Stops listening to messages published to channels that match one or more "
                 "patterns.",
         syntax="[pattern [pattern ...]]")
def punsubscribe(ctx: Ctx, argv: Argv) -> Any:
    return _change(ctx, argv, unsubscribe_all, PATTERNS)


@command("publish", 3, "pubsub loading stale fast may_replicate sentinel", group="pubsub",
         since="2.0.0",
         keys="",
         summary="Posts a message to a channel.", syntax="channel message")
def publish(ctx: Ctx, argv: Argv) -> int:
    receivers = ctx.engine.pubsub.publish(argv[1], argv[2])
    cluster = ctx.engine.cluster
    if cluster is None:
        _propagate(ctx, b"PUBLISH", argv)
    elif cluster.relay is not None:  # to every other node, as Redis's bus carries it
        cluster.relay.publish(argv[1], argv[2])
    return receivers


def _propagate(ctx: Ctx, command: bytes, argv: Argv) -> None:
    """A published message goes to this node's replicas too, as Redis propagates it to its
    own: a primary's clients' messages, and on a replica those of its primary (passed down a
    chain of replicas), never a replica's own clients' (Redis's replicas feed their
    sub-replicas only what their primary sends)."""
    propagate = ctx.engine.pubsub.propagate
    if propagate is not None and (ctx.engine.read_only is None or ctx.session.from_primary):
        propagate(command, argv[1], argv[2])


@command("ssubscribe", -2, "pubsub noscript loading stale", group="pubsub", since="7.0.0",
         keys="NOT_KEY @1 r-1,1,0",
         summary="Listens for messages published to shard channels.",
         syntax="shardchannel [shardchannel ...]")
def ssubscribe(ctx: Ctx, argv: Argv) -> Any:
    return _change(ctx, argv, subscribe_all, SHARD_CHANNELS)


@command("sunsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="7.0.0",
         keys="NOT_KEY @1 r-1,1,0",
         summary="Stops listening to messages posted to shard channels.",
         syntax="[shardchannel [shardchannel ...]]")
def sunsubscribe(ctx: Ctx, argv: Argv) -> Any:
    return _change(ctx, argv, unsubscribe_all, SHARD_CHANNELS)


@command("spublish", 3, "pubsub loading stale fast may_replicate", group="pubsub", since="7.0.0",
         keys="NOT_KEY",
         summary="Post a message to a shard channel", syntax="shardchannel message")
def spublish(ctx: Ctx, argv: Argv) -> int:
    receivers = ctx.engine.pubsub.spublish(argv[1], argv[2])
    _propagate(ctx, b"SPUBLISH", argv)
    return receivers


PUBSUB = container("pubsub", "A container for Pub/Sub commands.", group="pubsub",
                   since="2.8.0")


def _channels(ctx: Ctx, argv: Argv, kind: Kind) -> list[bytes]:
    if len(argv) > 3:
        raise subcommand_syntax(argv)
    return ctx.engine.pubsub.active_channels(argv[2] if len(argv) == 3 else None, kind)


def _numsub(ctx: Ctx, argv: Argv, kind: Kind) -> list[Any]:
    registry = ctx.engine.pubsub
    reply: list[Any] = []
    for channel in argv[2:]:
        reply += [channel, registry.numsub(channel, kind)]
    return reply


@subcommand(PUBSUB, "channels", -2, "pubsub loading stale", since="2.8.0",
            keys="",
            summary="Returns the active channels.", syntax="[pattern]")
def pubsub_channels(ctx: Ctx, argv: Argv) -> list[bytes]:
    return _channels(ctx, argv, CHANNELS)


@subcommand(PUBSUB, "numsub", -2, "pubsub loading stale", since="2.8.0",
            keys="",
            summary="Returns a count of subscribers to channels.",
            syntax="[channel [channel ...]]")
def pubsub_numsub(ctx: Ctx, argv: Argv) -> list[Any]:
    return _numsub(ctx, argv, CHANNELS)


@subcommand(PUBSUB, "shardchannels", -2, "pubsub loading stale", since="7.0.0",
            keys="",
            summary="Returns the active shard channels.", syntax="[pattern]")
def pubsub_shardchannels(ctx: Ctx, argv: Argv) -> list[bytes]:
    return _channels(ctx, argv, SHARD_CHANNELS)


@subcommand(PUBSUB, "shardnumsub", -2, "pubsub loading stale", since="7.0.0",
            keys="",
            summary="Returns the count of subscribers of shard channels.",
            syntax="[shardchannel [shardchannel ...]]")
def pubsub_shardnumsub(ctx: Ctx, argv: Argv) -> list[Any]:
    return _numsub(ctx, argv, SHARD_CHANNELS)


@subcommand(PUBSUB, "numpat", 2, "pubsub loading stale", since="2.8.0",
            keys="",
            summary="Returns a count of unique pattern subscriptions.")
def pubsub_numpat(ctx: Ctx, argv: Argv) -> int:
    return ctx.engine.pubsub.numpat()


help_subcommand(PUBSUB, HELP_LINES, since="6.2.0")
