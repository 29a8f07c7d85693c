"""The Pub/Sub registry (engine.exec.pubsub): subscriptions by channel and pattern, delivery
order and counts, live channels only, the confirmations' shapes, the subscribed-context rule and
line, and the embedded Subscription (confirmations and messages as redis-py's dicts, close; a
`wake` that raises is logged, never raised into the publishing thread)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from streamkeep import Engine
from streamkeep.engine.commands.pubsub import glob_match
from streamkeep.engine.exec.pubsub import (
    CHANNELS,
    PATTERNS,
    SHARD_CHANNELS,
    PubSub,
    Subscriber,
    SubscriptionOverflow,
    in_resp2_subscribed,
    message_dict,
    subscribe_all,
    subscribed_context_error,
    unsubscribe_all,
)
from streamkeep.engine.runtime.core import Session
from streamkeep.engine.wire.reply import Push


def subscriber() -> tuple[Subscriber, list[Push]]:
    got: list[Push] = []
    return Subscriber(got.append), got


def test_publish_reaches_channel_then_pattern_subscribers_and_counts_deliveries() -> None:
    registry = PubSub(glob_match)
    a, got_a = subscriber()
    b, got_b = subscriber()
    registry.subscribe(a, b"news")
    registry.psubscribe(a, b"n*")
    registry.psubscribe(b, b"n*")
    assert registry.publish(b"news", b"hi") == 3
    assert got_a == [Push([b"message", b"news", b"hi"]),
                     Push([b"pmessage", b"n*", b"news", b"hi"])]
    assert got_b == [Push([b"pmessage", b"n*", b"news", b"hi"])]
    assert registry.publish(b"other", b"x") == 0


def test_subscribing_twice_is_one_subscription() -> None:
    registry = PubSub(glob_match)
    a, got = subscriber()
    registry.subscribe(a, b"c")
    registry.subscribe(a, b"c")
    assert a.count() == 1
    assert registry.publish(b"c", b"m") == 1
    assert len(got) == 1


def test_channels_and_patterns_without_subscribers_disappear() -> None:
    registry = PubSub(glob_match)
    a, _ = subscriber()
    b, _ = subscriber()
    registry.subscribe(a, b"c1")
    registry.subscribe(b, b"c1")
    registry.subscribe(a, b"c2")
    registry.psubscribe(a, b"p*")
    registry.psubscribe(b, b"p*")
    assert registry.active_channels() == [b"c1", b"c2"]
    assert registry.active_channels(b"*2") == [b"c2"]
    assert (registry.numsub(b"c1"), registry.numpat()) == (2, 1)
    registry.drop(a)
    assert (a.channels, a.patterns) == ({}, {})
    assert registry.active_channels() == [b"c1"]
    assert (registry.numsub(b"c1"), registry.numsub(b"c2"), registry.numpat()) == (1, 0, 1)
    registry.unsubscribe(b, b"c1")
    registry.punsubscribe(b, b"p*")
    assert registry.channels == {} and registry.patterns == {}


def test_unsubscribing_what_was_never_subscribed_is_harmless() -> None:
    registry = PubSub(glob_match)
    a, _ = subscriber()
    registry.unsubscribe(a, b"nope")
    registry.punsubscribe(a, b"nope*")
    assert registry.channels == {} and a.count() == 0


def test_confirmations_carry_the_running_count_in_argument_order() -> None:
    registry = PubSub(glob_match)
    a, got = subscriber()
    subscribe_all(registry, a, [b"x", b"y", b"x"], CHANNELS, a.deliver)
    subscribe_all(registry, a, [b"p*"], PATTERNS, a.deliver)
    assert got == [Push([b"subscribe", b"x", 1]), Push([b"subscribe", b"y", 2]),
                   Push([b"subscribe", b"x", 2]), Push([b"psubscribe", b"p*", 3])]
    got.clear()
    unsubscribe_all(registry, a, [], CHANNELS, a.deliver)  # none named: every channel
    assert got == [Push([b"unsubscribe", b"x", 2]), Push([b"unsubscribe", b"y", 1])]
    got.clear()
    unsubscribe_all(registry, a, [], CHANNELS, a.deliver)  # none left: one null confirmation
    unsubscribe_all(registry, a, [b"zz"], PATTERNS, a.deliver)
    assert got == [Push([b"unsubscribe", None, 1]), Push([b"punsubscribe", b"zz", 1])]


@pytest.mark.parametrize(("pattern", "channel", "matches"), [
    (b"news.*", b"news.art", True), (b"news.?", b"news.ab", False), (b"h[ae]llo", b"hello", True),
    (b"h[^e]llo", b"hello", False), (b"H*", b"hello", False), (b"a\\*", b"a*", True),
])
def test_patterns_match_as_redis_globs(pattern: bytes, channel: bytes, matches: bool) -> None:
    registry = PubSub(glob_match)
    a, _ = subscriber()
    registry.psubscribe(a, pattern)
    assert registry.publish(channel, b"m") == int(matches)


def test_the_subscribed_context_rule() -> None:
    sub, _ = subscriber()
    session = Session()
    session.subscriber, session.client = sub, SimpleNamespace(protocol=2)
    assert not in_resp2_subscribed(session)
    sub.channels[b"c"] = None
    assert in_resp2_subscribed(session)
    session.client.protocol = 3
    assert not in_resp2_subscribed(session)  # type: ignore[arg-type]
    session.client = None  # embedded: no restriction
    assert not in_resp2_subscribed(session)  # type: ignore[arg-type]
    assert subscribed_context_error("config|get") == (
        "ERR Can't execute 'config|get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT "
        "/ RESET are allowed in this context")


def test_message_dicts_are_redis_pys() -> None:
    assert message_dict(Push([b"message", b"c", b"d"])) == {
        "type": "message", "pattern": None, "channel": b"c", "data": b"d"}
    assert message_dict(Push([b"pmessage", b"p*", b"c", b"d"])) == {
        "type": "pmessage", "pattern": b"p*", "channel": b"c", "data": b"d"}
    assert message_dict(Push([b"unsubscribe", None, 0]))["data"] == 0


def test_embedded_subscription_reads_confirmations_then_messages() -> None:
    engine = Engine()
    with engine.subscribe("orders") as sub:
        assert sub.get_message() == {"type": "subscribe", "pattern": None,
                                     "channel": b"orders", "data": 1}
        assert sub.get_message() is None
        assert engine.execute("PUBLISH", "orders", "o1") == 1
        assert sub.get_message(timeout=1)["data"] == b"o1"  # type: ignore[index]
        sub.psubscribe("ord*")
        sub.get_message()
        assert engine.execute("PUBLISH", "orders", "o2") == 2
        assert [m["type"] for m in (sub.get_message(), sub.get_message())] == [  # type: ignore[index]
            "message", "pmessage"]
    assert engine.execute("PUBSUB", "NUMSUB", "orders") == [b"orders", 0]
    assert engine.execute("PUBSUB", "NUMPAT") == 0
    with pytest.raises(ValueError):
        sub.subscribe("again")


def test_a_wake_that_raises_stays_with_its_subscription(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    """A Subscription's `wake` is its reader's code, run by whatever thread publishes (a
    replica's follower, the expiry timer's keyspace events). One that raises (an event loop
    that closed) is logged: the PUBLISH is answered, the other subscribers get the message,
    and so does the failing one's queue."""
    engine = Engine()
    failing, other = engine.subscribe("news"), engine.subscribe("news")
    for sub in (failing, other):
        assert sub.get_message()["type"] == "subscribe"  # type: ignore[index]

    def wake() -> None:
        raise RuntimeError("Event loop is closed")

    failing.wake = wake
    with caplog.at_level(logging.ERROR, logger="streamkeep.engine"):
        assert engine.execute("PUBLISH", "news", "m") == 2
    assert other.get_message()["data"] == b"m"  # type: ignore[index]
    assert failing.get_message()["data"] == b"m"  # type: ignore[index]
    assert sum("wake-up failed" in r.getMessage() for r in caplog.records) == 1


