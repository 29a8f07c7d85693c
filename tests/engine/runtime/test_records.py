"""A command's effects logged as one record (engine.runtime.records: Records).

A commit appends one record to the AOF (its LSN returned and left for WAIT on the session)
and hands the same record to every sink; without an AOF its LSN is 0; a WATCHed key its
effects change makes the watching client's EXEC fail.
"""

from __future__ import annotations

from pathlib import Path

from streamkeep import Engine, Record, Session
from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.wire.reply import to_plain

EFFECT = [b"XADD", b"s", b"1-1", b"f", b"v"]


def _ctx(engine: Engine, now: int, db: int = 0) -> Ctx:
    session = Session()
    session.db = db
    ctx = Ctx(engine, session, now)
    ctx.effects = [list(EFFECT)]
    return ctx


def test_a_commit_is_one_record_for_the_aof_and_every_sink(tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "d")) as engine:
        first: list[Record] = []
        second: list[Record] = []
        engine.add_sink(first.append)
        engine.add_sink(second.append)
        engine.execute("SET", "k", "v")  # LSN 1
        with engine.lock:
            lsn = engine.records.commit(_ctx(engine, 1234, 3), 3)
        assert lsn == 2
        assert first[-1] == second[-1] == Record(2, 1234, 3, [EFFECT])
        assert len(first) == 2
    with Engine.open(str(tmp_path / "d")) as reopened:  # the record was the AOF's
        reopened.execute("SELECT", "3")
        assert reopened.execute("XLEN", "s") == 1


def test_without_an_aof_the_record_has_lsn_0() -> None:
    engine = Engine()
    records: list[Record] = []
    engine.add_sink(records.append)
    with engine.lock:
        assert engine.records.commit(_ctx(engine, 5), 0) == 0
    assert records == [Record(0, 5, 0, [EFFECT])]


def test_the_keys_its_effects_change_are_touched_for_watch() -> None:
    engine = Engine()
    watcher = Session()
    engine.execute_raw(watcher, (b"WATCH", b"s"))
    engine.execute_raw(watcher, (b"MULTI",))
    engine.execute_raw(watcher, (b"XLEN", b"s"))
    with engine.lock:
        engine.records.commit(_ctx(engine, 5), 0)  # (the effect is logged, not applied)
    assert to_plain(engine.execute_raw(watcher, (b"EXEC",))) is None

