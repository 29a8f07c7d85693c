"""engine.runtime.evictions with real `streamkeep serve` child processes: maxmemory under a
flood (noeviction), hostile writes over the limit, and an evicting primary's replica.

maxmemory under a flood, against a real `streamkeep serve` child process (noeviction, the
limit set a few MB above what it holds once started).

A producer XADDs to a stream with a consumer group as fast as pipelining allows until the
server refuses it with OOM; it keeps every entry the server refused and sends it again, while a
consumer reads with XREADGROUP, acknowledges with XACK and deletes with XDEL what it read (it
starts deleting once the producer was first refused, so the flood is sure to reach the limit).
Asserted: the producer was refused at least once and went on being served afterwards (more than
the whole headroom's worth of entries: the deleted entries' memory came back); the consumer's
XREADGROUP, XACK and XDEL were never refused; every entry an XADD reply acknowledged was read
exactly once or is still in the stream (none lost), and nothing the server refused is in it.

A hostile client, once memory is over the limit: a SET or an APPEND of a value larger than all
the room left is refused, as are SUNIONSTORE and ZRANGESTORE (even of small sources), and none
of them changes anything; reads, DEL and everything else that cannot grow memory still run, and
once DELs brought memory back under the limit, writes are taken again. Under the limit, a SET
whose value alone is larger than the room left is refused (its argument holds that memory before
it runs), while a small command that crosses the limit (SETRANGE far out) is taken, as the limit
is checked before a command, and the next write is refused.

maxmemory's evictions under replication, with real `streamkeep serve` processes: a primary
under `allkeys-lru` evicts as writes push it past its limit, and its one replica applies those
evictions (the DEL records the primary logs) and never evicts on its own, even with a limit of
its own far below what it holds (`replica-ignore-maxmemory` is always yes). Once the replica has
caught up, it holds exactly the primary's state (`DEBUG DIGEST`).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep.engine.runtime.evictions import time_limit_ns
from tests.support.replication_util import caught_up, info
from tests.support.resp_client import RespClient, RespError
from tests.support.serve_process import ServeProcess

OOM = "OOM command not allowed when used memory > 'maxmemory'."
MB = 1 << 20
HEADROOM = 4 * MB
PAYLOAD = b"p" * 500
BATCH = 200  # XADDs per pipeline
READ_COUNT = 100  # entries per XREADGROUP
MAX_ROUNDS = 20_000  # producer pipelines, at most
MAX_STALLS = 20_000  # producer waits for a consumer round after a fully refused pipeline
MAX_CONSUMER_ROUNDS = 200_000


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServeProcess]:
    """A `streamkeep serve` child (noeviction, no limit yet), killed and its files removed at
    the end."""
    proc = ServeProcess(tmp_path / "sk")
    try:
        yield proc
    finally:
        proc.kill()
        proc.remove_files()


def used_memory(conn: RespClient) -> int:
    return int(fields(conn, "memory")["used_memory"])


def fields(conn: RespClient, section: str) -> dict[str, str]:
    text = conn.execute("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def set_headroom(conn: RespClient, headroom: int) -> int:
    """maxmemory set `headroom` bytes above what the server holds now; the limit."""
    assert conn.execute("CONFIG", "SET", "maxmemory-policy", "noeviction") == "OK"
    limit = used_memory(conn) + headroom
    assert conn.execute("CONFIG", "SET", "maxmemory", str(limit)) == "OK"
    return limit


class Consumer:
    """XREADGROUP, then XACK and (once `deleting` is set) XDEL of what it read, until the
    producer is `done` and a read finds nothing new; every reply that is an error kept."""

    def __init__(self, port: int) -> None:
        self.conn = RespClient("127.0.0.1", port, timeout=60)
        self.deleting = threading.Event()
        self.done = threading.Event()
        self.read: dict[bytes, bytes] = {}  # id -> the producer's sequence number
        self.duplicates: list[bytes] = []
        self.errors: list[tuple[str, str]] = []
        self.rounds = 0
        self.deleted = 0
        self.round_done = threading.Condition()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as err:  # (reported by the test, not lost in the thread)
            self.failure = err
        finally:
            with self.round_done:
                self.rounds = MAX_CONSUMER_ROUNDS + 1  # (a waiting producer goes on)
                self.round_done.notify_all()

    def _run(self) -> None:
        undeleted: list[bytes] = []  # read and acknowledged, not yet deleted
        for _round in range(MAX_CONSUMER_ROUNDS):
            finished = self.done.is_set()  # (before the read: then a read of nothing is the end)
            reply = self._call("XREADGROUP", "GROUP", "g", "c", "COUNT", str(READ_COUNT),
                               "BLOCK", "10", "STREAMS", "flood", ">")
            ids = []
            for _key, entries in reply or []:
                for entry_id, values in entries:
                    seq = dict(zip(values[::2], values[1::2], strict=True))[b"n"]
                    if entry_id in self.read:
                        self.duplicates.append(entry_id)
                    self.read[entry_id] = seq
                    ids.append(entry_id)
            if ids:
                self._call("XACK", "flood", "g", *ids)
                undeleted += ids
            if undeleted and self.deleting.is_set():
                self.deleted += self._call("XDEL", "flood", *undeleted) or 0
                undeleted = []
            with self.round_done:
                self.rounds += 1
                self.round_done.notify_all()
            if finished and not ids:
                if undeleted:
                    self.deleted += self._call("XDEL", "flood", *undeleted) or 0
                return
        raise AssertionError(f"the consumer did not finish in {MAX_CONSUMER_ROUNDS} rounds")

    def _call(self, *argv: str | bytes) -> Any:
        reply = self.conn.pipeline(argv)[0]
        if isinstance(reply, RespError):
            self.errors.append((str(argv[0]), str(reply)))
            return None
        return reply

    def wait_round(self, seen: int) -> int:
        """Wait until the consumer has ended a round after round `seen`; the rounds now."""
        with self.round_done:
            self.round_done.wait_for(lambda: self.rounds > seen, timeout=60)
            return self.rounds


def test_a_flood_of_xadds_is_refused_then_served_again_and_nothing_acknowledged_is_lost(
        server: ServeProcess) -> None:
    with RespClient("127.0.0.1", server.port, timeout=60) as admin:
        assert admin.execute("XGROUP", "CREATE", "flood", "g", "$", "MKSTREAM") == "OK"
        set_headroom(admin, HEADROOM)
    consumer = Consumer(server.port)
    reader = threading.Thread(target=consumer.run, name="oom-flood-consumer", daemon=True)
    reader.start()
    with RespClient("127.0.0.1", server.port, timeout=60) as producer:
        acked: dict[bytes, bytes] = {}  # id -> sequence number, for every XADD the server took
        ooms = 0
        before_oom = after_oom = 0  # entries taken before the first OOM, and after it
        pending: deque[int] = deque()  # sequence numbers refused: sent again first
        next_seq = 0
        stalls = seen = 0
        enough = False  # more than the headroom's worth taken after the first OOM: no new entries
        try:
            for _round in range(MAX_ROUNDS):
                batch = [pending.popleft() for _ in range(min(BATCH, len(pending)))]
                while len(batch) < BATCH and not enough:  # (then only what was refused, again)
                    batch.append(next_seq)
                    next_seq += 1
                replies = producer.pipeline(*(("XADD", "flood", "*", "n", str(seq), "p", PAYLOAD)
                                              for seq in batch))
                denied = []
                for seq, reply in zip(batch, replies, strict=True):
                    if isinstance(reply, RespError):
                        assert str(reply) == OOM, reply
                        denied.append(seq)
                        continue
                    assert reply not in acked, reply
                    acked[reply] = b"%d" % seq
                    if ooms:
                        after_oom += 1
                    else:
                        before_oom += 1
                if denied:
                    ooms += len(denied)
                    consumer.deleting.set()
                    pending.extendleft(reversed(denied))
                enough = after_oom > before_oom
                if enough and not pending:
                    break
                if len(denied) == len(batch):  # nothing taken: the consumer must free some first
                    stalls += 1
                    assert stalls <= MAX_STALLS and consumer.failure is None, \
                        (stalls, consumer.failure, consumer.deleted, fields(producer, "memory"))
                    seen = consumer.wait_round(seen)
            else:
                pytest.fail(f"the producer did not finish in {MAX_ROUNDS} pipelines: {ooms} "
                            f"refused, {before_oom} taken before the first OOM, {after_oom} after")
        finally:
            consumer.done.set()
            reader.join(120)
            consumer.conn.close()
        assert not reader.is_alive(), "the consumer did not end"
        assert consumer.failure is None, consumer.failure
        check_flood(producer, consumer, acked, ooms, before_oom, after_oom)


def check_flood(producer: RespClient, consumer: Consumer, acked: dict[bytes, bytes], ooms: int,
                before_oom: int, after_oom: int) -> None:
    """The flood's outcome (see the module's docstring), once the consumer has drained it."""
    # Refused, then served again: more than the whole headroom's worth after the first OOM.
    assert ooms > 0
    assert after_oom > before_oom > 0
    # Reads, acknowledgements and deletions were never refused (nor failed otherwise).
    assert consumer.errors == []
    # Nothing acknowledged was lost, nothing refused was added, nothing was read twice.
    remaining = {entry_id: dict(zip(values[::2], values[1::2], strict=True))[b"n"]
                 for entry_id, values in producer.execute("XRANGE", "flood", "-", "+")}
    assert consumer.duplicates == []
    assert set(acked) <= set(consumer.read) | set(remaining)
    assert {**consumer.read, **remaining} == acked
    assert sorted(int(seq) for seq in acked.values()) == list(range(len(acked)))
    assert producer.execute("XPENDING", "flood", "g")[0] == 0
    stats = fields(producer, "stats")
    assert stats["evicted_keys"] == "0"
    xadd = fields(producer, "commandstats")["cmdstat_xadd"]
    assert f"rejected_calls={ooms}," in xadd, xadd
    for name in ("xreadgroup", "xack", "xdel"):
        assert "rejected_calls=0," in fields(producer, "commandstats")[f"cmdstat_{name}"]


def refused(conn: RespClient, *argv: str | bytes) -> None:
    reply = conn.pipeline(argv)[0]
    assert isinstance(reply, RespError) and str(reply) == OOM, (argv[:2], reply)


def test_over_the_limit_big_values_and_store_commands_are_refused(server: ServeProcess) -> None:
    with RespClient("127.0.0.1", server.port, timeout=60) as conn:
        assert conn.execute("SET", "s", "small") == "OK"
        assert conn.execute("SADD", "a", *(f"m{i}" for i in range(50))) == 50
        assert conn.execute("SADD", "b", *(f"m{i}" for i in range(25, 75))) == 50
        assert conn.execute("ZADD", "z", *(x for i in range(50) for x in (str(i), f"m{i}"))) == 50
        limit = set_headroom(conn, 2 * MB)
        # One write taken under the limit takes memory a MB past it (Redis checks before a
        # command): over it by far more than anything else moves.
        assert conn.execute("SETRANGE", "pad", str(3 * MB), "x") == 3 * MB + 1
        assert used_memory(conn) > limit + MB // 2
        keys = conn.execute("DBSIZE")
        big = b"B" * (4 * MB)  # larger than all the room the limit left
        refused(conn, "SET", "big", big)
        refused(conn, "APPEND", "s", big)
        refused(conn, "SET", "s", "tiny")
        refused(conn, "APPEND", "s", "!")
        refused(conn, "SETRANGE", "s", "0", "x")
        refused(conn, "SUNIONSTORE", "dst", "a", "b")
        refused(conn, "SUNIONSTORE", "dst", "a")
        refused(conn, "SUNIONSTORE", "a", "nokey")  # (it would only have deleted a)
        refused(conn, "ZRANGESTORE", "dst2", "z", "0", "-1")
        refused(conn, "ZRANGESTORE", "dst2", "z", "0", "0")
        refused(conn, "ZRANGESTORE", "z", "nokey", "0", "-1")
        # None of them changed anything; reads and DEL still run.
        assert conn.execute("DBSIZE") == keys
        assert conn.execute("EXISTS", "big", "dst", "dst2") == 0
        assert conn.execute("GET", "s") == b"small"
        assert conn.execute("SCARD", "a") == 50
        assert len(conn.execute("SUNION", "a", "b")) == 75
        assert conn.execute("ZCARD", "z") == 50
        assert conn.execute("DEL", "pad") == 1
        # Room again: the same writes are taken.
        assert conn.execute("SUNIONSTORE", "dst", "a", "b") == 75
        assert conn.execute("ZRANGESTORE", "dst2", "z", "0", "-1") == 50
        assert conn.execute("APPEND", "s", "!") == 6
        assert b"\r\nevicted_keys:0\r\n" in conn.execute("INFO", "stats")


def test_one_write_may_cross_the_limit_and_the_next_is_refused(server: ServeProcess) -> None:
    """The limit is looked at before a command runs (Redis's processCommand). A SET whose own
    value is larger than the room left is refused even under the limit: its argument, read
    before it runs, already holds that memory (Redis's query buffer does too). A small command
    that makes a big value (SETRANGE far out) is taken under the limit, and crosses it: the
    next denyoom command is refused until memory is back under it."""
    with RespClient("127.0.0.1", server.port, timeout=60) as conn:
        limit = set_headroom(conn, 2 * MB)
        with RespClient("127.0.0.1", server.port, timeout=60) as big:
            refused(big, "SET", "big", b"B" * (4 * MB))
        assert conn.execute("EXISTS", "big") == 0
        assert conn.execute("SETRANGE", "big", str(3 * MB), "x") == 3 * MB + 1
        assert used_memory(conn) > limit
        refused(conn, "SET", "k", "v")
        refused(conn, "APPEND", "big", "x")
        refused(conn, "SETRANGE", "k", "0", "x")
        assert conn.execute("STRLEN", "big") == 3 * MB + 1
        assert conn.execute("DEL", "big") == 1
        assert conn.execute("SET", "k", "v") == "OK"
        assert used_memory(conn) < limit


# --- an evicting primary's replica ------------------------------------------------------------

VALUE = b"v" * 1000
SET_BATCH = 500  # SETs per pipeline
MAX_BATCHES = 400  # 200,000 keys (about 200 MB) at most: far more than the limit needs
EVICTED_ENOUGH = 2000  # go on until this many keys went: several rounds of evictions


def stat(client: redis.Redis, name: str, section: str = "stats") -> int:
    return int(info(client, section)[name])


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    """`start(name, *serve_args)`: a `streamkeep serve` child on tmp_path/name; every one is
    killed and its files removed at the end."""
    started: list[ServeProcess] = []

    def spawn(name: str, *args: str) -> ServeProcess:
        started.append(ServeProcess(tmp_path / name, *args))
        return started[-1]

    try:
        yield spawn
    finally:
        for server in started:
            server.kill()
            server.remove_files()


def test_the_replica_applies_the_primarys_evictions_and_evicts_nothing(
        start: Callable[..., ServeProcess]) -> None:
    primary = start("p")
    replica = start("r", "--replicaof", "127.0.0.1", str(primary.port))
    p, r = primary.client(), replica.client()
    caught_up(p, r)
    # The replica is given a limit it is far over, which it must ignore.
    assert r.config_set("maxmemory-policy", "allkeys-lru")
    replica_limit = stat(r, "used_memory", "memory") // 2
    assert r.config_set("maxmemory", str(replica_limit))
    assert r.config_get("replica-ignore-maxmemory") == {"replica-ignore-maxmemory": "yes"}
    limit = stat(p, "used_memory", "memory") + HEADROOM
    assert p.config_set("maxmemory-policy", "allkeys-lru")
    assert p.config_set("maxmemory", str(limit))

    written = 0
    for _batch in range(MAX_BATCHES):
        pipe = p.pipeline(transaction=False)
        for i in range(written, written + SET_BATCH):
            pipe.set(b"key:%d" % i, VALUE)
        replies = pipe.execute(raise_on_error=False)
        assert replies == [True] * SET_BATCH, {str(x) for x in replies if x is not True}
        written += SET_BATCH
        assert r.get(b"key:0") in (VALUE, None)  # (a read on the replica: nothing evicts)
        if stat(p, "evicted_keys") >= EVICTED_ENOUGH:
            break
    else:
        pytest.fail(f"{written} keys of {len(VALUE)} bytes written, "
                    f"{stat(p, 'evicted_keys')} evicted under maxmemory {limit}: "
                    f"used_memory {stat(p, 'used_memory', 'memory')}")

    # The primary stayed within its limit: at most a command's worth over it. Then the limit
    # goes, so that no eviction happens while the counts below are read.
    assert stat(p, "used_memory", "memory") < limit + MB
    assert p.config_set("maxmemory", "0")

    digest = caught_up(p, r)
    assert digest == r.execute_command("DEBUG", "DIGEST")
    evicted, kept = stat(p, "evicted_keys"), p.dbsize()
    assert evicted + kept == written  # every key written once: each went by eviction or is kept
    assert kept * len(VALUE) < HEADROOM  # (what it kept fit in the headroom)
    assert r.dbsize() == kept
    assert int(info(r)["master_repl_offset"]) == int(info(p)["master_repl_offset"])
    # The replica was over its own limit all along, and evicted nothing.
    assert stat(r, "evicted_keys") == 0
    assert r.config_get("maxmemory") == {"maxmemory": str(replica_limit)}
    assert stat(r, "used_memory", "memory") > replica_limit


def test_tenacity_bounds_one_command_s_evictions_as_redis_does() -> None:
    assert time_limit_ns(10) == 500_000 and time_limit_ns(0) == 0
    assert time_limit_ns(11) == int(500_000 * 1.15)
    assert time_limit_ns(100) is None
