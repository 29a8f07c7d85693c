"""Pub/Sub's engine state: which subscribers listen on which channels and patterns, and the
delivery of a published message to each of them.

Owns `PubSub` (the registry: one per engine, changed only under the engine lock, of channels,
patterns and shard channels: `Kind`), `Subscriber` (one connection's subscriptions and the
callback its messages go through), the messages' shapes as Redis sends them (`message`,
`pmessage`, `smessage`, the subscribe and unsubscribe confirmations, as `Push` values: RESP3
`>`, plain arrays in RESP2), Redis's refusal of other commands while a
RESP2 connection is subscribed, and `Subscription`, the embedded API's subscriber (a thread of
the same process reads its messages with `get_message`). Nothing here is persisted or logged:
Pub/Sub is not part of the keyspace. A Subscription's `wake` is its reader's code, run by
whatever thread published (a caller's, the replica's follower, the expiry timer's keyspace
events): what it raises is logged there and goes no further. Must not touch: sockets (a network
subscriber's callback belongs to the server's connection and must not block), the command
table, the keyspace.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.engine.wire.reply import Push

if TYPE_CHECKING:
    from streamkeep.engine.exec.context import Session
    from streamkeep.engine.exec.engine_state import EngineState

log = logging.getLogger("streamkeep.engine")

Deliver = Callable[[Push], None]
Matcher = Callable[[bytes, bytes], bool]  # (pattern, channel): Redis's glob match

# What a subscribed RESP2 connection may still run (Redis's processCommand).
SUBSCRIBED_CONTEXT_COMMANDS = frozenset({
    b"subscribe", b"ssubscribe", b"unsubscribe", b"sunsubscribe", b"psubscribe",
    b"punsubscribe", b"ping", b"quit", b"reset",
})


def subscribed_context_error(command_name: str) -> str:
    """Redis's refusal of `command_name` (its full name: "get", "config|get") on a subscribed
    RESP2 connection."""
    return (f"ERR Can't execute '{command_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / "
            "PING / QUIT / RESET are allowed in this context")


def in_resp2_subscribed(session: Session) -> bool:
    """A RESP2 connection with a subscription: Redis restricts its commands and answers its
    PING as a message (`session.client` is the server's connection; None when embedded)."""
    sub = session.subscriber
    client = session.client
    return (sub is not None and client is not None and client.protocol == 2
            and sub.total() > 0)


class Kind:
    """One of the three subscription spaces: its name on both `PubSub` and `Subscriber` (the
    attribute holding it), its confirmations' and messages' words. Shard channels are Redis 7's
    sharded Pub/Sub, a space of their own in a server without cluster."""

    __slots__ = ("attr", "subscribe", "unsubscribe", "message", "shard")

    def __init__(self, attr: str, subscribe: bytes, unsubscribe: bytes, message: bytes) -> None:
        self.attr = attr
        self.subscribe = subscribe
        self.unsubscribe = unsubscribe
        self.message = message
        self.shard = attr == "shard_channels"


# What a message's first item is, as opposed to a confirmation's.
MESSAGE_KINDS = frozenset((b"message", b"pmessage", b"smessage"))

CHANNELS = Kind("channels", b"subscribe", b"unsubscribe", b"message")
PATTERNS = Kind("patterns", b"psubscribe", b"punsubscribe", b"pmessage")
SHARD_CHANNELS = Kind("shard_channels", b"ssubscribe", b"sunsubscribe", b"smessage")
KINDS = (CHANNELS, PATTERNS, SHARD_CHANNELS)


class Subscriber:
    """One connection's channels, patterns and shard channels, in subscription order, and
    `deliver`, which takes each message and confirmation meant for it. `deliver` is called under
    the engine lock, from whichever thread ran the command: it must only queue the message."""

    __slots__ = ("channels", "patterns", "shard_channels", "deliver", "active", "__weakref__")

    def __init__(self, deliver: Deliver) -> None:
        self.channels: dict[bytes, None] = {}
        self.patterns: dict[bytes, None] = {}
        self.shard_channels: dict[bytes, None] = {}
        self.deliver = deliver
        # total() > 0, kept by the registry: the server tests it before every command.
        self.active = False

    def count(self, kind: Kind = CHANNELS) -> int:
        """The count a confirmation of `kind` carries (Redis's clientSubscriptionsCount:
        channels plus patterns; for shard channels, those alone)."""
        if kind.shard:
            return len(self.shard_channels)
        return len(self.channels) + len(self.patterns)

    def total(self) -> int:
        """Every subscription: while it is not 0 the connection is a subscriber (Redis's
        CLIENT_PUBSUB: the RESP2 gate, the pubsub output-limit class)."""
        return len(self.channels) + len(self.patterns) + len(self.shard_channels)


class PubSub:
    """The registry: for each kind, name -> its subscribers (in subscription order). A name
    with no subscriber left is removed, so CHANNELS and NUMPAT count only live ones, as Redis
    does."""

    def __init__(self, match: Matcher) -> None:
        self.match = match
        # What a primary does with a message published here besides delivering it: sends it
        # to its replicas (replication.sender; None: no replication). Called with (PUBLISH or
        # SPUBLISH, channel, message) under the engine lock.
        self.propagate: Callable[[bytes, bytes, bytes], None] | None = None
        self.channels: dict[bytes, dict[Subscriber, None]] = {}
        self.patterns: dict[bytes, dict[Subscriber, None]] = {}
        self.shard_channels: dict[bytes, dict[Subscriber, None]] = {}

    # --- subscriptions ----------------------------------------------------------------------

    def add(self, sub: Subscriber, kind: Kind, name: bytes) -> None:
        index: dict[bytes, dict[Subscriber, None]] = getattr(self, kind.attr)
        index.setdefault(name, {})[sub] = None
        getattr(sub, kind.attr)[name] = None
        sub.active = True

    def remove(self, sub: Subscriber, kind: Kind, name: bytes) -> None:
        index: dict[bytes, dict[Subscriber, None]] = getattr(self, kind.attr)
        subscribers = index.get(name)
        if subscribers is not None:
            subscribers.pop(sub, None)
            if not subscribers:
                del index[name]
        getattr(sub, kind.attr).pop(name, None)
        sub.active = sub.total() > 0

    def subscribe(self, sub: Subscriber, channel: bytes) -> None:
        self.add(sub, CHANNELS, channel)

    def psubscribe(self, sub: Subscriber, pattern: bytes) -> None:
        self.add(sub, PATTERNS, pattern)

    def unsubscribe(self, sub: Subscriber, channel: bytes) -> None:
        self.remove(sub, CHANNELS, channel)

    def punsubscribe(self, sub: Subscriber, pattern: bytes) -> None:
        self.remove(sub, PATTERNS, pattern)

    def drop(self, sub: Subscriber) -> None:
        """Every subscription of `sub` ended, with no confirmation (a closed connection, RESET)."""
        for kind in KINDS:
            for name in list(getattr(sub, kind.attr)):
                self.remove(sub, kind, name)

    # --- publishing -------------------------------------------------------------------------

    def publish(self, channel: bytes, message: bytes) -> int:
        """Deliver `message` to the channel's subscribers, then to each pattern subscription
        that matches it (a subscriber of both gets it twice, as in Redis); how many
        deliveries (PUBLISH's reply)."""
        receivers = _deliver_all(self.channels.get(channel),
                                 Push([b"message", channel, message]))
        for pattern, subscribers in list(self.patterns.items()):
            if self.match(pattern, channel):
                receivers += _deliver_all(subscribers,
                                          Push([b"pmessage", pattern, channel, message]))
        return receivers

    def spublish(self, channel: bytes, message: bytes) -> int:
        """SPUBLISH: the shard channel's subscribers only (patterns never see shard messages)."""
        return _deliver_all(self.shard_channels.get(channel),
                            Push([b"smessage", channel, message]))

    # --- PUBSUB's introspection -------------------------------------------------------------

    def active_channels(self, pattern: bytes | None = None, kind: Kind = CHANNELS) -> list[bytes]:
        index: dict[bytes, dict[Subscriber, None]] = getattr(self, kind.attr)
        return [channel for channel in index if pattern is None or self.match(pattern, channel)]

    def numsub(self, channel: bytes, kind: Kind = CHANNELS) -> int:
        return len(getattr(self, kind.attr).get(channel, ()))

    def numpat(self) -> int:
        """Distinct patterns with a subscriber (not pattern subscriptions)."""
        return len(self.patterns)


def _deliver_all(subscribers: dict[Subscriber, None] | None, push: Push) -> int:
    if not subscribers:
        return 0
    receivers = list(subscribers)  # a delivery may end a subscription: it still counts
    for sub in receivers:
        sub.deliver(push)
    return len(receivers)


# --- the replies: one confirmation per name, in argument order, each through `deliver` -------


def subscribe_all(registry: PubSub, sub: Subscriber, names: Iterable[bytes], kind: Kind,
                  deliver: Deliver) -> None:
    """(P|S)SUBSCRIBE: each name subscribed and confirmed (again, if already)."""
    for name in names:
        registry.add(sub, kind, name)
        deliver(Push([kind.subscribe, name, sub.count(kind)]))


def unsubscribe_all(registry: PubSub, sub: Subscriber, names: Iterable[bytes], kind: Kind,
                    deliver: Deliver) -> None:
    """(P|S)UNSUBSCRIBE: the names given, or with none every current one; with none given and
    none subscribed, one confirmation naming no channel (Redis's null)."""
    names = list(names) or list(getattr(sub, kind.attr))
    if not names:
        deliver(Push([kind.unsubscribe, None, sub.count(kind)]))
        return
    for name in names:
        registry.remove(sub, kind, name)
        deliver(Push([kind.unsubscribe, name, sub.count(kind)]))


# --- the embedded API -----------------------------------------------------------------------


class SubscriptionOverflow(StreamkeepError):
    """An embedded subscriber fell behind by more than its limit: its subscriptions ended, as a
    network subscriber past `client-output-buffer-limit pubsub` is disconnected."""


class Subscription:
    """A subscriber in the same process (`Engine.subscribe`): its own session running SUBSCRIBE
    and the like through the engine, its messages queued for `get_message`, as redis-py's
    `PubSub` gives them (dicts with type, pattern, channel, data; the confirmations too).

    The unread messages are bounded like a network subscriber's output: past `limit_bytes` of
    unread payload (default: the hard limit of `client-output-buffer-limit pubsub`; 0: none)
    the subscriptions end, and once the queue is read `get_message` raises
    SubscriptionOverflow, so a thread that stopped reading cannot grow the process without
    bound."""

    def __init__(self, engine: EngineState, session: Session,
                 run: Callable[[Session, tuple[bytes, ...]], Any],
                 limit_bytes: int | None = None) -> None:
        self.engine = engine
        self.session = session
        self.run = run  # runs a command in `session` (the engine core's execute_raw)
        self.messages: queue.SimpleQueue[tuple[Push, int]] = queue.SimpleQueue()
        self.subscriber = Subscriber(self._enqueue)
        session.subscriber = self.subscriber
        if limit_bytes is None:
            limit_bytes = engine.config["client-output-buffer-limit"]["pubsub"][0]
        self.limit_bytes = limit_bytes
        self.pending_bytes = 0
        self.pending_lock = threading.Lock()  # the reader's thread and the publishers' share it
        self.overflowed = False
        self.closed = False
        # Called after each message is queued (engine lock held, any thread; must not block):
        # an event loop's reader waits on it instead of a thread blocked in get_message.
        self.wake: Callable[[], None] | None = None

    def _enqueue(self, push: Push) -> None:
        """The subscriber's delivery (engine lock held): queue, or end past the limit."""
        if self.overflowed:
            return
        size = sum(len(item) for item in push.items if type(item) is bytes)
        with self.pending_lock:
            self.pending_bytes += size
            pending = self.pending_bytes
        self.messages.put((push, size))
        if self.limit_bytes and pending > self.limit_bytes:
            self.overflowed = True
            self.engine.pubsub.drop(self.subscriber)
        if self.wake is not None:
            try:  # (costs nothing unless it raises: no per-message work is added)
                self.wake()
            except Exception:
                log.exception("a subscription's wake-up failed; the publisher goes on")

    def subscribe(self, *channels: bytes | str) -> None:
        self._run(b"SUBSCRIBE", channels)

    def psubscribe(self, *patterns: bytes | str) -> None:
        self._run(b"PSUBSCRIBE", patterns)

    def unsubscribe(self, *channels: bytes | str) -> None:
        self._run(b"UNSUBSCRIBE", channels)

    def punsubscribe(self, *patterns: bytes | str) -> None:
        self._run(b"PUNSUBSCRIBE", patterns)

    def _run(self, name: bytes, args: tuple[bytes | str, ...]) -> None:
        if self.closed:
            raise ValueError("the subscription is closed")
        argv = (name, *(a.encode() if isinstance(a, str) else a for a in args))
        self.run(self.session, argv)

    def get_message(self, timeout: float | None = 0.0) -> dict[str, Any] | None:
        """The next message or confirmation, waiting up to `timeout` seconds (None: until one
        comes); None if there is none by then."""
        try:
            if self.overflowed or (timeout is not None and timeout <= 0):
                push, size = self.messages.get_nowait()
            else:
                push, size = self.messages.get(timeout=timeout)
        except queue.Empty:
            if self.overflowed:
                raise SubscriptionOverflow(
                    f"the subscriber fell more than {self.limit_bytes} bytes behind; its "
                    "subscriptions ended") from None
            return None
        with self.pending_lock:
            self.pending_bytes -= size
        return message_dict(push)

    def close(self) -> None:
        """Every subscription ended; messages already queued stay readable."""
        if self.closed:
            return
        self.closed = True
        with self.engine.lock:
            self.engine.pubsub.drop(self.subscriber)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def message_dict(push: Push) -> dict[str, Any]:
    """A message or confirmation as redis-py's PubSub.get_message returns it (bytes kept)."""
    items = push.items
    kind = items[0].decode()
    if kind == "pmessage":
        return {"type": kind, "pattern": items[1], "channel": items[2], "data": items[3]}
    return {"type": kind, "pattern": None, "channel": items[1], "data": items[2]}


__all__ = ["CHANNELS", "KINDS", "MESSAGE_KINDS", "PATTERNS", "SHARD_CHANNELS", "SUBSCRIBED_CONTEXT_COMMANDS",
           "Kind", "PubSub", "Subscriber", "Subscription", "SubscriptionOverflow", "in_resp2_subscribed", "message_dict",
           "subscribe_all", "subscribed_context_error", "unsubscribe_all"]
