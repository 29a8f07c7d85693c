"""The network server (engine.server) end to end: real sockets, redis-py (sync and asyncio, RESP2
and RESP3), redis-cli and redis-benchmark against an in-process streamkeep server, with the real
redis-server as the oracle wherever the behaviour is Redis's (RESP3 shapes, redis-cli output,
transactions, blocking order, protocol errors).

Covers: pipelining, blocked reads across connections (timeouts, FIFO wake-ups, NOGROUP, clients
that go away, never blocking others), MULTI/EXEC/DISCARD/WATCH and the one-record EXEC in the
AOF, AUTH and protected mode, and the limits (maxclients, bulk length, query buffer, output
buffer, slow and malformed clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.retry import Retry

from streamkeep import Engine
from streamkeep.aof.codec import HEADER_SIZE, decode_header, scan
from streamkeep.engine.commands.connection import password_matches
from streamkeep.engine.server.network import DENIED, is_loopback
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser
from tests.support.diffutil import (
    IDMP_FIELDS,
    without_idmp_fields_cli,
    without_idmp_fields_resp,
)
from tests.support.resp_client import (
    RespClient,
    RespError,
    client_factory,
    encode_command,
    read_raw_reply,
)
from tests.support.server_util import ServerHandle, read_until_closed, start_server

TIMEOUT = 10.0
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOGROUP_READ = "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"


# --- fixtures and helpers ------------------------------------------------------------------------



@pytest.fixture
def connect(served) -> Iterator[Callable[..., RespClient]]:
    with client_factory(served, TIMEOUT) as factory:
        yield factory


def raw_socket(target: Any, timeout: float = TIMEOUT, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:  # before connect, so the window is small from the start
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect((target.host, target.port))
    return sock


def exchange_until_closed(target: Any, payload: bytes) -> bytes:
    with raw_socket(target) as sock:
        sock.sendall(payload)
        return read_until_closed(sock)


def raw_session(target: Any, *commands: tuple[Any, ...], protocol: int = 3) -> list[bytes]:
    """Each command's reply bytes on one connection (after HELLO `protocol`, whose reply is
    first)."""
    with socket.create_connection((target.host, target.port), timeout=TIMEOUT) as sock:
        f = sock.makefile("rb")
        out = []
        for argv in (("HELLO", protocol), *commands):
            sock.sendall(encode_command(*argv))
            out.append(read_raw_reply(f))
        return out


def parse_reply(data: bytes) -> Any:
    parser = ReplyParser()
    parser.feed(data)
    value = parser.next()
    assert value is not NEED_MORE and parser.pending_bytes() == 0, data
    return value


def wait_until(predicate: Callable[[], bool], timeout: float = TIMEOUT, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.002)


def ours_blocked(handle: ServerHandle) -> Callable[[int], None]:
    def wait(n: int) -> None:
        wait_until(lambda: handle.engine.waiting.blocked_clients() == n, what=f"{n} blocked clients")
    return wait


def redis_blocked(redis_server: Any) -> Callable[[int], None]:
    def blocked() -> int:
        with RespClient(redis_server.host, redis_server.port) as c:
            info = c.execute("INFO", "clients").decode()
        return int(info.split("blocked_clients:")[1].split()[0])

    def wait(n: int) -> None:
        wait_until(lambda: blocked() == n, what=f"{n} blocked redis clients")
    return wait


def outcome(client: RespClient, *argv: Any) -> Any:
    try:
        return client.execute(*argv)
    except RespError as err:
        return err


def config_set(client: RespClient, name: str, value: Any) -> None:
    assert client.execute("CONFIG", "SET", name, value) == "OK"


def has_input(sock_or_client: Any, wait: float = 0.05) -> bool:
    sock = getattr(sock_or_client, "_sock", sock_or_client)
    return bool(select.select([sock], [], [], wait)[0])


def served_client_count(handle: ServerHandle) -> int:
    return len(handle.server.clients)


# --- redis-py, sync and asyncio, RESP2 and RESP3 --------------------------------------------------


async def stream_scenario(call: Callable[..., Any]) -> list[Any]:
    """The stream methods of redis-py; explicit IDs so both servers' results are comparable."""
    out = [
        await call("xadd", "s", {"f": "1"}, id="1-1"),
        await call("xadd", "s", {"f": "2", "g": "x"}, id="1-2"),
        await call("xadd", "s", {"f": "3"}, id="2-0"),
        await call("xadd", "s", {"f": "4"}, id="3-0", maxlen=10, approximate=False),
        await call("xlen", "s"),
        await call("xrange", "s"),
        await call("xrange", "s", min="1-2", max="+", count=2),
        await call("xrevrange", "s", max="+", min="-", count=1),
        await call("xgroup_create", "s", "g", id="0"),
        await call("xreadgroup", "g", "alice", {"s": ">"}, count=2),
        await call("xreadgroup", "g", "bob", {"s": ">"}),
        await call("xreadgroup", "g", "bob", {"s": ">"}, block=50),
        await call("xread", {"s": "1-2"}, count=5),
    ]
    pending = await call("xpending_range", "s", "g", min="-", max="+", count=10)
    out.append([{k: v for k, v in p.items() if k != "time_since_delivered"} for p in pending])
    out.append(await call("xclaim", "s", "g", "bob", min_idle_time=0, message_ids=["1-1"]))
    out.append(await call("xclaim", "s", "g", "bob", min_idle_time=0, message_ids=["1-2"],
                          justid=True))
    out.append(await call("xautoclaim", "s", "g", "carol", min_idle_time=0, start_id="0-0",
                          count=1))
    out.append(await call("xack", "s", "g", "1-1", "2-0"))
    out.append(await call("xpending", "s", "g"))
    info = await call("xinfo_stream", "s")
    out.append({k: v for k, v in info.items() if k.encode() not in IDMP_FIELDS})  # 8.6: no 7.0
    out.append(await call("xdel", "s", "3-0"))
    out.append(await call("xtrim", "s", maxlen=2, approximate=False))
    out.append(await call("xrange", "s"))
    return out


