"""A redis-server's commands applied to an engine (no sockets): what is applied, what is skipped
and counted, transactions applied whole with the offset moving at EXEC, a transaction cut by a
lost link dropped, errors counted, and an RDB's keys loaded."""

from __future__ import annotations

from streamkeep import Engine
from streamkeep.engine.model.list_node import node_new
from streamkeep.replication.redis_commands import RedisApplier
from streamkeep.replication.redis_link import command_size
from streamkeep.snapshot.rdb import RdbKey


def feed(applier: RedisApplier, *commands: list[str]) -> None:
    for c in commands:
        argv = [a.encode() for a in c]
        applier.apply(argv, command_size(argv))


def test_stream_and_string_writes_apply_others_are_counted() -> None:
    with Engine() as engine:
        engine.read_only = "READONLY You can't write against a read only replica."
        a = RedisApplier(engine)
        feed(a, ["SELECT", "1"], ["XADD", "s", "1-1", "f", "v"], ["SET", "k", "v"],
             ["PFADD", "h", "v"], ["SET", "k2", "v"], ["PING"], ["PEXPIREAT", "s", "9"],
             ["RESTORE", "h2", "0", "\x1cnot-a-stored-type"], ["REPLCONF", "GETACK", "*"],
             ["MSETNX", "m1", "1", "m2", "2"], ["GETSET", "k", "w"], ["SETBIT", "k", "0", "1"],
             ["SETRANGE", "k2", "1", "x"], ["MSETEX", "1", "m3", "3", "PXAT", "9"],
             ["DELEX", "m2", "IFEQ", "2"])
        assert dict(a.skipped_commands) == {"pfadd": 1, "restore": 1, "setbit": 1}
        assert a.applied == 10 and a.errors == 0
        # A TTL already past is kept until the primary's DEL: the primary's session sees it,
        # a client's read on this replica sees the key as missing (as on a Redis replica).
        assert engine.strings[1][b"k"] == b"w" and engine.expires[1][b"s"] == 9
        assert engine.strings[1][b"m1"] == b"1" and b"m2" not in engine.strings[1]
        assert engine.strings[1][b"k2"] == b"vx" and engine.expires[1][b"m3"] == 9
        assert engine.execute("SELECT", "1") == "OK"
        assert engine.execute("XLEN", "s") == 0 and engine.execute("GET", "k2") == b"vx"
        assert engine.execute("TTL", "s") == -2 and engine.execute("TYPE", "s") == "none"
        assert engine.dbs[1][b"s"].length == 1  # nothing deleted here
        feed(a, ["DEL", "s"])
        assert b"s" not in engine.dbs[1] and b"s" not in engine.expires[1]
        # Client writes are still refused: only the primary's session passes the gate.
        try:
            engine.execute("XADD", "s", "*", "f", "v")
        except Exception as err:  # noqa: BLE001 - the message is what is checked
            assert "READONLY" in str(err)
        else:
            raise AssertionError("a client's write was accepted on a replica")


def test_a_published_message_reaches_this_nodes_subscribers_and_is_not_logged() -> None:
    with Engine() as engine:
        records: list[object] = []
        engine.add_sink(records.append)
        a = RedisApplier(engine)
        sub = engine.subscribe("news")
        sub.get_message()
        feed(a, ["PUBLISH", "news", "m1"])
        a.apply_many([[b"PUBLISH", b"news", b"m2"], [b"XADD", b"s", b"1-1", b"f", b"v"]])
        assert [sub.get_message()["data"] for _ in range(2)] == [b"m1", b"m2"]  # type: ignore[index]
        assert not a.skipped_commands and a.errors == 0
        assert len(records) == 1  # the XADD's record only


def test_a_transaction_applies_whole_and_moves_the_offset_at_exec() -> None:
    with Engine() as engine:
        a = RedisApplier(engine)
        feed(a, ["XADD", "s", "1-1", "f", "v"])
        before = a.offset
        feed(a, ["MULTI"], ["XADD", "s", "2-1", "f", "v"], ["PFADD", "x", "y"])
        assert a.offset == before and engine.execute("XLEN", "s") == 1
        # The link is lost here: the primary resends from `before`, MULTI included.
        a.abandon()
        feed(a, ["MULTI"], ["XADD", "s", "2-1", "f", "v"], ["PFADD", "x", "y"],
             ["XADD", "s", "3-1", "f", "v"], ["EXEC"])
        size = sum(command_size([w.encode() for w in c]) for c in (
            ["MULTI"], ["XADD", "s", "2-1", "f", "v"], ["PFADD", "x", "y"],
            ["XADD", "s", "3-1", "f", "v"], ["EXEC"]))
        assert a.offset == before + size
        assert engine.execute("XRANGE", "s", "-", "+") == [
            [b"1-1", [b"f", b"v"]], [b"2-1", [b"f", b"v"]], [b"3-1", [b"f", b"v"]]]
        assert a.skipped_commands["pfadd"] == 1  # counted once: the dropped copy was not applied


def test_a_failing_command_is_counted_and_the_stream_goes_on() -> None:
    with Engine() as engine:
        a = RedisApplier(engine)
        feed(a, ["XADD", "s", "5-1", "f", "v"], ["XADD", "s", "1-1", "f", "v"],
             ["MULTI"], ["XADD", "s", "0-1", "f", "v"], ["XADD", "s", "6-1", "f", "v"], ["EXEC"],
             ["XADD", "s", "7-1", "f", "v"])
        assert a.errors == 2 and "XADD s 0-1" in (a.last_error or "")
        assert engine.execute("XLEN", "s") == 3


