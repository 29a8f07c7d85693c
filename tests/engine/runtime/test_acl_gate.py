"""The ACL gate (engine.runtime.acl_gate) end to end: an in-process server, redis-py clients
logged in as users with the rules an operator gives a producer, a worker, a read-only reader,
a Pub/Sub user; every refusal's line (Redis 7.2+/8.x's), its ACL LOG entry, and where the check
happens: before a command runs, before MULTI queues it (EXEC then aborts), again at EXEC (the
rules changed meanwhile), at each of a script's redis.call, at a blocked read's re-run. Also
AUTH and HELLO with users, the default user turned off, requirepass as the default user's
password, CLIENT LIST's user=, CLIENT KILL USER and ACL DELUSER closing a user's connections.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from streamkeep import Engine
from tests.support.server_util import ServerHandle, start_server

KEY_DENIED = "No permissions to access a key"
CHANNEL_DENIED = "No permissions to access a channel"


def command_denied(user: str, command: str) -> str:
    return f"User {user} has no permissions to run the '{command}' command"


@pytest.fixture
def served() -> Iterator[ServerHandle]:
    handle = start_server(Engine.open())
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture
def admin(served: ServerHandle) -> Iterator[redis.Redis]:
    client = redis.Redis(port=served.port, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def login(served: ServerHandle) -> Iterator[Callable[..., redis.Redis]]:
    made: list[redis.Redis] = []

    def connect(user: str, password: str, **kwargs: Any) -> redis.Redis:
        client = redis.Redis(port=served.port, username=user, password=password,
                             decode_responses=True, retry=Retry(NoBackoff(), 0), **kwargs)
        made.append(client)
        return client

    yield connect
    for client in made:
        client.close()


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(redis.exceptions.NoPermissionError) as refused:
        call()
    return str(refused.value)


def test_a_producer_may_append_to_its_streams_only(admin, login) -> None:
    admin.acl_setuser("producer", enabled=True, passwords=["+p1"], keys=["orders:*"],
                      commands=["+xadd"])
    producer = login("producer", "p1")
    assert producer.xadd("orders:eu", {"sku": "A"})
    assert _refused(lambda: producer.xadd("payments", {"n": "1"})) == KEY_DENIED
    assert _refused(lambda: producer.xrange("orders:eu")) == command_denied("producer", "xrange")
    assert admin.xlen("payments") == 0 and admin.xlen("orders:eu") == 1
    # (redis-py's CLIENT SETINFO at connect is refused and logged too, as by Redis)
    entries = [e for e in admin.acl_log() if e["object"] != "client|setinfo"]
    assert [(e["reason"], e["context"], e["object"], e["username"]) for e in entries] == [
        ("command", "toplevel", "xrange", "producer"), ("key", "toplevel", "payments",
                                                        "producer")]
    assert entries[0]["client-info"]["user"] == "producer"  # (redis-py parses the line)
    assert {"entry-id", "timestamp-created", "timestamp-last-updated"} <= set(entries[0])


def test_read_and_write_key_permissions_follow_the_key_specs(admin, login) -> None:
    """%R~ reads: XINFO and XRANGE pass, XADD does not; XREADGROUP only reads its key by
    Redis's key spec, so a reader may read through a group."""
    admin.xgroup_create("orders:eu", "shipping", id="0", mkstream=True)
    admin.xadd("orders:eu", {"sku": "A"})
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">r1", "%R~orders:*", "+@stream")
    reader = login("reader", "r1")
    assert reader.xinfo_stream("orders:eu")["length"] == 1
    assert len(reader.xrange("orders:eu")) == 1
    assert reader.xreadgroup("shipping", "w1", {"orders:eu": ">"})
    assert _refused(lambda: reader.xadd("orders:eu", {"n": "1"})) == KEY_DENIED
    assert _refused(lambda: reader.xinfo_stream("billing")) == KEY_DENIED


def test_a_group_or_consumer_named_streams_does_not_hide_the_keys_read(admin, login) -> None:
    """The keys XREADGROUP reads are found as the command parses its options: a consumer
    called STREAMS (where a keyword search of the key spec would start) or an option Redis 8
    added before STREAMS does not move the check onto other arguments."""
    for key in ("public:x", "secret"):
        admin.xgroup_create(key, "g", id="0", mkstream=True)
        admin.xadd(key, {"n": "1"})
    admin.execute_command("ACL", "SETUSER", "reader", "on", ">r1", "~public:*", "~STREAMS",
                          "+xreadgroup", "+xread")
    reader = login("reader", "r1")
    assert _refused(lambda: reader.execute_command(
        "XREADGROUP", "GROUP", "g", "STREAMS", "STREAMS", "public:x", "secret", ">",
        ">")) == KEY_DENIED
    assert _refused(lambda: reader.execute_command(
        "XREADGROUP", "GROUP", "g", "c", "CLAIM", "0", "STREAMS", "secret", ">")) == KEY_DENIED
    assert reader.execute_command("XREADGROUP", "GROUP", "g", "STREAMS", "STREAMS",
                                  "public:x", ">")
    assert admin.xpending("secret", "g")["pending"] == 0


