"""Differential-test helpers: the same argv on the engine and on a real redis-server.

Owns `run_both` (run one argv on both, assert the same reply or the same error line, return it),
`Both` (the pair plus shorthands), `outcome` and `err` (one side's reply or error line), the
engine clock used by differential tests (wall-clock ms, because the oracle runs on real time), and
the normalisers for fields that depend on time (`Near`: idle times compared within a tolerance) or
on auto-generated IDs (`id_shape`). The local oracle is Redis 7.0.15: callers must keep 8.x-only
behaviour out of these comparisons (see /work/notes/redis8-streams.md and
tests/differential/test_redis8.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from streamkeep import Engine, ReplyError
from streamkeep.engine.exec.table import COMMANDS
from tests.support.resp_client import RespClient, RespError

Normaliser = Callable[[Any], Any]


class WallClock:
    """The engine's clock in differential tests: real milliseconds, like the server's."""

    def __call__(self) -> int:
        return int(time.time() * 1000)


class Near:
    """An idle time / delivery time: equal to another Near within `tol` ms (two processes
    read their clocks a few ms apart), or within twice the longest a command took to run on
    both (`run_both`'s `slowest_pair_ms`), whichever is more: the two sides stamp a command's
    time that far apart, and a busy machine can stall between them for seconds."""

    __slots__ = ("value",)
    tol = 1500
    slowest_pair_ms = 0.0  # the longest engine-then-Redis round of run_both so far

    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        tol = max(self.tol, 2 * Near.slowest_pair_ms + 100)
        return isinstance(other, Near) and abs(self.value - other.value) <= tol

    def __hash__(self) -> int:  # pragma: no cover - never hashed meaningfully
        return 0

    def __repr__(self) -> str:
        return f"~{self.value}"


_ID_RE = re.compile(rb"^\d+-\d+$")


def id_shape(value: Any) -> Any:
    """Every `ms-seq` bulk replaced by the marker b'<id>' (for replies to `*` XADDs)."""
    if isinstance(value, bytes) and _ID_RE.match(value):
        return b"<id>"
    if isinstance(value, list):
        return [id_shape(v) for v in value]
    return value


IDMP_FIELDS = (b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked",
               b"iids-added", b"iids-duplicates")


def _word(arg: Any) -> bytes:
    return (arg.encode() if isinstance(arg, str) else bytes(arg)).lower()


def without_idmp_fields(reply: Any) -> Any:
    """An XINFO STREAM reply (flat RESP2 map) without Redis 8.6's idempotent-producer fields,
    which the 7.0 oracle does not have (tests/differential/test_redis86_idmp.py checks them)."""
    if not isinstance(reply, list):
        return reply
    out: list[Any] = []
    for i in range(0, len(reply) - 1, 2):
        if reply[i] not in IDMP_FIELDS:
            out += reply[i:i + 2]
    return out


_IDMP_FIELD_RESP = re.compile(
    rb"\$\d+\r\n(?:" + b"|".join(re.escape(f) for f in IDMP_FIELDS) + rb")\r\n:\d+\r\n")
_IDMP_FIELD_CLI = re.compile(r'^\s*\d+# "(?:' + "|".join(
    re.escape(f.decode()) for f in IDMP_FIELDS) + r')" => .*\n', re.M)


def without_idmp_fields_resp(data: bytes) -> bytes:
    """An XINFO STREAM reply's RESP2/RESP3 bytes without 8.6's IDMP fields (the header's
    element count lowered to match), as the 7.0 oracle writes it."""
    stripped, removed = _IDMP_FIELD_RESP.subn(b"", data)
    if not removed:
        return data
    kind, rest = stripped[:1], stripped[1:]
    count, sep, body = rest.partition(b"\r\n")
    per_field = 1 if kind == b"%" else 2  # RESP3: map pairs; RESP2: flat elements
    return kind + b"%d" % (int(count) - removed * per_field) + sep + body


def without_idmp_fields_cli(text: str) -> str:
    """redis-cli's `-3` rendering of an XINFO STREAM map without 8.6's IDMP fields, the
    remaining `N#` lines renumbered (width kept) as redis-cli numbers them."""
    stripped = _IDMP_FIELD_CLI.sub("", text)
    if stripped == text:
        return text
    counter = iter(range(1, 1 << 30))

    def renumber(match: re.Match[str]) -> str:
        return f"{next(counter):>{len(match.group(1))}}#"

    return re.sub(r"^(\s*\d+)#", renumber, stripped, flags=re.M)


def outcome(target: Any, *argv: Any) -> tuple[str, Any]:
    """("ok", reply) or ("err", line), whatever runs the command; an XINFO STREAM reply
    without the fields the 7.0 oracle lacks (without_idmp_fields)."""
    try:
        reply = target.execute(*argv)
    except (ReplyError, RespError) as err:
        return "err", str(err)
    if len(argv) > 2 and _word(argv[0]) == b"xinfo" and _word(argv[1]) == b"stream":
        reply = without_idmp_fields(reply)
    return "ok", reply


def err(target: Any, *argv: Any) -> str:
    """The error line `target` (engine, connection, ...) answers argv with; fails if it succeeds."""
    kind, value = outcome(target, *argv)
    assert kind == "err", f"{argv!r} did not fail: {value!r}"
    return value


def run_both(engine: Engine, redis: Any, *argv: Any, normalise: Normaliser | None = None) -> Any:
    """Run argv on both; assert the same reply (after `normalise`) or the same error line.

    Returns Redis's reply (normalised, if asked), or for an error a `ReplyError` carrying the
    line (not raised)."""
    began = time.monotonic()
    ours, theirs = outcome(engine, *argv), outcome(redis, *argv)
    Near.slowest_pair_ms = max(Near.slowest_pair_ms, (time.monotonic() - began) * 1000)
    if normalise is not None:
        if ours[0] == "ok":
            ours = ("ok", normalise(ours[1]))
        if theirs[0] == "ok":
            theirs = ("ok", normalise(theirs[1]))
    assert ours == theirs, f"\nargv:   {argv!r}\nengine: {ours!r}\nredis:  {theirs!r}"
    status, value = theirs
    return ReplyError(value) if status == "err" else value


class Both:
    """An engine and a Redis connection driven in lockstep."""

    def __init__(self, engine: Engine, redis: Any) -> None:
        self.engine = engine
        self.redis = redis
        Near.slowest_pair_ms = 0.0  # (a test's own commands set the idle times' tolerance)

    def __call__(self, *argv: Any, normalise: Normaliser | None = None) -> Any:
        return run_both(self.engine, self.redis, *argv, normalise=normalise)

    def ok(self, *argv: Any, normalise: Normaliser | None = None) -> Any:
        """Same as calling, but the reply must not be an error."""
        reply = self(*argv, normalise=normalise)
        assert not isinstance(reply, ReplyError), f"{argv!r} failed: {reply}"
        return reply

    def err(self, *argv: Any) -> str:
        """Both must fail with the same line; returns it."""
        reply = self(*argv)
        assert isinstance(reply, ReplyError), f"{argv!r} did not fail: {reply!r}"
        return str(reply)

    def script(self, *commands: tuple[Any, ...]) -> list[Any]:
        return [self(*argv) for argv in commands]

    def bulk(self, commands: list[tuple[Any, ...]]) -> None:
        """Many commands, pipelined to Redis; every reply compared."""
        theirs = self.redis.pipeline(*commands)
        for argv, reply in zip(commands, theirs, strict=True):
            ours = outcome(self.engine, *argv)
            if isinstance(reply, RespError):
                assert ours == ("err", str(reply)), argv
            else:
                assert ours == ("ok", reply), argv

    def config(self, name: str, value: int) -> None:
        """Set a stream-node config on both sides."""
        assert self.redis.execute("CONFIG", "SET", name, str(value)) == "OK"
        self.engine.set_config(name, value)


# --- the engine under test, embedded or behind the network server ---------------------------------


def config_set_over_wire() -> bool:
    """True once the command table has CONFIG SET (engine.cmd_admin)."""
    spec = COMMANDS.get(b"config")
    return spec is not None and b"set" in spec.subcommands


class ServedEngine:
    """An engine served by an in-process streamkeep server, driven through a socket: the same
    `execute` / `set_config` as an `Engine` (RESP2 replies as RespClient returns them, which are
    the embedded API's plain values; error replies raised as ReplyError), so the differential
    suites run unchanged through the network server."""

    def __init__(self, engine: Engine) -> None:
        from tests.support.server_util import start_server

        self.engine = engine
        self.handle = start_server(engine)
        self.client = RespClient(self.handle.host, self.handle.port, timeout=30)

    def execute(self, *argv: Any) -> Any:
        try:
            return self.client.execute(*argv)
        except RespError as err:
            raise ReplyError(str(err)) from None

    def set_config(self, name: str, value: Any) -> None:
        if config_set_over_wire():
            assert self.execute("CONFIG", "SET", name, str(value)) == "OK"
        else:  # no CONFIG SET yet: change the served engine's setting in process
            self.engine.set_config(name, value)

    def close(self) -> None:
        self.client.close()
        self.handle.stop()


BACKENDS = ("embedded", "server")


# --- normalisers for time-dependent replies ------------------------------------------------------


def pending_norm(reply: Any) -> Any:
    """XPENDING extended form: [id, consumer, idle, count] with idle as Near."""
    if not isinstance(reply, list):
        return reply
    return [[i, c, Near(idle), n] for i, c, idle, n in reply]


def flat_map(reply: list[Any]) -> dict[bytes, Any]:
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


def consumers_norm(reply: Any) -> Any:
    """XINFO CONSUMERS: name and pending only (7.0 lacks `inactive`), idle as Near."""
    if not isinstance(reply, list):
        return reply
    out = []
    for item in reply:
        m = flat_map(item)
        out.append([m[b"name"], m[b"pending"], Near(m[b"idle"])])
    return out


def groups_norm(reply: Any) -> Any:
    """XINFO GROUPS without entries-read/lag (they differ between 7.0 and 8.x once entries
    were deleted or trimmed; test_redis8 covers 8.x's arithmetic)."""
    if not isinstance(reply, list):
        return reply
    out = []
    for item in reply:
        m = flat_map(item)
        out.append([m[b"name"], m[b"consumers"], m[b"pending"], m[b"last-delivered-id"]])
    return out


REDIS_DEFAULTS = {"stream-node-max-entries": 100, "stream-node-max-bytes": 4096,
                  "notify-keyspace-events": ""}


def reset_redis_config(redis: Any) -> None:
    for name, value in REDIS_DEFAULTS.items():
        redis.execute("CONFIG", "SET", name, str(value))


__all__ = [
    "BACKENDS", "Both", "ServedEngine", "config_set_over_wire", "Near", "WallClock", "consumers_norm", "groups_norm", "id_shape", "outcome",
    "pending_norm", "reset_redis_config", "run_both",
]
