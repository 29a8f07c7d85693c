"""The list commands (engine.commands.lists): replies, errors, Redis 8's encodings and their
conversions, effects (and their replay to the same state, encodings included), the pops a
served blocking command logs, keyspace events, WRONGTYPE, blocking in MULTI, and a random
sequence checked against a Python list."""

from __future__ import annotations

import random

import pytest

from streamkeep import Engine, Session
from tests.support.effects_util import Recorded


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


def enc(e: Engine, key: str) -> bytes:
    return e.execute("OBJECT", "ENCODING", key)


# --- the brokers' commands first -----------------------------------------------------------------


def test_queue_commands(rec: Recorded) -> None:
    assert rec("LPUSH", "q", "j1", "j2") == 2
    assert rec("RPUSH", "q", "j0") == 3
    assert rec("LRANGE", "q", 0, -1) == [b"j2", b"j1", b"j0"]
    assert rec("LLEN", "q") == 3
    assert rec("BRPOP", "q", 1) == [b"q", b"j0"]
    assert rec("LMOVE", "q", "processing", "RIGHT", "LEFT") == b"j1"
    assert rec("LREM", "processing", 1, "j1") == 1
    assert rec("EXISTS", "processing") == 0
    assert rec("RPOPLPUSH", "q", "q") == b"j2"
    assert rec("LPOP", "q") == b"j2"
    assert rec("EXISTS", "q") == 0
    assert rec("LPOP", "q") is None
    assert rec("LPUSHX", "q", "x") == 0
    assert rec("EXISTS", "q") == 0
    rec.assert_replays()


def test_reads_and_indexes(rec: Recorded) -> None:
    rec("RPUSH", "l", *"abcdef")
    assert rec("LRANGE", "l", -3, 100) == [b"d", b"e", b"f"]
    assert rec("LRANGE", "l", 4, 2) == []
    assert rec("LRANGE", "l", -100, 0) == [b"a"]
    assert rec("LRANGE", "nokey", 0, -1) == []
    assert rec("LINDEX", "l", -1) == b"f"
    assert rec("LINDEX", "l", 6) is None
    assert rec("LINDEX", "nokey", "notanumber") is None  # the key is looked up first
    assert rec.err("LINDEX", "l", "x") == "ERR value is not an integer or out of range"
    assert rec("LPOP", "l", 0) == []
    assert rec("LPOP", "nokey", 0) is None  # (RESP2's null array)
    assert rec("RPOP", "l", 2) == [b"f", b"e"]
    assert rec("LPOP", "l", 10) == [b"a", b"b", b"c", b"d"]
    assert rec.err("LPOP", "l", "-1") == "ERR value is out of range, must be positive"
    assert rec.err("LPOP", "l", "1", "2") == "ERR wrong number of arguments for 'lpop' command"


def test_lpos(rec: Recorded) -> None:
    rec("RPUSH", "l", "a", "b", "c", "1", "2", "3", "c", "c")
    assert rec("LPOS", "l", "c") == 2
    assert rec("LPOS", "l", "c", "RANK", 2) == 6
    assert rec("LPOS", "l", "c", "RANK", -1) == 7
    assert rec("LPOS", "l", "c", "COUNT", 0) == [2, 6, 7]
    assert rec("LPOS", "l", "c", "COUNT", 2, "RANK", -1) == [7, 6]
    assert rec("LPOS", "l", "c", "COUNT", 0, "MAXLEN", 7) == [2, 6]
    assert rec("LPOS", "l", "c", "RANK", -1, "MAXLEN", 1) == 7
    assert rec("LPOS", "l", "c", "RANK", -2, "MAXLEN", 1) is None
    assert rec("LPOS", "l", "2") == 4  # an integer-encoded element matches its text
    assert rec("LPOS", "l", "02") is None
    assert rec("LPOS", "nokey", "c") is None
    assert rec("LPOS", "nokey", "c", "COUNT", 1) == []
    assert rec.err("LPOS", "l", "c", "RANK", 0).startswith("ERR RANK can't be zero")
    assert rec.err("LPOS", "l", "c", "COUNT", -1) == "ERR COUNT can't be negative"
    assert rec.err("LPOS", "l", "c", "MAXLEN", "x") == "ERR MAXLEN can't be negative"
    assert rec.err("LPOS", "l", "c", "RANK") == "ERR syntax error"


def test_changes_in_place(rec: Recorded) -> None:
    rec("RPUSH", "l", "a", "b", "c", "b")
    assert rec("LSET", "l", -1, "z") == "OK"
    assert rec.err("LSET", "l", 4, "z") == "ERR index out of range"
    assert rec.err("LSET", "nokey", 0, "z") == "ERR no such key"
    assert rec("LINSERT", "l", "BEFORE", "b", "x") == 5
    assert rec("LINSERT", "l", "after", "c", "y") == 6
    assert rec("LINSERT", "l", "after", "nope", "y") == -1
    assert rec("LINSERT", "nokey", "after", "a", "y") == 0
    assert rec.err("LINSERT", "l", "middle", "a", "y") == "ERR syntax error"
    assert rec("LRANGE", "l", 0, -1) == [b"a", b"x", b"b", b"c", b"y", b"z"]
    assert rec("LREM", "l", 0, "nope") == 0
    rec("RPUSH", "l", "a", "a")
    assert rec("LREM", "l", -2, "a") == 2
    assert rec("LRANGE", "l", 0, -1) == [b"a", b"x", b"b", b"c", b"y", b"z"]
    assert rec("LTRIM", "l", 1, -2) == "OK"
    assert rec("LRANGE", "l", 0, -1) == [b"x", b"b", b"c", b"y"]
    assert rec("LTRIM", "l", 5, 1) == "OK"
    assert rec("EXISTS", "l") == 0
    assert rec("LTRIM", "nokey", 0, 1) == "OK"
    rec.assert_replays()


