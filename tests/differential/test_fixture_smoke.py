"""Smoke tests for the real-redis fixtures and the raw RESP client."""

from __future__ import annotations

import threading

import pytest
import redis

from tests.support.resp_client import RespError


def test_ping_is_simple_string(redis_raw):
    assert redis_raw.execute("PING") == "PONG"


def test_xadd_returns_bulk_bytes(redis_raw):
    reply = redis_raw.execute("XADD", "k", "1-1", "f", "v")
    assert reply == b"1-1"
    assert isinstance(reply, bytes)
    assert redis_raw.execute("XLEN", "k") == 1
    assert redis_raw.execute("XRANGE", "k", "-", "+") == [[b"1-1", [b"f", b"v"]]]
    assert redis_raw.execute("GET", "missing") is None


def test_error_line_is_exact(redis_raw):
    with pytest.raises(RespError) as excinfo:
        redis_raw.execute("XADD", "k")
    assert str(excinfo.value) == "ERR wrong number of arguments for 'xadd' command"
    assert excinfo.value.prefix == "ERR"
    # RespError is also a redis.ResponseError.
    with pytest.raises(redis.ResponseError):
        redis_raw.execute("XADD", "k")


def test_nested_errors_are_returned_not_raised(redis_raw):
    assert redis_raw.execute("MULTI") == "OK"
    assert redis_raw.execute("SET", "s", "x") == "QUEUED"
    assert redis_raw.execute("XLEN", "s") == "QUEUED"
    reply = redis_raw.execute("EXEC")
    assert reply[0] == "OK"
    assert isinstance(reply[1], RespError)
    assert reply[1].prefix == "WRONGTYPE"


def test_each_test_starts_empty(redis_raw):
    assert redis_raw.execute("DBSIZE") == 0
    redis_raw.execute("SET", "leftover", "1")


def test_redis_client_fixture(redis_client):
    assert redis_client.dbsize() == 0
    assert redis_client.xadd("s", {"a": "1"}, id="5-0") == b"5-0"


def test_blocking_read_across_connections(redis_raw_factory):
    reader = redis_raw_factory(timeout=10)
    writer = redis_raw_factory()
    reader.send("XREAD", "BLOCK", 5000, "STREAMS", "s", "$")
    # Wait until the reader is actually blocked before writing.
    result = {}

    def read():
        result["reply"] = reader.read()

    t = threading.Thread(target=read)
    t.start()
    for _ in range(200):
        clients = writer.execute("CLIENT", "LIST")
        if b"cmd=xread" in clients:
            break
        threading.Event().wait(0.01)
    writer.execute("XADD", "s", "7-0", "f", "v")
    t.join(timeout=10)
    assert result["reply"] == [[b"s", [[b"7-0", [b"f", b"v"]]]]]
