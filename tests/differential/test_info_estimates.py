"""INFO's measured and estimated figures against a real redis-server: the scripts' memory fields
(their names and order, what makes them move), and a database's avg_ttl in the keyspace
section (the active expiry cycle's running estimate of its keys' TTLs).

The figures themselves are each server's own: Redis sizes its allocations (a 16K reply buffer
per client, its dict entries), streamkeep measures the Lua heap through lupa's allocator and its
objects with sys.getsizeof. So a test compares names, order and what changes a figure, and
avg_ttl's value within the second or so two servers' clocks and cycles differ by.

Where Redis 8.x differs from Debian's 7.0.15: 8.x prints the script fields as 7.0 does, in
the same order (7.0 introduced the used_memory_vm_*, used_memory_scripts_eval and FUNCTION
fields), and keeps avg_ttl's
estimate the same way (98% of the previous estimate per sampling pass, the first sample
whole), adding `subexpiry=` to the keyspace line. mem_clients_normal is not compared: 7.0
updates a client's figure from its cron, so a new connection shows 0 there, where 8.x updates
it after every command (updateClientMemUsageAndBucket).
"""

from __future__ import annotations

import time

import pytest

from tests.support.resp_client import RespClient

SCRIPT_FIELDS = ["used_memory_lua", "used_memory_vm_eval", "used_memory_lua_human",
                 "used_memory_scripts_eval", "number_of_cached_scripts", "number_of_functions",
                 "number_of_libraries", "used_memory_vm_functions", "used_memory_vm_total",
                 "used_memory_vm_total_human", "used_memory_functions", "used_memory_scripts",
                 "used_memory_scripts_human"]


def memory(client: RespClient) -> dict[str, str]:
    text = client.execute("INFO", "memory").decode()
    return dict(line.split(":", 1) for line in text.split("\r\n")[1:] if line)


def test_memory_fields_follow_redis_order(redis_raw: RespClient, sk: RespClient) -> None:
    theirs, ours = list(memory(redis_raw)), list(memory(sk))
    shared = [name for name in theirs if name in ours]
    assert [name for name in ours if name in theirs] == shared
    assert [name for name in theirs if name in SCRIPT_FIELDS] == SCRIPT_FIELDS
    assert [name for name in ours if name in SCRIPT_FIELDS] == SCRIPT_FIELDS


def test_script_fields_move_as_redis_does(redis_raw: RespClient, sk: RespClient) -> None:
    """Caching scripts adds to the cache's figure and count on both; the Lua heap is never
    0 once a script ran; SCRIPT FLUSH empties the cache."""
    for client in (redis_raw, sk):
        assert client.execute("SCRIPT", "FLUSH") == "OK"
        empty = memory(client)
        assert empty["number_of_cached_scripts"] == "0"
        client.execute("EVAL", "return 1", "0")
        one = memory(client)
        client.execute("EVAL", "return 'two'", "0")
        two = memory(client)
        assert [one["number_of_cached_scripts"], two["number_of_cached_scripts"]] == ["1", "2"]
        assert (int(empty["used_memory_scripts_eval"]) < int(one["used_memory_scripts_eval"])
                < int(two["used_memory_scripts_eval"]))
        assert int(two["used_memory_lua"]) > 0
        assert two["used_memory_vm_eval"] == two["used_memory_lua"]
        assert client.execute("SCRIPT", "FLUSH") == "OK"
        assert memory(client)["number_of_cached_scripts"] == "0"


def _avg_ttl(client: RespClient, db: int) -> int:
    text = client.execute("INFO", "keyspace").decode()
    line = next(line for line in text.split("\r\n") if line.startswith(f"db{db}:"))
    return int(dict(kv.split("=") for kv in line.split(":", 1)[1].split(","))["avg_ttl"])


def _wait_estimate(client: RespClient, db: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while (value := _avg_ttl(client, db)) == 0:
        assert time.monotonic() < deadline, "no active expiry cycle sampled the TTLs"
        time.sleep(0.05)
    return value


def test_avg_ttl_is_the_active_cycles_estimate(redis_raw: RespClient, sk: RespClient) -> None:
    """50 keys with a 100 s TTL: 0 until a cycle sampled them (ten cycles a second on both
    servers), then close to 100 s on both."""
    db = 9
    estimates = {}
    for name, client in (("redis", redis_raw), ("streamkeep", sk)):
        assert client.execute("SELECT", str(db)) == "OK"
        try:
            client.pipeline(*(("SET", f"ttl:{i}", "v", "EX", "100") for i in range(50)))
            estimates[name] = _wait_estimate(client, db)
        finally:
            client.execute("FLUSHDB")
    for value in estimates.values():
        assert 95_000 <= value <= 100_000, estimates
    assert abs(estimates["redis"] - estimates["streamkeep"]) < 3_000, estimates


def test_function_fields_move_as_redis_does(redis_raw: RespClient, sk: RespClient) -> None:
    """A library of two functions: counted on both, its code adds to used_memory_functions
    and to used_memory_scripts; FUNCTION FLUSH takes them away. (Redis's functions runtime
    exists from the start, about 33K: streamkeep's is made by the first library.)"""
    pytest.importorskip("streamkeep.engine.exec.functions")
    library = ("#!lua name=estimates\n"
               "redis.register_function('e1', function(keys, args) return 1 end)\n"
               "redis.register_function('e2', function(keys, args) return 2 end)")
    for client in (redis_raw, sk):
        assert client.execute("FUNCTION", "FLUSH") == "OK"
        before = memory(client)
        try:
            assert client.execute("FUNCTION", "LOAD", library) == b"estimates"
            after = memory(client)
        finally:
            client.execute("FUNCTION", "FLUSH")
        assert [after["number_of_functions"], after["number_of_libraries"]] == ["2", "1"]
        assert int(after["used_memory_functions"]) > int(before["used_memory_functions"])
        assert int(after["used_memory_vm_functions"]) > 0
        assert (int(after["used_memory_scripts"]) - int(after["used_memory_scripts_eval"])
                == int(after["used_memory_functions"]))
        assert (int(after["used_memory_vm_total"]) == int(after["used_memory_vm_eval"])
                + int(after["used_memory_vm_functions"]))
        flushed = memory(client)
        assert [flushed["number_of_functions"], flushed["number_of_libraries"]] == ["0", "0"]
