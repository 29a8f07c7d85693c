"""Hash commands on the embedded engine (engine.commands.hashes): replies and Redis's error
lines, effects (small, replayed to the same state digest), keyspace events, WRONGTYPE, RESP3
shapes, the listpack limits from the settings. Field expiry: test_hash_expiry.py."""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep import Engine, ReplyError, Session
from streamkeep.engine.wire.reply import RespMap, to_plain
from tests.support.effects_util import Recorded, argv_bytes


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


# --- replies -------------------------------------------------------------------------------------


def test_set_get_and_friends(rec: Recorded) -> None:
    assert rec("HSET", "h", "a", "1", "b", "2") == 2
    assert rec("HSET", "h", "a", "3", "c", "4") == 1
    assert rec("HMSET", "h", "d", "5") == "OK"
    assert rec("HSETNX", "h", "a", "9") == 0
    assert rec("HSETNX", "h", "e", "6") == 1
    assert rec("HGET", "h", "a") == b"3"
    assert rec("HGET", "h", "nope") is None
    assert rec("HGET", "nokey", "a") is None
    assert rec("HMGET", "h", "a", "nope", "b") == [b"3", None, b"2"]
    assert rec("HMGET", "nokey", "a", "b") == [None, None]
    assert rec("HLEN", "h") == 5
    assert rec("HLEN", "nokey") == 0
    assert rec("HSTRLEN", "h", "a") == 1
    assert rec("HSTRLEN", "h", "nope") == 0
    assert rec("HEXISTS", "h", "a") == 1
    assert rec("HEXISTS", "h", "nope") == 0
    assert rec("HKEYS", "h") == [b"a", b"b", b"c", b"d", b"e"]
    assert rec("HVALS", "h") == [b"3", b"2", b"4", b"5", b"6"]
    assert rec("HGETALL", "h") == [b"a", b"3", b"b", b"2", b"c", b"4", b"d", b"5", b"e", b"6"]
    assert rec("HGETALL", "nokey") == []
    assert rec("HKEYS", "nokey") == []
    assert rec("HDEL", "h", "a", "nope", "b") == 2
    assert rec("HDEL", "nokey", "a") == 0
    assert rec("TYPE", "h") == "hash"
    assert rec("OBJECT", "ENCODING", "h") == b"listpack"


def test_errors(rec: Recorded) -> None:
    assert rec.err("HSET", "h", "a", "1", "b") == \
        "ERR wrong number of arguments for 'hset' command"
    assert rec.err("HMSET", "h", "a", "1", "b") == \
        "ERR wrong number of arguments for 'hmset' command"
    rec("SET", "s", "v")
    for argv in (("HSET", "s", "a", "1"), ("HGET", "s", "a"), ("HGETALL", "s"),
                 ("HDEL", "s", "a"), ("HINCRBY", "s", "a", "1"), ("HLEN", "s"),
                 ("HRANDFIELD", "s"), ("HSCAN", "s", "0"), ("HSETNX", "s", "a", "1")):
        assert rec.err(*argv).startswith("WRONGTYPE"), argv
    assert rec.err("HINCRBY", "s", "a", "x") == "ERR value is not an integer or out of range"
    rec("HSET", "h", "s", "abc", "big", "9223372036854775807", "f", "1.5")
    assert rec.err("HINCRBY", "h", "s", "1") == "ERR hash value is not an integer"
    assert rec.err("HINCRBY", "h", "big", "1") == "ERR increment or decrement would overflow"
    assert rec.err("HINCRBYFLOAT", "h", "s", "1") == "ERR hash value is not a float"
    assert rec.err("HINCRBYFLOAT", "h", "f", "x") == "ERR value is not a valid float"
    assert rec.err("HINCRBYFLOAT", "h", "f", "inf") == "ERR value is NaN or Infinity"
    assert rec.err("HRANDFIELD", "h", "x") == "ERR value is not an integer or out of range"
    assert rec.err("HRANDFIELD", "h", "1", "nope") == "ERR syntax error"
    assert rec.err("HRANDFIELD", "h", "1", "WITHVALUES", "x") == "ERR syntax error"
    assert rec.err("HRANDFIELD", "h", "-9223372036854775808") == \
        "ERR value is out of range, value must between -9223372036854775807 and " \
        "9223372036854775807"
    assert rec.err("HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES") == \
        "ERR value is out of range"
    assert rec.err("HSCAN", "h", "x") == "ERR invalid cursor"
    assert rec.err("HSCAN", "h", "-1") == "ERR invalid cursor"  # 8.x's string2ull
    assert rec.err("HSCAN", "h", "0", "COUNT", "0") == "ERR syntax error"
    assert rec.err("HSCAN", "h", "0", "NOPE") == "ERR syntax error"


