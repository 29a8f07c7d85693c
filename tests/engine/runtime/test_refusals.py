"""Commands refused before they run (engine.runtime.refusals: Refusals).

A refusal is counted as Redis's rejectCommand counts it (a rejected call of its command, an
error reply; an unknown command has no command to count), the server's gates check a
command's existence and arity before their own line, a refusal inside MULTI makes EXEC abort,
and while a script is busy only the allow_busy commands run.
"""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError, Session
from streamkeep.engine.exec.scripting import BUSY
from streamkeep.engine.runtime.refusals import NOAUTH


def test_the_unauthenticated_gate_checks_the_command_first() -> None:
    engine = Engine()
    refusals, session = engine.refusals, Session()
    assert refusals.refuse_unauthenticated(session, (b"XLEN", b"s")).line == NOAUTH
    assert refusals.refuse_unauthenticated(session, (b"XLEN",)).line.startswith(
        "ERR wrong number of arguments for 'xlen'")
    assert refusals.refuse_unauthenticated(session, (b"NOPE",)).line.startswith(
        "ERR unknown command 'NOPE'")
    assert engine.stats.counters("xlen").rejected == 2 and engine.stats.counters("xlen").calls == 0
    assert engine.stats.total_error_replies == 3


def test_a_refusal_inside_multi_aborts_the_exec() -> None:
    engine = Engine()
    session = Session()
    engine.execute_raw(session, (b"MULTI",))
    with pytest.raises(ReplyError, match="ERR unknown command"):
        engine.execute_raw(session, (b"NOPE",))
    assert session.multi_failed
    with pytest.raises(ReplyError, match="EXECABORT Transaction discarded because of "
                                         "previous errors"):
        engine.execute_raw(session, (b"EXEC",))
    assert session.multi is None


def test_while_a_script_is_busy_only_allowed_commands_run() -> None:
    engine = Engine()
    session = Session()
    with engine.lock:  # the busy script's thread holds the lock
        refused = engine.refusals.run_while_busy(session, (b"XLEN", b"s"))
        assert isinstance(refused, ReplyError) and refused.line == BUSY
        assert engine.refusals.run_while_busy(session, (b"MULTI",)) == "OK"
        gated = engine.refusals.run_while_busy(session, (b"WATCH", b"k"), lambda name: NOAUTH)
        assert isinstance(gated, ReplyError) and gated.line == NOAUTH
    assert engine.stats.counters("xlen").rejected == 1
