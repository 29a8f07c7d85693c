"""The command entries and the general dispatch (engine.runtime.dispatch: Dispatch, Entry).

The table maps each common spelling of a plain command to this engine's entry for it, the one
a lookup of the command finds too; an entry carries the arity bounds the core's fast path
checks and this engine's counters for its command (an effect-only command's counters are its
own, which no statistic reports, and only `effect_entry` finds it); what the table cannot run
(a wrong arity, an unknown name) is refused as Redis refuses it, counted as a rejected call;
inside MULTI a command is queued, and a refused one makes the EXEC abort.
"""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError, Session
from streamkeep.engine.exec.table import lookup

XADD = (b"XADD", b"s", b"*", b"f", b"v")
DUP = (b"SK.XIDMPDUP", b"s", b"p")  # an effect-only command (engine.commands.idmp)


def test_the_table_and_a_lookup_find_the_same_entry() -> None:
    engine = Engine()
    dispatch = engine.dispatch
    xadd = dispatch.table[b"XADD"]
    assert dispatch.table[b"xadd"] is dispatch.table[b"Xadd"] is xadd
    assert dispatch.entry_for(XADD) is xadd
    assert dispatch.entry_of(lookup(XADD)) is xadd
    assert dispatch.effect_entry(XADD) is xadd
    assert (xadd.name, xadd.is_write, xadd.min_args) == ("xadd", True, 5)
    assert xadd.counters is engine.stats.counters("xadd")
    engine.execute(*XADD)
    assert xadd.counters.calls == 1
    assert b"cmdstat_xadd:calls=1" in engine.execute("INFO", "commandstats")


def test_an_effect_only_command_has_an_entry_for_effects_alone() -> None:
    engine = Engine()
    dispatch = engine.dispatch
    assert b"SK.XIDMPDUP" not in dispatch.table
    with pytest.raises(ReplyError, match="unknown command 'SK.XIDMPDUP'"):
        dispatch.entry_for(DUP)
    entry = dispatch.effect_entry(DUP)
    assert entry.name == "sk.xidmpdup" and entry is dispatch.effect_entry(DUP)
    assert entry.counters is not engine.stats.counters("sk.xidmpdup")


def test_a_command_the_table_cannot_run_is_refused_and_counted() -> None:
    engine = Engine()
    session = Session()
    with engine.lock:
        with pytest.raises(ReplyError) as err:
            engine.dispatch.general(session, (b"XADD", b"s"))
        assert err.value.line == "ERR wrong number of arguments for 'xadd' command"
        with pytest.raises(ReplyError, match="ERR unknown command 'NOPE'"):
            engine.dispatch.general(session, (b"NOPE",))
    assert engine.stats.counters("xadd").rejected == 1
    assert session.lastcmd is None  # an unknown command's, as Redis's NULL


def test_inside_multi_a_command_is_queued_and_a_refused_one_aborts_the_exec() -> None:
    engine = Engine()
    session = Session()
    with engine.lock:
        assert engine.dispatch.general(session, (b"MULTI",))[0] is not None  # MULTI runs
    engine.submit(session, (b"MULTI",))
    with engine.lock:
        assert engine.dispatch.general(session, XADD) == (None, "QUEUED")
        with pytest.raises(ReplyError):
            engine.dispatch.general(session, (b"NOPE",))
    assert session.multi_failed
    with pytest.raises(ReplyError, match="EXECABORT"):
        engine.execute_raw(session, (b"EXEC",))
    assert engine.execute("EXISTS", "s") == 0
