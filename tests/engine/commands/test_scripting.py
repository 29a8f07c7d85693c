"""EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (engine.commands.scripting): their table
entries, the script cache (EVAL's scripts evicted past 500, SCRIPT LOAD's kept), EVAL queued in
MULTI, and what a read-only replica refuses."""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.exec import scripting
from streamkeep.engine.exec.scripting import sha1hex
from tests.support.diffutil import err
from tests.support.effects_util import Recorded

pytest.importorskip("lupa")


def test_command_info_of_the_scripting_commands() -> None:
    e = Engine()
    info = e.execute("COMMAND", "INFO", "eval", "evalsha_ro", "script|kill")
    assert info[0][:3] == [b"eval", -3, ["noscript", "stale", "skip_monitor",
                                         "no_mandatory_keys", "movablekeys"]]
    assert "readonly" in info[1][2]
    assert info[2][0] == b"script|kill" and "allow_busy" in info[2][2]
    assert e.execute("COMMAND", "GETKEYS", "EVAL", "return 1", "2", "a", "b", "c") == [b"a", b"b"]


def test_eval_scripts_are_evicted_past_the_limit_load_scripts_are_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripting, "EVAL_SCRIPTS_MAX", 3)
    e = Engine()
    loaded = e.execute("SCRIPT", "LOAD", "return 'pinned'")
    bodies = [f"return {i}" for i in range(5)]
    for body in bodies:
        e.execute("EVAL", body, "0")
    shas = [sha1hex(b.encode()) for b in bodies]
    assert e.execute("SCRIPT", "EXISTS", loaded, *shas) == [1, 0, 0, 1, 1, 1]
    assert e.execute("EVALSHA", loaded, "0") == b"pinned"


def test_script_load_and_flush_log_nothing() -> None:
    r = Recorded()
    before = len(r.records)
    r("SCRIPT", "LOAD", "return 1")
    r("EVAL", "return redis.call('GET', 'nothing')", "0")
    r("SCRIPT", "FLUSH")
    assert len(r.records) == before


def test_eval_in_multi_runs_at_exec_in_the_transactions_record() -> None:
    r = Recorded()
    r("MULTI")
    assert r("EVAL", "return redis.call('INCR', KEYS[1])", "1", "n") == "QUEUED"
    r("SET", "other", "x")
    before = len(r.records)
    assert r("EXEC") == [1, "OK"]
    assert len(r.records) == before + 1
    assert [list(e) for e in r.records[-1].effects] == [[b"SET", b"n", b"1", b"KEEPTTL"],
                                                       [b"SET", b"other", b"x"]] or \
        len(r.records[-1].effects) == 2
    r.assert_replays()


def test_a_read_only_replica_refuses_writes_inside_and_flagged_scripts() -> None:
    e = Engine()
    e.read_only = "READONLY You can't write against a read only replica."
    assert e.execute("EVAL", "return redis.call('GET', 'k')", "0") is None
    assert err(e, "EVAL", "return redis.call('SET', 'k', 'v')", "0").startswith(
        "READONLY You can't write against a read only replica. script:")
    assert err(e, "EVAL", "#!lua\nreturn 1", "0") == \
        "READONLY Can not run script with write flag on readonly replica"
    assert e.execute("EVAL", "#!lua flags=no-writes\nreturn 1", "0") == 1


def test_numkeys_and_noscript_lines() -> None:
    e = Engine()
    assert err(e, "EVAL", "return 1", "1") == \
        "ERR Number of keys can't be greater than number of args"
    assert err(e, "EVAL", "return 1", "-1") == "ERR Number of keys can't be negative"
    assert err(e, "EVALSHA", "abc", "0") == "NOSCRIPT No matching script. Please use EVAL."
    with pytest.raises(ReplyError, match="^ERR Error compiling script"):
        e.execute("SCRIPT", "LOAD", "return +")