def run_sync(client: redis.Redis) -> list[Any]:
    async def call(name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(client, name)(*args, **kwargs)

    try:
        return asyncio.run(stream_scenario(call))
    finally:
        client.close()


def run_async(host: str, port: int, protocol: int) -> list[Any]:
    async def main() -> list[Any]:
        client = redis.asyncio.Redis(host=host, port=port, protocol=protocol)

        async def call(name: str, *args: Any, **kwargs: Any) -> Any:
            return await getattr(client, name)(*args, **kwargs)

        try:
            return await stream_scenario(call)
        finally:
            await client.aclose()

    return asyncio.run(main())


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("flavour", ["sync", "asyncio"])
def test_redis_py_stream_methods(served, redis_raw, redis_server, flavour, protocol):
    def run(host: str, port: int) -> list[Any]:
        if flavour == "sync":
            return run_sync(redis.Redis(host=host, port=port, protocol=protocol))
        return run_async(host, port, protocol)

    ours = run(served.host, served.port)
    theirs = run(redis_server.host, redis_server.port)
    assert ours == theirs
    assert ours[0] == b"1-1" and ours[4] == 4
    assert [entry[0] for entry in ours[5]] == [b"1-1", b"1-2", b"2-0", b"3-0"]
    assert not ours[11]  # the BLOCK 50 read timed out (redis-py: [] or None)
    assert ours[-1] == [(b"1-2", {b"f": b"2", b"g": b"x"}), (b"2-0", {b"f": b"3"})]
    info = ours[19]
    assert info.get("length", info.get(b"length")) == 4
    if protocol == 3:  # RESP3 maps reach redis-py as dicts
        assert isinstance(ours[9], dict)


# --- RESP3 shapes, byte for byte against redis-server ----------------------------------------------


def test_resp3_reply_bytes_match_redis(served, redis_raw, redis_server):
    commands = [
        ("XADD", "s", "1-1", "f", "v"),
        ("XADD", "s", "1-2", "field", "value", "a", "b"),
        ("XADD", "t", "5-0", "x", "y"),
        ("XINFO", "STREAM", "s"),
        ("XREAD", "STREAMS", "s", "0"),
        ("XREAD", "COUNT", "1", "STREAMS", "s", "nokey", "t", "0", "0", "0"),
        ("XREAD", "BLOCK", "30", "STREAMS", "s", "$"),
        ("XGROUP", "CREATE", "s", "g", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "30", "STREAMS", "s", ">"),
        ("XRANGE", "s", "-", "+"),
        ("XPENDING", "s", "g"),
        ("XLEN", "nokey"),
        ("XADD", "s", "1-1", "f", "v"),
        ("PING",),
        ("ECHO", "hello"),
        ("XGROUP", "CREATE", "t", "g2", "0"),
        ("XREADGROUP", "GROUP", "g2", "c", "STREAMS", "t", ">"),
        ("XAUTOCLAIM", "t", "g2", "d", "0", "0-0", "JUSTID"),
        ("XCLAIM", "t", "g2", "e", "0", "5-0", "JUSTID"),
        ("XINFO", "GROUPS", "t"),
        ("MULTI",), ("XADD", "s", "1-1", "f", "v"), ("XLEN", "s"), ("EXEC",),
    ]
    ours = raw_session(served, *commands)
    theirs = raw_session(redis_server, *commands)
    assert ours[4].startswith(b"%16\r\n$6\r\nlength\r\n:2\r\n")  # XINFO STREAM: a map
    assert b"$13\r\nidmp-duration\r\n:100\r\n" in ours[4]  # 8.6's fields, not in 7.0
    ours[4] = without_idmp_fields_resp(ours[4])
    assert ours[1:] == theirs[1:]
    assert ours[5] == (b"%1\r\n$1\r\ns\r\n*2\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
                       b"*2\r\n$3\r\n1-2\r\n*4\r\n$5\r\nfield\r\n$5\r\nvalue\r\n$1\r\na\r\n"
                       b"$1\r\nb\r\n")
    assert ours[6].startswith(b"%2\r\n$1\r\ns\r\n")  # XREAD: a map, only keys with entries
    assert ours[7] == ours[10] == b"_\r\n"  # timeouts: RESP3 null
    # HELLO 3: the same map keys, protocol 3, a standalone master.
    hello_ours, hello_theirs = parse_reply(ours[0]), parse_reply(theirs[0])
    assert ours[0].startswith(b"%7\r\n")
    assert [k for k, _ in hello_ours.items] == [k for k, _ in hello_theirs.items] == [
        b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"]
    mine = dict(hello_ours.items)
    assert (mine[b"server"], mine[b"proto"], mine[b"mode"], mine[b"role"], mine[b"modules"]) \
        == (b"redis", 3, b"standalone", b"master", [])


def test_resp2_after_hello_2(served, redis_raw, redis_server):
    commands = [("XADD", "s", "1-1", "f", "v"), ("XINFO", "STREAM", "s"),
                ("XREAD", "STREAMS", "s", "0"), ("XREAD", "BLOCK", "20", "STREAMS", "s", "$")]
    ours = raw_session(served, *commands, protocol=2)
    theirs = raw_session(redis_server, *commands, protocol=2)
    assert ours[0].startswith(b"*14\r\n") and ours[2].startswith(b"*32\r\n")
    ours[2] = without_idmp_fields_resp(ours[2])  # 8.6's XINFO STREAM fields: not in 7.0
    assert ours[1:] == theirs[1:]
    assert ours[4] == b"*-1\r\n"


# --- redis-cli and redis-benchmark -----------------------------------------------------------------


def cli(target: Any, *args: str, stdin: str | None = None) -> str:
    """redis-cli's output (and its exit status when not 0)."""
    proc = subprocess.run(
        ["redis-cli", "-h", target.host, "-p", str(target.port), *args],
        input=stdin, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    return proc.stdout + proc.stderr + (f"[exit {proc.returncode}]" if proc.returncode else "")


def test_redis_cli_output_matches_redis(served, redis_raw, redis_server):
    outputs = {}
    for name, target in (("ours", served), ("theirs", redis_server)):
        out = [
            cli(target, "XADD", "s", "1-1", "name", "alice", "n", "1"),
            cli(target, "XADD", "s", "2-0", "name", "bob b"),
            cli(target, "XADD", "s", "1-1", "x", "y"),
            cli(target, "--no-raw", "XRANGE", "s", "-", "+"),
            cli(target, "--no-raw", "XADD", "s", "1-1", "x", "y"),
            cli(target, "--no-raw", "XREAD", "COUNT", "5", "STREAMS", "s", "0"),
            cli(target, "--no-raw", "XLEN", "s"),
            cli(target, "--no-raw", "XREAD", "BLOCK", "20", "STREAMS", "s", "$"),
            cli(target, "-3", "--no-raw", "XREAD", "STREAMS", "s", "0"),
            without_idmp_fields_cli(cli(target, "-3", "--no-raw", "XINFO", "STREAM", "s")),
            cli(target, "--no-raw", stdin="XLEN s\nXRANGE s - + COUNT 1\nPING\n"),
        ]
        outputs[name] = out
    assert outputs["ours"] == outputs["theirs"]
    ours = outputs["ours"]
    assert ours[0] == "1-1\n"
    assert ours[3] == ('1) 1) "1-1"\n   2) 1) "name"\n      2) "alice"\n      3) "n"\n'
                       '      4) "1"\n2) 1) "2-0"\n   2) 1) "name"\n      2) "bob b"\n')
    assert ours[4].startswith("(error) ERR The ID specified in XADD is equal or smaller")
    assert ours[7] == "(nil)\n"


def test_redis_cli_pipe_mass_insert(served):
    data = b"".join(encode_command("XADD", "mass", f"{i}-0", "f", str(i)) for i in range(1, 5001))
    data += encode_command("XADD", "mass", "1-0", "dup", "x")  # one error
    proc = subprocess.run(["redis-cli", "-h", served.host, "-p", str(served.port), "--pipe"],
                          input=data, capture_output=True, timeout=TIMEOUT, check=False)
    assert proc.stdout.endswith(b"errors: 1, replies: 5001\n"), proc
    assert served.engine.execute("XLEN", "mass") == 5000


def test_redis_benchmark_pipelined_xadd(served, connect):
    proc = subprocess.run(
        ["redis-benchmark", "-h", served.host, "-p", str(served.port), "-n", "2000", "-c", "4",
         "-P", "16", "-q", "XADD", "bench", "*", "f", "v"],
        capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert connect().execute("XLEN", "bench") == 2000


# --- pipelining ----------------------------------------------------------------------------------


def test_pipeline_of_1000_commands_in_one_write(served, connect):
    commands: list[tuple[Any, ...]] = []
    for i in range(1, 501):
        commands.append(("XADD", "s", f"{i}-1", "n", str(i)))
        commands.append(("XLEN", "s"))
    commands[500] = ("XADD", "s", "1-1", "dup", "x")  # an error in the middle keeps the order
    client = connect()
    replies = client.pipeline(*commands)
    assert len(replies) == 1000
    for i, (argv, reply) in enumerate(zip(commands, replies, strict=True)):
        if i == 500:
            assert isinstance(reply, RespError) and reply.prefix == "ERR"
        elif argv[0] == "XADD":
            assert reply == argv[2].encode()
        else:  # XLEN right after the XADD before it
            added = sum(1 for a in commands[: i + 1] if a[0] == "XADD") - (1 if i > 500 else 0)
            assert reply == added
    assert client.execute("XLEN", "s") == 499


def test_inline_and_multibulk_mixed_in_one_write(served):
    payload = (b"PING\r\n" + encode_command("XADD", "s", "1-1", "f", "v")
               + b"XLEN s\n" + b'ECHO "a\\x41b"\r\n' + b"\r\n" + encode_command("XLEN", "s"))
    with raw_socket(served) as sock:
        sock.sendall(payload)
        f = sock.makefile("rb")
        replies = [read_raw_reply(f) for _ in range(5)]
    assert replies == [b"+PONG\r\n", b"$3\r\n1-1\r\n", b":1\r\n", b"$3\r\naAb\r\n", b":1\r\n"]


# --- blocking reads --------------------------------------------------------------------------------


def test_block_timeouts_return_nil(served, connect):
    client = connect()
    client.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    for argv in (("XREAD", "BLOCK", "100", "STREAMS", "s", "$"),
                 ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "100", "STREAMS", "s", ">")):
        start = time.monotonic()
        assert client.execute(*argv) is None
        assert 0.09 <= time.monotonic() - start < 5
    assert served.engine.waiting.blocked_clients() == 0


def fifo_scenario(connect: Callable[[], RespClient], wait_blocked: Callable[[int], None]
                  ) -> list[Any]:
    producer = connect()
    producer.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    waiters = []
    for name in ("c1", "c2", "c3"):
        client = connect()
        client.send("XREADGROUP", "GROUP", "g", name, "COUNT", "1", "BLOCK", "0",
                    "STREAMS", "s", ">")
        waiters.append(client)
        wait_blocked(len(waiters))  # arrival order is c1, c2, c3
    replies = []
    for i, client in enumerate(waiters, 1):
        producer.execute("XADD", "s", f"{i}-0", "n", str(i))
        replies.append(client.read())
        wait_blocked(3 - i)
        assert not any(has_input(w) for w in waiters[i:])  # the others still wait
    pending = producer.execute("XPENDING", "s", "g", "-", "+", "10")
    replies.append([(p[0], p[1], p[3]) for p in pending])
    return replies


def test_blocked_clients_served_in_arrival_order(served, connect, redis_raw_factory,
                                                 redis_server):
    ours = fifo_scenario(connect, ours_blocked(served))
    theirs = fifo_scenario(redis_raw_factory, redis_blocked(redis_server))
    assert ours[3] == theirs[3] == [(b"1-0", b"c1", 1), (b"2-0", b"c2", 1), (b"3-0", b"c3", 1)]
    assert ours[:3] == theirs[:3] == [
        [[b"s", [[f"{i}-0".encode(), [b"n", str(i).encode()]]]]] for i in (1, 2, 3)]


@pytest.mark.parametrize("removal", [("XGROUP", "DESTROY", "s", "g"), ("DEL", "s")])
def test_blocked_xreadgroup_gets_nogroup(served, connect, removal):
    producer = connect()
    producer.execute("XADD", "s", "1-0", "f", "v")
    producer.execute("XGROUP", "CREATE", "s", "g", "$")
    waiter = connect()
    waiter.send("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    ours_blocked(served)(1)
    producer.execute(*removal)
    with pytest.raises(RespError) as err:
        waiter.read()
    assert str(err.value) == NOGROUP_READ
    assert served.engine.waiting.blocked_clients() == 0
    assert waiter.execute("PING") == "PONG"  # the connection goes on


def test_client_gone_while_blocked_is_forgotten(served, connect):
    producer = connect()
    producer.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    first, second = connect(), connect()
    for client, name in ((first, "c1"), (second, "c2")):
        client.send("XREADGROUP", "GROUP", "g", name, "COUNT", "1", "BLOCK", "0",
                    "STREAMS", "s", ">")
    wait_blocked = ours_blocked(served)
    wait_blocked(2)
    first.close()
    wait_blocked(1)  # the server noticed: c1's wait is gone
    producer.execute("XADD", "s", "1-0", "f", "v")
    assert second.read() == [[b"s", [[b"1-0", [b"f", b"v"]]]]]
    pending = producer.execute("XPENDING", "s", "g", "-", "+", "10")
    assert [(p[0], p[1]) for p in pending] == [(b"1-0", b"c2")]
    wait_until(lambda: served_client_count(served) == 2, what="c1 released")


def test_a_blocked_client_never_blocks_others(served, connect):
    blocked = connect()
    blocked.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    blocked.send("PING")  # queued behind the blocked read on the same connection
    ours_blocked(served)(1)
    other = connect(timeout=2)  # (a server blocked by the read would time this one out)
    assert other.execute("PING") == "PONG"
    assert other.execute("XADD", "elsewhere", "1-0", "f", "v") == b"1-0"
    assert other.execute("XLEN", "elsewhere") == 1
    assert not has_input(blocked, 0.1)  # its PING waits for the XREAD
    other.execute("XADD", "s", "7-0", "f", "v")
    assert blocked.read() == [[b"s", [[b"7-0", [b"f", b"v"]]]]]
    assert blocked.read() == "PONG"


# --- transactions --------------------------------------------------------------------------------


def transaction_script(a: RespClient, b: RespClient) -> list[Any]:
    out = []
    steps: list[tuple[RespClient, tuple[Any, ...]]] = [
        # A refused command while queueing aborts the EXEC.
        (a, ("MULTI",)), (a, ("XADD", "s", "1-1", "f", "v")), (a, ("XADD", "s")),
        (a, ("NOSUCHCMD", "x")), (a, ("XLEN", "s")), (a, ("EXEC",)), (a, ("XLEN", "s")),
        # Runtime errors are per-command replies; the rest runs.
        (a, ("MULTI",)), (a, ("XADD", "s", "1-1", "f", "v")), (a, ("XADD", "s", "1-1", "f", "v")),
        (a, ("XGROUP", "CREATE", "s", "g", "0")), (a, ("XGROUP", "CREATE", "s", "g", "0")),
        (a, ("XLEN", "s")), (a, ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s",
                                 ">")),
        (a, ("EXEC",)),
        # DISCARD, and the misuse errors.
        (a, ("MULTI",)), (a, ("XADD", "s", "2-1", "f", "v")), (a, ("DISCARD",)),
        (a, ("XLEN", "s")), (a, ("DISCARD",)), (a, ("EXEC",)), (a, ("MULTI",)), (a, ("MULTI",)),
        (a, ("WATCH", "s")), (a, ("DISCARD",)),
        # WATCH: another client's write makes EXEC return nil.
        (a, ("WATCH", "s")), (b, ("XADD", "s", "3-1", "f", "v")), (a, ("MULTI",)),
        (a, ("XADD", "s", "4-1", "f", "v")), (a, ("EXEC",)), (a, ("XLEN", "s")),
        # ... and an untouched watch lets it run; UNWATCH forgets.
        (a, ("WATCH", "s", "other")), (b, ("XADD", "other2", "1-1", "f", "v")), (a, ("MULTI",)),
        (a, ("XADD", "s", "4-1", "f", "v")), (a, ("EXEC",)),
        (a, ("WATCH", "s")), (b, ("XADD", "s", "5-1", "f", "v")), (a, ("UNWATCH",)),
        (a, ("MULTI",)), (a, ("XLEN", "s")), (a, ("EXEC",)),
        (a, ("MULTI",)), (a, ("EXEC",)),
    ]
    for client, argv in steps:
        out.append(outcome(client, *argv))
    return out


def test_transactions_match_redis(connect, redis_raw_factory):
    ours = transaction_script(connect(), connect())
    theirs = transaction_script(redis_raw_factory(), redis_raw_factory())
    assert ours == theirs
    assert str(ours[5]) == "EXECABORT Transaction discarded because of previous errors."
    assert ours[6] == 0
    exec_reply = ours[14]
    assert exec_reply[0] == b"1-1" and isinstance(exec_reply[1], RespError)
    assert exec_reply[2] == "OK" and str(exec_reply[3]).startswith("BUSYGROUP")
    assert exec_reply[4] == 1
    assert exec_reply[5] == [[b"s", [[b"1-1", [b"f", b"v"]]]]]  # BLOCK does not block in EXEC
    assert ours[29] is None and ours[30] == 2  # WATCH + another client's XADD
    assert ours[35] == [b"4-1"] and ours[41] == [4] and ours[43] == []


def test_exec_is_one_aof_record_and_survives_restart(tmp_path):
    path = tmp_path / "data"
    handle = start_server(Engine.open(str(path), appendfsync="always"))
    try:
        with RespClient(handle.host, handle.port, timeout=TIMEOUT) as c:
            assert c.execute("XADD", "before", "1-1", "f", "v") == b"1-1"
            assert c.execute("MULTI") == "OK"
            assert c.execute("XADD", "s", "1-1", "a", "1") == "QUEUED"
            assert c.execute("XADD", "s", "1-2", "b", "2") == "QUEUED"
            assert c.execute("XADD", "s", "1-0", "bad", "id") == "QUEUED"  # fails at EXEC
            reply = c.execute("EXEC")
            assert reply[:2] == [b"1-1", b"1-2"] and isinstance(reply[2], RespError)
            digest = c.execute("DEBUG", "DIGEST")
    finally:
        handle.stop()  # closes the engine
    segments = sorted(path.glob("segment-*.aof"))
    assert segments
    data = segments[-1].read_bytes()
    header = decode_header(data)
    result = scan(data, HEADER_SIZE, header.first_lsn)
    assert result.damage is None and result.end == len(data)
    effects = [[tuple(e[:3]) for e in rec[3]] for rec in result.records]
    assert effects == [[(b"XADD", b"before", b"1-1")],
                       [(b"XADD", b"s", b"1-1"), (b"XADD", b"s", b"1-2")]]
    handle = start_server(Engine.open(str(path)))
    try:
        with RespClient(handle.host, handle.port, timeout=TIMEOUT) as c:
            assert c.execute("DEBUG", "DIGEST") == digest
            assert [e[0] for e in c.execute("XRANGE", "s", "-", "+")] == [b"1-1", b"1-2"]
    finally:
        handle.stop()


def test_exec_with_wrong_arity_discards_the_transaction(connect, redis_raw_factory):
    def script(c: RespClient) -> list[Any]:
        return [outcome(c, *argv) for argv in (
            ("MULTI",), ("XADD", "s", "1-1", "f", "v"), ("EXEC", "x"), ("XLEN", "s"),
            ("EXEC", "x"), ("EXEC",))]

    ours, theirs = script(connect()), script(redis_raw_factory())
    assert str(theirs[2]) == ("EXECABORT Transaction discarded because of: wrong number of "
                              "arguments for 'exec' command")
    assert theirs[3] == 0 and str(theirs[5]) == "ERR EXEC without MULTI"
    assert ours == theirs


# --- AUTH and protected mode ---------------------------------------------------------------------


@pytest.fixture
def with_password() -> Iterator[ServerHandle]:
    handle = start_server(Engine(requirepass="s3cret pass"))
    try:
        yield handle
    finally:
        handle.stop()


def test_requirepass_gates_every_command_but_auth_hello_quit_reset(with_password, connect):
    c = connect(handle=with_password)
    for argv in (("PING",), ("XADD", "s", "*", "f", "v"), ("XLEN", "s"), ("DEBUG", "DIGEST"),
                 ("MULTI",), ("DISCARD",), ("SHUTDOWN",), ("SELECT", "1"),
                 ("XREAD", "BLOCK", "0", "STREAMS", "s", "$"), ("CONFIG", "SET", "maxclients",
                                                               "1")):
        assert str(outcome(c, *argv)) == NOAUTH, argv
    # Like Redis (processCommand), unknown commands and wrong arity are reported first.
    assert str(outcome(c, "NOSUCHCMD", "x")) == (
        "ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' ")
    assert str(outcome(c, "XLEN")) == "ERR wrong number of arguments for 'xlen' command"
    # Redis (rejectCommand) words a refused EXEC as a transaction abort.
    assert str(outcome(c, "EXEC")) == ("EXECABORT Transaction discarded because of: NOAUTH "
                                       "Authentication required.")
    assert c.execute("RESET") == "RESET"
    assert str(outcome(c, "HELLO", "3")).startswith("NOAUTH HELLO must be called")
    for argv in (("AUTH", "wrong"), ("AUTH", "default", "wrong"), ("AUTH", "bob", "s3cret pass"),
                 ("AUTH", "s3cret"), ("AUTH", "s3cret pass "), ("HELLO", "3", "AUTH", "default",
                                                                "nope")):
        assert str(outcome(c, *argv)) == WRONGPASS, argv
    assert str(outcome(c, "PING")) == NOAUTH
    assert c.execute("AUTH", "s3cret pass") == "OK"
    assert c.execute("PING") == "PONG"
    assert c.execute("XLEN", "s") == 0  # nothing refused ran
    assert c.execute("RESET") == "RESET"  # RESET logs out again
    assert str(outcome(c, "PING")) == NOAUTH
    assert c.execute("AUTH", "default", "s3cret pass") == "OK"
    assert c.execute("PING") == "PONG"
    assert c.execute("QUIT") == "OK"
    with pytest.raises(ConnectionError):
        c.read()
    quitter = connect(handle=with_password)
    assert quitter.execute("QUIT") == "OK"  # QUIT needs no AUTH


def test_hello_3_auth(with_password):
    (hello,) = raw_session(with_password, protocol=3)[:1]
    assert hello.startswith(b"-NOAUTH HELLO must be called")
    with socket.create_connection((with_password.host, with_password.port), TIMEOUT) as sock:
        f = sock.makefile("rb")
        sock.sendall(encode_command("HELLO", "3", "AUTH", "default", "s3cret pass",
                                    "SETNAME", "me") + encode_command("XADD", "s", "1-1", "f", "v")
                     + encode_command("XREAD", "STREAMS", "s", "0"))
        reply = parse_reply(read_raw_reply(f))
        assert dict(reply.items)[b"proto"] == 3
        assert read_raw_reply(f) == b"$3\r\n1-1\r\n"
        assert read_raw_reply(f).startswith(b"%1\r\n")


def test_redis_py_with_password(with_password):
    no_retry = Retry(NoBackoff(), 0)  # redis-py retries AuthenticationError (a ConnectionError)
    anonymous = redis.Redis(host=with_password.host, port=with_password.port, retry=no_retry)
    with pytest.raises(redis.AuthenticationError):
        anonymous.xadd("s", {"f": "v"})
    for protocol in (2, 3):
        wrong = redis.Redis(host=with_password.host, port=with_password.port, password="nope",
                            protocol=protocol, retry=no_retry)
        with pytest.raises(redis.AuthenticationError, match="invalid username-password pair"):
            wrong.ping()
        wrong.close()
    for protocol in (2, 3):
        good = redis.Redis(host=with_password.host, port=with_password.port,
                           password="s3cret pass", protocol=protocol)
        assert good.xadd("s", {"f": "v"}, id=f"{protocol}-0") == f"{protocol}-0".encode()
        good.close()
    anonymous.close()


@pytest.mark.parametrize("payload, line", [
    (b"*11\r\n", b"-ERR Protocol error: unauthenticated multibulk length\r\n"),
    (b"*2000000\r\n$4\r\nPING\r\n", b"-ERR Protocol error: unauthenticated multibulk length\r\n"),
    (b"*2\r\n$4\r\nECHO\r\n$16385\r\n", b"-ERR Protocol error: unauthenticated bulk length\r\n"),
])
def test_unauthenticated_big_requests_are_refused(with_password, payload, line):
    assert exchange_until_closed(with_password, payload) == line
    with RespClient(with_password.host, with_password.port, timeout=TIMEOUT) as c:
        assert c.execute("AUTH", "s3cret pass") == "OK"
        args = ["XDEL", "s", *[f"{i}-0" for i in range(98)]]  # 100 arguments, once authenticated
        assert c.execute(*args) == 0
        assert c.execute("ECHO", "x" * 20000) == b"x" * 20000


def test_protected_mode_refuses_remote_clients_without_password(served, connect):
    admin = connect()  # connected (locally) before the swap below
    assert admin.execute("PING") == "PONG"
    served.server.is_local = lambda host: False  # 127.0.0.1 now counts as a remote address
    data = exchange_until_closed(served, encode_command("PING"))
    assert data == DENIED
    assert data.startswith(b"-DENIED Redis is running in protected mode because protected mode is"
                           b" enabled and no password is set for the default user.")
    config_set(admin, "requirepass", "pw")  # with a password, remote clients are welcome
    client = connect()
    assert str(outcome(client, "PING")) == NOAUTH
    assert client.execute("AUTH", "pw") == "OK"
    assert client.execute("PING") == "PONG"
    config_set(admin, "requirepass", "")
    assert exchange_until_closed(served, encode_command("PING")) == DENIED
    config_set(admin, "protected-mode", "no")  # or with protected mode off
    assert connect().execute("PING") == "PONG"


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("127.1.2.3") and is_loopback("::1")
    assert is_loopback(None) and is_loopback("")  # Unix sockets
    assert not is_loopback("10.1.2.3") and not is_loopback("192.168.0.1")
    assert not is_loopback("2001:db8::1") and not is_loopback("fe80::1%eth0")
    assert not is_loopback("not an address")


def test_password_matches():
    assert password_matches(b"secret", "secret")
    assert password_matches("pässwörd".encode(), "pässwörd")
    assert password_matches(b"\xff\xfe", b"\xff\xfe".decode("utf-8", "surrogateescape"))
    for given in (b"", b"secre", b"secret ", b"Secret", b"secretsecret", b"s"):
        assert not password_matches(given, "secret"), given
    assert not password_matches(b"x", "")


# --- limits ----------------------------------------------------------------------------------------


def test_maxclients(served, connect):
    first = connect()
    config_set(first, "maxclients", 2)
    second = connect()
    assert first.execute("PING") == second.execute("PING") == "PONG"
    assert exchange_until_closed(served, encode_command("PING")) == (
        b"-ERR max number of clients reached\r\n")
    assert first.execute("PING") == "PONG"
    second.close()
    wait_until(lambda: served_client_count(served) == 1, what="the second client released")
    assert connect().execute("PING") == "PONG"


def test_bulk_longer_than_proto_max_bulk_len(served, connect):
    limit = 1 << 20  # Redis's smallest proto-max-bulk-len
    other = connect()
    with raw_socket(served) as sock:
        config_set(other, "proto-max-bulk-len", limit)  # connected clients take it too
        sock.sendall(encode_command("ECHO", "x" * limit))  # at the limit: fine
        f = sock.makefile("rb")
        assert read_raw_reply(f) == b"$%d\r\n" % limit + b"x" * limit + b"\r\n"
        sock.sendall(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % (limit + 1))
        assert read_until_closed(sock) == b"-ERR Protocol error: invalid bulk length\r\n"
    assert other.execute("PING") == "PONG"


def test_settings_changed_between_accept_and_connection_made(served, monkeypatch):
    """asyncio calls connection_made a loop pass after it created the client: a CONFIG SET
    running in between must still reach it (a stale proto-max-bulk-len would let it send a
    longer bulk; a stale requirepass would let it in without a password)."""
    import streamkeep.engine.server.network as server_mod

    def late_client(server: Any) -> server_mod.Client:
        client = server_mod.Client(server)
        server.engine.execute("CONFIG", "SET", "proto-max-bulk-len", str(1 << 20))
        server.engine.execute("CONFIG", "SET", "requirepass", "secret")
        return client

    monkeypatch.setattr(served.server, "client_factory", late_client)
    with raw_socket(served) as sock:
        f = sock.makefile("rb")
        sock.sendall(encode_command("PING"))
        assert read_raw_reply(f) == f"-{NOAUTH}\r\n".encode()
        sock.sendall(encode_command("AUTH", "secret"))
        assert read_raw_reply(f) == b"+OK\r\n"
        sock.sendall(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % ((1 << 20) + 1))
        assert read_until_closed(sock) == b"-ERR Protocol error: invalid bulk length\r\n"


def test_query_buffer_limit_closes_the_connection(served, connect):
    other = connect()
    config_set(other, "client-query-buffer-limit", "1mb")  # Redis's smallest
    assert other.execute("ECHO", "y" * 900_000) == b"y" * 900_000  # under the limit
    with raw_socket(served) as sock:
        sock.sendall(b"*2\r\n$4\r\nECHO\r\n$3000000\r\n")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            for _ in range(20):  # 2 MB of a 3 MB argument: past the limit
                sock.sendall(b"z" * 100_000)
        assert read_until_closed(sock) == b""  # closed without a reply, as Redis does
    assert other.execute("PING") == "PONG"
    wait_until(lambda: served_client_count(served) == 1, what="the client released")


def test_client_that_stops_reading_is_cut_at_the_output_limit(served, connect):
    engine = served.engine
    value = "v" * 1000
    for i in range(1, 301):
        engine.execute("XADD", "big", f"{i}-0", "f", value)
    reply_size = len(raw_session(served, ("XRANGE", "big", "-", "+"), protocol=2)[1])
    other = connect(timeout=2)
    config_set(other, "client-output-buffer-limit", "normal 1mb 0 0")
    wait_until(lambda: served_client_count(served) == 1, what="only `other` connected")
    sock = raw_socket(served, rcvbuf=4096)
    # Accepted before anything is sent: otherwise the loop below may see one client because
    # this one is not counted yet, and then read every reply, so that no limit is ever hit.
    wait_until(lambda: served_client_count(served) == 2, what="the reader accepted")
    try:
        n = 60  # ~18 MB of replies that are never read
        sock.sendall(encode_command("XRANGE", "big", "-", "+") * n
                     + encode_command("XADD", "after", "1-1", "f", "v"))
        deadline = time.monotonic() + TIMEOUT
        while served_client_count(served) != 1:  # other keeps being served meanwhile
            assert other.execute("PING") == "PONG"
            assert time.monotonic() < deadline, "the non-reading client was not disconnected"
        received = len(read_until_closed(sock))
        assert received < n * reply_size // 2
    finally:
        sock.close()
    assert other.execute("XLEN", "big") == 300
    # Like Redis (CLIENT_CLOSE_ASAP), nothing after the limit was reached runs.
    assert other.execute("XLEN", "after") == 0


def test_a_random_pick_count_past_the_output_limit_closes_the_client_before_a_pick(
        served, connect):
    """SRANDMEMBER key -1000000000 (and in MULTI, HRANDFIELD and ZRANDMEMBER's) to a client
    whose output limit leaves ~2 MB: the client is closed as over its limit, counted, with
    nothing sent and no pick made (the memory traced while it runs stays far below the ~4 MB
    of list its budget's picks took); another client is answered meanwhile, EXEC's writes are
    made; in a script the call fails with the limit's words instead."""
    import tracemalloc

    engine = served.engine
    engine.execute("SADD", "k", *[f"m{i}" for i in range(1000)])
    engine.execute("HSET", "h", "f", "v")
    engine.execute("ZADD", "z", "1", "m")
    other = connect(timeout=TIMEOUT)
    config_set(other, "client-output-buffer-limit", "normal 1mb 0 0")
    config_set(other, "proto-max-bulk-len", "1mb")  # (one reply may reach 2 MB: see the guide)
    cases = [encode_command("SRANDMEMBER", "k", "-1000000000"),
             encode_command("MULTI") + encode_command("SET", "x", "1")
             + encode_command("HRANDFIELD", "h", "-1000000000", "WITHVALUES")
             + encode_command("ZRANDMEMBER", "z", "-1000000000", "WITHSCORES")
             + encode_command("SET", "y", "2") + encode_command("EXEC")]
    tracemalloc.start()
    try:
        for payload in cases:
            tracemalloc.reset_peak()
            with raw_socket(served) as sock:
                sock.sendall(payload)
                got = read_until_closed(sock)
            assert other.execute("PING") == "PONG"
            assert tracemalloc.get_traced_memory()[1] < 1 << 20
            assert b"m" not in got and len(got) < 100  # (MULTI's +OK, +QUEUED...)
    finally:
        tracemalloc.stop()
    stats = other.execute("INFO", "stats")
    assert b"client_output_buffer_limit_disconnections:2\r\n" in stats
    assert other.execute("MGET", "x", "y") == [b"1", b"2"]
    with pytest.raises(RespError, match="reply over the client's output limit"):
        other.execute("EVAL", "return #redis.call('SRANDMEMBER', KEYS[1], ARGV[1])", "1", "k",
                      "-1000000000")
    assert other.execute("EVAL", "return #redis.call('SRANDMEMBER', KEYS[1], ARGV[1])", "1",
                         "k", "-1000") == 1000


def test_many_small_picks_are_held_to_the_hard_limit_not_to_one_values_floor(
        served, connect):
    """The budget that lets one value as big as proto-max-bulk-len through a connection's hard
    limit does not let many small picks through: SRANDMEMBER key -200000 of ~3 MB to a client
    whose hard limit is 1 MB (proto-max-bulk-len 512 MB) is closed with no pick made, as Redis
    closes a client whose output passed its limit; -20000 (~300 KB) is answered."""
    engine = served.engine
    engine.execute("SADD", "k", *[f"m{i:05d}" for i in range(1000)])
    other = connect(timeout=TIMEOUT)
    config_set(other, "client-output-buffer-limit", "normal 1mb 0 0")
    with raw_socket(served) as sock:
        sock.sendall(encode_command("SRANDMEMBER", "k", "-200000"))
        got = read_until_closed(sock)
    assert b"m0" not in got
    assert len(other.execute("SRANDMEMBER", "k", "-20000")) == 20000
    assert b"client_output_buffer_limit_disconnections:1\r\n" in other.execute("INFO", "stats")


def test_client_over_the_soft_output_limit_for_its_seconds_is_cut(served, connect):
    """Redis's soft limit: output pending over it for soft-seconds in a row closes the client.
    (A flush with nothing pending skips the check: this one always leaves output pending.)"""
    engine = served.engine
    value = "v" * 1000
    for i in range(1, 301):  # ~300 KB per XRANGE
        engine.execute("XADD", "big", f"{i}-0", "f", value)
    other = connect(timeout=2)
    config_set(other, "client-output-buffer-limit", "normal 0 256kb 1")
    sock = raw_socket(served, rcvbuf=4096)
    wait_until(lambda: served_client_count(served) == 2, what="the reader accepted")
    began = time.monotonic()
    try:
        while served_client_count(served) != 1:  # never reads; one more reply every 50 ms
            with contextlib.suppress(OSError):
                sock.sendall(encode_command("XRANGE", "big", "-", "+"))
            time.sleep(0.05)
            assert time.monotonic() - began < TIMEOUT, "the client over the soft limit stayed"
    finally:
        sock.close()
    assert time.monotonic() - began >= 1.0  # not before it had been over it for the second
    # `other` reads its replies (each over the soft limit by itself): never cut.
    assert len(other.execute("XRANGE", "big", "-", "+")) == 300
    assert other.execute("PING") == "PONG"


def test_output_limit_set_between_a_clients_commands_applies_to_its_next_reply(served, connect):
    """The limit a reply is encoded against is found when the encoder first checks it, from
    the settings in force then: a client that ran commands before CONFIG SET is held to the
    new limit."""
    engine = served.engine
    value = "v" * 1000
    for i in range(1, 301):
        engine.execute("XADD", "big", f"{i}-0", "f", value)
    other = connect(timeout=2)
    sock = raw_socket(served, rcvbuf=4096)
    sock.sendall(encode_command("XLEN", "big") + encode_command("XRANGE", "big", "-", "+", "COUNT",
                                                                "1"))
    f = sock.makefile("rb")
    assert read_raw_reply(f) == b":300\r\n"
    assert read_raw_reply(f).startswith(b"*1\r\n")  # its output buffer used, and flushed
    config_set(other, "client-output-buffer-limit", "normal 1mb 0 0")
    try:
        sock.sendall(encode_command("XRANGE", "big", "-", "+") * 60)  # ~18 MB never read
        wait_until(lambda: served_client_count(served) == 1, what="the reader cut")
    finally:
        f.close()
        sock.close()
    assert other.execute("XLEN", "big") == 300


def test_pipelined_replies_of_every_size_leave_whole_and_in_order(served):
    """Small replies leave as copies of a buffer the connection keeps, big ones by hand-over,
    big bulks by reference: one pipeline mixing them reads back in order."""
    big_value = b"b" * (200 << 10)  # a bulk kept by reference
    entry = b"e" * 1000
    client = redis.Redis(host=served.host, port=served.port, socket_timeout=TIMEOUT)
    try:
        for i in range(1, 301):
            client.xadd("s", {"f": entry}, id=f"{i}-0")
        client.set("k", big_value)
        for _ in range(3):  # the connection's buffer is reused from one batch to the next
            pipe = client.pipeline(transaction=False)
            pipe.ping().xlen("s").xrange("s").get("k").xrange("s", count=1).echo("x" * 20000)
            pipe.xlen("s")
            ping, n, entries, got, first, echoed, n_again = pipe.execute()
            assert ping is True and n == n_again == 300
            assert len(entries) == 300 and entries[-1] == (b"300-0", {b"f": entry})
            assert got == big_value and first == [(b"1-0", {b"f": entry})]
            assert echoed == b"x" * 20000
            assert client.xlen("s") == 300
    finally:
        client.close()


def test_slow_client_one_byte_at_a_time_does_not_stall_others(served, connect):
    payload = encode_command("XADD", "s", "1-1", "field", "slowly")
    slow = raw_socket(served)
    done = threading.Event()

    def dribble() -> None:  # all but the last byte
        for i in range(len(payload) - 1):
            slow.sendall(payload[i:i + 1])
            time.sleep(0.004)
        done.set()

    sender = threading.Thread(target=dribble, daemon=True)
    sender.start()
    fast = connect(timeout=2)
    pings = 0  # counted, not timed: a server waiting on the slow client would answer none
    while not done.is_set():
        assert fast.execute("PING") == "PONG"
        assert fast.execute("XLEN", "s") == 0
        pings += 1
    sender.join()
    assert pings > 5
    slow.sendall(payload[-1:])
    slow.settimeout(TIMEOUT)
    assert slow.recv(100) == b"$3\r\n1-1\r\n"
    slow.close()
    assert fast.execute("XLEN", "s") == 1


MALFORMED = [
    b"*1\r\n$x\r\n",
    b"*2\r\n$4\r\nPING\r\nX\r\n",
    b"*abc\r\n",
    b"*3000000000\r\n",
    b"*1\r\n$-5\r\n",
    b"*1\r\n$600000000\r\n",
    b'PING "unbalanced\r\n',
    b"PING 'a'b\r\n",
    b"PING\r\n" + encode_command("XADD", "s", "1-1", "f", "v") + b"*1\r\n$x\r\n",
    b"*1\r\n" + b"7" * 70_000,
    b"x" * 70_000,
    b"*2\r\n$4\r\nECHO\r\n\r\n\r\n",
]


@pytest.mark.parametrize("payload", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_input_gets_redis_error_then_close(served, redis_raw, redis_server, payload):
    ours = exchange_until_closed(served, payload)
    theirs = exchange_until_closed(redis_server, payload)
    assert ours == theirs
    assert ours.endswith(b"\r\n") and b"-ERR Protocol error" in ours
    with RespClient(served.host, served.port, timeout=TIMEOUT) as c:  # others still served
        assert c.execute("PING") == "PONG"


NUL_FRAMING = [
    b"*1\r\n$4\x00\r\nPING\r\n",  # Redis's strchr() stops at the NUL: no line end, ever
    b"*1\x00\r\n$4\r\nPING\r\n",
    b"PING\x00\r\nPING\r\n",
    b"PING\r\n*2\r\n$4\r\nECHO\r\n$3\r\na\x00b\r\n",  # a NUL inside a bulk is just a byte
    b"*1\r\n$4\x00" + b"x" * 70_000,  # ... until the header is too long
    b"PING\x00" + b"x" * 70_000,
]


@pytest.mark.parametrize("payload", NUL_FRAMING, ids=range(len(NUL_FRAMING)))
def test_nul_bytes_in_framing_like_redis(served, redis_raw, redis_server, payload):
    def exchange(target: Any) -> bytes:
        with raw_socket(target) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)  # both close on EOF
            return read_until_closed(sock)

    assert exchange(served) == exchange(redis_server)


def test_unknown_command_line_cuts_at_nul(connect, redis_raw):
    argv = ("PI\x00NG", "a\x00b", "c")
    assert str(outcome(redis_raw, *argv)) == (
        "ERR unknown command 'PI', with args beginning with: 'a' 'c' ")
    assert str(outcome(connect(), *argv)) == str(outcome(redis_raw, *argv))


CLOSING = [
    b"PING\r\nQUIT\r\nPING\r\n",
    encode_command("XADD", "s", "1-1", "f", "v") + encode_command("QUIT") + encode_command(
        "XADD", "s", "2-1", "f", "v"),
    b"QUIT extra args\r\nPING\r\n",
]


@pytest.mark.parametrize("payload", CLOSING, ids=range(len(CLOSING)))
def test_quit_answers_then_closes_like_redis(served, redis_raw, redis_server, payload):
    ours = exchange_until_closed(served, payload)
    theirs = exchange_until_closed(redis_server, payload)
    assert ours == theirs
    assert ours.endswith(b"+OK\r\n")
    with RespClient(served.host, served.port, timeout=TIMEOUT) as c:
        assert c.execute("XRANGE", "s", "-", "+") == redis_raw.execute("XRANGE", "s", "-", "+")


# --- more connection state -------------------------------------------------------------------------


def test_pipeline_under_appendfsync_always_keeps_reply_order(tmp_path):
    path = tmp_path / "data"
    handle = start_server(Engine.open(str(path), appendfsync="always"))
    try:
        commands: list[tuple[Any, ...]] = []
        for i in range(1, 301):
            commands += [("XADD", "s", f"{i}-1", "n", str(i)), ("PING",), ("XLEN", "s")]
        with RespClient(handle.host, handle.port, timeout=TIMEOUT) as c:
            replies = c.pipeline(*commands)
            digest = c.execute("DEBUG", "DIGEST")
        expected = []
        for i in range(1, 301):
            expected += [f"{i}-1".encode(), "PONG", i]
        assert replies == expected
        assert handle.engine.journal.synced_lsn >= 300  # every reply waited for its fsync
    finally:
        handle.stop()
    with Engine.open(str(path)) as engine:
        assert engine.digest() == digest


def test_disconnect_ends_transaction_and_watches(served, connect):
    client = connect()
    assert client.execute("WATCH", "s", "t") == "OK"
    assert client.execute("MULTI") == "OK"
    assert client.execute("XADD", "s", "1-1", "f", "v") == "QUEUED"
    assert served.engine.watches
    client.close()
    wait_until(lambda: not served.engine.watches, what="the watches dropped")
    assert connect().execute("XLEN", "s") == 0  # the queued XADD never ran


def test_reset_returns_to_resp2_db0_and_no_transaction(served):
    with socket.create_connection((served.host, served.port), timeout=TIMEOUT) as sock:
        f = sock.makefile("rb")

        def call(*argv: Any) -> bytes:
            sock.sendall(encode_command(*argv))
            return read_raw_reply(f)

        assert call("HELLO", "3").startswith(b"%7\r\n")
        assert call("SELECT", "3") == b"+OK\r\n"
        assert call("XADD", "s", "1-1", "f", "v") == b"$3\r\n1-1\r\n"
        assert call("MULTI") == b"+OK\r\n"
        assert call("XLEN", "s") == b"+QUEUED\r\n"
        assert call("RESET") == b"+RESET\r\n"
        assert call("XREAD", "BLOCK", "10", "STREAMS", "s", "$") == b"*-1\r\n"  # RESP2 again
        assert call("XLEN", "s") == b":0\r\n"  # db 0 again
        assert call("EXEC") == b"-ERR EXEC without MULTI\r\n"
        assert call("SELECT", "3") == b"+OK\r\n"
        assert call("XLEN", "s") == b":1\r\n"


def test_each_connection_has_its_own_database(served, connect):
    a, b = connect(), connect()
    assert a.execute("SELECT", "5") == "OK"
    a.execute("XADD", "s", "1-1", "f", "v")
    assert b.execute("XLEN", "s") == 0
    assert b.execute("SELECT", "5") == "OK" and b.execute("XLEN", "s") == 1
    assert served.engine.execute("XLEN", "s") == 0  # the embedded session: db 0


def test_blocked_client_input_is_paused_then_resumed_in_order(served, connect):
    blocked = connect()
    n = 250_000  # 1.5 MB of PINGs behind the blocked read: reading pauses past 1 MiB
    payload = encode_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$") + b"PING\r\n" * n
    sender = threading.Thread(target=blocked._sock.sendall, args=(payload,), daemon=True)
    sender.start()
    ours_blocked(served)(1)
    client = next(iter(c for c in served.server.clients.values() if c.waiting is not None))
    wait_until(lambda: client.reading_paused, what="reading paused")
    other = connect(timeout=2)
    assert other.execute("PING") == "PONG"
    other.execute("XADD", "s", "9-9", "f", "v")
    assert blocked.read() == [[b"s", [[b"9-9", [b"f", b"v"]]]]]
    assert blocked._rfile.read(7 * n) == b"+PONG\r\n" * n
    sender.join(TIMEOUT)
    assert not client.reading_paused
    assert blocked.execute("XLEN", "s") == 1


def test_stop_with_a_blocked_client(connect):
    engine = Engine()
    handle = start_server(engine)
    waiter = connect(handle=handle)
    waiter.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    ours_blocked(handle)(1)
    handle.stop()  # asserts the server thread ended
    with pytest.raises(ConnectionError):
        waiter.read()
    assert engine.closed


def test_blocked_claim_wakes_when_an_entry_becomes_idle(served, connect):
    """XREADGROUP ... CLAIM (8.x) blocked with nothing idle enough: the server re-runs it when
    the pending entry reaches the idle time, with no other event to wake it."""
    producer = connect()
    producer.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    producer.execute("XADD", "s", "2-1", "f", "v")
    producer.execute("XREADGROUP", "GROUP", "g", "first", "STREAMS", "s", ">")
    claimer = connect()
    start = time.monotonic()
    reply = claimer.execute("XREADGROUP", "GROUP", "g", "second", "BLOCK", "5000", "CLAIM",
                            "150", "STREAMS", "s", ">")
    assert 0.1 <= time.monotonic() - start < 3
    entry_id, fields, idle, count = reply[0][1][0]
    assert (entry_id, fields, count) == (b"2-1", [b"f", b"v"], 1) and idle >= 150
    assert producer.execute("XPENDING", "s", "g", "-", "+", "10")[0][1] == b"second"
    assert claimer.execute("PING") == "PONG"


def test_embedded_write_wakes_a_network_client(served, connect):
    """The embedded API and the server share one engine: a write made in process from another
    thread serves a client blocked on a socket."""
    waiter = connect()
    waiter.send("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    ours_blocked(served)(1)
    served.engine.execute("XADD", "s", "3-3", "from", "python")
    assert waiter.read() == [[b"s", [[b"3-3", [b"from", b"python"]]]]]


@pytest.mark.parametrize("argv", [
    ("SHUTDOWN", "ABORT"), ("SHUTDOWN", "abort", "NOW"), ("SHUTDOWN", "SAVE", "ABORT"),
    ("SHUTDOWN", "SAVE", "NOSAVE"), ("SHUTDOWN", "NOSAVE", "save"), ("SHUTDOWN", "bogus"),
    ("SHUTDOWN", "NOW", "FORCE", "x"),
])
def test_shutdown_arguments_that_do_not_shut_down(served, redis_raw, argv):
    """SHUTDOWN ABORT cancels a shutdown in progress (there never is one here): it must not
    stop the server; illegal combinations are syntax errors. The same lines as Redis."""
    with RespClient(served.host, served.port, timeout=TIMEOUT) as c:
        assert str(outcome(c, *argv)) == str(outcome(redis_raw, *argv))
        assert c.execute("PING") == "PONG"
    assert served.thread.is_alive()
    assert redis_raw.execute("PING") == "PONG"


def test_concurrent_writers_under_appendfsync_always(tmp_path):
    """Group commit with several clients writing at once: every write is acknowledged (no
    spurious MISCONF while records of other clients wait for the next fsync round)."""
    path = tmp_path / "data"
    handle = start_server(Engine.open(str(path), appendfsync="always"))
    replies: list[list[Any]] = [[] for _ in range(4)]

    def writer(n: int) -> None:
        with RespClient(handle.host, handle.port, timeout=TIMEOUT) as c:
            for i in range(1, 101):
                if i % 4:
                    replies[n].append(outcome(c, "XADD", f"w{n}", f"{i}-1", "f", "v"))
                else:
                    replies[n] += c.pipeline(*[("XADD", f"w{n}", f"{i}-{j}", "f", "v")
                                              for j in range(2, 7)])

    try:
        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        errors = [r for rs in replies for r in rs if isinstance(r, RespError)]
        assert not errors, errors[:3]
        assert [len(rs) for rs in replies] == [200] * 4
        digest = handle.engine.digest()
    finally:
        handle.stop()
    with Engine.open(str(path)) as engine:
        assert engine.digest() == digest
        assert [engine.execute("XLEN", f"w{n}") for n in range(4)] == [200] * 4


# --- a disconnected client is freed at once (issue #11 B) ----------------------------------------


def _wait_for(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.mark.parametrize("pending", [
    b"*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$1048576\r\n" + b"x" * 600_000,  # a big bulk, unfinished
    b"*3\r\n$4\r\nECHO\r\n$1\r\na\r\n$100\r\n" + b"x" * 50,  # a small one, unfinished
    b"*1000\r\n" + b"$1\r\nx\r\n" * 500,  # many arguments, unfinished
    b"MULTI\r\nXADD s * f v\r\n",  # a transaction left open
    b"*1\r\n$3\r\nabc\r\n$x\r\n",  # a protocol error (the parser keeps it, with a traceback)
])
def test_disconnected_client_is_freed_without_the_collector(served, pending):
    import gc

    from streamkeep.engine.server.network import Client

    def alive() -> bool:
        # (A compiled Client takes no weak reference. With the collector off, an object left
        # in a reference cycle stays among the tracked objects until a collection.)
        return any(type(o) is Client and o.id == cid for o in gc.get_objects())

    server = served.server
    before = set(server.clients)
    sock = raw_socket(served)
    sock.sendall(pending)
    _wait_for(lambda: len(server.clients) > len(before))
    (cid,) = set(server.clients) - before
    time.sleep(0.2)  # the server reads what was sent
    gc.disable()
    try:
        assert alive()
        sock.close()
        _wait_for(lambda: cid not in server.clients)
        _wait_for(lambda: not alive(), timeout=2)
    finally:
        gc.enable()


def test_the_active_expiry_cycle_runs_on_a_timer() -> None:
    """A key nobody touches again still goes once expired: the server's timer runs the engine's
    active cycle, which logs the DEL."""
    engine = Engine()
    records: list[Any] = []
    engine.add_sink(records.append)
    handle = start_server(engine)
    try:
        with RespClient(handle.host, handle.port, timeout=TIMEOUT) as client:
            assert client.execute("SET", "k", "v", "PX", "30") == "OK"
            deadline = time.monotonic() + 5
            while engine.strings[0] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not engine.strings[0] and not engine.expires[0]
            assert records[-1].effects == [[b"DEL", b"k"]]
    finally:
        handle.stop()


# --- Pub/Sub ---------------------------------------------------------------------------------------


def test_pubsub_with_redis_py_across_connections(served):
    subscriber_client = redis.Redis(host=served.host, port=served.port)
    publisher = redis.Redis(host=served.host, port=served.port)
    pubsub = subscriber_client.pubsub()
    try:
        pubsub.subscribe("orders")
        pubsub.psubscribe("ord*")
        assert [pubsub.get_message(timeout=TIMEOUT)["type"] for _ in range(2)] == [
            "subscribe", "psubscribe"]
        assert publisher.publish("orders", "o1") == 2
        first = pubsub.get_message(timeout=TIMEOUT)
        second = pubsub.get_message(timeout=TIMEOUT)
        assert (first["type"], first["channel"], first["data"]) == ("message", b"orders", b"o1")
        assert (second["type"], second["pattern"]) == ("pmessage", b"ord*")
        assert publisher.pubsub_numsub("orders") == [(b"orders", 1)]
        assert publisher.pubsub_numpat() == 1
        pubsub.punsubscribe()
        assert pubsub.get_message(timeout=TIMEOUT)["type"] == "punsubscribe"
        assert publisher.publish("orders", "o2") == 1
    finally:
        pubsub.close()
        subscriber_client.close()
        publisher.close()
    # A closed connection's subscriptions end with it.
    with RespClient(served.host, served.port, timeout=TIMEOUT) as c:
        wait_until(lambda: c.execute("PUBSUB", "NUMSUB", "orders") == [b"orders", 0],
                   what="the subscription dropped")


def test_pubsub_resp3_with_redis_py(served):
    client = redis.Redis(host=served.host, port=served.port, protocol=3)
    pubsub = client.pubsub()
    try:
        pubsub.subscribe("c")
        assert pubsub.get_message(timeout=TIMEOUT)["type"] == "subscribe"
        assert client.publish("c", "hello") == 1
        message = pubsub.get_message(timeout=TIMEOUT)
        assert (message["type"], message["data"]) == ("message", b"hello")
    finally:
        pubsub.close()
        client.close()


def test_a_subscribed_resp2_connection_runs_only_pubsub_commands(served):
    replies = raw_session(served, ("SUBSCRIBE", "a"), ("XLEN", "s"), ("NOSUCH",), ("PING",),
                          ("PING", "x"), ("XADD", "s"), ("UNSUBSCRIBE",), ("PING",), protocol=2)
    assert replies[1:] == [
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
        b"-ERR Can't execute 'xlen': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / "
        b"RESET are allowed in this context\r\n",
        b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
        b"*2\r\n$4\r\npong\r\n$0\r\n\r\n",
        b"*2\r\n$4\r\npong\r\n$1\r\nx\r\n",
        b"-ERR wrong number of arguments for 'xadd' command\r\n",
        b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n",
        b"+PONG\r\n",
    ]
    stats = served.engine.execute("INFO", "commandstats").decode()
    assert "cmdstat_xlen:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1" in stats


def test_messages_cross_between_embedded_and_network_subscribers(served):
    engine = served.engine
    with engine.subscribe("from-wire") as embedded, \
            RespClient(served.host, served.port, timeout=TIMEOUT) as net:
        net.send("SUBSCRIBE", "from-thread")
        assert net.read() == [b"subscribe", b"from-thread", 1]
        embedded.get_message()
        # PUBLISH from another thread: the network subscriber's delivery goes through the loop.
        assert engine.execute("PUBLISH", "from-thread", "t") == 1
        assert net.read() == [b"message", b"from-thread", b"t"]
        with RespClient(served.host, served.port, timeout=TIMEOUT) as publisher:
            assert publisher.execute("PUBLISH", "from-wire", "w") == 1
        assert embedded.get_message(timeout=TIMEOUT)["data"] == b"w"  # type: ignore[index]
        assert engine.execute("CLIENT", "LIST", "TYPE", "pubsub").count(b"flags=P") == 1
        info = engine.execute("INFO").decode()
        assert "pubsub_clients:1\r\n" in info  # the network one (the embedded one is no client)
        assert "pubsub_channels:2\r\n" in info and "pubsubshard_channels:0\r\n" in info


def test_a_subscriber_that_stops_reading_is_cut_at_the_pubsub_limit(served, connect, caplog):
    other = connect(timeout=2)
    config_set(other, "client-output-buffer-limit", "pubsub 256kb 0 0")
    sock = raw_socket(served, rcvbuf=4096)
    try:
        sock.sendall(encode_command("SUBSCRIBE", "flood"))
        wait_until(lambda: other.execute("PUBSUB", "NUMSUB", "flood") == [b"flood", 1],
                   what="the subscriber")
        payload = "m" * 10_000
        deadline = time.monotonic() + TIMEOUT
        while other.execute("PUBSUB", "NUMSUB", "flood") == [b"flood", 1]:
            other.execute("PUBLISH", "flood", payload)
            assert time.monotonic() < deadline, "the slow subscriber was not disconnected"
    finally:
        sock.close()
    wait_until(lambda: any("closed for overcoming of output buffer limits" in r.getMessage()
                           for r in caplog.records), what="the log line")
    assert other.execute("PING") == "PONG"


@pytest.mark.parametrize("protocol", [2, 3])
def test_pubsub_with_redis_py_asyncio(served, protocol):
    """The request/reply shape of asyncio stream frameworks: a reply channel subscribed, the
    request sent with XADD, the answer PUBLISHed by another connection."""

    async def scenario() -> Any:
        client = redis.asyncio.Redis(host=served.host, port=served.port, protocol=protocol)
        responder = redis.asyncio.Redis(host=served.host, port=served.port)
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe("reply:1")
            assert (await pubsub.get_message(timeout=TIMEOUT))["type"] == "subscribe"
            await client.xadd("requests", {"reply-to": "reply:1"})
            request = await responder.xrange("requests")
            channel = request[0][1][b"reply-to"]
            assert await responder.publish(channel, "done") == 1
            return await pubsub.get_message(ignore_subscribe_messages=True, timeout=TIMEOUT)
        finally:
            await pubsub.aclose()
            await client.aclose()
            await responder.aclose()

    message = asyncio.run(scenario())
    assert (message["type"], message["channel"], message["data"]) == (
        "message", b"reply:1", b"done")


def test_client_list_and_kill_see_subscribers(served, connect):
    admin = connect()
    with RespClient(served.host, served.port, timeout=TIMEOUT) as sub:
        sub.send("SUBSCRIBE", "a", "b")
        sub.read(), sub.read()
        sub.send("PSUBSCRIBE", "p*")
        sub.read()
        sub.send("SSUBSCRIBE", "s")
        sub.read()
        [line] = admin.execute("CLIENT", "LIST", "TYPE", "pubsub").decode().splitlines()
        fields = dict(item.split("=", 1) for item in line.split())
        assert (fields["flags"], fields["sub"], fields["psub"], fields["ssub"]) == (
            "P", "2", "1", "1")
        assert admin.execute("CLIENT", "KILL", "TYPE", "pubsub") == 1
        wait_until(lambda: admin.execute("PUBSUB", "NUMPAT") == 0, what="the subscriber gone")
    assert admin.execute("CLIENT", "LIST", "TYPE", "pubsub") == b""


def test_an_idle_subscriber_is_not_timed_out(served, connect):
    admin = connect()
    config_set(admin, "timeout", 1)
    try:
        with RespClient(served.host, served.port, timeout=TIMEOUT) as sub, \
                RespClient(served.host, served.port, timeout=TIMEOUT) as idle:
            sub.send("SUBSCRIBE", "quiet")
            sub.read()
            idle.execute("PING")
            wait_until(lambda: admin.execute("PING") == "PONG"  # admin keeps talking
                       and served_client_count(served) == 2, timeout=5,
                       what="the idle client closed")
            assert admin.execute("PUBLISH", "quiet", "still here") == 1
            assert sub.read() == [b"message", b"quiet", b"still here"]
    finally:
        config_set(admin, "timeout", 0)
