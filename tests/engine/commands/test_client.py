"""CLIENT (engine.commands.client): on an embedded engine, and through the in-process server
(names, SETINFO, LIST and INFO, KILL), with error lines and names compared with the real
redis-server.
"""

from __future__ import annotations

import time

import pytest
import redis

from streamkeep import Engine
from tests.support.diffutil import err
from tests.support.resp_client import RespClient, RespError
from tests.support.server_util import ServerHandle, connect


def closed_by_server(client: RespClient, timeout: float = 5.0) -> bool:
    """True once the server has closed the connection (EOF on a read)."""
    client.settimeout(timeout)
    try:
        client.read()
    except TimeoutError:
        return False
    except ConnectionError:  # EOF ("connection closed by server") or a reset
        return True
    return False


# --- CLIENT ----------------------------------------------------------------------------------


def test_client_on_an_embedded_engine() -> None:
    engine = Engine()
    assert engine.execute("CLIENT", "ID") == 0
    assert engine.execute("CLIENT", "LIST") == b""
    assert engine.execute("CLIENT", "INFO") == b""
    assert engine.execute("CLIENT", "GETNAME") is None
    assert engine.execute("CLIENT", "SETNAME", "worker") == "OK"
    assert engine.execute("CLIENT", "GETNAME") == b"worker"
    assert engine.execute("CLIENT", "SETINFO", "lib-name", "mine") == "OK"
    assert err(engine, "CLIENT", "KILL", "127.0.0.1:1") == "ERR No such client"
    assert engine.execute("CLIENT", "KILL", "ID", "1") == 0
    assert engine.execute("CLIENT", "NO-EVICT", "on") == "OK"


@pytest.mark.parametrize("argv", [
    ("CLIENT", "SETNAME", "a b"),
    ("CLIENT", "SETNAME", "a\nb"),
    ("CLIENT", "KILL", "1.2.3.4:5"),
    ("CLIENT", "KILL", "ID", "abc"),
    ("CLIENT", "KILL", "ID", "0"),
    ("CLIENT", "KILL", "TYPE", "bogus"),
    ("CLIENT", "KILL", "foo", "bar"),
    ("CLIENT", "KILL", "SKIPME", "maybe"),
    ("CLIENT", "KILL", "ID", "1", "SKIPME"),
    ("CLIENT", "KILL"),
    ("CLIENT", "LIST", "TYPE", "bogus"),
    ("CLIENT", "LIST", "ID", "abc"),
    ("CLIENT", "LIST", "ID", "1", "x"),
    ("CLIENT", "LIST", "bogus"),
    ("CLIENT", "NO-EVICT", "maybe"),
    ("CLIENT", "GETNAME", "x"),
    ("CLIENT", "GETREDIR", "x"),
    ("CLIENT", "BOGUS"),
    ("CLIENT",),
])
def test_client_errors_match_redis(redis_raw: RespClient, sk: RespClient,
                                   argv: tuple[str, ...]) -> None:
    assert err(sk, *argv) == err(redis_raw, *argv)


def test_client_names_match_redis(redis_raw: RespClient, sk: RespClient) -> None:
    for client in (redis_raw, sk):
        assert client.execute("CLIENT", "GETNAME") is None
        assert client.execute("CLIENT", "SETNAME", "worker-1") == "OK"
        assert client.execute("CLIENT", "GETNAME") == b"worker-1"
        assert client.execute("CLIENT", "SETNAME", "") == "OK"
        assert client.execute("CLIENT", "GETNAME") is None
        assert isinstance(client.execute("CLIENT", "ID"), int)
        assert client.execute("CLIENT", "KILL", "ID", "999999") == 0
        assert client.execute("CLIENT", "KILL", "ADDR", "1.2.3.4:5", "SKIPME", "yes") == 0
        assert client.execute("CLIENT", "NO-EVICT", "off") == "OK"
        assert client.execute("CLIENT", "GETREDIR") == -1  # (tracking off)


