"""INFO commandstats / errorstats / total_error_replies and CLIENT LIST cmd=, against a real
redis-server: the same commands on both, then the counters compared (calls, rejected_calls,
failed_calls and the error counts; `usec` differs by nature and is only checked for shape).

Redis 7.0 (the local oracle) and 8.x count alike: src/server.c call() counts a call after the
command ran and a failed call when it replied an error, rejectCommand a rejected call (arity,
refused while queueing in MULTI, a refused EXEC), afterErrorReply every error reply under its
first word (redis.io INFO: "rejected_calls", "failed_calls", the errorstats section)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.resp_client import RespClient, RespError
from tests.support.server_util import ServerHandle, connect

CMDSTAT = re.compile(r"calls=(\d+),usec=(\d+),usec_per_call=(\d+\.\d\d),"
                     r"rejected_calls=(\d+),failed_calls=(\d+)$")

SCRIPT: tuple[tuple[str, ...], ...] = (
    ("XADD", "s", "1-1", "f", "v"),
    ("XADD", "s", "1-1", "f", "v"),  # ran and failed: ERR (the ID is not greater)
    ("XADD", "s"),  # rejected: arity
    ("XLEN", "s"),
    ("XINFO", "STREAM", "s"),
    ("XINFO",),  # rejected as the container: cmdstat_xinfo
    ("XINFO", "NOPE"),  # unknown subcommand: an ERR, no command's line
    ("NOSUCH", "x"),  # unknown command: the same
    ("XGROUP", "CREATECONSUMER", "s", "g", "c"),  # NOGROUP, failed
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),  # NOGROUP, failed
    ("XGROUP", "CREATE", "s", "g", "$"),
    ("XGROUP", "CREATE", "s", "g", "$"),  # BUSYGROUP, failed
    ("MULTI",),
    ("XLEN", "s"),  # queued: counted only if EXEC runs it
    ("XADD", "s"),  # rejected while queueing
    ("EXEC",),  # EXECABORT: a failed EXEC
    ("MULTI",),
    ("XADD", "s", "1-1", "f", "v"),  # fails inside EXEC: a failed XADD, an ERR
    ("XLEN", "s"),
    ("EXEC",),  # ran: a call, not failed
    ("EXEC",),  # ERR EXEC without MULTI: failed
    ("CLIENT", "ID"),
    ("CONFIG", "GET", "maxclients"),
    ("XREAD", "COUNT", "1", "STREAMS", "s", "0"),
    ("XACK", "s", "g", "1-1"),
    ("XACK", "s"),  # rejected: arity
)


def info_fields(client: RespClient, section: str) -> dict[str, str]:
    text = client.execute("INFO", section)
    text = text.decode() if isinstance(text, bytes) else str(text)
    fields = {}
    for line in text.split("\r\n"):
        if line and not line.startswith("#"):
            key, _, value = line.partition(":")
            fields[key] = value
    return fields


def counted(client: RespClient) -> tuple[dict[str, tuple[str, str, str]], dict[str, str], str]:
    """(commandstats without the times, errorstats, total_error_replies)."""
    commands = {}
    for name, value in info_fields(client, "commandstats").items():
        match = CMDSTAT.match(value)
        assert match is not None, (name, value)
        calls, usec, per_call, rejected, failed = match.groups()
        expected = int(usec) / int(calls) if int(calls) else 0.0
        assert abs(float(per_call) - expected) <= 0.01, value
        commands[name] = (calls, rejected, failed)
    errors = info_fields(client, "errorstats")
    total = info_fields(client, "stats")["total_error_replies"]
    return commands, errors, total


def run_script(client: RespClient) -> list[Any]:
    client.execute("CONFIG", "RESETSTAT")
    return [client.pipeline(argv)[0] for argv in SCRIPT]


def test_commandstats_and_errorstats_match_redis(redis_raw: RespClient, sk: RespClient) -> None:
    theirs_replies, ours_replies = run_script(redis_raw), run_script(sk)
    kinds = [type(r).__name__ for r in theirs_replies]
    assert [type(r).__name__ for r in ours_replies] == kinds
    theirs, ours = counted(redis_raw), counted(sk)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    assert ours[2] == theirs[2]
    # The figures checked above, spelled out (Redis's own tests check the same rules).
    # XADD: ran 3 times (one failed, one failed inside EXEC), refused twice (arity).
    assert ours[0]["cmdstat_xadd"] == ("3", "2", "2")
    assert ours[0]["cmdstat_xinfo"] == ("0", "1", "0")
    assert ours[0]["cmdstat_exec"] == ("3", "0", "2")
    assert ours[0]["cmdstat_xreadgroup"] == ("1", "0", "1")
    assert ours[1]["errorstat_NOGROUP"] == "count=2"
    assert ours[1]["errorstat_EXECABORT"] == "count=1"


def test_info_stats_total_commands_processed_counts_calls(redis_raw: RespClient,
                                                          sk: RespClient) -> None:
    for client in (redis_raw, sk):
        run_script(client)
    # Refused commands are not processed ones; commands run by EXEC are.
    theirs = info_fields(redis_raw, "stats")["total_commands_processed"]
    assert info_fields(sk, "stats")["total_commands_processed"] == theirs


def test_config_resetstat_clears_the_counters(redis_raw: RespClient, sk: RespClient) -> None:
    for client in (redis_raw, sk):
        run_script(client)
        assert client.execute("CONFIG", "RESETSTAT") == "OK"
    for client in (redis_raw, sk):
        commands, errors, total = counted(client)
        # RESETSTAT counts itself after clearing it all (an INFO counts once it has replied).
        assert commands == {"cmdstat_config|resetstat": ("1", "0", "0")}
        assert errors == {}
        assert total == "0"


def test_default_info_has_errorstats_not_commandstats(redis_raw: RespClient,
                                                      sk: RespClient) -> None:
    for client in (redis_raw, sk):
        client.execute("CONFIG", "RESETSTAT")
        client.pipeline(("NOSUCH",))
    sections = []
    for client in (redis_raw, sk):
        text = client.execute("INFO")
        text = text.decode() if isinstance(text, bytes) else str(text)
        assert "errorstat_ERR:count=1\r\n" in text
        assert "cmdstat_" not in text
        everything = client.execute("INFO", "everything")
        everything = everything.decode() if isinstance(everything, bytes) else str(everything)
        assert "# Commandstats\r\ncmdstat_" in everything
        sections.append([line for line in text.split("\r\n") if line.startswith("# ")])
    ours = sections[1]
    assert ours.index("# Errorstats") == ours.index("# Cluster") - 1


def _cmd_of(observer: RespClient, client_id: int) -> str:
    line = observer.execute("CLIENT", "LIST", "ID", str(client_id))
    line = line.decode() if isinstance(line, bytes) else str(line)
    match = re.search(r" cmd=(\S+) ", line)
    assert match is not None, line
    return match.group(1)


def _last_commands(observer: RespClient, other: RespClient) -> list[str]:
    other_id = other.execute("CLIENT", "ID")
    seen = [_cmd_of(observer, other_id)]
    for argv in (("XADD", "s", "*", "f", "v"), ("XINFO",), ("NOSUCH",), ("XINFO", "STREAM", "s"),
                 ("XADD", "s"), ("CONFIG", "GET", "maxclients"), ("XINFO", "NOPE")):
        other.pipeline(argv)
        seen.append(_cmd_of(observer, other_id))
    info = other.execute("CLIENT", "INFO")
    info = info.decode() if isinstance(info, bytes) else str(info)
    seen.append(re.search(r" cmd=(\S+) ", info).group(1))  # type: ignore[union-attr]
    return seen


def test_client_list_cmd_names_the_subcommand(redis_raw_factory: Callable[..., RespClient],
                                              served: ServerHandle) -> None:
    theirs = _last_commands(redis_raw_factory(), redis_raw_factory())
    ours = _last_commands(connect(served), connect(served))
    assert ours == theirs
    assert ours == ["client|id", "xadd", "xinfo", "NULL", "xinfo|stream", "xadd", "config|get",
                    "NULL", "client|info"]


def test_blocked_read_timing_out_counts_one_call(redis_raw_factory: Callable[..., RespClient],
                                                 served: ServerHandle) -> None:
    results = []
    for client in (redis_raw_factory(), connect(served)):
        client.execute("CONFIG", "RESETSTAT")
        assert client.execute("XREAD", "BLOCK", "20", "STREAMS", "nokey", "$") is None
        client.execute("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM")
        assert client.execute("XREADGROUP", "GROUP", "g", "c", "BLOCK", "20",
                              "STREAMS", "s2", ">") is None
        commands, errors, total = counted(client)
        results.append((commands["cmdstat_xread"], commands["cmdstat_xreadgroup"], total))
    assert results[1] == results[0] == (("1", "0", "0"), ("1", "0", "0"), "0")


def test_protocol_error_counts_as_an_err_reply(redis_raw_factory: Callable[..., RespClient],
                                               served: ServerHandle) -> None:
    results = []
    for observer, bad in ((redis_raw_factory(), redis_raw_factory()),
                          (connect(served), connect(served))):
        observer.execute("CONFIG", "RESETSTAT")
        bad.send_raw(b"*1\r\n$-5\r\n")
        with pytest.raises(RespError) as refused:
            bad.read()
        line = str(refused.value)
        _, errors, total = counted(observer)
        results.append((line, errors, total))
    assert results[1] == results[0]
    assert results[0][1] == {"errorstat_ERR": "count=1"}


def _blocked_then_group_destroyed(reader: RespClient, other: RespClient,
                                  wait_blocked: Callable[[], None]) -> tuple[Any, ...]:
    other.execute("XADD", "s3", "666", "f", "v")
    other.execute("XGROUP", "CREATE", "s3", "g", "$")
    other.execute("CONFIG", "RESETSTAT")
    reader.send("XREADGROUP", "GROUP", "g", "Alice", "BLOCK", "0", "STREAMS", "s3", ">")
    wait_blocked()
    other.execute("XGROUP", "DESTROY", "s3", "g")
    with pytest.raises(RespError) as ended:
        reader.read()
    commands, errors, total = counted(other)
    return ended.value.prefix, commands["cmdstat_xreadgroup"], errors, total


def _blocked_clients(client: RespClient) -> int:
    return int(info_fields(client, "clients")["blocked_clients"])


def test_blocked_xreadgroup_whose_group_is_destroyed(
        redis_raw_factory: Callable[..., RespClient], served: ServerHandle) -> None:
    """One call, one failed call, one NOGROUP error (Redis's stream-cgroups tests check the
    same; the error's text differs between 7.0 and 8.x, its code does not). A deleted key
    ends it with NOGROUP in 8.x but UNBLOCKED in 7.0: tests/engine/exec/test_stats.py."""
    results = []
    for reader, other in ((redis_raw_factory(), redis_raw_factory()),
                          (connect(served), connect(served))):
        def wait_blocked(other: RespClient = other) -> None:
            deadline = time.monotonic() + 5
            while _blocked_clients(other) < 1:
                assert time.monotonic() < deadline
                time.sleep(0.01)
        results.append(_blocked_then_group_destroyed(reader, other, wait_blocked))
    assert results[1] == results[0]
    assert results[0] == ("NOGROUP", ("1", "0", "1"), {"errorstat_NOGROUP": "count=1"}, "1")
