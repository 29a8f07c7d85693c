"""Replication between real `streamkeep serve` processes on loopback: a primary, two replicas
of it and one chained replica (a replica of a replica), shared by the module.

A seeded workload of every stream write (XADD with trims, XREADGROUP, XACK, XCLAIM, XAUTOCLAIM,
XDEL, XTRIM, group changes) runs on the primary; every replica must end with the same
`DEBUG DIGEST` and answer reads with the same bytes. Replicas refuse writes with Redis's
READONLY line, serve blocking reads woken by replicated entries, and WAIT / WAITAOF count them.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from streamkeep.replication.link import NOT_STREAMKEEP
from tests.support.replication_util import caught_up, drive, info, wait_for
from tests.support.resp_client import RespClient
from tests.support.serve_process import ServeProcess

READONLY = "You can't write against a read only replica."


class Cluster:
    def __init__(self, root: Path) -> None:
        self.primary = ServeProcess(root / "p")
        self.replicas = [ServeProcess(root / f"r{i}", "--replicaof", "127.0.0.1",
                                      str(self.primary.port)) for i in range(2)]
        self.chained = ServeProcess(root / "c", "--replicaof", "127.0.0.1",
                                    str(self.replicas[0].port))
        self.p = self.primary.client()
        self.r = [r.client() for r in self.replicas]
        self.c = self.chained.client()

    def all(self) -> list[ServeProcess]:
        return [self.primary, *self.replicas, self.chained]

    def sync(self) -> bytes:
        digest = caught_up(self.p, self.r[0])
        assert caught_up(self.p, self.r[1]) == digest
        assert caught_up(self.r[0], self.c) == digest
        return digest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("replication"))
    try:
        yield c
    finally:
        for proc in c.all():
            proc.kill()


def test_every_write_reaches_every_replica_with_the_same_state(cluster: Cluster) -> None:
    drive(cluster.p, seed=7, start=0, stop=3000)
    digest = cluster.sync()
    assert digest == cluster.p.execute_command("DEBUG", "DIGEST")
    for key in ("s1", "s2", "s3"):
        raw = [RespClient(proc.host, proc.port) for proc in cluster.all()]
        try:
            for argv in (["XRANGE", key, "-", "+"], ["XINFO", "STREAM", key, "FULL"],
                         ["XPENDING", key, "g1"], ["XINFO", "GROUPS", key]):
                replies = {repr(c.pipeline(tuple(argv))[0]) for c in raw}
                assert len(replies) == 1, argv
        finally:
            for c in raw:
                c.close()


def test_replicas_refuse_every_write_with_readonly(cluster: Cluster) -> None:
    cluster.p.xadd("ro", {"f": "v"})
    cluster.p.xgroup_create("ro", "g", "0")
    cluster.sync()
    for replica in (cluster.r[0], cluster.c):
        for argv in (["XADD", "ro", "*", "f", "v"], ["XREADGROUP", "GROUP", "g", "c", "STREAMS",
                                                     "ro", ">"],
                     ["XACK", "ro", "g", "0-1"], ["XGROUP", "CREATE", "ro", "g2", "$"],
                     ["XDEL", "ro", "0-1"], ["XTRIM", "ro", "MAXLEN", "0"], ["DEL", "ro"]):
            with pytest.raises(redis.ReadOnlyError, match=READONLY):
                replica.execute_command(*argv)
        pipe = replica.pipeline(transaction=True)
        pipe.xadd("ro", {"f": "v"})
        with pytest.raises((redis.ReadOnlyError, redis.ResponseError)):
            pipe.execute()
        assert replica.xlen("ro") == 1  # reads are served


def test_a_blocked_xread_on_a_replica_wakes_on_a_replicated_entry(cluster: Cluster) -> None:
    cluster.p.xadd("wake", {"f": "0"})
    cluster.sync()
    got: list = []

    def read() -> None:
        got.append(cluster.replicas[1].client().xread({"wake": "$"}, block=10_000))

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(0.3)
    entry_id = cluster.p.xadd("wake", {"f": "1"})
    reader.join(10)
    assert got and got[0][0][1][0][0] == entry_id


def test_wait_counts_the_replicas_that_acknowledged(cluster: Cluster) -> None:
    cluster.sync()
    cluster.p.xadd("w", {"f": "v"})
    assert cluster.p.execute_command("WAIT", 2, 5000) == 2
    assert cluster.p.execute_command("WAIT", 0, 0) == 2
    began = time.monotonic()
    assert cluster.p.execute_command("WAIT", 3, 300) == 2  # only two follow the primary
    assert 0.25 <= time.monotonic() - began < 5
    assert cluster.p.execute_command("WAITAOF", 1, 2, 5000) == [1, 2]
    # A chained replica acknowledges to its own primary.
    assert cluster.r[0].execute_command("ROLE")[0] == b"slave"
    with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica"):
        cluster.r[0].execute_command("WAIT", 1, 100)
    with pytest.raises(redis.ResponseError, match="WAITAOF cannot be used with replica"):
        cluster.r[0].execute_command("WAITAOF", 0, 1, 100)


def test_role_and_info_replication(cluster: Cluster) -> None:
    lsn = cluster.sync() and int(info(cluster.p)["master_repl_offset"])
    role = cluster.p.execute_command("ROLE")
    assert role[0] == b"master" and role[1] == lsn
    assert sorted(int(r[1]) for r in role[2]) == sorted(r.port for r in cluster.replicas)
    fields = info(cluster.p)
    assert fields["role"] == "master" and fields["connected_slaves"] == "2"
    assert "state=online" in fields["slave0"]
    # Replicas acknowledge every second (and on GETACK): their offsets reach ours.
    wait_for(lambda: all(f"offset={lsn}," in info(cluster.p)[f"slave{i}"] for i in (0, 1)),
             15, "the replicas' acknowledgements")
    replica = info(cluster.r[1])
    assert replica["role"] == "slave" and replica["master_port"] == str(cluster.primary.port)
    assert replica["master_link_status"] == "up" and replica["master_sync_in_progress"] == "0"
    assert replica["slave_repl_offset"] == str(lsn)
    assert replica["master_replid"] == fields["master_replid"]
    role = cluster.r[1].execute_command("ROLE")
    assert role == [b"slave", b"127.0.0.1", cluster.primary.port, b"connected", lsn]
    stats = info(cluster.p, "stats")
    assert int(stats["sync_full"]) >= 2 and "sync_partial_ok" in stats
    assert cluster.r[1].config_get("replicaof")["replicaof"] == \
        f"127.0.0.1 {cluster.primary.port}"


def test_a_replica_that_does_not_speak_the_record_stream_is_refused(cluster: Cluster) -> None:
    # What redis-server sends as a replica: it gets an error, never bytes it cannot parse.
    with socket.create_connection((cluster.primary.host, cluster.primary.port), 5) as sock:
        sock.sendall(b"REPLCONF capa eof capa psync2\r\n")
        assert sock.recv(100) == b"+OK\r\n"
        sock.sendall(b"PSYNC ? -1\r\n")
        assert sock.recv(1000) == f"-{NOT_STREAMKEEP}\r\n".encode()


def test_a_redis_server_pointed_at_streamkeep_is_refused_clearly(
        cluster: Cluster, tmp_path: Path) -> None:
    import subprocess

    from streamkeep.tools.servers import free_port

    port = free_port()
    logfile = tmp_path / "redis.log"  # a file, not a pipe: it logs every (quick) retry
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path),
                             "--logfile", str(logfile),
                             "--replicaof", "127.0.0.1", str(cluster.primary.port)])
    try:
        r = redis.Redis(host="127.0.0.1", port=port)
        wait_for(lambda: r.ping(), 10, "redis-server")
        time.sleep(1.5)
        assert info(r)["master_link_status"] == "down"
        assert r.dbsize() == 0
    finally:
        proc.kill()
        proc.wait(10)
    out = logfile.read_text()
    assert "this primary is streamkeep" in out, out[-2000:]


def test_replicaof_itself_is_refused(cluster: Cluster) -> None:
    with pytest.raises(redis.ResponseError, match="its own replica"):
        cluster.p.execute_command("REPLICAOF", "127.0.0.1", cluster.primary.port)
    assert cluster.p.execute_command("ROLE")[0] == b"master"
    assert cluster.r[0].execute_command("REPLICAOF", "127.0.0.1", cluster.primary.port) == \
        b"OK Already connected to specified master"