def test_client_setinfo(sk: RespClient) -> None:
    assert sk.execute("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == "OK"
    assert sk.execute("CLIENT", "SETINFO", "lib-ver", "5.0") == "OK"
    assert b" lib-name=redis-py lib-ver=5.0\n" in sk.execute("CLIENT", "INFO")
    with pytest.raises(RespError, match="^ERR Unrecognized option 'foo'$"):
        sk.execute("CLIENT", "SETINFO", "foo", "bar")
    with pytest.raises(RespError, match="^ERR lib-name cannot contain spaces, newlines or "
                                        "special characters.$"):
        sk.execute("CLIENT", "SETINFO", "lib-name", "a b")
    assert sk.execute("CLIENT", "NO-TOUCH", "on") == "OK"


def test_client_list_and_info(served: ServerHandle) -> None:
    a, b = connect(served), connect(served)
    a.execute("CLIENT", "SETNAME", "alpha")
    a_id, b_id = a.execute("CLIENT", "ID"), b.execute("CLIENT", "ID")
    assert b_id > a_id > 0
    listing = b.execute("CLIENT", "LIST").decode()
    lines = listing.splitlines()
    assert listing.endswith("\n") and len(lines) == 2
    assert lines[0].startswith(f"id={a_id} addr=127.0.0.1:") and " name=alpha " in lines[0]
    me = b.execute("CLIENT", "INFO").decode()
    assert me.startswith(f"id={b_id} ") and me.endswith("\n")
    only_a = b.execute("CLIENT", "LIST", "ID", str(a_id), "999").decode().splitlines()
    assert len(only_a) == 1 and only_a[0].startswith(f"id={a_id} ")
    assert b.execute("CLIENT", "LIST", "TYPE", "pubsub") == b""
    assert len(b.execute("CLIENT", "LIST", "TYPE", "normal").decode().splitlines()) == 2
    r3 = redis.Redis(host=served.host, port=served.port, protocol=3)
    names = {c["name"] for c in r3.client_list()}
    assert "alpha" in names
    assert r3.client_info()["lib-name"] == "redis-py"  # redis-py's CLIENT SETINFO on connect
    r3.close()
    a.close()
    b.close()


def test_client_kill_other_connections(served: ServerHandle) -> None:
    killer, victim, bystander = connect(served), connect(served), connect(served)
    victim_id = victim.execute("CLIENT", "ID")
    victim_addr = next(line.split()[1][5:] for line in
                       killer.execute("CLIENT", "LIST").decode().splitlines()
                       if line.startswith(f"id={victim_id} "))
    assert killer.execute("CLIENT", "KILL", victim_addr) == "OK"
    assert closed_by_server(victim)
    assert err(killer, "CLIENT", "KILL", victim_addr) == "ERR No such client"
    bystander_id = bystander.execute("CLIENT", "ID")
    assert killer.execute("CLIENT", "KILL", "ID", str(bystander_id)) == 1
    assert closed_by_server(bystander)
    assert killer.execute("PING") == "PONG"  # SKIPME yes by default
    deadline = time.monotonic() + 5
    while len(served.server.clients) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(served.server.clients) == [killer.execute("CLIENT", "ID")]
    killer.close()


def test_client_kill_self_replies_first(served: ServerHandle) -> None:
    me, other = connect(served), connect(served)
    my_addr = me.execute("CLIENT", "INFO").decode().split()[1][5:]
    assert me.execute("CLIENT", "KILL", my_addr) == "OK"  # the reply arrives, then EOF
    assert closed_by_server(me)
    assert other.execute("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no") == 1
    assert closed_by_server(other)
    again = connect(served)
    assert again.execute("PING") == "PONG"
    assert again.execute("CLIENT", "KILL", "USER", "default") == 0  # only itself, skipped
    assert err(again, "CLIENT", "KILL", "USER", "bob") == "ERR No such user 'bob'"
    again.close()


def test_client_kill_maxage(served: ServerHandle) -> None:
    old, young = connect(served), connect(served)
    old.execute("PING")
    for client in served.server.clients.values():
        if client.id == 1:
            client.created -= 100  # connected 100 s ago
    assert young.execute("CLIENT", "KILL", "MAXAGE", "50") == 1
    assert closed_by_server(old)
    assert young.execute("PING") == "PONG"
    young.close()


def test_client_kill_a_blocked_client(served: ServerHandle) -> None:
    blocked, killer = connect(served), connect(served)
    blocked_id = blocked.execute("CLIENT", "ID")
    blocked.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    deadline = time.monotonic() + 5
    while "blocked_clients:1" not in killer.execute("INFO", "clients").decode():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert killer.execute("CLIENT", "KILL", "ID", str(blocked_id)) == 1
    assert closed_by_server(blocked)
    assert "blocked_clients:0" in killer.execute("INFO", "clients").decode()
    killer.close()