def test_an_rdb_replaces_everything_streams_restored_others_counted() -> None:
    with Engine() as source, Engine() as engine:
        source.execute("XADD", "s", "1-1", "f", "v")
        source.execute("XGROUP", "CREATE", "s", "g", "0")
        payload = source.execute("DUMP", "s")
        value = payload[1:-10]
        engine.execute("XADD", "old", "1-1", "f", "v")
        engine.read_only = "READONLY You can't write against a read only replica."
        a = RedisApplier(engine)
        keys = [RdbKey(0, b"s", payload[0], value, None), RdbKey(0, b"str", 0, b"\x01v", None),
                RdbKey(2, b"t", payload[0], value, 2**62), RdbKey(0, b"gone", payload[0],
                                                                  value, 1)]
        keys.append(RdbKey(0, b"a", 28, b"\x00\x00", None))  # an array: skipped, counted
        keys.append(RdbKey(0, b"z", 5, b"\x01\x01m" + bytes(8), None))  # a zset: loaded
        keys.append(RdbKey(0, b"l", 1, b"\x01\x01v", None))  # a list: loaded
        # A replica's full sync: the expired stream is loaded with its TTL (its DEL follows).
        assert a.load(keys, 13, replace_all=True) == (3, 3, 1)
        assert engine.execute("EXISTS", "old") == 0
        assert engine.execute("XINFO", "GROUPS", "s")[0][1] == b"g"
        assert engine.strings[0][b"str"] == b"v" and engine.expires[0][b"gone"] == 1
        assert engine.execute("SELECT", "2") == "OK" and engine.execute("XLEN", "t") == 1
        assert engine.execute("PEXPIRETIME", "t") == 2**62
        assert dict(a.skipped_keys) == {"array": 1}
        assert dict(a.loaded_keys) == {"zset": 1, "list": 1}
        assert bytes(engine.keyspaces[5][0][b"l"]) == bytes(node_new([b"v"]))  # (slot 5: lists)
        assert engine.keyspaces[2][0][b"z"].score(b"m") == 0.0  # (slot 2: sorted sets)
        assert (a.expired_keys, a.expiries_kept) == (0, 2)
        # An RDB file imported as a primary's: the expired key is skipped.
        assert a.load(keys, 13, replace_all=True, skip_expired=True) == (2, 2, 1)
        assert (a.expired_keys, a.expiries_kept) == (1, 3)


def test_a_skipped_keyspace_command_is_warned_about_once(caplog) -> None:  # type: ignore[no-untyped-def]
    with Engine() as engine:
        a = RedisApplier(engine)
        feed(a, ["SWAPDB", "0", "1"], ["SWAPDB", "1", "0"], ["SET", "k", "v"])
        warnings = [r.message for r in caplog.records if "SWAPDB" in r.message]
        assert len(warnings) == 1 and "REPLICAOF again" in warnings[0]
        assert a.skipped_commands["swapdb"] == 2


def test_an_aof_that_cannot_be_written_stops_the_stream_before_the_offset_moves(
        tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from streamkeep.engine.wire.errors import StorageError

    with Engine.open(str(tmp_path / "d")) as engine:
        a = RedisApplier(engine)
        feed(a, ["XADD", "s", "1-1", "f", "v"])
        offset = a.offset
        engine.journal.error = "MISCONF Errors writing to the AOF file: No space left on device"
        try:
            for commands in ([["XADD", "s", "2-1", "f", "v"]],
                             [["XADD", "s", "2-1", "f", "v"], ["XADD", "s", "3-1", "f", "v"]]):
                with pytest.raises(StorageError, match="MISCONF"):
                    a.apply_many([[w.encode() for w in c] for c in commands])
                assert a.offset == offset and a.errors == 0
        finally:
            engine.journal.error = None
        assert engine.execute("XLEN", "s") == 1


def test_trims_as_redis_rewrites_them_apply_exactly() -> None:
    """Redis turns `MAXLEN ~ n LIMIT l` into `MAXLEN = <exact> LIMIT l` for its replicas and
    AOF and obeys those unlimited; a client may not send them."""
    with Engine() as engine:
        a = RedisApplier(engine)
        feed(a, *(["XADD", "s", f"{i}-0", "f", str(i)] for i in range(1, 301)))
        feed(a, ["XADD", "s", "MAXLEN", "=", "201", "LIMIT", "100", "301-0", "f", "x"],
             ["XTRIM", "s", "MAXLEN", "=", "101", "LIMIT", "100"])
        assert a.errors == 0 and engine.execute("XLEN", "s") == 101
        assert engine.execute("XREVRANGE", "s", "+", "-", "COUNT", "1")[0][0] == b"301-0"
        try:
            engine.execute("XTRIM", "s", "MAXLEN", "=", "10", "LIMIT", "100")
        except Exception as err:  # noqa: BLE001 - the message is what is checked
            assert "LIMIT cannot be used without the special ~ option" in str(err)
        else:
            raise AssertionError("a client's exact trim with LIMIT was accepted")
