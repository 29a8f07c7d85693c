"""The sorted set range commands on the embedded engine (engine.commands.zset_ranges): ZRANGE's
grammar and its errors, the older range commands, ZRANGESTORE's destination and encoding, the
ZREMRANGEBY* commands, their effects replayed to the same state."""

from __future__ import annotations

import pytest

from tests.support.effects_util import Recorded


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


def test_ranges(rec: Recorded) -> None:
    rec("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d")
    assert rec("ZRANGE", "z", "(1", "3", "BYSCORE") == [b"b", b"c"]
    assert rec("ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2") == [b"c", b"b"]
    assert rec("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "1", "-1") == [b"b", b"c", b"d"]
    assert rec("ZREVRANGEBYSCORE", "z", "3", "2", "WITHSCORES") == [b"c", b"3", b"b", b"2"]
    assert rec("ZRANGEBYLEX", "z", "[b", "(d") == [b"b", b"c"]
    assert rec("ZREVRANGEBYLEX", "z", "+", "-", "LIMIT", "0", "2") == [b"d", b"c"]
    assert rec("ZREVRANGE", "z", "0", "1") == [b"d", b"c"]
    assert rec("ZRANK", "z", "c") == 2 and rec("ZREVRANK", "z", "c", "WITHSCORE") == [1, b"3"]
    assert rec("ZRANK", "z", "x", "WITHSCORE") is None
    assert rec("ZCOUNT", "z", "(1", "+inf") == 3 and rec("ZLEXCOUNT", "z", "-", "[b") == 2
    assert rec.err("ZRANGE", "z", "0", "1", "LIMIT", "0", "1") == (
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
    assert rec.err("ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES") == (
        "ERR syntax error, WITHSCORES not supported in combination with BYLEX")
    assert rec.err("ZRANGE", "z", "a", "b", "BYSCORE") == "ERR min or max is not a float"
    assert rec.err("ZRANGE", "z", "a", "b", "BYLEX") == "ERR min or max not valid string range item"
    assert rec.err("ZRANK", "z", "a", "WITHSCORES") == "ERR syntax error"


def test_big_sets_change_encoding_and_replay(rec: Recorded) -> None:
    pairs = [x for i in range(300) for x in (str(i), f"m{i:03d}")]
    rec("ZADD", "z", *pairs)
    assert rec("OBJECT", "ENCODING", "z") == b"skiplist"
    assert rec("ZRANGESTORE", "small", "z", "0", "9") == 10
    assert rec("OBJECT", "ENCODING", "small") == b"listpack"
    assert rec("ZUNIONSTORE", "u", "2", "z", "small") == 300
    assert rec("OBJECT", "ENCODING", "u") == b"skiplist"
    assert rec("ZRANGESTORE", "huge", "z", "0", "9223372036854775807") == 300
    assert rec("ZREMRANGEBYRANK", "z", "0", "149") == 150
    assert rec("ZCARD", "z") == 150
    cursor, seen = b"0", set()
    while True:
        cursor, page = rec("ZSCAN", "z", cursor, "COUNT", "20")
        seen.update(page[::2])
        if cursor == b"0":
            break
    assert len(seen) == 150
    rec.assert_replays()