def test_multi_refuses_at_queue_time_and_exec_checks_again(admin, login) -> None:
    admin.execute_command("ACL", "SETUSER", "tx", "on", ">t1", "~orders:*", "+@all")
    tx = login("tx", "t1")
    pipe = tx.pipeline(transaction=True)
    pipe.xadd("orders:eu", {"n": "1"}).xadd("payments", {"n": "1"})
    with pytest.raises(redis.exceptions.ResponseError) as aborted:  # (EXECABORT, annotated)
        pipe.execute()
    assert KEY_DENIED in str(aborted.value)
    assert admin.xlen("orders:eu") == 0
    # Queued while allowed, then the rules change before EXEC.
    raw = login("tx", "t1", single_connection_client=True)
    raw.execute_command("MULTI")
    raw.execute_command("XADD", "orders:eu", "*", "n", "2")
    admin.execute_command("ACL", "SETUSER", "tx", "-xadd")
    replies = raw.execute_command("EXEC")
    assert str(replies[0]) == ("ACLs rules changed between the moment the transaction was "
                               "accumulated and the EXEC call. This command is no longer "
                               "allowed for the following reason: no permission to execute "
                               "the command or subcommand")
    assert admin.acl_log(1)[0]["context"] == "multi"


def test_a_scripts_calls_run_with_the_callers_permissions(admin, login) -> None:
    admin.execute_command("ACL", "SETUSER", "scripter", "on", ">s1", "~orders:*", "+eval",
                          "+set", "+get")
    scripter = login("scripter", "s1")
    assert scripter.eval("return redis.call('set', KEYS[1], 'v')", 1, "orders:k") == "OK"
    with pytest.raises(redis.exceptions.ResponseError) as failed:
        scripter.eval("return redis.call('set', 'payments', 'v')", 0)
    assert str(failed.value).startswith(f"ACL failure in script: {KEY_DENIED}")
    with pytest.raises(redis.exceptions.ResponseError) as failed:
        scripter.eval("return redis.call('del', 'orders:k')", 0)
    assert str(failed.value).startswith("ACL failure in script: "
                                        + command_denied("scripter", "del"))
    assert admin.acl_log(1)[0]["context"] == "lua"
    assert admin.get("payments") is None


def test_channels_are_checked_for_publish_and_subscribe(admin, login) -> None:
    admin.execute_command("ACL", "SETUSER", "news", "on", ">n1", "resetchannels", "&news:*",
                          "+publish", "+subscribe", "+psubscribe")
    news = login("news", "n1")
    assert news.publish("news:today", "hi") == 0
    assert _refused(lambda: news.publish("gossip", "hi")) == CHANNEL_DENIED
    # A pattern must equal an allowed one, literally; a channel matches a pattern.
    assert _refused(lambda: news.execute_command("PSUBSCRIBE", "news:*x")) == CHANNEL_DENIED
    sub = news.pubsub()
    sub.subscribe("news:1")
    assert sub.get_message(timeout=5)["type"] == "subscribe"
    sub.close()


def test_authentication_with_users(admin, login, served: ServerHandle) -> None:
    admin.execute_command("ACL", "SETUSER", "alice", "on", ">a1", "+@all", "~*")
    with pytest.raises(redis.exceptions.AuthenticationError):
        login("alice", "wrong").ping()
    assert admin.acl_log(1)[0]["reason"] == "auth"
    alice = login("alice", "a1")
    assert alice.acl_whoami() == "alice"
    hello = redis.Redis(port=served.port, protocol=3, username="alice", password="a1",
                        decode_responses=True)
    assert hello.acl_whoami() == "alice"
    hello.close()
    assert any(c["user"] == "alice" for c in admin.client_list())
    # The default user off: a new connection must log in; requirepass gives it a password.
    admin.execute_command("ACL", "SETUSER", "default", "off")
    anonymous = redis.Redis(port=served.port, retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.exceptions.AuthenticationError):
        anonymous.ping()
    anonymous.close()
    assert alice.ping()
    alice.config_set("requirepass", "d1")
    alice.execute_command("ACL", "SETUSER", "default", "on")
    assert redis.Redis(port=served.port, password="d1").ping()


def test_client_kill_user_and_deluser_close_that_users_connections(admin, login) -> None:
    admin.execute_command("ACL", "SETUSER", "bob", "on", ">b1", "+@all", "~*")
    bob = login("bob", "b1", single_connection_client=True)
    assert bob.ping()
    assert admin.client_kill_filter(user="bob") == 1
    with pytest.raises(redis.exceptions.ConnectionError):
        bob.ping()
    carol = login("bob", "b1", single_connection_client=True)
    assert carol.ping()
    assert admin.acl_deluser("bob") == 1
    with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.AuthenticationError)):
        carol.ping()