def test_mpop_and_errors(rec: Recorded) -> None:
    rec("RPUSH", "b", "1", "2", "3")
    assert rec("LMPOP", 2, "a", "b", "LEFT") == [b"b", [b"1"]]
    assert rec("LMPOP", 2, "a", "b", "RIGHT", "COUNT", 5) == [b"b", [b"3", b"2"]]
    assert rec("LMPOP", 2, "a", "b", "RIGHT") is None
    assert rec.err("LMPOP", 0, "a", "LEFT") == "ERR numkeys should be greater than 0"
    assert rec.err("LMPOP", 2, "a", "LEFT") == "ERR syntax error"
    assert rec.err("LMPOP", 1, "a", "UP") == "ERR syntax error"
    assert rec.err("LMPOP", 1, "a", "LEFT", "COUNT", 0) == "ERR count should be greater than 0"
    assert rec.err("LMPOP", 1, "a", "LEFT", "COUNT", 1, "COUNT", 1) == "ERR syntax error"
    assert rec.err("BLPOP", "a", "-1") == "ERR timeout is negative"
    assert rec.err("BLPOP", "a", "x") == "ERR timeout is not a float or out of range"
    rec("SET", "s", "v")
    wrong = "WRONGTYPE Operation against a key holding the wrong kind of value"
    for argv in (("LPUSH", "s", "a"), ("LLEN", "s"), ("LRANGE", "s", 0, 1), ("LPOP", "s"),
                 ("LMOVE", "s", "d", "LEFT", "LEFT"), ("LMPOP", 1, "s", "LEFT"),
                 ("BLPOP", "s", 0), ("LINDEX", "s", 0), ("LPOS", "s", "a")):
        assert rec.err(*argv) == wrong, argv
    rec("RPUSH", "src", "a")
    assert rec.err("LMOVE", "src", "s", "LEFT", "LEFT") == wrong
    assert rec("LRANGE", "src", 0, -1) == [b"a"]  # nothing popped


# --- encodings -----------------------------------------------------------------------------------


def test_encodings_follow_redis_8(rec: Recorded) -> None:
    e = rec.engine
    rec("RPUSH", "l", "a")
    assert enc(e, "l") == b"listpack"
    rec("RPUSH", "l", "x" * 8200)  # the listpack's bytes plus this pass 8 KiB
    assert enc(e, "l") == b"quicklist"
    rec("RPOP", "l")
    assert enc(e, "l") == b"listpack"  # one packed node within half the limit
    rec("CONFIG", "SET", "list-max-listpack-size", "4")
    rec("RPUSH", "n", 1, 2, 3, 4)
    assert enc(e, "n") == b"listpack"
    rec("RPUSH", "n", 5)
    assert enc(e, "n") == b"quicklist"
    rec("RPOP", "n", 2)
    assert enc(e, "n") == b"quicklist"  # 3 elements: not within half of 4
    rec("RPOP", "n")
    assert enc(e, "n") == b"listpack"
    rec("CONFIG", "SET", "list-max-listpack-size", "-2")
    rec("RPUSH", "big", *[f"element-{i}" for i in range(5000)])
    assert enc(e, "big") == b"quicklist"
    assert rec("LINDEX", "big", 2500) == b"element-2500"
    assert rec("LLEN", "big") == 5000
    rec.assert_replays()


def test_a_long_list_against_a_python_list(rec: Recorded) -> None:
    rng = random.Random(7)
    model: list[bytes] = []
    values = [b"1", b"-7", b"abc", b"x" * 70, b"y" * 5000, b"", b"12345678901", b"007"]
    for step in range(3000):
        op = rng.randrange(10)
        item = rng.choice(values) + (str(rng.randrange(5)).encode() if rng.random() < .5 else b"")
        if op < 3:
            rec("RPUSH", "k", item)
            model.append(item)
        elif op < 5:
            rec("LPUSH", "k", item, item + b"!")
            model[:0] = [item + b"!", item]
        elif op == 5 and model:
            count = rng.randrange(1, 4)
            got = rec("LPOP", "k", count)
            assert got == model[:count]
            del model[:count]
        elif op == 6 and model:
            got = rec("RPOP", "k")
            assert got == model.pop()
        elif op == 7 and model:
            i = rng.randrange(-len(model), len(model))
            rec("LSET", "k", i, item)
            model[i] = item
        elif op == 8 and model:
            pivot = rng.choice(model)
            assert rec("LINSERT", "k", "AFTER", pivot, item) == len(model) + 1
            model.insert(model.index(pivot) + 1, item)
        elif op == 9 and model:
            target = rng.choice(model)
            count = rng.choice((0, 1, -1, 2))
            removed = rec("LREM", "k", count, target)
            expect = [i for i, v in enumerate(model) if v == target]
            expect = expect if count == 0 else expect[:count] if count > 0 else expect[count:]
            assert removed == len(expect)
            for i in reversed(expect):
                del model[i]
        if step % 97 == 0:
            assert rec("LRANGE", "k", 0, -1) == model
            if model:
                j = rng.randrange(len(model))
                assert rec("LINDEX", "k", j) == model[j]
                assert rec("LPOS", "k", model[j]) == model.index(model[j])
    assert rec("LRANGE", "k", 0, -1) == model
    rec.assert_replays()


