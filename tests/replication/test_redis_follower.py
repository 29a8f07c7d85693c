"""A streamkeep replica of a real redis-server (7.0): the handshake, full syncs (disk and diskless
RDB transfers), the command stream under a mixed workload (transactions, other types, DEL,
FLUSHDB), the link cut (a partial sync), redis-server restarted, and the replica's own AOF
reopened. The oracle is a redis-server replica of the same primary: after each step the
streamkeep replica holds what it holds (the same XRANGE, XINFO STREAM FULL, consumers' seen and
active times aside: each node's own clock, and XPENDING), at the primary's offset. A replica,
not the primary: Redis's replicas differ from their primary where Redis propagates less than it
changes (a history XREADGROUP's delivery count, entries-read after XCLAIM)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep import Engine
from tests.support.redis_state import raw_client, stream_keys, stream_state
from tests.support.replication_util import drive, wait_for
from tests.support.replication_util import info as info_fields

# (Without the delay, a diskless primary waits 5 s for more replicas before each full sync.)
DISKLESS = {"disk": ("--repl-diskless-sync", "no"),
            "diskless": ("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")}


def _client(server: Any, db: int = 0) -> redis.Redis:
    return redis.Redis(host=server.host, port=server.port, db=db, protocol=2)


def _info(engine: Engine) -> dict[str, str]:
    text = engine.execute("INFO", "replication").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def _oracle(start_redis: Callable[..., Any], server: Any) -> Any:
    """A redis-server replica of `server`, started when the streamkeep replica starts, so that
    both begin by a full sync of the same data (a replica synced by the command stream holds
    what Redis propagated, less than an RDB of the primary carries)."""
    # Its own RDB file: one it would load at start (another oracle's, in the same directory)
    # holds a replication position and would make it continue, not sync anew.
    return start_redis("--replicaof", server.host, str(server.port),
                       "--dbfilename", f"oracle-{uuid.uuid4().hex}.rdb")


def same_streams(r: redis.Redis, oracle: Any, replica: Engine) -> bool:
    """True once both replicas are at the primary's offset and the streamkeep replica holds
    in every database the streams the redis-server replica holds."""
    offset = r.info("replication")["master_repl_offset"]
    follower = replica.replication.follower
    if not follower.link_up or follower.redis is None or \
            follower.redis.applier.offset != offset or \
            _client(oracle).info("replication").get("slave_repl_offset") != offset:
        return False
    try:
        for db in (0, 1):
            run = raw_client(_client(oracle), db)
            replica.execute("SELECT", str(db))
            keys = stream_keys(run)
            if sorted(keys) != sorted(stream_keys(replica.execute)) or \
                    stream_state(run, keys) != stream_state(replica.execute, keys):
                return False
    finally:
        replica.execute("SELECT", "0")
    return True


def _client_db1(r: redis.Redis) -> redis.Redis:
    kwargs = r.connection_pool.connection_kwargs
    return redis.Redis(host=kwargs["host"], port=kwargs["port"], db=1, protocol=2)


def _seed(r: redis.Redis) -> None:
    """Streams of every shape, keys of other types, two databases, an expiring stream."""
    for i in range(1, 301):
        r.xadd("big", {"temp": str(i), "bin\x00": b"\xff" * (i % 7)})
    r.xdel("big", "1-0")
    r.xgroup_create("big", "g1", "0")
    r.xreadgroup("g1", "alice", {"big": ">"}, count=5)
    r.execute_command("XGROUP", "CREATECONSUMER", "big", "g1", "idle")
    r.execute_command("XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    r.xadd("ttl", {"f": "v"})
    r.expire("ttl", 1000)
    r.set("str", "v")
    r.hset("hash", "f", "v")
    _client_db1(r).xadd("other-db", {"f": "v"})


def _more(r: redis.Redis, seed: int, start: int, stop: int) -> None:
    """The mixed workload, a transaction, other types' commands, DEL and FLUSHDB."""
    drive(r, seed, start, stop)
    with r.pipeline(transaction=True) as p:
        p.xadd("tx", {"a": "1"})
        p.set("tx-str", "x")
        p.xadd("tx", {"b": "2"})
        p.execute()
    r.lpush("list", "x")
    r.delete("big")
    other = _client_db1(r)
    other.flushdb()
    other.xadd("other-db", {"again": "1"})