def test_the_embedded_engine_has_no_users() -> None:
    engine = Engine.open()
    try:
        r = engine.redis()
        r.xadd("payments", {"n": "1"})
        assert engine.acl is None
    finally:
        engine.close()


def test_a_functions_calls_run_with_the_callers_permissions(admin, login) -> None:
    admin.function_load("#!lua name=shop\n"
                        "redis.register_function('put', function(keys, args)\n"
                        "  return redis.call('set', keys[1], args[1]) end)\n"
                        "redis.register_function('wipe', function(keys, args)\n"
                        "  return redis.call('set', 'payments', 'x') end)")
    admin.execute_command("ACL", "SETUSER", "caller", "on", ">c1", "~orders:*", "+fcall",
                          "+set")
    caller = login("caller", "c1")
    assert caller.fcall("put", 1, "orders:k", "v") == "OK"
    with pytest.raises(redis.exceptions.ResponseError) as failed:
        caller.fcall("wipe", 0)
    assert str(failed.value).startswith(f"ACL failure in script: {KEY_DENIED}")
    assert admin.get("payments") is None


def test_no_password_reaches_the_aof(tmp_path) -> None:
    """ACL SETUSER, AUTH and CONFIG SET requirepass change no data: nothing of them is logged,
    so no password is in the AOF (streamkeep aof dump reads those bytes)."""
    handle = start_server(Engine.open(str(tmp_path / "data")))
    try:
        r = redis.Redis(port=handle.port)
        r.execute_command("ACL", "SETUSER", "alice", "on", ">alice-secret-1", "+@all", "~*")
        r.config_set("requirepass", "default-secret-2")
        alice = redis.Redis(port=handle.port, username="alice", password="alice-secret-1")
        alice.xadd("orders", {"n": "1"})
        alice.close()
        r.close()
    finally:
        handle.stop()
    logged = b"".join(path.read_bytes() for path in (tmp_path / "data").rglob("*")
                      if path.is_file())
    assert b"orders" in logged
    assert b"alice-secret-1" not in logged and b"default-secret-2" not in logged


def test_a_replica_logs_in_with_masteruser(tmp_path) -> None:
    """The primary's default user off; the replica's link logs in as a user that may only
    replicate (+psync +replconf +ping), with masteruser and masterauth."""
    primary = start_server(Engine.open(str(tmp_path / "primary")))
    replica = None
    try:
        admin = redis.Redis(port=primary.port)
        admin.execute_command("ACL", "SETUSER", "admin", "on", ">a", "+@all", "~*", "&*")
        admin.execute_command("ACL", "SETUSER", "replicator", "on", ">rp", "+psync",
                              "+replconf", "+ping")
        admin.execute_command("ACL", "SETUSER", "default", "off")
        admin.close()
        writer = redis.Redis(port=primary.port, username="admin", password="a")
        writer.xadd("orders", {"n": "1"})
        replica = Engine.open(str(tmp_path / "replica"), masteruser="replicator",
                              masterauth="rp", replicaof=("127.0.0.1", primary.port))
        deadline = time.monotonic() + 20
        while replica.redis().xlen("orders") != 1:
            assert time.monotonic() < deadline, "the replica did not log in and sync"
            time.sleep(0.05)
        writer.close()
    finally:
        if replica is not None:
            replica.close()
        primary.stop()


def test_a_shared_directory_may_have_users_too(tmp_path) -> None:
    from streamkeep.engine.services.shared import SharedError

    with pytest.raises(SharedError, match="ACL SETUSER"):  # (its server's, not an opener's)
        Engine.open(str(tmp_path / "data"), shared=True, user="worker on >w1")
    engine = Engine.open(str(tmp_path / "data"), shared=True)
    try:
        r = engine.redis()
        r.execute_command("ACL", "SETUSER", "worker", "on", ">w1", "+@all", "~jobs:*")
        assert b"worker" in r.execute_command("ACL", "USERS")
    finally:
        engine.close()


def test_a_subscriber_whose_channels_are_revoked_is_disconnected(admin, login) -> None:
    admin.execute_command("ACL", "SETUSER", "listener", "on", ">l1", "resetchannels",
                          "&news:*", "+subscribe", "+ping")
    listener = login("listener", "l1")
    sub = listener.pubsub()
    sub.subscribe("news:1")
    assert sub.get_message(timeout=5)["type"] == "subscribe"
    admin.execute_command("ACL", "SETUSER", "listener", "+publish")  # channels unchanged
    assert admin.publish("news:1", "still") == 1
    admin.execute_command("ACL", "SETUSER", "listener", "resetchannels", "&other:*")
    assert admin.publish("news:1", "gone") == 0  # (Redis closes it: it may not read news:*)
    sub.close()