# --- effects -------------------------------------------------------------------------------------


def test_effects(rec: Recorded) -> None:
    assert rec.effects("RPUSH", "l", "a", "b", "c") == (3, [[b"RPUSH", b"l", b"a", b"b", b"c"]])
    assert rec.effects("LPUSHX", "nokey", "a") == (0, [])
    assert rec.effects("LPOP", "l") == (b"a", [[b"LPOP", b"l"]])
    assert rec.effects("RPOP", "l", 5) == ([b"c", b"b"], [[b"RPOP", b"l", b"2"]])
    rec("RPUSH", "l", "a", "b")
    assert rec.effects("BLPOP", "nokey", "l", 0) == ([b"l", b"a"], [[b"LPOP", b"l"]])
    assert rec.effects("BLMPOP", 0, 1, "l", "RIGHT", "COUNT", 9) == (
        [b"l", [b"b"]], [[b"RPOP", b"l", b"1"]])
    rec("RPUSH", "l", "a", "b")
    assert rec.effects("BLMOVE", "l", "m", "LEFT", "RIGHT", 0) == (
        b"a", [[b"LMOVE", b"l", b"m", b"LEFT", b"RIGHT"]])
    assert rec.effects("BRPOPLPUSH", "l", "m", 0) == (b"b", [[b"RPOPLPUSH", b"l", b"m"]])
    assert rec.effects("LTRIM", "m", 0, -1) == ("OK", [])
    assert rec.effects("LREM", "m", 0, "zz") == (0, [])
    assert rec.effects("LINSERT", "m", "BEFORE", "zz", "q") == (-1, [])
    rec.assert_replays()


def test_a_served_blocked_pop_logs_the_pop() -> None:
    rec = Recorded()
    e = rec.engine
    waiter = Session()
    reply, _ = e.submit(waiter, (b"BLMOVE", b"q", b"work", b"RIGHT", b"LEFT", b"0"), [])
    assert type(reply).__name__ == "Waiter"  # parked
    e.execute("RPUSH", "q", "a", "b")
    assert e.execute("LRANGE", "work", 0, -1) == [b"b"]
    logged = [list(effect) for record in rec.records for effect in record.effects]
    assert reply.done and reply.result == b"b"
    assert [b"LMOVE", b"q", b"work", b"RIGHT", b"LEFT"] in logged
    rec.assert_replays()


def test_blocking_in_multi_replies_at_once(rec: Recorded) -> None:
    e = rec.engine
    s = Session()

    def run(*argv: object) -> object:
        return e.submit(s, tuple(a if isinstance(a, bytes) else str(a).encode()
                                 for a in argv), [])[0]

    run("MULTI")
    for argv in (("BLPOP", "nokey", 0), ("BLMOVE", "nokey", "d", "LEFT", "LEFT", 0),
                 ("BLMPOP", 0, 1, "nokey", "LEFT")):
        run(*argv)
    replies = run("EXEC")
    assert [type(r).__name__ for r in replies] == ["_NullArray", "NoneType", "_NullArray"]


def _events(sub: object) -> list[bytes]:
    found = []
    while (message := sub.get_message(0)) is not None:  # type: ignore[attr-defined]
        if message["type"] == "pmessage":
            found.append(message["channel"].rsplit(b":", 1)[1])
    return found


def test_events() -> None:
    e = Engine()
    e.execute("CONFIG", "SET", "notify-keyspace-events", "KEAnoc")
    sub = e.psubscribe("__keyevent@*")
    e.execute("RPUSH", "l", "a", "b", "c")
    e.execute("LPUSH", "l", "z")
    e.execute("LPOP", "l")
    e.execute("RPOP", "l", 2)
    e.execute("LSET", "l", 0, "q")
    e.execute("LINSERT", "l", "AFTER", "q", "r")
    e.execute("LREM", "l", 1, "r")
    e.execute("LTRIM", "l", 0, 0)
    assert _events(sub) == [b"new", b"rpush", b"lpush", b"lpop", b"rpop", b"lset", b"linsert",
                            b"lrem", b"ltrim"]
    e.execute("LMOVE", "l", "m", "LEFT", "RIGHT")
    assert _events(sub) == [b"new", b"rpush", b"lpop", b"del"]
    sub.close()
