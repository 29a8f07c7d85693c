"""engine.exec.notify: the notify-keyspace-events classes (Redis's letters, its refusal of any
other, CONFIG GET's canonical text), the messages a command publishes (keyspace then keyevent,
in Redis's order), none while the setting is empty (no publish call at all), none logged, and a
replica publishing its own as it applies its primary's records. The messages are compared with
redis-server's in tests/differential/test_keyspace_events.py."""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.exec import notify
from streamkeep.engine.exec.notify import classes_text, parse_classes
from tests.support.command_strategies import Clock
from tests.support.diffutil import err


def events(sub: Any) -> list[tuple[bytes, bytes]]:
    out = []
    while (message := sub.get_message()) is not None:
        if message["type"] == "pmessage":
            out.append((message["channel"], message["data"]))
    return out


@pytest.fixture
def engine() -> Engine:
    clock = Clock()
    clock.now = 1_000_000
    return Engine(clock=clock, notify_keyspace_events="KEA")


def test_letters_as_redis_reads_and_prints_them():
    assert parse_classes("KEA") == notify.KEYSPACE | notify.KEYEVENT | notify.ALL
    assert parse_classes("") == 0
    assert parse_classes("KEA!") is None and parse_classes("kea") is None
    assert classes_text(parse_classes("KEA")) == "AKE"
    assert classes_text(parse_classes("KEAn")) == "AKE"  # A hides n, as in Redis
    assert classes_text(parse_classes("Kg$xt")) == "g$xtK"
    assert classes_text(parse_classes("Ed")) == "dE"
    assert classes_text(parse_classes("AKEm")) == "AKEm"
    assert classes_text(parse_classes("noc")) == "noc"


def test_config_set_and_get():
    e = Engine()
    assert e.execute("CONFIG", "GET", "notify-keyspace-events") == [
        b"notify-keyspace-events", b""]
    assert e.execute("CONFIG", "SET", "notify-keyspace-events", "KEx") == "OK"
    assert e.execute("CONFIG", "GET", "notify-keyspace-events")[1] == b"xKE"
    assert e.notify_flags == notify.KEYSPACE | notify.KEYEVENT | notify.EXPIRED
    assert err(e, "CONFIG", "SET", "notify-keyspace-events", "KEZ") == (
        "ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - "
        "Invalid event class character. Use 'Ag$lshzxeKEtmdnoc'.")
    assert e.notify_flags == notify.KEYSPACE | notify.KEYEVENT | notify.EXPIRED


def test_a_command_publishes_keyspace_then_keyevent(engine):
    sub = engine.psubscribe("__key*__:*")
    engine.execute("SET", "k", "v", "EX", "10")
    assert events(sub) == [(b"__keyspace@0__:k", b"set"), (b"__keyevent@0__:set", b"k"),
                           (b"__keyspace@0__:k", b"expire"), (b"__keyevent@0__:expire", b"k")]
    engine.execute("SELECT", "3")
    engine.execute("XADD", "s", "1-1", "f", "v")
    assert events(sub) == [(b"__keyspace@3__:s", b"xadd"), (b"__keyevent@3__:xadd", b"s")]


def test_only_the_classes_set_are_published():
    e = Engine(notify_keyspace_events="Kt")
    sub = e.psubscribe("*")
    e.execute("SET", "k", "v")
    e.execute("DEL", "k")
    e.execute("XADD", "s", "1-1", "f", "v")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    assert events(sub) == [(b"__keyspace@0__:s", b"xadd"), (b"__keyspace@0__:s", b"xgroup-create")]


