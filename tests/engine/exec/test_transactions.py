"""Transactions (engine.exec.transactions): the queueing rule, MULTI/EXEC/DISCARD/WATCH/UNWATCH
and their error lines, a transaction logged as one record (SELECT effects where it switches
databases) that replays to the same state, and the WATCH registry marking sessions dirty from
the keys a record's effects touch."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError, Session
from streamkeep.engine.exec.table import lookup
from streamkeep.engine.exec.transactions import (
    NOT_IN_MULTI,
    RUN_IN_MULTI,
    WatchRegistry,
    end_transaction,
    queue_in_multi,
)
from tests.support.effects_util import Recorded, argv_bytes

EXECABORT = "EXECABORT Transaction discarded because of previous errors."


@pytest.fixture
def rec() -> Recorded:
    rec = Recorded(now=10)
    rec("XADD", "s", "1-0", "f", "v")
    return rec


# --- queueing ----------------------------------------------------------------------------------


def test_a_transaction_is_one_record(rec: Recorded) -> None:
    count = len(rec.records)
    assert rec.effects("MULTI") == ("OK", [])
    assert rec("XADD", "s", "2-0", "f", "v") == "QUEUED"
    assert rec("XLEN", "s") == "QUEUED"
    assert rec("XDEL", "s", "1-0") == "QUEUED"
    assert len(rec.records) == count  # nothing ran yet
    assert rec.effects("EXEC") == ([b"2-0", 2, 1], [[b"XADD", b"s", b"2-0", b"f", b"v"],
                                                    [b"XDEL", b"s", b"1-0"]])
    assert len(rec.records) == count + 1
    rec.assert_replays()


def test_a_read_only_transaction_logs_nothing(rec: Recorded) -> None:
    count = len(rec.records)
    rec("MULTI")
    rec("XLEN", "s")
    rec("XRANGE", "s", "-", "+")
    assert rec("EXEC") == [1, [[b"1-0", [b"f", b"v"]]]]
    assert rec("MULTI") == "OK" and rec("EXEC") == []
    assert len(rec.records) == count


def test_errors_while_running_are_replies_in_place(rec: Recorded) -> None:
    rec("MULTI")
    rec("XADD", "s", "1-0", "f", "v")  # equal to the top item: fails when it runs
    rec("XADD", "s", "3-0", "f", "v")
    reply, effects = rec.effects("EXEC")
    assert isinstance(reply[0], ReplyError) and reply[0].line == (
        "ERR The ID specified in XADD is equal or smaller than the target stream top item")
    assert reply[1] == b"3-0"
    assert effects == [[b"XADD", b"s", b"3-0", b"f", b"v"]]
    rec.assert_replays()


@pytest.mark.parametrize(("argv", "line"), [
    (("NOPE", "x"), "ERR unknown command 'NOPE', with args beginning with: 'x' "),
    (("XLEN",), "ERR wrong number of arguments for 'xlen' command"),
    (("SAVE",), NOT_IN_MULTI),
    (("SHUTDOWN",), NOT_IN_MULTI),
    (("PSYNC", "?", "-1"), NOT_IN_MULTI),
])
def test_a_refused_command_aborts_the_transaction(rec: Recorded, argv: tuple[str, ...],
                                                  line: str) -> None:
    rec("MULTI")
    rec("XADD", "s", "2-0", "f", "v")
    assert rec.err(*argv) == line
    assert rec("XLEN", "s") == "QUEUED"  # still queueing after the refusal
    assert rec.err("EXEC") == EXECABORT
    assert rec("XLEN", "s") == 1  # nothing ran; the transaction is over
    assert rec.err("EXEC") == "ERR EXEC without MULTI"


def test_transaction_commands_errors(rec: Recorded) -> None:
    assert rec.err("EXEC") == "ERR EXEC without MULTI"
    assert rec.err("DISCARD") == "ERR DISCARD without MULTI"
    rec("MULTI")
    # These run at once inside MULTI (and do not flag the transaction).
    assert rec.err("MULTI") == "ERR MULTI calls can not be nested"
    assert rec.err("WATCH", "s") == "ERR WATCH inside MULTI is not allowed"
    rec("XADD", "s", "2-0", "f", "v")
    assert rec("EXEC") == [b"2-0"]
    assert {"multi", "exec", "discard", "watch"} <= RUN_IN_MULTI


def test_discard_drops_the_queue(rec: Recorded) -> None:
    rec("MULTI")
    rec("XADD", "s", "2-0", "f", "v")
    assert rec.effects("DISCARD") == ("OK", [])
    assert rec("XLEN", "s") == 1
    assert rec.err("EXEC") == "ERR EXEC without MULTI"


def test_a_transaction_across_databases_logs_its_selects(rec: Recorded) -> None:
    rec("MULTI")
    rec("SELECT", "2")
    rec("XADD", "t", "1-0", "f", "v")
    rec("XLEN", "t")
    rec("SELECT", "0")
    rec("XADD", "s", "2-0", "f", "v")
    assert rec.effects("EXEC") == (["OK", b"1-0", 1, "OK", b"2-0"], [
        [b"SELECT", b"2"], [b"XADD", b"t", b"1-0", b"f", b"v"],
        [b"SELECT", b"0"], [b"XADD", b"s", b"2-0", b"f", b"v"]])
    assert rec.records[-1].db == 0
    rec.assert_replays()


def test_queue_in_multi_refuses_writes_the_journal_cannot_take(tmp_path: Path) -> None:
    engine = Engine.open(str(tmp_path))
    try:
        journal = engine.journal
        assert journal is not None
        journal.error = "MISCONF Errors writing to the AOF"  # as a failed write leaves it
        session = Session()
        session.multi = []
        assert queue_in_multi(engine, session, lookup(argv_bytes(("XLEN", "s"))),
                              argv_bytes(("XLEN", "s"))) == "QUEUED"
        with pytest.raises(ReplyError, match="^MISCONF Errors writing to the AOF$"):
            queue_in_multi(engine, session, lookup(argv_bytes(("XDEL", "s", "1-0"))),
                           argv_bytes(("XDEL", "s", "1-0")))
        assert session.multi_failed and len(session.multi) == 1
        assert queue_in_multi(engine, session, lookup((b"EXEC",)), (b"EXEC",)) is None
        journal.error = None
    finally:
        engine.close()


# --- WATCH -------------------------------------------------------------------------------------


def other_writes(rec: Recorded, *argv: str, db: int = 0) -> None:
    reply, _ = rec.engine.submit(Session(db), argv_bytes(argv))
    assert not isinstance(reply, ReplyError)


def watched_exec(rec: Recorded) -> object:
    rec("MULTI")
    rec("XADD", "s", "9-0", "f", "v")
    return rec("EXEC")


def test_a_touched_watch_fails_exec(rec: Recorded) -> None:
    assert rec.effects("WATCH", "s", "t") == ("OK", [])
    other_writes(rec, "XADD", "t", "1-0", "f", "v")
    count = len(rec.records)
    assert watched_exec(rec) is None
    assert len(rec.records) == count and rec("XLEN", "s") == 1  # nothing ran, nothing logged
    # EXEC ended the watch: the next transaction runs.
    other_writes(rec, "XADD", "t", "2-0", "f", "v")
    assert watched_exec(rec) == [b"9-0"]


def test_what_does_not_touch_a_watch(rec: Recorded) -> None:
    rec("WATCH", "s")
    other_writes(rec, "XADD", "other", "1-0", "f", "v")
    other_writes(rec, "XADD", "s", "1-0", "f", "v", db=3)  # the same name in another database
    other_writes(rec, "XDEL", "s", "7-0")  # a write that changes nothing logs nothing
    other_writes(rec, "XRANGE", "s", "-", "+")
    assert watched_exec(rec) == [b"9-0"]


@pytest.mark.parametrize("argv", [
    ("XDEL", "s", "1-0"), ("DEL", "x", "s"), ("RENAME", "s", "moved"), ("FLUSHDB",),
    ("FLUSHALL",), ("XGROUP", "CREATE", "s", "g", "$"),
])
def test_every_write_to_the_key_touches_it(rec: Recorded, argv: tuple[str, ...]) -> None:
    rec("WATCH", "s")
    other_writes(rec, *argv)
    assert watched_exec(rec) is None


def test_flushdb_of_another_database_does_not_touch(rec: Recorded) -> None:
    rec("WATCH", "s")
    other_writes(rec, "XADD", "k", "1-0", "f", "v", db=4)
    other_writes(rec, "FLUSHDB", db=4)
    assert watched_exec(rec) == [b"9-0"]


def test_unwatch_and_discard_forget_the_watch(rec: Recorded) -> None:
    rec("WATCH", "s")
    other_writes(rec, "XADD", "s", "2-0", "f", "v")
    assert rec.effects("UNWATCH") == ("OK", [])
    assert watched_exec(rec) == [b"9-0"]
    rec("WATCH", "s")
    rec("MULTI")
    rec("DISCARD")
    other_writes(rec, "XADD", "s", "10-0", "f", "v")
    rec("MULTI")
    rec("XLEN", "s")
    assert rec("EXEC") == [4]


# --- the registry ------------------------------------------------------------------------------


def test_watch_registry_touch_and_unwatch() -> None:
    watches = WatchRegistry()
    a, b = Session(), Session()
    assert not watches
    watches.watch(a, 0, b"k")
    watches.watch(b, 0, b"k")
    watches.watch(b, 1, b"j")
    assert watches and a.watched == {(0, b"k")}
    watches.touch(1, b"k")
    assert not a.dirty and not b.dirty
    watches.touch(0, b"k")
    assert a.dirty and b.dirty
    watches.unwatch_all(a)
    assert a.watched == set() and set(watches.by_key) == {(0, b"k"), (1, b"j")}
    watches.unwatch_all(b)
    assert not watches


def test_touch_where_marks_whole_databases() -> None:
    watches = WatchRegistry()
    zero, one = Session(), Session()
    watches.watch(zero, 0, b"k")
    watches.watch(one, 1, b"k")
    watches.touch_where([1])
    assert (zero.dirty, one.dirty) == (False, True)
    watches.touch_where(None)
    assert zero.dirty


@pytest.mark.parametrize(("effects", "dirty"), [
    ([[b"XADD", b"s", b"1-0", b"f", b"v"]], {b"s"}),
    ([[b"DEL", b"a", b"b"]], {b"a", b"b"}),
    ([[b"RENAME", b"a", b"s"]], {b"a", b"s"}),
    ([[b"XGROUP", b"SETID", b"s", b"g", b"1-0", b"ENTRIESREAD", b"1"]], {b"s"}),
    ([[b"SK.XCONSUMER", b"b", b"g", b"c", b"1", b"1"]], {b"b"}),  # internal effects too
    ([[b"SELECT", b"1"], [b"XADD", b"a", b"1-0", b"f", b"v"]], set()),  # in database 1
    ([[b"SELECT", b"1"], [b"FLUSHDB"]], set()),
    ([[b"FLUSHDB"]], {b"a", b"b", b"s"}),
    ([[b"SELECT", b"1"], [b"FLUSHALL"]], {b"a", b"b", b"s"}),
])
def test_touch_effects_follows_key_positions_and_selects(effects: list[list[bytes]],
                                                         dirty: set[bytes]) -> None:
    watches = WatchRegistry()
    sessions = {key: Session() for key in (b"a", b"b", b"s")}
    for key, session in sessions.items():
        watches.watch(session, 0, key)
    watches.touch_effects(0, effects)
    assert {key for key, session in sessions.items() if session.dirty} == dirty


def test_end_transaction_resets_the_session() -> None:
    engine = Engine()
    watches = engine.watches
    session = Session()
    session.multi, session.multi_failed, session.dirty = [], True, True
    watches.watch(session, 0, b"k")
    end_transaction(engine, session)
    assert (session.multi, session.multi_failed, session.dirty) == (None, False, False)
    assert session.watched == set() and not watches
