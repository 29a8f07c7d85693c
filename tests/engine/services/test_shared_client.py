"""engine.services.shared_client: a shared directory's engine has the in-process Engine's API and
replies. The same commands give the same replies (and error lines) in process and through the
directory's server, redis-py's facade too; a blocked read waits in its own thread's
connection; a subscriber gets messages published by another process; a forked child talks
over a connection of its own; a call that never reached a killed server is sent again to its
successor, a call whose reply was lost raises ServerLost, and a thread's MULTI is never
silently replayed on a new connection."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from streamkeep import Engine, ReplyError, StreamQueue
from streamkeep.engine.services.shared_client import ServerLost, SharedEngine
from tests.support.pids import wait_gone

# A session of commands whose replies cover every shape: bulk, integer, status, null, nested
# arrays, nil arrays, errors (raised: compared by their line), transactions, strings.
SESSION: list[tuple[Any, ...]] = [
    (), ("",), ("PING",), ("PING", "hello"), ("ECHO", b"\x00\xff"),
    ("XADD", "s", "1-1", "a", "1", "b", "2"), ("XADD", "s", "1-2", "a", 3.5),
    ("XADD", "s", "1-3", "c", 7), ("XLEN", "s"), ("XRANGE", "s", "-", "+"),
    ("XREVRANGE", "s", "+", "-", "COUNT", 1), ("XRANGE", "nope", "-", "+"),
    ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", 2, "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "nope", ">"),
    ("XPENDING", "s", "g"), ("XPENDING", "s", "g", "-", "+", 10),
    ("XACK", "s", "g", "1-1"), ("XREAD", "COUNT", 1, "STREAMS", "s", "1-2"),
    ("XREAD", "STREAMS", "s", "$"), ("XINFO", "STREAM", "s"), ("XINFO", "GROUPS", "s"),
    ("XINFO", "CONSUMERS", "s", "g"), ("XADD", "s", "1-1", "x", "y"), ("XADD", "s"),
    ("SET", "k", "v"), ("GET", "k"), ("GET", "missing"), ("INCR", "n"), ("INCR", "k"),
    ("MULTI",), ("XADD", "t", "2-1", "f", "v"), ("INCR", "n"), ("EXEC",),
    ("TYPE", "s"), ("EXISTS", "s", "k", "nope"), ("DEL", "k"), ("NOSUCHCOMMAND",),
    ("XTRIM", "s", "MAXLEN", 1), ("XDEL", "s", "1-3"), ("DBSIZE",),
    # What would leave a connection out of step is refused, as in process, or ends it (QUIT).
    ("SUBSCRIBE", "news"), ("PSUBSCRIBE", "n*"), ("CLIENT", "REPLY", "OFF"), ("QUIT",),
    ("PING",), ("SELECT", 1), ("DBSIZE",), ("SELECT", 0), ("DBSIZE",),
]


def replies(engine: Any) -> list[Any]:
    out = []
    for args in SESSION:
        try:
            reply = engine.execute(*args)
        except ReplyError as err:
            reply = ("error", str(err))
        if args[:2] == ("XINFO", "CONSUMERS"):  # milliseconds of idleness: the clock's
            reply = [[x if k not in (b"idle", b"inactive") else int
                      for k, x in zip([None, *c[:-1]], c, strict=True)] for c in reply]
        elif args[:2] == ("XPENDING", "s") and len(args) > 3:
            reply = [[sid, who, int, count] for sid, who, _idle, count in reply]
        out.append(reply)
    return out


def test_the_same_commands_give_the_same_replies_in_process_and_shared(
        shared_dir: Path, tmp_path: Path) -> None:
    with Engine.open(str(tmp_path / "in-process")) as local:
        expected = replies(local)
    with Engine.open(str(shared_dir), shared=True) as shared:
        got = replies(shared)
    for args, want, have in zip(SESSION, expected, got, strict=True):
        assert have == want, args


def test_redis_pys_facade_gives_the_same_values(shared_dir: Path, tmp_path: Path) -> None:
    def run(engine: Any) -> list[Any]:
        r = engine.redis(decode_responses=True)
        r.xadd("s", {"a": "1"}, id="1-1")
        r.xadd("s", {"b": "2"}, id="1-2")
        r.xgroup_create("s", "g", id="0")
        return [r.xrange("s"), r.xreadgroup("g", "c", {"s": ">"}, count=1), r.xlen("s"),
                r.xpending("s", "g"), r.xinfo_groups("s"), r.delete("s2"), r.exists("s"),
                r.xack("s", "g", "1-1")]

    with Engine.open(str(tmp_path / "in-process")) as local:
        expected = run(local)
    with Engine.open(str(shared_dir), shared=True) as shared:
        assert run(shared) == expected


def test_arguments_are_converted_and_refused_as_in_process(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        assert engine.execute("SET", "f", 1.25) == "OK"
        assert engine.execute("GET", "f") == b"1.25"
        assert engine.execute("SET", b"b", bytearray(b"xy")) == "OK"
        with pytest.raises(TypeError, match="bool is not a valid command argument"):
            engine.execute("SET", "k", True)
        with pytest.raises(TypeError, match="invalid command argument type dict"):
            engine.execute("SET", "k", {})
        assert engine.execute("PING") == "PONG"  # the connection is still in step


def test_a_blocked_read_waits_on_its_own_threads_connection(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        got: list[Any] = []
        reader = threading.Thread(
            target=lambda: got.append(engine.execute("XREAD", "BLOCK", 0, "STREAMS", "s", "$")))
        reader.start()
        # The reader's thread is blocked; this one's calls go on meanwhile, until the reader
        # is one of the server's blocked clients.
        while int(engine.execute("INFO", "clients").split(b"blocked_clients:")[1].split()[0]) < 1:
            assert engine.execute("PING") == "PONG"
        engine.execute("XADD", "s", "5-1", "k", "v")
        reader.join()
        assert got == [[[b"s", [[b"5-1", [b"k", b"v"]]]]]]


_PUBLISHER = """
import sys
from streamkeep import Engine
with Engine.open(sys.argv[1], shared=True) as engine:
    print(engine.execute("PUBLISH", "news", "from another process"))
