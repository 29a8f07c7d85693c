"""MULTI/EXEC/DISCARD/WATCH on the engine (the server runs the same code), compared with a real
redis-server where Redis 7.0 and 8.x agree."""

from __future__ import annotations

from streamkeep import Engine, ReplyError, Session
from streamkeep.engine.wire.reply import NULL_ARRAY
from tests.support.diffutil import Both, WallClock


def _errors_as_text(reply: object) -> object:
    """An EXEC reply with its error elements as their lines (the two clients' error types
    differ)."""
    if not isinstance(reply, list):
        return reply
    return [str(x) if isinstance(x, Exception) else x for x in reply]


def both(redis_raw) -> Both:
    return Both(Engine(clock=WallClock()), redis_raw)


def test_transaction_replies_match_redis(redis_raw) -> None:
    b = both(redis_raw)
    b.err("EXEC")
    b.err("DISCARD")
    assert b("MULTI") == "OK"
    b.err("MULTI")  # nested: an error, but the transaction goes on
    b.err("WATCH", "s")  # inside MULTI: an error, the transaction goes on
    assert b("XADD", "s", "1-1", "f", "v") == "QUEUED"
    assert b("XADD", "s", "1-1", "f", "v") == "QUEUED"  # fails at EXEC time
    assert b("XLEN", "s") == "QUEUED"
    replies = b("EXEC", normalise=_errors_as_text)
    assert replies == [b"1-1", "ERR The ID specified in XADD is equal or smaller than the target "
                       "stream top item", 1]


def test_queueing_error_aborts_exec(redis_raw) -> None:
    b = both(redis_raw)
    b("MULTI")
    b("XADD", "s", "1-1", "f", "v")
    b.err("XADD", "s")  # wrong arity while queueing
    b.err("NOSUCHCOMMAND")
    assert b.err("EXEC") == "EXECABORT Transaction discarded because of previous errors."
    assert b("XLEN", "s") == 0


def test_discard_and_blocking_inside_multi(redis_raw) -> None:
    b = both(redis_raw)
    b("MULTI")
    b("XADD", "s", "1-1", "f", "v")
    assert b("DISCARD") == "OK"
    assert b("XLEN", "s") == 0
    b("MULTI")
    b("XREAD", "BLOCK", "0", "STREAMS", "s", "$")  # does not block inside a transaction
    assert b("EXEC") == [None]


def test_watch_invalidated_by_another_session() -> None:
    e = Engine()
    alice, bob = Session(), Session()
    e.execute_raw(alice, (b"WATCH", b"s"))
    e.execute_raw(bob, (b"XADD", b"s", b"1-1", b"f", b"v"))
    e.execute_raw(alice, (b"MULTI",))
    e.execute_raw(alice, (b"XADD", b"s", b"2-1", b"f", b"v"))
    assert e.execute_raw(alice, (b"EXEC",)) is NULL_ARRAY
    assert e.execute("XLEN", "s") == 1
    # EXEC dropped the watch: the next transaction runs.
    e.execute_raw(alice, (b"MULTI",))
    e.execute_raw(alice, (b"XADD", b"s", b"2-1", b"f", b"v"))
    assert e.execute_raw(alice, (b"EXEC",)) == [b"2-1"]


def test_watch_untouched_key_and_unwatch() -> None:
    e = Engine()
    alice, bob = Session(), Session()
    e.execute_raw(alice, (b"WATCH", b"s", b"t"))
    e.execute_raw(bob, (b"XADD", b"other", b"1-1", b"f", b"v"))
    e.execute_raw(alice, (b"MULTI",))
    assert e.execute_raw(alice, (b"EXEC",)) == []
    e.execute_raw(alice, (b"WATCH", b"s"))
    e.execute_raw(alice, (b"UNWATCH",))
    e.execute_raw(bob, (b"XADD", b"s", b"1-1", b"f", b"v"))
    e.execute_raw(alice, (b"MULTI",))
    assert e.execute_raw(alice, (b"EXEC",)) == []


def test_watch_sees_group_changes_and_flush() -> None:
    e = Engine()
    alice, bob = Session(), Session()
    e.execute("XADD", "s", "1-1", "f", "v")
    e.execute_raw(alice, (b"WATCH", b"s"))
    e.execute_raw(bob, (b"XGROUP", b"CREATE", b"s", b"g", b"0"))
    e.execute_raw(alice, (b"MULTI",))
    assert e.execute_raw(alice, (b"EXEC",)) is NULL_ARRAY
    e.execute_raw(alice, (b"WATCH", b"s"))
    e.execute_raw(bob, (b"FLUSHALL",))
    e.execute_raw(alice, (b"MULTI",))
    assert e.execute_raw(alice, (b"EXEC",)) is NULL_ARRAY


def test_transaction_commands_check_arity() -> None:
    e = Engine()
    e.execute("MULTI")
    e.execute("XADD", "s", "1-1", "f", "v")
    assert e.execute("EXEC") == [b"1-1"]
    try:
        e.execute("MULTI", "extra")
    except ReplyError as err:
        assert str(err) == "ERR wrong number of arguments for 'multi' command"
    else:
        raise AssertionError("MULTI with an argument must fail")
