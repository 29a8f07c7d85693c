"""Idempotent producers (engine.commands.idmp): XCFGSET and XIDMPRECORD's parsing, error lines
and effects; XADD ... IDMP / IDMPAUTO's duplicate refusal and recording, logged as the plain
XADD, XCFGSET (when the state is created), XIDMPRECORD and SK.XIDMPDUP; replay of all of it."""

from __future__ import annotations

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.commands import idmp
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.model.idmp_maps import auto_iid
from streamkeep.engine.model.stream import Stream
from tests.support.effects_util import Recorded

NOW = 1_000_000
FIRST = b"%d-0" % NOW


@pytest.fixture
def rec() -> Recorded:
    rec = Recorded(now=NOW)
    rec("XADD", "s", "1-1", "f", "v")
    return rec


def info_field(engine: Engine, key: str, name: bytes) -> object:
    """One field of XINFO STREAM key."""
    info = engine.execute("XINFO", "STREAM", key)
    return info[info.index(name) + 1]


def xcfgset(key: bytes, duration: int, maxsize: int) -> list[bytes]:
    return [b"XCFGSET", key, b"IDMP-DURATION", b"%d" % duration, b"IDMP-MAXSIZE", b"%d" % maxsize]


# --- XCFGSET -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("tail", "line"), [
    ((), "ERR At least one parameter must be specified: IDMP-DURATION or IDMP-MAXSIZE"),
    (("IDMP-DURATION",), "ERR syntax error"),
    (("BOGUS", "1"), "ERR syntax error"),
    (("IDMP-DURATION", "0"), "ERR IDMP-DURATION must be between 1 and 86400 seconds"),
    (("IDMP-DURATION", "86401"), "ERR IDMP-DURATION must be between 1 and 86400 seconds"),
    (("IDMP-MAXSIZE", "0"), "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"),
    (("IDMP-MAXSIZE", "10001"), "ERR IDMP-MAXSIZE must be between 1 and 10000 entries"),
    (("IDMP-MAXSIZE", "x"), "ERR value is not an integer or out of range"),
    (("IDMP-MAXSIZE", "5", "idmp-maxsize", "6"), "ERR IDMP-MAXSIZE specified multiple times"),
    (("IDMP-DURATION", "5", "IDMP-MAXSIZE"), "ERR syntax error"),
])
def test_xcfgset_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    assert rec.err("XCFGSET", "s", *tail) == line


def test_xcfgset_checks_its_arguments_before_the_key(rec: Recorded) -> None:
    assert rec.err("XCFGSET", "nokey", "IDMP-DURATION", "0") == (
        "ERR IDMP-DURATION must be between 1 and 86400 seconds")
    assert rec.err("XCFGSET", "nokey", "IDMP-DURATION", "10") == "ERR no such key"


def test_xcfgset_logs_both_settings_and_only_changes(rec: Recorded) -> None:
    # Creating the state logs it, even with the default values.
    assert rec.effects("XCFGSET", "s", "IDMP-DURATION", "100") == ("OK", [xcfgset(b"s", 100, 100)])
    assert rec.effects("XCFGSET", "s", "IDMP-DURATION", "100") == ("OK", [])
    assert rec.effects("XCFGSET", "s", "idmp-maxsize", "7") == ("OK", [xcfgset(b"s", 100, 7)])
    assert rec.effects("XCFGSET", "s", "IDMP-MAXSIZE", "8", "IDMP-DURATION", "9") == (
        "OK", [xcfgset(b"s", 9, 8)])
    assert (info_field(rec.engine, "s", b"idmp-duration"),
            info_field(rec.engine, "s", b"idmp-maxsize")) == (9, 8)
    rec.assert_replays()


def test_settings_are_the_streams_else_the_configured_defaults() -> None:
    engine = Engine(**{"stream-idmp-duration": 30, "stream-idmp-maxsize": 40})
    ctx = Ctx(engine, Session(), NOW)
    s = Stream()
    assert idmp.settings(ctx, s) == (30, 40)
    assert s.idmp is None  # asking does not create the state
    state, created = idmp.idmp_state(ctx, s)
    assert created and (state.duration, state.maxsize) == (30, 40)
    assert idmp.idmp_state(ctx, s) == (state, False)
    state.configure(5, 6)
    assert idmp.settings(ctx, s) == (5, 6)