def test_incr(rec: Recorded) -> None:
    assert rec("HINCRBY", "h", "n", "5") == 5
    assert rec("HINCRBY", "h", "n", "-7") == -2
    assert rec("HINCRBYFLOAT", "h", "x", "10.5") == b"10.5"
    assert rec("HINCRBYFLOAT", "h", "x", "0.1") == b"10.6"
    assert rec("HINCRBYFLOAT", "h", "n", "5.0e3") == b"4998"
    assert rec("HGET", "h", "n") == b"4998"


def test_randfield(rec: Recorded) -> None:
    assert rec("HRANDFIELD", "nokey") is None
    assert rec("HRANDFIELD", "nokey", "3") == []
    rec("HSET", "h", "a", "1", "b", "2", "c", "3")
    assert rec("HRANDFIELD", "h") in (b"a", b"b", b"c")
    assert rec("HRANDFIELD", "h", "0") == []
    assert rec("HRANDFIELD", "h", "5") == [b"a", b"b", b"c"]
    assert rec("HRANDFIELD", "h", "5", "WITHVALUES") == [b"a", b"1", b"b", b"2", b"c", b"3"]
    two = rec("HRANDFIELD", "h", "2")
    assert len(set(two)) == 2 and set(two) <= {b"a", b"b", b"c"}
    many = rec("HRANDFIELD", "h", "-10", "WITHVALUES")
    assert len(many) == 20
    pairs = dict(zip(many[::2], many[1::2], strict=True))
    assert pairs.items() <= {b"a": b"1", b"b": b"2", b"c": b"3"}.items()
    assert rec.effects("HRANDFIELD", "h", "-5")[1] == []


def test_scan(rec: Recorded) -> None:
    assert rec("HSCAN", "nokey", "0") == [b"0", []]
    rec("HSET", "h", "a1", "1", "b1", "2", "a2", "3")
    assert rec("HSCAN", "h", "0") == [b"0", [b"a1", b"1", b"b1", b"2", b"a2", b"3"]]
    assert rec("HSCAN", "h", "0", "MATCH", "a*") == [b"0", [b"a1", b"1", b"a2", b"3"]]
    assert rec("HSCAN", "h", "0", "NOVALUES") == [b"0", [b"a1", b"b1", b"a2"]]
    for i in range(600):
        rec("HSET", "big", f"f{i}", str(i))
    seen: dict[bytes, bytes] = {}
    cursor = b"0"
    while True:
        cursor, page = rec("HSCAN", "big", cursor, "COUNT", "50")
        seen.update(zip(page[::2], page[1::2], strict=True))
        if cursor == b"0":
            break
    assert seen == {f"f{i}".encode(): str(i).encode() for i in range(600)}


def test_resp3_shapes() -> None:
    e = Engine()
    s = Session()
    e.execute("HSET", "h", "a", "1", "b", "2")

    class Client:
        protocol = 3

        def reply_budget(self) -> int:
            return 0

        def elements_budget(self) -> int:
            return 0

    s.client = Client()  # type: ignore[assignment]
    reply, _ = e.submit(s, argv_bytes(("HGETALL", "h")))
    assert type(reply) is RespMap and reply.items == [(b"a", b"1"), (b"b", b"2")]
    reply, _ = e.submit(s, argv_bytes(("HRANDFIELD", "h", "2", "WITHVALUES")))
    assert to_plain(reply) == [[b"a", b"1"], [b"b", b"2"]]
    reply, _ = e.submit(s, argv_bytes(("HRANDFIELD", "h", "-3", "WITHVALUES")))
    assert all(len(pair) == 2 for pair in to_plain(reply))
    reply, _ = e.submit(s, argv_bytes(("HGETALL", "nokey")))
    assert type(reply) is RespMap and reply.items == []


# --- encodings and the settings ----------------------------------------------------------------