@pytest.mark.parametrize(("argv", "expected"), [
    (("SET", "k", "v"), [b"new", b"set"]),
    (("SET", "old", "v"), [b"overwritten", b"set"]),
    (("SET", "s", "v"), [b"overwritten", b"type_changed", b"set"]),
    (("MSETEX", "1", "k", "v", "PX", "100"), [b"new", b"expire", b"set"]),
    (("INCR", "num"), [b"incrby"]),
    (("INCR", "k"), [b"new", b"incrby"]),
    (("INCREX", "k", "BYINT", "5"), [b"new", b"incrby"]),
    (("INCREX", "num", "BYFLOAT", "0.5"), [b"incrbyfloat"]),
    (("INCREX", "num", "EX", "100"), [b"incrby", b"expire"]),
    (("INCREX", "ttl", "PERSIST"), [b"incrby", b"persist"]),
    (("INCREX", "num", "PERSIST"), [b"incrby"]),
    (("INCREX", "ttl", "EX", "200", "ENX"), [b"incrby"]),
    (("INCREX", "num", "EXAT", "1"), [b"del"]),
    (("INCREX", "num", "UBOUND", "0"), []),
    (("SETRANGE", "old", "1", "x"), [b"setrange"]),
    (("APPEND", "k", "x"), [b"new", b"append"]),
    (("DELEX", "old", "IFEQ", "v"), [b"del"]),
    (("DELEX", "old", "IFEQ", "no"), []),
    (("XADD", "new-stream", "*", "f", "v"), [b"new", b"xadd"]),
    (("XADD", "s", "MAXLEN", "0", "*", "f", "v"), [b"xadd", b"xtrim"]),
    (("XGROUP", "CREATE", "n", "g", "$", "MKSTREAM"), [b"new", b"xgroup-create"]),
    (("RENAME", "old", "s"), [b"new", b"overwritten", b"type_changed", b"rename_from",
                              b"rename_to"]),
])
def test_events_of_each_command(argv, expected):
    e = Engine(notify_keyspace_events="KAnoc")
    e.execute("MSET", "old", "v", "num", "1")
    e.execute("SET", "ttl", "1", "EX", "100")
    e.execute("XADD", "s", "1-1", "f", "v")
    sub = e.psubscribe("__keyspace@0__:*")
    e.execute(*argv)
    assert [data for _channel, data in events(sub)] == expected


def test_expiry_publishes_expired_lazily_and_actively(engine):
    sub = engine.psubscribe("__keyevent@0__:*")
    engine.execute("SET", "a", "1", "PX", "10")
    engine.execute("SET", "b", "1", "PX", "10")
    events(sub)
    engine.clock.now += 11  # type: ignore[attr-defined]
    assert engine.execute("GET", "a") is None
    assert events(sub) == [(b"__keyevent@0__:expired", b"a")]
    assert engine.expiry_cycle.run() == 1
    assert events(sub) == [(b"__keyevent@0__:expired", b"b")]


def test_nothing_is_published_or_even_built_while_off(monkeypatch):
    calls = []
    monkeypatch.setattr(notify, "keyspace_event", lambda *args: calls.append(args))
    e = Engine()
    for argv in (("SET", "k", "v"), ("SET", "k", "v", "EX", "1"), ("INCR", "n"),
                 ("XADD", "s", "*", "f", "v"), ("DEL", "k"), ("XGROUP", "CREATE", "s", "g", "0"),
                 ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")):
        e.execute(*argv)
    assert calls == []
    assert e.notify_flags == 0


def test_events_are_never_logged(engine):
    records: list[Any] = []
    engine.add_sink(records.append)
    engine.execute("SET", "k", "v")
    assert [r.effects for r in records] == [[[b"SET", b"k", b"v"]]]


def test_a_replica_publishes_as_it_applies_its_primary_records(engine):
    records: list[Any] = []
    engine.add_sink(records.append)
    for argv in (("SET", "k", "v"), ("XADD", "s", "1-1", "f", "v"), ("EXPIRE", "k", "100"),
                 ("DEL", "k")):
        engine.execute(*argv)
    replica = Engine(notify_keyspace_events="KEA")
    sub = replica.psubscribe("__keyspace@0__:*")
    replica.replay.apply_many(records)
    assert [data for _channel, data in events(sub)] == [b"set", b"xadd", b"expire", b"del"]


def test_a_read_of_a_missing_key_is_a_keymiss_a_write_is_not():
    e = Engine(notify_keyspace_events="Em")
    sub = e.psubscribe("*")
    for argv in (("GET", "m"), ("XLEN", "m"), ("INCR", "m"), ("GET", "m"), ("TTL", "zz"),
                 ("SETRANGE", "n", "0", "x"), ("EXISTS", "n", "o")):
        e.execute(*argv)
    assert [data for _channel, data in events(sub)] == [b"m", b"m", b"zz", b"o"]