@pytest.mark.parametrize("transfer", sorted(DISKLESS))
def test_a_replica_of_redis_server_follows_its_streams(start_redis, tmp_path: Path,
                                                      transfer: str) -> None:
    server = start_redis(*DISKLESS[transfer])
    r = _client(server)
    _seed(r)
    r.zadd("zset", {"m": 1.5, "n": -2})  # (stored here: restored by the full sync)
    r.rpush("list", *[b"e%d" % i for i in range(2000)], b"\xff" * 9000)  # (so are lists)
    oracle = _oracle(start_redis, server)
    with Engine.open(str(tmp_path / "replica"),
                     replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: same_streams(r, oracle, replica), what="the full sync")
        info = _info(replica)
        assert info["master_protocol"] == "redis" and info["redis_full_syncs"] == "1"
        assert info["redis_skipped_keys"] == ""  # (the hash, sorted set and list are kept)
        assert replica.execute("HGET", "hash", "f") == b"v"
        assert replica.execute("ZRANGE", "zset", "0", "-1") == [b"n", b"m"]
        assert replica.execute("LRANGE", "list", "0", "-1") == r.lrange("list", 0, -1)
        assert info["redis_expiries_loaded"] == "1"
        assert replica.execute("GET", "str") == b"v"
        assert replica.execute("PEXPIRETIME", "ttl") == r.pexpiretime("ttl")
        assert replica.execute("ROLE")[:4] == [b"slave", server.host.encode(), server.port,
                                               b"connected"]
        _more(r, seed=1, start=0, stop=600)
        wait_for(lambda: same_streams(r, oracle, replica), what="the command stream")
        info = _info(replica)
        skipped = dict(pair.split("=") for pair in info["redis_skipped_commands"].split(",")
                       if pair)
        assert "lpush" not in skipped and "set" not in skipped and "expire" not in skipped
        assert replica.execute("LRANGE", "list", "0", "-1") == r.lrange("list", 0, -1)
        assert replica.execute("GET", "tx-str") == b"x"
        assert replica.execute("EXISTS", "big") == 0
        # redis-server sees both replicas' ACKed offsets (the streamkeep one embedded: port 0).
        def acked() -> bool:
            fields = info_fields(r)
            slaves = [fields[k] for k in fields if k.startswith("slave") and k[5:].isdigit()]
            return len(slaves) == 2 and all(
                f"offset={fields['master_repl_offset']}," in line for line in slaves) and \
                any("port=0," in line for line in slaves)
        wait_for(acked, what="the ACKs")


def test_a_cut_link_resumes_and_a_restarted_redis_server_resyncs(start_redis,
                                                                  tmp_path: Path) -> None:
    # Its own RDB file name: a replica in the same directory writes dump.rdb.
    server = start_redis("--repl-diskless-sync", "no", "--dbfilename", "restart.rdb")
    r = _client(server)
    _seed(r)
    oracle = _oracle(start_redis, server)
    with Engine.open(str(tmp_path / "replica"),
                     replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: same_streams(r, oracle, replica), what="the full sync")
        following = replica.replication.follower.redis
        # The link cut, during writes: a partial sync from the offset the replica holds.
        _more(r, seed=2, start=0, stop=200)
        r.execute_command("CLIENT", "KILL", "TYPE", "replica")
        _more(r, seed=2, start=200, stop=400)
        wait_for(lambda: same_streams(r, oracle, replica), what="the partial sync")
        assert following.partial_syncs >= 1 and following.full_syncs == 1
        # redis-server restarted with its data (an RDB saved at shutdown): the replica
        # converges on what it holds now, whichever sync redis-server grants.
        r.config_set("save", "3600 1")
        r.shutdown(save=True)
        server.process.wait(10)
        server = start_redis("--repl-diskless-sync", "no", "--dbfilename", "restart.rdb",
                             port=server.port)
        r = _client(server)
        _more(r, seed=3, start=0, stop=200)
        wait_for(lambda: same_streams(r, oracle, replica), what="the sync after the restart")
        expected = stream_state(replica.execute, stream_keys(replica.execute))
    # The replica restarts from its own AOF, without redis-server.
    with Engine.open(str(tmp_path / "replica")) as again:
        assert stream_state(again.execute, stream_keys(again.execute)) == expected


def test_a_replica_of_redis_server_refuses_client_writes_and_can_be_promoted(
        start_redis, tmp_path: Path) -> None:
    server = start_redis(*DISKLESS["diskless"])
    r = _client(server)
    r.xadd("s", {"f": "v"}, id="1-1")
    oracle = _oracle(start_redis, server)
    with Engine.open(str(tmp_path / "replica"),
                     replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: same_streams(r, oracle, replica))
        with pytest.raises(Exception, match="READONLY"):
            replica.execute("XADD", "s", "*", "f", "v")
        assert replica.execute("REPLICAOF", "NO", "ONE") == "OK"
        r.xadd("s", {"f": "after"}, id="2-1")
        time.sleep(0.3)
        assert replica.execute("XRANGE", "s", "-", "+") == [[b"1-1", [b"f", b"v"]]]
        assert replica.execute("XADD", "s", "3-1", "f", "mine") == b"3-1"