def test_encoding_follows_the_limits() -> None:
    rec = Recorded()
    rec("HSET", "h", "a", "x" * 64)
    assert rec("OBJECT", "ENCODING", "h") == b"listpack"
    rec("HSET", "h", "b", "x" * 65)
    assert rec("OBJECT", "ENCODING", "h") == b"hashtable"
    rec("CONFIG", "SET", "hash-max-ziplist-entries", "2")
    assert rec("CONFIG", "GET", "hash-max-listpack-entries") == [b"hash-max-listpack-entries",
                                                                 b"2"]
    rec("HSET", "k", "a", "1", "b", "2")
    assert rec("OBJECT", "ENCODING", "k") == b"listpack"
    rec("HSET", "k", "c", "3")
    assert rec("OBJECT", "ENCODING", "k") == b"hashtable"
    rec("CONFIG", "SET", "hash-max-listpack-value", "3")
    rec("HSET", "v", "a", "1234")
    assert rec("OBJECT", "ENCODING", "v") == b"hashtable"
    rec("CONFIG", "SET", "hash-max-listpack-entries", "512")
    rec("CONFIG", "SET", "hash-max-listpack-value", "64")
    rec("HSET", "old", "a", "1", "b", "2", "c", "3")
    rec("CONFIG", "SET", "hash-max-listpack-entries", "3")
    assert rec("OBJECT", "ENCODING", "old") == b"listpack"  # (until its next write)
    rec("HSET", "old", "d", "4")
    assert rec("OBJECT", "ENCODING", "old") == b"hashtable"


def test_config_defaults() -> None:
    e = Engine()
    got = e.execute("CONFIG", "GET", "hash-max-*")
    assert dict(zip(got[::2], got[1::2], strict=True)) == {
        b"hash-max-listpack-entries": b"512", b"hash-max-listpack-value": b"64"}


# --- effects and replay --------------------------------------------------------------------------


def test_effects(rec: Recorded) -> None:
    assert rec.effects("HSET", "h", "a", "1", "b", "2") == (2, [[b"HSET", b"h", b"a", b"1",
                                                                 b"b", b"2"]])
    assert rec.effects("HMSET", "h", "c", "3") == ("OK", [[b"HSET", b"h", b"c", b"3"]])
    assert rec.effects("HSETNX", "h", "a", "9") == (0, [])
    assert rec.effects("HSETNX", "h", "d", "4") == (1, [[b"HSET", b"h", b"d", b"4"]])
    assert rec.effects("HDEL", "h", "nope") == (0, [])
    assert rec.effects("HDEL", "h", "d", "nope") == (1, [[b"HDEL", b"h", b"d"]])
    assert rec.effects("HINCRBY", "h", "n", "5") == (5, [[b"HINCRBY", b"h", b"n", b"5"]])
    assert rec.effects("HINCRBYFLOAT", "h", "f", "1.10") == (
        b"1.1", [[b"HSET", b"h", b"f", b"1.1"]])
    assert rec.effects("HGET", "h", "a") == (b"1", [])
    rec.assert_replays()


def test_replay_digest_after_every_command() -> None:
    primary = Engine(clock=lambda: 1_000_000)
    replica = Engine(clock=lambda: 1_000_000)
    primary.add_sink(replica.replay.apply)
    script: list[tuple[Any, ...]] = [
        ("HSET", "h", "a", "1", "b", "2"),
        ("HINCRBY", "h", "a", "10"),
        ("HINCRBYFLOAT", "h", "b", "0.25"),
        ("HSETNX", "h", "c", "3"),
        ("HMSET", "h", "d", "x" * 100),
        ("HDEL", "h", "a"),
        *[("HSET", "big", f"f{i}", f"v{i}") for i in range(520)],
        ("HDEL", "big", "f3", "f9"),
        ("HDEL", "h", "b", "c", "d"),
    ]
    for argv in script:
        primary.execute(*argv)
        assert primary.digest() == replica.digest(), argv
    assert replica.execute("EXISTS", "h") == 0
    assert replica.execute("HLEN", "big") == 518


# --- keyspace events -----------------------------------------------------------------------------


def events(sub: object) -> list[bytes]:
    found = []
    while (message := sub.get_message(0)) is not None:  # type: ignore[attr-defined]
        if message["type"] == "pmessage":
            found.append(message["channel"].rsplit(b":", 1)[1])
    return found


