"""ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD on the embedded engine
(engine.commands.zset_algebra): inf + -inf = 0, weights, aggregates, errors, replay."""

from __future__ import annotations

import pytest

from tests.support.effects_util import Recorded


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


def test_algebra(rec: Recorded) -> None:
    rec("ZADD", "a", "1", "x", "inf", "y", "3", "z")
    rec("ZADD", "b", "2", "x", "-inf", "y")
    assert rec("ZUNION", "2", "a", "b", "WITHSCORES") == [b"y", b"0", b"x", b"3", b"z", b"3"]
    assert rec("ZINTER", "2", "a", "b", "AGGREGATE", "MIN", "WITHSCORES") == [
        b"y", b"-inf", b"x", b"1"]
    assert rec("ZDIFF", "2", "a", "b") == [b"z"]
    assert rec("ZINTERCARD", "2", "a", "b", "LIMIT", "1") == 1
    assert rec("ZUNION", "2", "a", "b", "WEIGHTS", "0", "1", "WITHSCORES") == [
        b"y", b"-inf", b"z", b"0", b"x", b"2"]
    assert rec.err("ZUNION", "0", "a") == "ERR at least 1 input key is needed for 'zunion' command"
    assert rec.err("ZINTERCARD", "1", "a", "LIMIT", "-1") == "ERR LIMIT can't be negative"
    assert rec.err("ZUNION", "1", "a", "WEIGHTS", "x") == "ERR weight value is not a float"
    assert rec("ZINTERSTORE", "a", "2", "a", "nokey") == 0
    assert rec("EXISTS", "a") == 0
    rec.assert_replays()


def test_store_of_many_keys_holds_only_the_result(rec: Recorded) -> None:
    rec("ZADD", "one", "1", "x")
    keys = [f"missing{i}" for i in range(3000)]
    assert rec("ZUNIONSTORE", "d", str(len(keys) + 1), "one", *keys) == 1
    assert rec("ZINTERSTORE", "d", str(len(keys) + 1), "one", *keys) == 0
    assert rec("EXISTS", "d") == 0
    rec.assert_replays()
