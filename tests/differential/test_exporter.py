"""Debian's prometheus-redis-exporter against a streamkeep primary and replica and a
redis-server primary and replica holding the same data (the same commands, sent to both): the
metric families it gives for each are counted (streamkeep must give at least 120, and those it
does not give are exactly the ones listed below, each with the reason it does not apply), and
the stream, persistence and replication families must carry the same values, but for the
exclusions listed, each with its reason (a time, a process id, a size that depends on the file
format, an offset counted in another unit).

The report (both counts, what is missing and why) is printed; run with `-s` to see it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.exporter import Exporters, Labels, Metrics
from tests.support.resp_client import RespClient

MIN_FAMILIES = 120

# Families the exporter gives for Redis and not for streamkeep: they describe what streamkeep
# has not.
NOT_APPLICABLE = {
    **dict.fromkeys(
        ["redis_allocator_active_bytes", "redis_allocator_allocated_bytes",
         "redis_allocator_frag_bytes", "redis_allocator_frag_ratio",
         "redis_allocator_resident_bytes", "redis_allocator_rss_bytes",
         "redis_allocator_rss_ratio"], "jemalloc's arenas: streamkeep allocates through "
                                       "pymalloc and the C allocator"),
    **dict.fromkeys(
        ["redis_active_defrag_running", "redis_defrag_hits", "redis_defrag_misses",
         "redis_defrag_key_hits", "redis_defrag_key_misses"], "no active defragmentation"),
    **dict.fromkeys(
        ["redis_rdb_last_cow_size_bytes", "redis_aof_last_cow_size_bytes",
         "redis_module_fork_in_progress", "redis_module_fork_last_cow_size"],
        "no fork: a compaction's build is a process of its own reading the files, no "
        "copy-on-write; no modules"),
    **dict.fromkeys(
        ["redis_tracking_total_items", "redis_tracking_total_keys",
         "redis_tracking_total_prefixes"], "no client-side caching (CLIENT TRACKING)"),
    "redis_migrate_cached_sockets_total": "no MIGRATE",
}

STREAM_FAMILIES = {
    "redis_stream_length", "redis_stream_radix_tree_keys", "redis_stream_radix_tree_nodes",
    "redis_stream_groups", "redis_stream_last_generated_id", "redis_stream_group_consumers",
    "redis_stream_group_messages_pending", "redis_stream_group_last_delivered_id",
    "redis_stream_group_consumer_messages_pending", "redis_stream_group_consumer_idle_seconds",
}
PERSISTENCE_FAMILIES = {
    "redis_loading_dump_file", "redis_rdb_changes_since_last_save",
    "redis_rdb_bgsave_in_progress", "redis_rdb_last_save_timestamp_seconds",
    "redis_rdb_last_bgsave_status", "redis_rdb_last_bgsave_duration_sec",
    "redis_rdb_current_bgsave_duration_sec", "redis_aof_enabled",
    "redis_aof_rewrite_in_progress", "redis_aof_rewrite_scheduled",
    "redis_aof_last_rewrite_duration_sec", "redis_aof_current_rewrite_duration_sec",
    "redis_aof_current_size_bytes", "redis_aof_base_size_bytes", "redis_aof_pending_rewrite",
    "redis_aof_buffer_length", "redis_aof_pending_bio_fsync", "redis_aof_delayed_fsync",
    "redis_aof_last_bgrewrite_status", "redis_aof_last_write_status",
}
REPLICATION_FAMILIES = {
    "redis_connected_slaves", "redis_connected_slave_offset_bytes",
    "redis_connected_slave_lag_seconds", "redis_master_repl_offset", "redis_second_repl_offset",
    "redis_repl_backlog_is_active", "redis_replication_backlog_bytes",
    "redis_repl_backlog_first_byte_offset", "redis_repl_backlog_history_bytes",
    "redis_replica_resyncs_full", "redis_replica_partial_resync_accepted",
    "redis_replica_partial_resync_denied", "redis_master_link_up",
    "redis_master_last_io_seconds_ago", "redis_master_sync_in_progress",
    "redis_slave_repl_offset", "redis_slave_info", "redis_slave_priority",
    "redis_slave_expires_tracked_keys", "redis_connected_clients",
}
# Compared for their labels only (which stream, group, replica...): the values are times or
# counted in a unit of their own.
LABELS_ONLY = {
    "redis_stream_group_consumer_idle_seconds": "a time",
    "redis_rdb_last_save_timestamp_seconds": "a time",
    "redis_rdb_last_bgsave_duration_sec": "a time (whole seconds the compaction took; checked "
                                          "to be >= 0 below)",
    "redis_aof_last_rewrite_duration_sec": "a time (as above)",
    "redis_aof_pending_bio_fsync": "a time: whether an everysec fsync is due at the scrape",
    "redis_aof_current_size_bytes": "the file format's size (streamkeep's records are not "
                                    "Redis's RESP commands)",
    "redis_aof_base_size_bytes": "the file format's size (a snapshot, not an RDB preamble)",
    "redis_connected_slave_offset_bytes": "streamkeep's offsets count records (LSNs), Redis's "
                                          "bytes of its replication stream",
    "redis_master_repl_offset": "the same unit (records, not bytes)",
    "redis_slave_repl_offset": "the same unit",
    "redis_repl_backlog_first_byte_offset": "the same unit",
    "redis_repl_backlog_history_bytes": "the same unit",
    "redis_replication_backlog_bytes": "Redis's is its repl-backlog-size setting; "
                                       "streamkeep's backlog is its AOF segments (their bytes)",
    "redis_connected_slave_lag_seconds": "a time",
    "redis_master_last_io_seconds_ago": "a time",
}
# The same, on the replicas only.
REPLICA_LABELS_ONLY = {
    "redis_rdb_changes_since_last_save":
        "streamkeep counts the records logged since its snapshot, one per write command; Redis "
        "counts changes, and a Redis replica one per command its primary propagates (an "
        "XREADGROUP of ten entries: ten XCLAIMs and more): equal on the primary, compared "
        "there after a save and three single XADDs",
}


def _wait(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _info(client: RespClient, section: str) -> dict[str, str]:
    text = client.execute("INFO", section)
    text = text.decode() if isinstance(text, bytes) else str(text)
    return dict(line.split(":", 1) for line in text.split("\r\n")
                if line and not line.startswith("#"))


# A script of two million table writes: about 0.1 s in either Lua 5.1, a latency spike over
# 10 ms on both servers.
SLOW_SCRIPT = "local t = {} for i = 1, 2000000 do t[i % 100 + 1] = i end return 1"


def _workload(client: RespClient) -> None:
    """The same data and history on both primaries; explicit IDs, so that the IDs (and the
    families built from them) are equal."""
    client.execute("CONFIG", "SET", "slowlog-log-slower-than", "0")
    client.execute("CONFIG", "SET", "latency-monitor-threshold", "10")
    for i in range(1, 251):  # three radix tree nodes: 100 entries a node
        client.pipeline(("XADD", "orders", f"1-{i}", "item", f"book {i}", "qty", str(i % 7)))
    client.execute("XADD", "events", "5-1", "kind", "start")
    client.execute("XGROUP", "CREATE", "orders", "shipping", "0")
    client.execute("XGROUP", "CREATE", "orders", "billing", "$")
    client.execute("XREADGROUP", "GROUP", "shipping", "alice", "COUNT", "10", "STREAMS",
                   "orders", ">")
    client.execute("XREADGROUP", "GROUP", "shipping", "bob", "COUNT", "5", "STREAMS",
                   "orders", ">")
    client.execute("XACK", "orders", "shipping", "1-1", "1-2", "1-11")
    client.execute("XGROUP", "CREATECONSUMER", "orders", "billing", "carol")
    client.execute("SET", "greeting", "hello")
    client.execute("SET", "session", "token", "EX", "3600")
    client.execute("GET", "greeting")
    client.execute("GET", "missing")
    client.execute("XRANGE", "orders", "-", "+", "COUNT", "3")
    client.execute("EVAL", SLOW_SCRIPT, "0")


def _persist(client: RespClient) -> None:
    """A rewrite, then a save (Redis's save resets the changes counted; a streamkeep
    compaction is both), then three more writes."""
    client.execute("BGREWRITEAOF")
    _wait(lambda: _info(client, "persistence")["aof_rewrite_in_progress"] == "0"
          and _info(client, "persistence")["aof_rewrite_scheduled"] == "0", "the rewrite")
    _wait(lambda: _bgsave(client), "a BGSAVE to start")
    _wait(lambda: _info(client, "persistence")["rdb_bgsave_in_progress"] == "0", "the save")
    for i in range(1, 4):
        client.execute("XADD", "events", f"6-{i}", "kind", "tick")


def _bgsave(client: RespClient) -> bool:
    try:
        client.execute("BGSAVE")
    except Exception:  # noqa: BLE001 - "a rewrite is in progress": try again
        return False
    return True


def _normalise(metrics: Metrics, ports: dict[str, str]) -> Metrics:
    """The servers' own ports in labels replaced by their role ("primary", "replica")."""
    out: Metrics = {}
    for family, samples in metrics.items():
        out[family] = {tuple((k, ports.get(v, v) if k.endswith("port") else v)
                             for k, v in labels): value for labels, value in samples.items()}
    return out