def test_replicaof_at_run_time_with_a_password(start_redis, tmp_path: Path) -> None:
    server = start_redis("--requirepass", "s3cret", *DISKLESS["diskless"])
    r = redis.Redis(host=server.host, port=server.port, password="s3cret", protocol=2)
    r.xadd("s", {"f": "v"}, id="1-1")
    r.set("other", "x")
    with Engine.open(str(tmp_path / "replica"), masterauth="s3cret") as replica:
        assert replica.execute("REPLICAOF", server.host, str(server.port)) == "OK"
        wait_for(lambda: replica.execute("XLEN", "s") == 1, what="the full sync")
        r.xadd("s", {"f": "w"}, id="2-1")
        wait_for(lambda: replica.execute("XLEN", "s") == 2, what="the command stream")
        info = _info(replica)
        assert info["master_link_status"] == "up" and info["redis_skipped_keys"] == ""
        assert replica.execute("GET", "other") == b"x"
        assert int(info["slave_repl_offset"]) == r.info("replication")["master_repl_offset"]


def test_a_restarted_replica_continues_by_a_partial_sync(start_redis, tmp_path: Path) -> None:
    server = start_redis(*DISKLESS["diskless"])
    r = _client(server)
    _seed(r)
    oracle = _oracle(start_redis, server)
    path = str(tmp_path / "replica")
    with Engine.open(path, replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: same_streams(r, oracle, replica), what="the full sync")
        _more(r, seed=4, start=0, stop=100)
        wait_for(lambda: same_streams(r, oracle, replica), what="the command stream")
    _more(r, seed=4, start=100, stop=200)  # while it is down
    with Engine.open(path, replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: same_streams(r, oracle, replica), what="the sync after the restart")
        following = replica.replication.follower.redis
        assert (following.full_syncs, following.partial_syncs) == (0, 1)
    # A log that does not end where the position was saved: a full sync, never a gap.
    with Engine.open(path) as primary_now:  # promoted, it takes a write of its own
        primary_now.execute("XADD", "mine", "1-1", "f", "v")
    oracle = _oracle(start_redis, server)  # synced from an RDB too
    with Engine.open(path, replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: same_streams(r, oracle, replica), what="the full sync")
        assert replica.replication.follower.redis.full_syncs == 1
        assert replica.execute("EXISTS", "mine") == 0


def test_a_message_published_on_the_redis_server_primary_reaches_the_replicas_subscribers(
        start_redis, tmp_path: Path) -> None:
    server = start_redis(*DISKLESS["diskless"])
    r = _client(server)
    with Engine.open(str(tmp_path / "replica"),
                     replicaof=(server.host, server.port)) as replica, \
            replica.subscribe("news") as sub:
        wait_for(lambda: _info(replica).get("master_link_status") == "up", what="the link")
        assert sub.get_message()["type"] == "subscribe"  # type: ignore[index]
        assert r.publish("news", "from the primary") == 0  # no subscriber on the primary
        message = sub.get_message(timeout=10)
        assert message is not None and message["data"] == b"from the primary"
        assert "publish" not in replica.replication.follower.redis.applier.skipped_commands


# --- strings and TTLs ------------------------------------------------------------------------


def _keys_of(run: Callable[..., Any]) -> dict:
    from tests.support.redis_state import keys_state

    return keys_state(run)


def _same_keys(r: redis.Redis, replica: Engine) -> bool:
    """Both at the primary's offset, and the replica's reads give every key of database 0 the
    primary's type, value and expiry time."""
    follower = replica.replication.follower
    if not follower.link_up or follower.redis is None or \
            follower.redis.applier.offset != r.info("replication")["master_repl_offset"]:
        return False
    return _keys_of(replica.execute) == _keys_of(raw_client(r, 0))