def test_shard_channels_are_a_space_of_their_own() -> None:
    registry = PubSub(glob_match)
    a, got = subscriber()
    subscribe_all(registry, a, [b"c"], CHANNELS, a.deliver)
    subscribe_all(registry, a, [b"c", b"d"], SHARD_CHANNELS, a.deliver)
    assert got[1:] == [Push([b"ssubscribe", b"c", 1]), Push([b"ssubscribe", b"d", 2])]
    assert (a.count(), a.count(SHARD_CHANNELS), a.total()) == (1, 2, 3)
    registry.psubscribe(a, b"*")
    got.clear()
    assert registry.spublish(b"c", b"m") == 1  # patterns never see shard messages
    assert got == [Push([b"smessage", b"c", b"m"])]
    assert registry.active_channels(kind=SHARD_CHANNELS) == [b"c", b"d"]
    assert registry.numsub(b"d", SHARD_CHANNELS) == 1 and registry.numsub(b"d") == 0
    got.clear()
    unsubscribe_all(registry, a, [], SHARD_CHANNELS, a.deliver)
    assert got == [Push([b"sunsubscribe", b"c", 1]), Push([b"sunsubscribe", b"d", 0])]
    registry.drop(a)
    assert a.total() == 0 and registry.channels == registry.patterns == {}


def test_active_follows_the_subscriptions() -> None:
    registry = PubSub(glob_match)
    a, _ = subscriber()
    assert not a.active
    registry.add(a, SHARD_CHANNELS, b"s")
    registry.psubscribe(a, b"p*")
    assert a.active
    registry.remove(a, SHARD_CHANNELS, b"s")
    assert a.active
    registry.drop(a)
    assert not a.active


def test_an_embedded_subscriber_that_falls_behind_is_ended() -> None:
    engine = Engine()
    sub = engine.subscribe("c", limit_bytes=1000)
    sub.get_message()
    for _ in range(3):
        assert engine.execute("PUBLISH", "c", "x" * 400) == 1
    assert engine.execute("PUBLISH", "c", "late") == 0  # its subscriptions ended at the third
    assert [sub.get_message()["data"] for _ in range(3)] == [b"x" * 400] * 3  # type: ignore[index]
    with pytest.raises(SubscriptionOverflow, match="more than 1000 bytes behind"):
        sub.get_message(timeout=5)


def test_reading_keeps_an_embedded_subscriber_within_its_limit() -> None:
    engine = Engine()
    sub = engine.subscribe("c", limit_bytes=1000)
    for _ in range(20):
        engine.execute("PUBLISH", "c", "x" * 400)
        assert sub.get_message(timeout=1) is not None
    assert sub.get_message()["data"] == b"x" * 400  # type: ignore[index]
    assert not sub.overflowed and sub.pending_bytes == 0
