"""Commands run as one (engine.runtime.batches).

* Engine.execute_atomic (the work queue's transactions) is one transaction and one record; a
  transaction of plain XADDs runs without queueing, with EXEC's replies, record and counts;
* Batches.execute_batch (a redis-server primary's stream on a replica) takes the same fast path
  for plain XADDs live: one record, the same replies and state as command by command, and
  the same state replayed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkeep import Engine, Record, ReplyError


def test_execute_atomic_is_one_transaction_and_one_record() -> None:
    from streamkeep.engine.runtime.core import Session

    engine = Engine()
    records: list[Record] = []
    engine.add_sink(records.append)
    session = Session()
    replies = engine.execute_atomic(session, [
        (b"XADD", b"s", b"1-1", b"f", b"v"), (b"XADD", b"s", b"1-0", b"f", b"v"),
        (b"XLEN", b"s")])
    assert replies[0] == b"1-1" and isinstance(replies[1], ReplyError) and replies[2] == 1
    assert len(records) == 1 and [e[0] for e in records[0].effects] == [b"XADD"]
    with pytest.raises(ReplyError, match="EXECABORT Transaction discarded because of "
                                         "previous errors"):
        engine.execute_atomic(session, [(b"XADD", b"s", b"*", b"f", b"v"), (b"NOPE",)])
    with pytest.raises(ReplyError, match="EXECABORT"):
        engine.execute_atomic(session, [(b"MULTI",)])
    assert engine.execute("XLEN", "s") == 1 and session.multi is None
    engine.execute_raw(session, (b"MULTI",))
    with pytest.raises(ReplyError, match="MULTI calls can not be nested"):
        engine.execute_atomic(session, [(b"XLEN", b"s")])


def _transaction_outcome(engine: Engine, session: object, argvs: list) -> tuple:
    """A transaction's replies (errors as their lines), records and stats."""
    records: list[Record] = []
    engine.add_sink(records.append)
    try:
        replies = engine.execute_atomic(session, argvs)  # type: ignore[arg-type]
    except ReplyError as err:
        replies = err.line
    lines = replies if isinstance(replies, str) else [
        r.line if isinstance(r, ReplyError) else r for r in replies]
    calls = {name: (engine.stats.counters(name).calls, engine.stats.counters(name).failed)
             for name in ("xadd", "exec")}
    return lines, [list(map(list, r.effects)) for r in records], calls


@pytest.mark.parametrize("argvs", [
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"XADD", b"t", b"*", b"n", b"1", b"m", b"2")],
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"XADD", b"str", b"*", b"f", b"v")],  # WRONGTYPE
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"XADD", b"s", b"*", b"f")],  # arity: EXECABORT
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"xadd", b"s", b"*", b"f", b"v")],
])
def test_a_transaction_of_plain_xadds_is_exec_as_the_table_runs_it(argvs: list) -> None:
    """execute_atomic runs a transaction of plain `XADD key * ...` without queueing (as
    execute_batch does): the replies, the one record, the call counts are EXEC's."""
    from streamkeep.engine.runtime import batches
    from streamkeep.engine.runtime.core import Session

    outcomes = []
    for fast in (True, False):
        engine = Engine(clock=lambda: 1_000)
        engine.execute("SET", "str", "x")
        engine.execute("XADD", "s", "999-0", "f", "v")
        if not fast:  # the general path: MULTI, the queued commands, EXEC
            engine.execute_raw(Session(), (b"WATCH", b"other"))  # (another session's)
            original = batches.plain_xadd
            batches.plain_xadd = lambda argv: False  # type: ignore[assignment]
            try:
                outcomes.append(_transaction_outcome(engine, Session(), argvs))
            finally:
                batches.plain_xadd = original
        else:
            outcomes.append(_transaction_outcome(engine, Session(), argvs))
    assert outcomes[0] == outcomes[1]


def test_a_watching_session_takes_the_general_transaction() -> None:
    from streamkeep.engine.runtime.core import Session

    engine = Engine()
    session = Session()
    engine.execute_raw(session, (b"WATCH", b"s"))
    engine.execute("XADD", "s", "*", "f", "v")  # another client changes the watched key
    assert engine.execute_atomic(session, [(b"XADD", b"s", b"*", b"f", b"v")]) is None \
        or engine.execute("XLEN", "s") == 1


BATCH = [  # a redis-server primary's stream between transactions, as a replica applies it
    (b"SELECT", b"1"), (b"XADD", b"a", b"1-1", b"f", b"v"), (b"XADD", b"a", b"1-1", b"f", b"v"),
    (b"SELECT", b"2"), (b"XADD", b"b", b"MAXLEN", b"=", b"1", b"5-1", b"f", b"v"),
    (b"XADD", b"b", b"6-1", b"f", b"w"), (b"XGROUP", b"CREATE", b"b", b"g", b"0"),
    (b"XCLAIM", b"b", b"g", b"c", b"0", b"6-1", b"FORCE", b"JUSTID"), (b"NOPE",),
    (b"SELECT", b"0"), (b"XADD", b"c", b"0-0", b"f", b"v"), (b"XADD", b"c", b"7-1", b"f", b"v"),
    (b"XDEL", b"c", b"7-1"),
]


def test_execute_batch_is_one_record_that_replays_to_the_same_state(tmp_path: Path) -> None:
    """Batches.execute_batch: plain XADDs by add_entry, the rest through the command table,
    each command's database SELECTed in the record; the same replies and state as the
    commands run one by one, and the same state again once the record is replayed."""
    from streamkeep.engine.runtime.core import Session

    def clock() -> int:
        return 1_700_000_000_000

    one_by_one = Engine(clock=clock)
    expected: list = []
    for argv in BATCH:
        try:
            expected.append(one_by_one.execute_raw(one_by_one.session, argv))
        except ReplyError as err:
            expected.append(err)
    path = str(tmp_path / "d")
    with Engine.open(path, clock=clock) as engine:
        records: list[Record] = []
        engine.add_sink(records.append)
        session = Session()
        replies = engine.batches.execute_batch(session, BATCH)
        assert [r.line if isinstance(r, ReplyError) else r for r in replies] == \
            [r.line if isinstance(r, ReplyError) else r for r in expected]
        assert isinstance(replies[2], ReplyError) and isinstance(replies[8], ReplyError)
        assert len(records) == 1 and session.db == 0
        assert engine.digest() == one_by_one.digest()
    with Engine.open(path, clock=clock) as again:
        assert again.digest() == one_by_one.digest()
        again.execute("SELECT", "2")
        assert again.execute("XLEN", "b") == 2 and again.execute("XPENDING", "b", "g")[0] == 1
