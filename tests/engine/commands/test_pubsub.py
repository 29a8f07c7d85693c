"""Pub/Sub's commands (engine.commands.pubsub) on an engine: PUBLISH's count, PUBSUB CHANNELS /
NUMSUB / NUMPAT and their errors, (un)subscribing through a session's subscriber, the refusal on
a session without one, RESET ending subscriptions, and that nothing is logged as an effect."""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.wire.reply import NO_REPLY, Push


def test_publish_without_subscribers_is_zero_and_logs_nothing() -> None:
    engine = Engine()
    assert engine.execute_with_effects("PUBLISH", "c", "m") == (0, [])


def test_pubsub_introspection() -> None:
    engine = Engine()
    a = engine.subscribe("news.art", "news.tech")
    b = engine.subscribe("news.art")
    p = engine.psubscribe("news.*", "x?")
    assert sorted(engine.execute("PUBSUB", "CHANNELS")) == [b"news.art", b"news.tech"]
    assert engine.execute("PUBSUB", "CHANNELS", "*tech") == [b"news.tech"]
    assert engine.execute("PUBSUB", "NUMSUB", "news.art", "none") == [b"news.art", 2, b"none", 0]
    assert engine.execute("PUBSUB", "NUMSUB") == []
    assert engine.execute("PUBSUB", "NUMPAT") == 2
    assert engine.execute("PUBLISH", "news.art", "m") == 3
    for sub in (a, b, p):
        sub.close()
    assert engine.execute("PUBSUB", "CHANNELS") == []


@pytest.mark.parametrize(("argv", "line"), [
    (("PUBSUB",), "ERR wrong number of arguments for 'pubsub' command"),
    (("PUBSUB", "NUMPAT", "x"), "ERR wrong number of arguments for 'pubsub|numpat' command"),
    (("PUBSUB", "CHANNELS", "a", "b"),
     "ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP."),
    (("PUBSUB", "NOPE"), "ERR unknown subcommand 'NOPE'. Try PUBSUB HELP."),
    (("PUBLISH", "c"), "ERR wrong number of arguments for 'publish' command"),
    (("SUBSCRIBE",), "ERR wrong number of arguments for 'subscribe' command"),
])
def test_error_lines(argv: tuple[str, ...], line: str) -> None:
    with pytest.raises(ReplyError) as err:
        Engine().execute(*argv)
    assert str(err.value) == line


def test_subscribing_needs_a_session_with_a_subscriber() -> None:
    with pytest.raises(ReplyError, match="Engine.subscribe"):
        Engine().execute("SUBSCRIBE", "c")


def test_confirmations_go_to_the_subscriber_and_the_reply_is_empty() -> None:
    engine = Engine()
    sub = engine.subscribe()
    reply = engine.execute_raw(sub.session, (b"SUBSCRIBE", b"a", b"b"))
    assert reply is NO_REPLY
    assert [sub.messages.get_nowait()[0] for _ in range(2)] == [
        Push([b"subscribe", b"a", 1]), Push([b"subscribe", b"b", 2])]


def test_reset_ends_subscriptions_without_confirming() -> None:
    engine = Engine()
    sub = engine.subscribe("a")
    sub.get_message()
    assert engine.execute_raw(sub.session, (b"RESET",)) == "RESET"
    assert sub.get_message() is None
    assert engine.execute("PUBLISH", "a", "m") == 0


def test_inside_exec_the_confirmation_is_the_commands_reply() -> None:
    engine = Engine()
    sub = engine.subscribe()
    engine.execute_raw(sub.session, (b"MULTI",))
    engine.execute_raw(sub.session, (b"SUBSCRIBE", b"m"))
    assert engine.execute_raw(sub.session, (b"EXEC",)) == [Push([b"subscribe", b"m", 1])]
    assert sub.get_message() is None
    assert engine.execute("PUBLISH", "m", "x") == 1