def test_events() -> None:
    e = Engine()
    e.execute("CONFIG", "SET", "notify-keyspace-events", "KEAnoc")
    sub = e.psubscribe("__keyevent@*")
    e.execute("HSET", "h", "a", "1")
    e.execute("HSETNX", "h", "b", "2")
    e.execute("HSETNX", "h", "b", "2")
    e.execute("HINCRBY", "h", "n", "1")
    e.execute("HINCRBYFLOAT", "h", "n", "1.5")
    e.execute("HDEL", "h", "nope")
    e.execute("HDEL", "h", "a", "b")
    e.execute("HDEL", "h", "n")
    assert events(sub) == [b"new", b"hset", b"hset", b"hincrby", b"hincrbyfloat", b"hdel",
                           b"hdel", b"del"]
    sub.close()


# --- a small plain hash kept bare -----------------------------------------------------------------


def test_a_small_plain_hash_is_kept_as_its_pack() -> None:
    from streamkeep.engine.model.hashes import Hash
    from streamkeep.engine.model.packed_hash import PackedHash
    from streamkeep.engine.model.value_types import HASH

    e = Engine()
    space = e.keyspaces[HASH.slot][0]
    e.execute("HSET", "h", "a", "1", "b", "2")
    e.execute("HINCRBY", "n", "f", "1")
    e.execute("HINCRBYFLOAT", "x", "f", "1.5")
    e.execute("HSETNX", "s", "f", "1")
    assert all(type(space[k]) is PackedHash for k in (b"h", b"n", b"x", b"s"))
    e.execute("HDEL", "h", "b")
    assert type(space[b"h"]) is PackedHash and e.execute("HGETALL", "h") == [b"a", b"1"]
    e.execute("HSET", "big", "f", "x" * 65)
    e.execute("HSET", "ex", "a", "1")
    e.execute("HEXPIRE", "ex", "100", "FIELDS", "1", "nope")  # (listpackex, TTL set or not)
    assert isinstance(space[b"big"], Hash) and isinstance(space[b"ex"], Hash)
    assert e.execute("OBJECT", "ENCODING", "ex") == b"listpackex"
    e.execute("HDEL", "h", "a")  # (emptied: the key goes, nothing stored back)
    assert b"h" not in space and e.execute("EXISTS", "h") == 0


def test_generic_commands_see_a_bare_hash_as_a_hash() -> None:
    from streamkeep.engine.model.packed_hash import PackedHash
    from streamkeep.engine.model.value_types import HASH

    e = Engine()
    space = e.keyspaces[HASH.slot][0]
    e.execute("HSET", "h", "a", "1", "b", "2")
    assert e.execute("TYPE", "h") == "hash"
    assert e.execute("OBJECT", "ENCODING", "h") == b"listpack"
    assert e.execute("MEMORY", "USAGE", "h") > 0
    assert e.execute("SCAN", "0", "TYPE", "hash") == [b"0", [b"h"]]
    assert e.execute("SCAN", "0", "TYPE", "string") == [b"0", []]
    payload = e.execute("DUMP", "h")
    e.execute("RESTORE", "r", "0", payload)
    assert e.execute("DUMP", "r") == payload
    assert e.execute("HGETALL", "r") == e.execute("HGETALL", "h")
    assert e.execute("COPY", "h", "c") == 1 and type(space[b"c"]) is PackedHash
    e.execute("HSET", "c", "z", "9")
    assert e.execute("HGET", "h", "z") is None and e.execute("HGET", "c", "z") == b"9"
    e.execute("RENAME", "h", "h2")
    assert type(space[b"h2"]) is PackedHash and e.execute("HGET", "h2", "a") == b"1"
    e.execute("SET", "str", "v")
    with pytest.raises(ReplyError, match="WRONGTYPE"):
        e.execute("GET", "h2")
    with pytest.raises(ReplyError, match="WRONGTYPE"):
        e.execute("HLEN", "str")


def test_a_hash_read_then_renamed_never_writes_over_its_old_key() -> None:
    """A small hash kept as a Hash (RESTORE makes one) is bound to its key when read; after
    RENAME took it elsewhere and a new hash took the old key, a change to the renamed hash
    lands on it, not on the old key."""
    e = Engine()
    e.execute("HSET", "k", "a", "1", "b", "2")
    payload = e.execute("DUMP", "k")
    e.execute("DEL", "k")
    e.execute("RESTORE", "k", "0", payload)
    assert e.execute("HGET", "k", "a") == b"1"
    e.execute("RENAME", "k", "k2")
    e.execute("HSET", "k", "z", "9")
    e.execute("HSET", "k2", "c", "3")
    assert e.execute("HGETALL", "k") == [b"z", b"9"]
    assert e.execute("HGETALL", "k2") == [b"a", b"1", b"b", b"2", b"c", b"3"]