"""


def test_a_subscriber_gets_what_another_process_publishes(shared_dir: Path) -> None:
    import subprocess
    import sys

    with Engine.open(str(shared_dir), shared=True) as engine:
        with engine.subscribe("news") as sub:
            assert sub.get_message(timeout=None) == {
                "type": "subscribe", "pattern": None, "channel": b"news", "data": 1}
            assert sub.get_message(timeout=0) is None
            done = subprocess.run([sys.executable, "-c", _PUBLISHER, str(shared_dir)],
                                  capture_output=True, text=True, check=True)
            assert done.stdout == "1\n"
            assert sub.get_message(timeout=None) == {
                "type": "message", "pattern": None, "channel": b"news",
                "data": b"from another process"}
        with engine.psubscribe("n*") as psub:
            assert psub.get_message(timeout=None)["type"] == "psubscribe"
            engine.execute("PUBLISH", "now", "x")
            assert psub.get_message(timeout=None) == {
                "type": "pmessage", "pattern": b"n*", "channel": b"now", "data": b"x"}


def _forked_child(engine: SharedEngine, out: Any) -> None:
    out.put((engine.execute("XADD", "s", "*", "from", "child"), engine.server_pid,
             os.getpid()))


def test_a_forked_child_talks_over_its_own_connection(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        engine.execute("XADD", "s", "*", "from", "parent")
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_forked_child, args=(engine, out))
        child.start()
        sid, server, pid = out.get(timeout=60)
        child.join()
        assert child.exitcode == 0 and pid != os.getpid() and server == engine.server_pid
        # The parent's connection was not used by the child: it is still in step.
        assert engine.execute("XLEN", "s") == 2
        assert engine.execute("XRANGE", "s", sid, sid)[0][1] == [b"from", b"child"]


def test_a_spawned_process_gets_the_engine_as_its_path(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        child = ctx.Process(target=_forked_child, args=(engine, out))
        child.start()
        _sid, server, _pid = out.get(timeout=120)
        child.join()
        assert child.exitcode == 0 and server == engine.server_pid
        assert engine.execute("XLEN", "s") == 1


def test_a_lost_reply_raises_and_the_next_call_reconnects(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        old = engine.server_pid
        errors: list[BaseException] = []

        def blocked() -> None:
            try:
                engine.execute("XREAD", "BLOCK", 0, "STREAMS", "s", "$")
            except BaseException as err:  # noqa: BLE001 - what the test looks at
                errors.append(err)

        reader = threading.Thread(target=blocked)
        reader.start()
        while int(engine.execute("INFO", "clients").split(b"blocked_clients:")[1].split()[0]) < 1:
            pass
        os.kill(old, signal.SIGKILL)
        reader.join()
        assert isinstance(errors[0], ServerLost) and isinstance(errors[0], ConnectionError)
        assert f"process {old}" in str(errors[0])
        wait_gone(old, 30)
        assert engine.execute("PING") == "PONG"  # this thread's call: a new server
        assert engine.server_pid != old


def test_a_transaction_is_never_replayed_on_a_new_connection(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        assert engine.execute("MULTI") == "OK"
        assert engine.execute("SET", "k", "1") == "QUEUED"
        old = engine.server_pid
        os.kill(old, signal.SIGKILL)
        wait_gone(old, 30)
        with pytest.raises(ServerLost, match="MULTI, WATCH or session settings"):
            engine.execute("EXEC")
        assert engine.execute("GET", "k") is None  # nothing of it ran
        assert engine.execute("MULTI") == "OK"
        assert engine.execute("EXEC") == []


def test_the_work_queue_runs_over_a_shared_engine(shared_dir: Path) -> None:
    with Engine.open(str(shared_dir), shared=True) as engine:
        q = StreamQueue(engine, "jobs", consumer="w", visibility_timeout=0, max_deliveries=2)
        ids = q.put_many([{"n": i} for i in range(3)])
        assert q.put({"n": 9}, idempotency_key="k") == q.put({"n": 9}, idempotency_key="k")
        got = q.get(2)
        assert [m.id for m in got] == ids[:2] and got[0].fields == {b"n": b"0"}
        got[0].ack()
        got[1].nack()
        with q.process() as msg:
            assert msg is not None and msg.id == ids[1] and msg.deliveries == 2
            msg.nack()  # its last delivery allowed: dead-lettered now
        (letter,) = q.dead()
        assert letter.source_id == ids[1] and letter.deliveries == 2
        stats = q.stats()
        assert stats["length"] == 4 and stats["dead"] == 1 and stats["lag"] == 2


def test_a_closed_engine_refuses_calls(shared_dir: Path) -> None:
    engine = Engine.open(str(shared_dir), shared=True)
    engine.close()
    with pytest.raises(ValueError, match="the shared engine is closed"):
        engine.execute("PING")