def test_strings_and_ttls_follow_a_redis_server_primary(start_redis, tmp_path: Path) -> None:
    server = start_redis("--enable-debug-command", "yes", *DISKLESS["diskless"])
    r = _client(server)
    r.set("plain", "v")
    r.set("int", 12345)
    r.set("big", "streamkeep " * 300)  # LZF-compressed in the RDB
    r.set("ttl", "v", px=3_600_000)
    r.xadd("stream-ttl", {"f": "v"})
    r.pexpire("stream-ttl", 7_200_000)
    r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    r.set("past-in-rdb", "v", px=1)  # expired, not yet deleted: in the full sync's RDB
    time.sleep(0.01)
    with Engine.open(str(tmp_path / "replica"),
                     replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: replica.replication.follower.redis is not None and
                 replica.replication.follower.redis.full_syncs == 1, what="the full sync")
        # Loaded as a Redis replica loads it: the expired key too, hidden from reads until
        # the primary's DEL.
        assert replica.strings[0][b"past-in-rdb"] == b"v"
        assert replica.execute("GET", "past-in-rdb") is None
        assert replica.execute("EXISTS", "past-in-rdb") == 0
        r.get("past-in-rdb")  # the primary's lazy expiry: its DEL reaches the replica
        wait_for(lambda: b"past-in-rdb" not in replica.strings[0], what="the primary's DEL")
        assert _keys_of(replica.execute) == _keys_of(raw_client(r, 0))
        # The command stream: what Redis propagates for each string and TTL command.
        r.set("ex", "v", ex=100)  # SET ... PXAT
        r.execute_command("SETEX", "setex", "200", "v")
        r.psetex("psetex", 300_000, "v")
        r.set("float", "1.5", px=3_600_000)
        r.incrbyfloat("float", "2.25")  # SET ... KEEPTTL
        r.incr("int")
        r.append("plain", "+")
        r.getex("ttl", ex=500)  # PEXPIREAT
        r.getex("plain", px=60_000)
        r.getex("plain", persist=True)  # PERSIST
        r.getdel("big")  # DEL
        r.expire("int", 1000, nx=True)
        r.execute_command("MSETNX", "m1", "a", "m2", "b")
        r.getset("m1", "c")
        r.execute_command("EXPIREAT", "m2", str(int(time.time()) + 5000))
        r.persist("stream-ttl")
        with r.pipeline(transaction=True) as p:
            p.set("tx", "1", keepttl=True)
            p.incrby("tx", 41)
            p.pexpire("tx", 90_000)
            p.execute()
        wait_for(lambda: _same_keys(r, replica), what="the string commands")
        assert replica.execute("GET", "float") == b"3.75"
        # A key expiring on the primary: hidden here once its time passes, deleted by the
        # primary's DEL (its active cycle is off: the DEL comes with the next access).
        r.set("brief", "v", px=50)
        # Arrived first (a PTTL of -2 also means "not here yet"), then past its time.
        wait_for(lambda: b"brief" in replica.strings[0], what="the brief key's SET")
        wait_for(lambda: replica.execute("PTTL", "brief") == -2, what="the brief key's TTL")
        assert b"brief" in replica.strings[0]  # not deleted here: the replica does not write
        assert b"brief" not in replica.execute("KEYS", "*")
        assert replica.execute("TYPE", "brief") == "none"
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        wait_for(lambda: b"brief" not in replica.strings[0], what="the active cycle's DEL")
        wait_for(lambda: _same_keys(r, replica), what="the same keys")
        info = _info(replica)
        assert info["redis_commands_failed"] == "0"
        skipped = info["redis_skipped_commands"]
        assert "set" not in skipped and "pexpireat" not in skipped, skipped


def test_a_full_sync_names_no_skipped_keys_when_it_keeps_them_all(start_redis, tmp_path: Path,
                                                                  caplog) -> None:
    """Every type redis-server 7.0 makes is stored here now (lists too): nothing skipped, no
    line naming skipped keys. (What such a line says of a type streamkeep does not store is
    `rdb.describe_skipped`'s, tested with hand-built RDB files.)"""
    server = start_redis(*DISKLESS["diskless"])
    r = _client(server)
    r.xadd("s", {"f": "v"}, id="1-1")
    r.hset("h1", "f", "v")
    r.hset("h2", "f", "v")
    r.rpush("l", "1")
    with caplog.at_level("WARNING", logger="streamkeep"), \
            Engine.open(str(tmp_path / "replica"), replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: _info(replica).get("redis_full_syncs") == "1", what="the full sync")
        assert replica.execute("XLEN", "s") == 1
        assert replica.execute("LRANGE", "l", "0", "-1") == [b"1"]
        assert _info(replica)["redis_skipped_keys"] == ""
    said = [rec.getMessage() for rec in caplog.records if "skipped the keys" in rec.getMessage()]
    assert said == []


def test_a_full_sync_loads_the_primarys_function_libraries_in_place_of_the_replicas(
        start_redis, tmp_path: Path) -> None:
    from tests.support.rdb_files import LIBRARY

    server = start_redis(*DISKLESS["diskless"])
    r = _client(server)
    r.execute_command("FUNCTION", "LOAD", LIBRARY)
    r.set("k", "v")
    with Engine.open(str(tmp_path / "replica")) as replica:  # a library of its own, first
        replica.execute("FUNCTION", "LOAD",
                        "#!lua name=own\nredis.register_function('own', function() return 1 end)")
    with Engine.open(str(tmp_path / "replica"), replicaof=(server.host, server.port)) as replica:
        wait_for(lambda: _info(replica).get("redis_full_syncs") == "1", what="the full sync")
        assert replica.execute("FCALL_RO", "ro", "0") == b"ro"
        assert [lib[1] for lib in replica.execute("FUNCTION", "LIST")] == [b"lib"]
    with Engine.open(str(tmp_path / "replica")) as replica:  # (durable: in its own AOF)
        assert replica.execute("FCALL", "getk", "1", "k") == b"v"