@pytest.fixture
def exporters(tmp_path: Path) -> Iterator[Exporters]:
    started = Exporters(tmp_path)
    try:
        yield started
    finally:
        started.close()


def test_exporter_families_and_values_match_redis(
        start_redis: Callable[..., Any], spawn: Callable[..., Any], exporters: Exporters,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    redis_primary = start_redis("--appendonly", "yes", "--appenddirname", "primary-aof",
                                "--dbfilename", "primary.rdb")
    redis_replica = start_redis("--appendonly", "yes", "--appenddirname", "replica-aof",
                                "--dbfilename", "replica.rdb", "--replicaof", "127.0.0.1",
                                str(redis_primary.port))
    sk_primary = spawn(tmp_path / "primary")
    sk_replica = spawn(tmp_path / "replica", "--replicaof", "127.0.0.1", str(sk_primary.port))
    ports = {
        "redis": (redis_primary.port, redis_replica.port),
        "streamkeep": (sk_primary.port, sk_replica.port),
    }
    clients = {name: [RespClient("127.0.0.1", p, timeout=60) for p in pair]
               for name, pair in ports.items()}
    try:
        for primary, replica in clients.values():
            _wait(lambda r=replica: _info(r, "replication").get("master_link_status") == "up",
                  "the replica's link")
            _workload(primary)
            _persist(primary)
            assert primary.execute("WAIT", "1", "10000") == 1
        for name, (primary, _replica) in clients.items():  # no longer -1 once they ran
            persistence = _info(primary, "persistence")
            assert int(persistence["aof_last_rewrite_time_sec"]) >= 0, name
            assert int(persistence["rdb_last_bgsave_time_sec"]) >= 0, name
    finally:
        for pair in clients.values():
            for client in pair:
                client.close()
    scraped: dict[str, list[Metrics]] = {}
    for name, pair in ports.items():
        roles = {str(pair[0]): "primary", str(pair[1]): "replica"}
        for port in pair:
            exporters.start(port)
        scraped[name] = [_normalise(exporters.scrape(port), roles) for port in pair]

    theirs, ours = scraped["redis"][0], scraped["streamkeep"][0]
    runtime = ("go_", "process_", "promhttp_")  # the exporter's Go runtime's, not the server's
    their_families = {f for f in theirs if not f.startswith(runtime)}
    our_families = {f for f in ours if not f.startswith(runtime)}
    missing = sorted(their_families - our_families)
    report = [f"prometheus-redis-exporter families (go_, process_, promhttp_ aside): "
              f"redis-server {len(their_families)}, streamkeep {len(our_families)}",
              f"streamkeep only: {sorted(our_families - their_families)}",
              "missing for streamkeep:"]
    report += [f"  {family}: {NOT_APPLICABLE.get(family, 'NOT EXPECTED')}" for family in missing]
    with capsys.disabled():
        print("\n" + "\n".join(report))
    assert len(our_families) >= MIN_FAMILIES, "\n".join(report)
    assert set(missing) == set(NOT_APPLICABLE), "\n".join(report)

    compared = STREAM_FAMILIES | PERSISTENCE_FAMILIES | REPLICATION_FAMILIES
    differences = []
    for role, index in (("primary", 0), ("replica", 1)):
        theirs, ours = scraped["redis"][index], scraped["streamkeep"][index]
        for family in sorted(compared):
            expected = theirs.get(family, {})
            got = ours.get(family, {})
            if family in LABELS_ONLY or (role == "replica" and family in REPLICA_LABELS_ONLY):
                expected, got = dict.fromkeys(expected, 0), dict.fromkeys(got, 0)
            if got != expected:
                differences.append(f"{role} {family}:\n  redis:      {_show(expected)}\n"
                                   f"  streamkeep: {_show(got)}")
        for family in ("redis_instance_info",):
            assert {_label(k, "role") for k in ours[family]} == {
                _label(k, "role") for k in theirs[family]}
    assert not differences, "\n".join(differences)
    # The equal families hold what the workload made (a check that they were compared).
    primary = scraped["streamkeep"][0]
    assert primary["redis_stream_length"][(("db", "db0"), ("stream", "orders"))] == 250
    assert primary["redis_rdb_changes_since_last_save"][()] == 3
    assert primary["redis_connected_slaves"][()] == 1
    assert scraped["streamkeep"][1]["redis_master_link_up"][
        (("master_host", "127.0.0.1"), ("master_port", "primary"))] == 1


def _label(labels: Labels, name: str) -> str:
    return dict(labels)[name]


def _show(samples: dict[Labels, float]) -> str:
    return ", ".join(f"{dict(k)}={v}" for k, v in sorted(samples.items())) or "(none)"
