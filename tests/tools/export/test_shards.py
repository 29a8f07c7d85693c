"""`streamkeep export --cluster` and `--shard` against real `streamkeep serve
--cluster-enabled yes` children: finding a cluster's shards (tools.export.shards), every bad
input refused in one line with its exit status before Spark starts, and (with Spark) a
3-primary cluster, keys of every type spread over the slots, exported in one job: its rows are
the union of each primary's directory exported alone, each with its node and the slot CLUSTER
KEYSLOT gives its key; the data source's `shards` option planning each shard as alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from redis.cluster import RedisCluster

from streamkeep.tools.export import shards
from streamkeep.tools.export.cli import EXIT_NODE, EXIT_USAGE
from streamkeep.tools.main import main
from streamkeep.tools.servers import free_port
from streamkeep.tools.value_tables import STREAM_TABLES, export_tables
from tests.support.typed_keys import FAR

# Spark's JVM starts once per module and its first jobs warm it up (a safety net against a
# hang, not a bound on how long a job may take).
pytestmark = pytest.mark.timeout(900)


def cluster(*args: str) -> None:
    made = subprocess.run([sys.executable, "-m", "streamkeep", "cluster", "create", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr


def export(*args: str) -> tuple[int, str]:
    """The real command's exit status and stderr."""
    done = subprocess.run([sys.executable, "-m", "streamkeep", "export", *args],
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, done.stderr


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("streamkeep export: ")
    return lines[0]


def myid(server: Any) -> str:
    return server.client().execute_command("CLUSTER", "MYID").decode()


def test_the_primaries_and_their_directories(spawn: Any, tmp_path: Path) -> None:
    servers = [spawn(tmp_path / f"n{i}", "--cluster-enabled", "yes") for i in range(4)]
    # two primaries, each with a replica (the last two nodes)
    cluster(*(f"127.0.0.1:{s.port}" for s in servers), "--replicas", "1")
    ids = [myid(s) for s in servers]
    found = shards.from_cluster(f"127.0.0.1:{servers[3].port}")  # asked of a replica
    assert [(s.node, s.address, s.role, s.slots, s.directory) for s in found] == [
        (ids[0], f"127.0.0.1:{servers[0].port}", "primary", ((0, 8191),),
         str(tmp_path / "n0")),
        (ids[1], f"127.0.0.1:{servers[1].port}", "primary", ((8192, 16383),),
         str(tmp_path / "n1"))]
    # The directory form: a replica's directory stands for its shard, once.
    given = shards.from_directories([str(tmp_path / "n2"), str(tmp_path / "n1")])
    assert [(s.node, s.role, s.slots) for s in given] == [
        (ids[2], "replica", ((0, 8191),)), (ids[1], "primary", ((8192, 16383),))]
    out = str(tmp_path / "out")
    status, err = export("--shard", str(tmp_path / "n0"), "--shard", str(tmp_path / "n2"),
                         "--out", out)
    assert status == EXIT_USAGE
    assert "hold the same shard" in one_line(err) and not os.path.exists(out)
    status, err = export("--shard", str(tmp_path / "n0"), "--shard", str(tmp_path / "n0"),
                         "--out", out)
    assert status == EXIT_USAGE and "given already" in one_line(err)
    # A primary down: named, with its slots and replica, and what to do instead.
    servers[1].kill()
    status, err = export("--cluster", f"127.0.0.1:{servers[0].port}", "--out", out)
    line = one_line(err)
    assert status == EXIT_NODE
    assert f"primary {ids[1]} at 127.0.0.1:{servers[1].port} (slots 8192-16383" in line
    assert f"replicas: 127.0.0.1:{servers[3].port}" in line and "--shard" in line
    assert not os.path.exists(out)


def test_bad_sources_are_one_line_each(spawn: Any, tmp_path: Path) -> None:
    node = spawn(tmp_path / "node", "--cluster-enabled", "yes")
    plain = spawn(tmp_path / "plain")
    out = str(tmp_path / "out")
    address = f"127.0.0.1:{node.port}"
    not_data = tmp_path / "not-data"
    not_data.mkdir()
    cases = [
        (["--cluster", f"127.0.0.1:{free_port()}"], EXIT_NODE, "cannot connect"),
        (["--cluster", f"127.0.0.1:{plain.port}"], EXIT_NODE, "cluster support disabled"),
        (["--cluster", "nowhere"], EXIT_USAGE, "--cluster nowhere: not HOST:PORT"),
        (["--shard", str(not_data)], EXIT_USAGE, "not a streamkeep data directory"),
        (["--shard", str(tmp_path / "missing")], EXIT_USAGE, "no such file or directory"),
        (["--shard", str(tmp_path / "plain")], EXIT_USAGE,
         "no nodes.conf: not a cluster node's data directory"),
        ([str(tmp_path / "node"), "--cluster", address], EXIT_USAGE,
         "DIR and --cluster name what to export twice"),
        ([], EXIT_USAGE, "give what to export"),
        (["--cluster", address, "--since-lsn", "3"], EXIT_USAGE,
         "an incremental export (--since, --since-lsn) reads one data directory"),
    ]
    for args, status, message in cases:
        got, err = export(*args, "--out", out)
        assert (got, message in one_line(err)) == (status, True), (args, err)
    assert not os.path.exists(out)
    # A cluster's manifest is no base for an incremental export.
    manifest = tmp_path / "cluster-manifest.json"
    manifest.write_text(json.dumps({"format": "streamkeep-export", "lsn": None,
                                    "shards": [{"node": "a" * 40, "lsn": 3}]}))
    got, err = export(str(tmp_path / "plain"), "--since", str(manifest), "--out", out)
    assert got == EXIT_USAGE and "a cluster's export (one LSN per shard)" in one_line(err)
    # A node whose directory is not where it says, seen from here (as from another machine).
    os.rename(tmp_path / "node", tmp_path / "moved")
    got, err = export("--cluster", address, "--out", out)
    assert got == EXIT_NODE
    assert f"keeps its data in {tmp_path / 'node'}, which is not a directory here" \
        in one_line(err)
    # ... or where another node's directory is.
    os.rename(tmp_path / "moved", tmp_path / "node")
    (tmp_path / "node" / "nodes.conf").write_text(
        (tmp_path / "node" / "nodes.conf").read_text().replace(myid(node), "f" * 40))
    got, err = export("--cluster", address, "--out", out)
    assert got == EXIT_NODE and f"holds node {'f' * 40}'s files" in one_line(err)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One session for the module: export uses a running session and leaves it running."""
    from pyspark import sql
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in [*sys.path, os.environ.get("PYTHONPATH", "")] if p)
    session = (sql.SparkSession.builder.master("local[2]").appName("streamkeep-cluster-export")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.extraJavaOptions",
                       "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .getOrCreate())
    yield session
    session.stop()


def fill(client: RedisCluster, first: int, count: int) -> None:
    """Keys of every type, spread over the slots (and some sharing a hash tag)."""
    for i in range(first, first + count):
        client.set(f"s:{i}", f"v{i}")
        client.zadd(f"z:{i % 11}", {f"m{i}": i / 3})
        client.hset(f"h:{i % 7}", f"f{i}", i)
        client.sadd(f"{{tag}}set:{i % 3}", f"e{i}")
        client.rpush(f"l:{i % 5}", f"x{i}")
        client.xadd(f"x:{i % 6}", {"n": str(i), "b": b"\xff"})
    client.pexpireat("s:1", FAR)
    client.pexpireat("{tag}set:1", FAR + 1)


def wait_for_snapshot(directory: Path) -> None:
    deadline = time.monotonic() + 60
    while not any(n.startswith("snapshot-") for n in os.listdir(directory)):
        assert time.monotonic() < deadline, "no compaction"
        time.sleep(0.1)


def frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


def rows(out: str, table: str) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(os.path.join(out, table)).to_pylist()


def row_set(found: list[dict[str, Any]], drop: tuple[str, ...] = ()) -> list[tuple]:
    """Rows as sorted tuples of their columns (a multiset: duplicates would show)."""
    return sorted(tuple((k, frozen(v)) for k, v in row.items() if k not in drop)
                  for row in found)


def test_a_cluster_exported_in_one_job_is_its_primaries_exported_alone(
        spark: Any, spawn: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    servers = [spawn(tmp_path / f"n{i}", "--cluster-enabled", "yes") for i in range(3)]
    cluster(*(f"127.0.0.1:{s.port}" for s in servers))
    client = RedisCluster(host="127.0.0.1", port=servers[0].port)
    try:
        fill(client, 0, 60)
        client.xgroup_create("x:1", "g", "0")
        client.xreadgroup("g", "alice", {"x:1": ">"}, count=4)
        servers[0].client().bgrewriteaof()  # one node: a snapshot and records after it
        wait_for_snapshot(tmp_path / "n0")
        fill(client, 60, 30)
        written = {key.decode(): client.type(key).decode() for key in client.scan_iter(
            count=1000, target_nodes=RedisCluster.ALL_NODES)}
    finally:
        client.close()
    ids = [s.client().execute_command("CLUSTER", "MYID").decode() for s in servers]
    directories = [str(tmp_path / f"n{i}") for i in range(3)]

    together = str(tmp_path / "cluster")
    assert main(["export", "--cluster", f"127.0.0.1:{servers[1].port}", "--out", together,
                 "--num-partitions", "2"]) == 0
    printed = capsys.readouterr().out
    assert sum(line.startswith("state ") for line in printed.splitlines()) == 3
    assert "export     3 shards as of LSN" in printed
    alone = []
    for i, directory in enumerate(directories):
        alone.append(str(tmp_path / f"alone{i}"))
        assert main(["export", directory, "--out", alone[-1], "--num-partitions", "2"]) == 0
    given = str(tmp_path / "given")
    assert main(["export", *(a for d in directories for a in ("--shard", d)), "--out", given,
                 "--num-partitions", "2"]) == 0

    manifest = json.loads(Path(together, "export-manifest.json").read_text())
    assert [(s["node"], s["address"], s["directory"], s["role"]) for s in manifest["shards"]] \
        == [(ids[i], f"127.0.0.1:{servers[i].port}", directories[i], "primary")
            for i in range(3)]
    for i, shard in enumerate(manifest["shards"]):
        single = json.loads(Path(alone[i], "export-manifest.json").read_text())
        assert (shard["lsn"], shard["positions"]) == (single["lsn"], single["positions"])
    counts = {t: v["rows"] for t, v in manifest["tables"].items()}
    assert counts["keys"] == len(written) and counts["entries"] == 90

    slots: dict[bytes, int] = {}
    for table in export_tables():
        cluster_rows = rows(together, table)
        # the union of the single exports, each row with the node whose directory held it
        union = [{**row, "node": ids[i]} for i in range(3) for row in rows(alone[i], table)]
        assert row_set(cluster_rows, ("slot",)) == row_set(union), table
        assert row_set(rows(given, table)) == row_set(cluster_rows), table
        key = "stream" if table in STREAM_TABLES else "key"
        for row in cluster_rows:
            assert slots.setdefault(row[key], row["slot"]) == row["slot"]
    # every key written, with its type, and its slot as the cluster says it
    keys = rows(together, "keys")
    assert {r["key"].decode(): r["type"] for r in keys} == written
    asked = servers[2].client()
    assert slots == {key: asked.execute_command("CLUSTER", "KEYSLOT", key) for key in slots}
    owner = {ids[i]: shard["slots"] for i, shard in enumerate(manifest["shards"])}
    assert all(any(a <= r["slot"] <= b for a, b in owner[r["node"]]) for r in keys)
    assert {r["expire_ms"] for r in keys if r["key"] in (b"s:1", b"{tag}set:1")} == {
        FAR, FAR + 1}
    # no pin left in any directory
    assert not [n for d in directories for n in os.listdir(d) if n.startswith("export-pin-")]



@pytest.fixture(scope="module")
def two_directories(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two compacted data directories of streams and strings (small nodes: several
    partitions each)."""
    from streamkeep import Engine

    paths = []
    for n in range(2):
        path = str(tmp_path_factory.mktemp("shards") / f"d{n}")
        engine = Engine.open(path, stream_node_max_entries=4)
        try:
            for i in range(40):
                engine.execute("XADD", f"st:{n}:{i % 5}", f"{i + 1}-0", "i", str(i))
                engine.execute("SET", f"k:{n}:{i}", str(i))
            assert engine.compact(wait=True) is not None
        finally:
            engine.close()
        paths.append(path)
    return paths


def test_the_shards_option_plans_each_shard_as_alone(spark: Any,
                                                     two_directories: list[str]) -> None:
    from streamkeep.engine.model.keyslot import key_slot
    from streamkeep.tools.export.datasource import StreamkeepDataSource

    spark.dataSource.register(StreamkeepDataSource)
    shards = json.dumps([two_directories[0], {"path": two_directories[1], "node": "second"}])

    def reader(table: str, **options: str) -> Any:
        r = spark.read.format("streamkeep").option("table", table).option("numPartitions", 3)
        for name, value in options.items():
            r = r.option(name, value)
        return r

    for table, key in (("entries", "stream"), ("strings", "key")):
        alone = [reader(table).load(path) for path in two_directories]
        both = reader(table).option("shards", shards).load()
        # one partition set per shard: as many partitions as the two reads alone
        assert both.rdd.getNumPartitions() == sum(df.rdd.getNumPartitions() for df in alone)
        labels = [two_directories[0], "second"]
        expected = sorted((*row, labels[i], key_slot(row[key])) for i, df in enumerate(alone)
                          for row in df.collect())
        assert sorted(tuple(row) for row in both.collect()) == expected
        for arrow in ("true", "false"):  # pruned: the place columns alone, and the key
            pruned = reader(table, arrow=arrow).schema(f"slot int, {key} binary, node string") \
                .option("shards", shards).load()
            assert sorted(tuple(r) for r in pruned.collect()) == sorted(
                (row[-1], row[1], row[-2]) for row in expected)
    for bad, message in (("[1]", "must be a JSON list of paths"), ("{", "is not JSON"),
                         ("[]", "names no shard")):
        with pytest.raises(Exception, match=message):
            reader("entries").option("shards", bad).load().collect()
    with pytest.raises(Exception, match="load.. takes no path with it"):
        reader("entries").option("shards", shards).load(two_directories[0]).collect()