def test_configured_defaults_reach_the_created_state() -> None:
    rec = Recorded(now=NOW, **{"stream-idmp-duration": 30, "stream-idmp-maxsize": 40})
    _, effects = rec.effects("XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    assert effects[1] == xcfgset(b"s", 30, 40)
    # Replayed under other defaults, the logged settings win.
    replica = rec.replay()
    assert info_field(replica, "s", b"idmp-duration") == 30
    assert info_field(replica, "s", b"idmp-maxsize") == 40


def test_nomkstream_adds_no_stream_and_no_state() -> None:
    rec = Recorded(now=NOW)
    assert rec.effects("XADD", "t", "NOMKSTREAM", "IDMP", "p", "i", "*", "f", "v") == (None, [])
    assert rec("EXISTS", "t") == 0


# --- XADD IDMP / IDMPAUTO ----------------------------------------------------------------------


def test_xadd_iid() -> None:
    fields = (b"a", b"1", b"b", b"2")
    assert idmp.xadd_iid(b"mine", fields) == b"mine"
    assert idmp.xadd_iid(None, fields) == auto_iid(fields)
    assert idmp.xadd_iid(None, (b"b", b"2", b"a", b"1")) == auto_iid(fields)  # order-free
    assert idmp.xadd_iid(None, (b"a", b"1", b"b", b"3")) != auto_iid(fields)


@pytest.mark.parametrize("options", [
    ("IDMP", "p", "i"),                  # the producer's common shape (its own fast path)
    ("NOMKSTREAM", "IDMP", "p", "i"),    # the general parse
])
def test_xadd_idmp_logs_and_refuses_duplicates(options: tuple[str, ...]) -> None:
    rec = Recorded(now=NOW)
    rec("XADD", "t", "0-1", "x", "y")  # the stream exists: NOMKSTREAM adds too
    reply, effects = rec.effects("XADD", "t", *options, "*", "f", "v")
    assert reply == FIRST
    assert effects == [[b"XADD", b"t", FIRST, b"f", b"v"], xcfgset(b"t", 100, 100),
                       [b"XIDMPRECORD", b"t", b"p", b"i", FIRST]]
    # A duplicate: the original ID, nothing added, the lifetime count logged.
    assert rec.effects("XADD", "t", *options, "*", "f", "other") == (
        FIRST, [[b"SK.XIDMPDUP", b"t", b"1"]])
    assert rec.effects("XADD", "t", *options, "*", "f", "v")[1] == [[b"SK.XIDMPDUP", b"t", b"2"]]
    assert rec("XLEN", "t") == 2
    assert info_field(rec.engine, "t", b"iids-duplicates") == 2
    # Another iid is new; the state exists, so no XCFGSET this time.
    _, effects = rec.effects("XADD", "t", "IDMP", "p", "j", "*", "f", "v")
    assert [e[0] for e in effects] == [b"XADD", b"XIDMPRECORD"]
    rec.assert_replays()


def test_xadd_idmpauto_hashes_the_content(rec: Recorded) -> None:
    first, effects = rec.effects("XADD", "s", "IDMPAUTO", "p", "*", "a", "1", "b", "2")
    assert effects[2] == [b"XIDMPRECORD", b"s", b"p", auto_iid((b"a", b"1", b"b", b"2")), first]
    assert rec("XADD", "s", "IDMPAUTO", "p", "*", "b", "2", "a", "1") == first
    assert rec("XADD", "s", "IDMPAUTO", "q", "*", "b", "2", "a", "1") != first  # per producer
    assert rec("XADD", "s", "IDMPAUTO", "p", "*", "a", "1", "b", "3") != first
    rec.assert_replays()


def test_a_duplicate_expires_with_the_duration(rec: Recorded) -> None:
    rec("XCFGSET", "s", "IDMP-DURATION", "10")
    first = rec("XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    rec.clock.now += 9_999
    assert rec("XADD", "s", "IDMP", "p", "i", "*", "f", "v") == first
    rec.clock.now += 1
    assert rec("XADD", "s", "IDMP", "p", "i", "*", "f", "v") != first
    rec.assert_replays()


@pytest.mark.parametrize("options", [("IDMP", "p", "i"), ("MAXLEN", "5", "IDMP", "p", "i")])
def test_a_duplicate_is_refused_with_its_id_on_an_exhausted_stream(
        rec: Recorded, options: tuple[str, ...]) -> None:
    # XADD's order: the duplicate check comes before the exhausted stream's refusal.
    first = rec("XADD", "s", *options, "*", "f", "v")
    rec("XSETID", "s", "18446744073709551615-18446744073709551615")
    assert rec.effects("XADD", "s", *options, "*", "f", "w") == (
        first, [[b"SK.XIDMPDUP", b"s", b"1"]])
    exhausted = "ERR The stream has exhausted the last possible ID, unable to add more items"
    assert rec.err("XADD", "s", "IDMP", "p", "j", "*", "f", "v") == exhausted
    assert rec.err("XADD", "s", "*", "f", "v") == exhausted
    assert rec("XLEN", "s") == 2
    rec.assert_replays()


def test_a_recording_is_logged_before_the_trim_that_may_remove_it(rec: Recorded) -> None:
    reply, effects = rec.effects("XADD", "s", "MAXLEN", "1", "IDMP", "p", "i", "*", "f", "v")
    assert effects == [[b"XADD", b"s", reply, b"f", b"v"], xcfgset(b"s", 100, 100),
                       [b"XIDMPRECORD", b"s", b"p", b"i", reply],
                       [b"XTRIM", b"s", b"MAXLEN", b"=", b"1"]]
    rec.assert_replays()


@pytest.mark.parametrize(("options", "line"), [
    (("IDMP", "p", "i", "1-1"), "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"),
    (("IDMP", "", "i", "*"), "ERR IDMP requires a non-empty producer ID"),
    (("IDMP", "p", "", "*"), "ERR IDMP requires a non-empty idempotent ID"),
    (("IDMPAUTO", "", "*"), "ERR IDMPAUTO requires a non-empty producer ID"),
    (("IDMP", "p", "i", "IDMPAUTO", "p", "*"), "ERR IDMP/IDMPAUTO specified multiple times"),
])
def test_xadd_idmp_errors(rec: Recorded, options: tuple[str, ...], line: str) -> None:
    assert rec.err("XADD", "s", *options, "f", "v") == line
    assert rec("XLEN", "s") == 1


# --- XIDMPRECORD and SK.XIDMPDUP ---------------------------------------------------------------


@pytest.mark.parametrize(("argv", "line"), [
    (("nokey", "p", "i", "1-1"), "ERR no such key"),
    (("s", "", "i", "1-1"), "ERR XIDMPRECORD requires a non-empty producer ID"),
    (("s", "p", "", "1-1"), "ERR XIDMPRECORD requires a non-empty idempotent ID"),
    (("s", "p", "i", "bad"), "ERR Invalid stream ID specified as stream command argument"),
    (("s", "p", "i", "2-2"), "ERR No such message in stream"),
])
def test_xidmprecord_errors(rec: Recorded, argv: tuple[str, ...], line: str) -> None:
    assert rec.err("XIDMPRECORD", *argv) == line
    assert info_field(rec.engine, "s", b"iids-tracked") == 0


def test_xidmprecord_records_once(rec: Recorded) -> None:
    assert rec.effects("XIDMPRECORD", "s", "p", "i", "1-1") == ("OK", [
        xcfgset(b"s", 100, 100), [b"XIDMPRECORD", b"s", b"p", b"i", b"1-1"]])
    assert rec.effects("XIDMPRECORD", "s", "p", "i", "1-1") == ("OK", [])  # idempotent
    rec("XADD", "s", "2-0", "f", "v")
    assert rec.err("XIDMPRECORD", "s", "p", "i", "2-0") == (
        "ERR The producer ID and idempotent ID already map to another stream ID")
    # What it recorded makes an XADD with the same pid/iid a duplicate.
    assert rec.effects("XADD", "s", "IDMP", "p", "i", "*", "f", "v") == (
        b"1-1", [[b"SK.XIDMPDUP", b"s", b"1"]])
    rec.assert_replays()


def test_sk_xidmpdup_is_an_effect_only(rec: Recorded) -> None:
    assert rec.err("SK.XIDMPDUP", "s", "3").startswith("ERR unknown command 'SK.XIDMPDUP'")
    rec("XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    for _ in range(3):
        rec("XADD", "s", "IDMP", "p", "i", "*", "f", "v")
    assert info_field(rec.replay(), "s", b"iids-duplicates") == 3
    # Without the effect the count would be lost on replay.
    stripped = [r._replace(effects=[e for e in r.effects if e[0] != b"SK.XIDMPDUP"])
                for r in rec.records]
    assert rec.replay(stripped).execute("DEBUG", "DIGEST") != rec.digest()
