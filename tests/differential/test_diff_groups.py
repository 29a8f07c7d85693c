"""Differential tests of the consumer-group commands against the real redis-server: XGROUP
(CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XREADGROUP, XACK, XPENDING, XCLAIM,
XAUTOCLAIM, plus a seeded random differential fuzz over every stream command.

Every argv runs on the engine and on Redis; replies and error lines must match byte for byte
(idle times within a small tolerance: both sides run on the wall clock). Only behaviour common to
Redis 7.0 (the local oracle) and 8.x is compared. Where they differ (consumers created or touched
by XREADGROUP/XCLAIM/XAUTOCLAIM that serve nothing, lag/entries-read once entries were deleted,
ENTRIESREAD clamping, XINFO's active-time) the scenario avoids the difference here and
tests/differential/test_redis8.py asserts the 8.x behaviour.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest

from streamkeep import Engine
from tests.support.diffutil import (
    Both,
    WallClock,
    consumers_norm,
    groups_norm,
    id_shape,
    pending_norm,
    reset_redis_config,
)


@pytest.fixture
def both(redis_raw, backend) -> Iterator[Both]:
    """Runs every test twice: on an embedded engine and through the network server."""
    reset_redis_config(redis_raw)
    try:
        yield Both(backend(Engine(clock=WallClock())), redis_raw)
    finally:  # the server is shared by the whole session
        reset_redis_config(redis_raw)


def entries(both: Both, key: str, *ids: str) -> None:
    for sid in ids:
        both.ok("XADD", key, sid, "f", sid)


def check_state(both: Both, key: str, group: str, full_groups: bool = False) -> None:
    """Compare the observable PEL/group state."""
    both("XPENDING", key, group)
    both("XPENDING", key, group, "-", "+", "1000", normalise=pending_norm)
    both("XINFO", "CONSUMERS", key, group, normalise=consumers_norm)
    both("XINFO", "GROUPS", key, normalise=None if full_groups else groups_norm)


# --- XGROUP ----------------------------------------------------------------------------------------


def test_xgroup_create(both):
    entries(both, "s", "1-1", "2-2", "3-3")
    both.script(
        ("XGROUP", "CREATE", "s", "g1", "0"),
        ("XGROUP", "CREATE", "s", "g1", "0"),
        ("XGROUP", "CREATE", "s", "g2", "$"),
        ("XGROUP", "CREATE", "s", "g3", "2-2"),
        ("XGROUP", "CREATE", "s", "g4", "2"),
        ("XGROUP", "CREATE", "s", "g5", "99-99"),
        ("XGROUP", "CREATE", "s", "g6", "0", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g7", "0", "ENTRIESREAD", "1"),
        ("XGROUP", "CREATE", "s", "g8", "0", "ENTRIESREAD", "-1", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g9", "0", "entriesread", "0"),
        ("xgroup", "create", "s", "g10", "3-3", "mkstream", "ENTRIESREAD", "3"),
        ("XGROUP", "CREATE", "s", "", "0"),
        ("XGROUP", "CREATE", "s", "g11", "0", "MKSTREAM", "MKSTREAM"),
        ("XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"),
        ("XGROUP", "CREATE", "new2", "g", "5-5", "MKSTREAM"),
        ("XINFO", "STREAM", "new"),
        ("XINFO", "GROUPS", "new2"),
        ("EXISTS", "new", "new2"),
    )
    # lag of a group behind the first entry is 8.x's `length` rule (test_redis8).
    both("XINFO", "GROUPS", "s", normalise=groups_norm)


def test_xgroup_create_errors(both):
    entries(both, "s", "1-1")
    errors = [
        ("XGROUP", "CREATE", "missing", "g", "0"),
        ("XGROUP", "CREATE", "missing", "g", "$"),
        ("XGROUP", "CREATE", "missing", "g", "bad", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "bad"),
        ("XGROUP", "CREATE", "s", "g", "-"),
        ("XGROUP", "CREATE", "s", "g", "+"),
        ("XGROUP", "CREATE", "s", "g", "(1"),
        ("XGROUP", "CREATE", "s", "g", ">"),
        ("XGROUP", "CREATE", "s", "g", "0", "BOGUS"),
        ("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD"),
        ("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "x"),
        ("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "-2"),
        ("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "1.5"),
        ("XGROUP", "CREATE", "missing", "g", "0", "ENTRIESREAD", "-2"),
        ("XGROUP", "CREATE", "missing", "g", "0", "BOGUS"),
        ("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "MKSTREAM", "MKSTREAM", "MKSTREAM"),
        ("XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "1", "ENTRIESREAD", "1"),
        ("XGROUP", "CREATE", "s", "g"), ("XGROUP", "CREATE", "s"), ("XGROUP", "CREATE"),
    ]
    for argv in errors:
        both.err(*argv)
    both("EXISTS", "missing")
    both("XINFO", "GROUPS", "s")


def test_xgroup_setid(both):
    entries(both, "s", "1-1", "2-2", "3-3")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XGROUP", "SETID", "s", "g", "2-2"),
        ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XGROUP", "SETID", "s", "g", "$"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XGROUP", "SETID", "s", "g", "-"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "+"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "1-1", "ENTRIESREAD", "1"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "1", "ENTRIESREAD", "1"),
    )
    both("XINFO", "GROUPS", "s", normalise=groups_norm)  # behind first entry: 8.x lag rule
    both.script(
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-1"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "99-0", "entriesread", "3"),
        ("XINFO", "GROUPS", "s"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
    )
    errors = [
        ("XGROUP", "SETID", "missing", "g", "0"),
        ("XGROUP", "SETID", "s", "nogroup", "0"),
        ("XGROUP", "SETID", "s", "g", "bad"),
        ("XGROUP", "SETID", "s", "g", "(1"),
        ("XGROUP", "SETID", "s", "g", "0", "MKSTREAM"),
        ("XGROUP", "SETID", "missing", "g", "0", "MKSTREAM"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "x"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-5"),
        ("XGROUP", "SETID", "s", "g", "0", "BOGUS", "1"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "1", "ENTRIESREAD", "1"),
        ("XGROUP", "SETID", "s", "nogroup", "0", "ENTRIESREAD", "-5"),
        ("XGROUP", "SETID", "s", "g"),
    ]
    for argv in errors:
        both.err(*argv)


def test_xgroup_destroy(both):
    entries(both, "s", "1-1", "2-2")
    both.script(
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "CREATE", "s", "h", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XGROUP", "DESTROY", "s", "g"),
        ("XGROUP", "DESTROY", "s", "g"),
        ("XGROUP", "DESTROY", "s", "nope"),
        ("XGROUP", "DESTROY", "missing", "g"),
        ("XGROUP", "destroy", "s", "h"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XPENDING", "s", "g"),
        ("XGROUP", "DESTROY", "s"),
        ("XGROUP", "DESTROY", "s", "g", "extra"),
    )


def test_xgroup_consumers(both):
    entries(both, "s", "1-1", "2-2", "3-3")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XGROUP", "CREATECONSUMER", "s", "g", "alice"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "alice"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "bob"),
        ("XGROUP", "CREATECONSUMER", "s", "g", ""),
        ("XGROUP", "CREATECONSUMER", "s", "nogroup", "alice"),
        ("XGROUP", "CREATECONSUMER", "missing", "g", "alice"),
        ("XGROUP", "CREATECONSUMER", "s", "g"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "a", "b"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
        ("XGROUP", "DELCONSUMER", "s", "g", "alice"),
        ("XGROUP", "DELCONSUMER", "s", "g", "alice"),
        ("XGROUP", "DELCONSUMER", "s", "g", "nobody"),
        ("XGROUP", "DELCONSUMER", "s", "nogroup", "bob"),
        ("XGROUP", "DELCONSUMER", "missing", "g", "bob"),
        ("XGROUP", "DELCONSUMER", "s", "g"),
        ("XPENDING", "s", "g"),
        ("XGROUP", "DELCONSUMER", "s", "g", ""),
        ("XGROUP", "DELCONSUMER", "s", "g", "bob"),
        ("XPENDING", "s", "g"),
    )
    both("XINFO", "CONSUMERS", "s", "g", normalise=consumers_norm)


def test_xgroup_help_and_unknown(both):
    # The footer is 8.x's "Print this help." (7.0: "Prints"); test_redis8 checks the whole text.
    for argv in (("XGROUP", "HELP"), ("xgroup", "help")):
        both(*argv, normalise=lambda lines: lines[:-1])
    both.script(
        ("XGROUP", "HELP", "x"), ("XGROUP", "BOGUS"),
        ("XGROUP", "BOGUS", "s", "g", "x"), ("XGROUP",), ("XGROUP", "CREATECONSUMER"),
        ("XGROUP", "", "a"), ("XGROUP", "create\r\nx", "a", "b", "c"),
    )


# --- XREADGROUP ------------------------------------------------------------------------------------


def test_xreadgroup_new_entries_and_history(both):
    entries(both, "s", "1-1", "2-2", "3-3", "4-4", "5-5")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c2", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "1-1"),
        ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", "0-0"),
        ("XREADGROUP", "GROUP", "g", "c2", "STREAMS", "s", "18446744073709551615"),
        ("XREADGROUP", "GROUP", "g", "c3", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "0", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">"),
        ("XADD", "s", "6-6", "f", "v"),
        ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "-5", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0"),
    )
    check_state(both, "s", "g", full_groups=True)


def test_xreadgroup_deleted_entries_in_history(both):
    entries(both, "s", "1-1", "2-2", "3-3", "4-4")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    both.script(
        ("XDEL", "s", "2-2", "4-4"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", "2-2"),
        ("XTRIM", "s", "MAXLEN", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
    )
    both("XPENDING", "s", "g", "-", "+", "10", normalise=pending_norm)


def test_xreadgroup_noack(both):
    entries(both, "s", "1-1", "2-2", "3-3")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XREADGROUP", "GROUP", "g", "c", "NOACK", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "noack", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", "0"),
        ("XPENDING", "s", "g"),
    )
    check_state(both, "s", "g", full_groups=True)


def test_xreadgroup_multiple_streams(both):
    entries(both, "a", "1-1", "2-2")
    entries(both, "b", "1-5", "3-3", "4-4")
    entries(both, "c", "9-9")
    for key in ("a", "b", "c"):
        both.ok("XGROUP", "CREATE", key, "g", "0")
    both.ok("XGROUP", "CREATE", "c", "h", "$")
    both.script(
        ("XREADGROUP", "GROUP", "g", "x", "COUNT", "1", "STREAMS", "a", "b", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "x", "STREAMS", "a", "b", "c", ">", "0", ">"),
        ("XREADGROUP", "GROUP", "g", "x", "STREAMS", "a", "b", "c", "0", "0", "0"),
        ("XREADGROUP", "GROUP", "g", "y", "STREAMS", "a", "b", "c", "0", "0", "0"),
        ("XREADGROUP", "GROUP", "g", "x", "STREAMS", "a", "a", ">", "0"),
        ("XREADGROUP", "GROUP", "g", "x", "STREAMS", "a", "nokey", ">", ">"),
        ("XREADGROUP", "GROUP", "h", "x", "STREAMS", "c", "a", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "x", "STREAMS", "a", "b", ">", "$"),
        ("XREADGROUP", "GROUP", "g", "x", "STREAMS", "a", "b", ">", "bad"),
    )
    for key in ("a", "b", "c"):
        check_state(both, key, "g", full_groups=True)


def test_xreadgroup_errors(both):
    entries(both, "s", "1-1")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    errors = [
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "missing", ">"),
        ("XREADGROUP", "GROUP", "nogroup", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "bad"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "-"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "(0"),
        ("XREADGROUP", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "STREAMS", "s", ">", "x", "y"),
        ("XREADGROUP", "GROUP", "g", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "-1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BOGUS", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1"),
        ("XREADGROUP", "GROUP", "g", "c", "NOACK", "x", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "missing", "s", "$", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "missing", "$", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "missing", "bad", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s", ">", "bad"),
        ("XREAD", "GROUP", "g", "c", "STREAMS", "s", ">"),
        ("XREAD", "STREAMS", "s", ">"),
        ("XREADGROUP",), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"),
    ]
    for argv in errors:
        both.err(*argv)
    check_state(both, "s", "g", full_groups=True)


def test_xreadgroup_block_served_synchronously(both):
    entries(both, "s", "1-1", "2-2")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "100", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "COUNT", "1", "STREAMS", "s", "0"),
    )
    start = time.monotonic()
    both("XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "s", ">")
    assert time.monotonic() - start >= 0.09  # both really waited


def test_xreadgroup_rewound_group_redelivers(both):
    entries(both, "s", "1-1", "2-2", "3-3")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"),
        ("XCLAIM", "s", "g", "a", "0", "1-1", "RETRYCOUNT", "7"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "b", "COUNT", "2", "STREAMS", "s", ">"),
    )
    check_state(both, "s", "g", full_groups=True)


# --- XACK ------------------------------------------------------------------------------------------


def test_xack(both):
    entries(both, "s", "1-1", "2-2", "3-3", "4-4")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    both.script(
        ("XACK", "s", "g", "1-1"),
        ("XACK", "s", "g", "1-1"),
        ("XACK", "s", "g", "2-2", "2-2", "3-3", "9-9"),
        ("XACK", "s", "g", "4"),
        ("XACK", "s", "g", "bad"),
        ("XACK", "s", "g", "4-4", "bad"),
        ("XACK", "s", "g", "-"),
        ("XACK", "s", "g", "+"),
        ("XACK", "s", "nogroup", "4-4"),
        ("XACK", "s", "nogroup", "bad"),
        ("XACK", "missing", "g", "bad"),
        ("XACK", "s", "g"),
        ("XACK", "s"),
        ("XPENDING", "s", "g"),
        ("XACK", "s", "g", "4-4"),
        ("XPENDING", "s", "g"),
    )
    check_state(both, "s", "g", full_groups=True)


# --- XPENDING --------------------------------------------------------------------------------------


def _pending_setup(both: Both) -> None:
    entries(both, "s", "1-1", "2-2", "3-3", "4-4", "5-5", "6-6")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "STREAMS", "s", ">")
    both.ok("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">")
    both.ok("XCLAIM", "s", "g", "bob", "0", "3-3", "IDLE", "100000", "RETRYCOUNT", "4")


def test_xpending_forms(both):
    _pending_setup(both)
    both("XPENDING", "s", "g")
    for args in [
        ("-", "+", "10"), ("-", "+", "0"), ("-", "+", "-1"), ("-", "+", "2"),
        ("2-2", "4-4", "10"), ("(2-2", "(4-4", "10"), ("2", "4", "10"), ("5", "+", "10"),
        ("-", "+", "10", "bob"), ("-", "+", "10", "alice"), ("-", "+", "10", "nobody"),
        ("-", "+", "1", "alice"), ("3", "+", "9223372036854775807", "alice"),
        ("IDLE", "0", "-", "+", "10"), ("IDLE", "50000", "-", "+", "10"),
        ("IDLE", "50000", "-", "+", "10", "bob"), ("IDLE", "50000", "-", "+", "10", "alice"),
        ("IDLE", "-5", "-", "+", "10"), ("idle", "10000000", "-", "+", "10"),
        ("+", "-", "10"), ("(-", "+", "1"),
    ]:
        both("XPENDING", "s", "g", *args, normalise=pending_norm)


def test_xpending_errors(both):
    _pending_setup(both)
    errors = [
        ("XPENDING", "s"), ("XPENDING", "s", "g", "-"), ("XPENDING", "s", "g", "-", "+"),
        ("XPENDING", "s", "g", "IDLE", "10", "-", "+", "10", "c", "extra"),
        ("XPENDING", "s", "g", "IDLE", "10", "-", "+"),
        ("XPENDING", "s", "g", "IDLE", "x", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "x", "-", "+"),
        ("XPENDING", "s", "g", "-", "+", "x"), ("XPENDING", "s", "g", "bad", "+", "10"),
        ("XPENDING", "s", "g", "-", "bad", "10"), ("XPENDING", "s", "g", "bad", "bad", "x"),
        ("XPENDING", "s", "g", "(-", "+", "10"), ("XPENDING", "s", "g", "-", "(+", "10"),
        ("XPENDING", "s", "g", "(18446744073709551615-18446744073709551615", "+", "10"),
        ("XPENDING", "s", "g", "-", "(0-0", "10"),
        ("XPENDING", "s", "nogroup"), ("XPENDING", "missing", "g"),
        ("XPENDING", "s", "nogroup", "-", "+", "10"), ("XPENDING", "missing", "g", "bad", "+", "1"),
        ("XPENDING", "s", "g", "IDLE", "10", "-", "+", "x"),
    ]
    for argv in errors:
        both.err(*argv)


# --- XCLAIM ----------------------------------------------------------------------------------------


def test_xclaim_basic_and_options(both):
    _pending_setup(both)
    now = int(time.time() * 1000)
    both.script(
        ("XCLAIM", "s", "g", "carol", "0", "1-1"),
        ("XCLAIM", "s", "g", "carol", "0", "2-2", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "50000", "3-3", "4-4"),
        ("XCLAIM", "s", "g", "carol", "10000000", "3-3"),
        ("XCLAIM", "s", "g", "bob", "0", "4-4", "IDLE", "200000"),
        ("XCLAIM", "s", "g", "bob", "0", "5-5", "TIME", str(now - 300000)),
        ("XCLAIM", "s", "g", "bob", "0", "1-1", "TIME", str(now + 10**9)),
        ("XCLAIM", "s", "g", "bob", "0", "2-2", "IDLE", "-5"),
        ("XCLAIM", "s", "g", "bob", "0", "2-2", "TIME", "-5"),
        ("XCLAIM", "s", "g", "bob", "0", "2-2", "RETRYCOUNT", "0"),
        ("XCLAIM", "s", "g", "bob", "0", "2-2", "RETRYCOUNT", "-3"),
        ("XCLAIM", "s", "g", "bob", "-10", "2-2", "JUSTID", "RETRYCOUNT", "9"),
        ("XCLAIM", "s", "g", "bob", "0", "2-2", "2-2", "JUSTID"),
        ("XCLAIM", "s", "g", "bob", "0", "9-9", "1"),
        ("XCLAIM", "s", "g", "bob", "0", "1-1", "idle", "1", "time", "2", "justid", "force"),
    )
    check_state(both, "s", "g")


def test_xclaim_force(both):
    entries(both, "s", "1-1", "2-2", "3-3", "4-4")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "s", ">")
    both.script(
        ("XCLAIM", "s", "g", "b", "0", "2-2"),
        ("XCLAIM", "s", "g", "b", "0", "2-2", "FORCE"),
        ("XCLAIM", "s", "g", "b", "0", "3-3", "FORCE", "JUSTID"),
        ("XCLAIM", "s", "g", "b", "10000000", "4-4", "FORCE", "RETRYCOUNT", "5"),
        ("XCLAIM", "s", "g", "b", "0", "9-9", "FORCE"),
        ("XCLAIM", "s", "g", "b", "10000000", "1-1", "FORCE"),
        ("XDEL", "s", "4-4"),
        ("XCLAIM", "s", "g", "b", "0", "4-4", "FORCE"),
    )
    check_state(both, "s", "g", full_groups=True)


def test_xclaim_lastid(both):
    entries(both, "s", "1-1", "2-2", "3-3", "4-4")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "s", ">")
    both.script(
        ("XCLAIM", "s", "g", "a", "0", "1-1", "LASTID", "3-3"),
        ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "a", "0", "1-1", "LASTID", "2-2"),
        ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "a", "0", "1-1", "LASTID", "bad"),
        ("XCLAIM", "s", "g", "a", "0", "1-1", "LASTID", "+"),
        ("XCLAIM", "s", "g", "a", "0", "1-1", "LASTID"),
        ("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">"),
    )
    check_state(both, "s", "g")


def test_xclaim_deleted_entries_leave_the_pel(both):
    entries(both, "s", "1-1", "2-2", "3-3")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    both.script(
        ("XDEL", "s", "1-1", "2-2"),
        ("XPENDING", "s", "g"),
        ("XCLAIM", "s", "g", "b", "10000000", "1-1", "3-3"),
        ("XPENDING", "s", "g"),
        ("XCLAIM", "s", "g", "b", "0", "2-2", "3-3", "JUSTID"),
        ("XPENDING", "s", "g"),
    )
    check_state(both, "s", "g")


def test_xclaim_errors(both):
    _pending_setup(both)
    errors = [
        ("XCLAIM", "missing", "g", "c", "0", "1-1"),
        ("XCLAIM", "s", "nogroup", "c", "0", "1-1"),
        ("XCLAIM", "missing", "g", "c", "x", "1-1"),
        ("XCLAIM", "s", "g", "c", "x", "1-1"),
        ("XCLAIM", "s", "g", "c", "1.5", "1-1"),
        ("XCLAIM", "s", "g", "c", "0", "bad"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "bad"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "IDLE"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "IDLE", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "TIME", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "RETRYCOUNT", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "RETRYCOUNT"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "JUSTID", "2-2"),
        ("XCLAIM", "s", "g", "c", "0", "-", "1-1"),
        ("XCLAIM", "s", "g", "c", "0", "+"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "FORCE", "NOPE"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "LASTID", "-"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "IDLE", "1", "BOGUS"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "line\r\nbreak"),
        ("XCLAIM", "s", "g", "c", "0"), ("XCLAIM", "s", "g", "c"),
    ]
    for argv in errors:
        both.err(*argv)
    both("XPENDING", "s", "g", "-", "+", "10", normalise=pending_norm)


# --- XAUTOCLAIM ------------------------------------------------------------------------------------


def test_xautoclaim(both):
    entries(both, "s", *[f"{i}-{i}" for i in range(1, 13)])
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    both.ok("XGROUP", "CREATECONSUMER", "s", "g", "b")
    both.script(
        ("XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "2"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "3-3", "COUNT", "2", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "(4-4", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "b", "10000000", "0", "COUNT", "3"),
        ("XAUTOCLAIM", "s", "g", "b", "10000000", "0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "12-12"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "13"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "-", "justid", "count", "3", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "b", "-7", "-", "COUNT", "100"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "1", "COUNT", "5"),
    )
    check_state(both, "s", "g")


def test_xautoclaim_deleted_entries(both):
    entries(both, "s", *[f"{i}-{i}" for i in range(1, 11)])
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    both.ok("XGROUP", "CREATECONSUMER", "s", "g", "b")
    both.script(
        ("XDEL", "s", "2-2", "3-3", "7-7"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "2"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "3"),
        ("XAUTOCLAIM", "s", "g", "b", "10000000", "0", "COUNT", "2"),
        ("XAUTOCLAIM", "s", "g", "b", "10000000", "0"),
        ("XPENDING", "s", "g"),
        ("XTRIM", "s", "MAXLEN", "0"),
        ("XAUTOCLAIM", "s", "g", "b", "0", "0", "JUSTID"),
        ("XPENDING", "s", "g"),
    )
    check_state(both, "s", "g")


def test_xautoclaim_attempts_limit(both):
    """COUNT x 10 PEL entries are examined at most; the cursor says where to go on."""
    entries(both, "s", *[f"{i}-0" for i in range(1, 61)])
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "COUNT", "30", "STREAMS", "s", ">")
    both.ok("XCLAIM", "s", "g", "a", "0", *[f"{i}-0" for i in range(1, 31)], "IDLE", "500000",
            "JUSTID")
    both.ok("XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    both.ok("XGROUP", "CREATECONSUMER", "s", "g", "b")
    both.script(
        ("XAUTOCLAIM", "s", "g", "b", "100000", "31", "COUNT", "2", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "b", "100000", "51", "COUNT", "1", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "b", "100000", "55", "COUNT", "1", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "b", "100000", "0", "COUNT", "1", "JUSTID"),
        ("XAUTOCLAIM", "s", "g", "b", "100000", "0", "COUNT", "4", "JUSTID"),
    )
    check_state(both, "s", "g")


def test_claims_over_a_pel_of_many_chunks(both):
    """XCLAIM and XAUTOCLAIM over a PEL of thousands of entries (the packed PEL's chunks hold
    at most 1024), owned by interleaved consumers, some deleted, some idle long: the bulk
    claim step moves them as Redis does, batch by batch (delivery counts, owners, cursors)."""
    n = 2600
    both.bulk([("XADD", "s", f"{i}-1", "f", "v") for i in range(1, n + 1)])
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    for k in range(13):  # alternating readers: ownership interleaves in runs of 200
        both.ok("XREADGROUP", "GROUP", "g", "ab"[k % 2], "COUNT", "200", "STREAMS", "s", ">")
    old = [f"{i}-1" for i in range(1, n + 1, 7)]
    both.ok("XCLAIM", "s", "g", "c", "0", *old, "IDLE", "500000", "JUSTID")
    both.ok("XDEL", "s", *[f"{i}-1" for i in range(5, n + 1, 11)])
    both.ok("XGROUP", "CREATECONSUMER", "s", "g", "d")
    cursor = "0-0"
    for _ in range(40):  # only the old ones are idle enough; deleted ones go whatever
        reply = both("XAUTOCLAIM", "s", "g", "d", "100000", cursor, "COUNT", "45")
        cursor = reply[0].decode()
        if cursor == "0-0":
            break
    assert cursor == "0-0"
    check_state(both, "s", "g")
    both("XCLAIM", "s", "g", "a", "0", *[f"{i}-1" for i in range(2, n + 1, 3)], "JUSTID")
    both("XCLAIM", "s", "g", "b", "0", *[f"{i}-1" for i in range(n, 0, -13)], "RETRYCOUNT",
         "4")
    both("XCLAIM", "s", "g", "c", "0", "9-1", "10-1", "9-1", "3000-1", "12-1", "FORCE")
    cursor = "0-0"
    for _ in range(40):
        reply = both("XAUTOCLAIM", "s", "g", "b", "0", cursor, "COUNT", "300", "JUSTID")
        cursor = reply[0].decode()
        if cursor == "0-0":
            break
    assert cursor == "0-0"
    check_state(both, "s", "g")


def test_xautoclaim_errors(both):
    entries(both, "s", "1-1")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    errors = [
        ("XAUTOCLAIM", "missing", "g", "c", "0", "0"),
        ("XAUTOCLAIM", "s", "nogroup", "c", "0", "0"),
        ("XAUTOCLAIM", "missing", "g", "c", "x", "0"),
        ("XAUTOCLAIM", "missing", "g", "c", "0", "bad"),
        ("XAUTOCLAIM", "missing", "g", "c", "0", "0", "COUNT", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "x", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "bad"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "(-"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "(18446744073709551615-18446744073709551615"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "-1"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "x"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "576460752303423488"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "BOGUS"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "JUSTID", "x"),
        ("XAUTOCLAIM", "s", "g", "c", "0"),
    ]
    for argv in errors:
        both.err(*argv)
    # COUNT * 16 bytes are allocated up front: the maximum COUNT can never be.
    both.err("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "576460752303423487")
    both("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "1000000")


# --- XINFO over group state (fields common to 7.0 and 8.x) ----------------------------------------


def test_xinfo_after_group_activity(both):
    entries(both, "s", "1-1", "2-2", "3-3", "4-4")
    for group in ("g", "h"):
        both.ok("XGROUP", "CREATE", "s", group, "0")
    both.ok("XREADGROUP", "GROUP", "g", "a", "COUNT", "3", "STREAMS", "s", ">")
    both.ok("XREADGROUP", "GROUP", "h", "b", "NOACK", "STREAMS", "s", ">")
    both.ok("XACK", "s", "g", "2-2")
    both("XINFO", "STREAM", "s")
    both("XINFO", "GROUPS", "s")
    both("XINFO", "CONSUMERS", "s", "g", normalise=consumers_norm)
    both.ok("XADD", "s", "5-5", "f", "v")
    both("XINFO", "GROUPS", "s")


# --- random differential fuzz ----------------------------------------------------------------------

KEYS = ["s1", "s2"]
GROUPS = ["g1", "g2"]
CONSUMERS = ["c1", "c2", "c3"]
SPECIAL_IDS = ["0", "0-0", "-", "bad", "(3", "18446744073709551615-0", "1-", "+5", " 1"]


class Fuzzer:
    """Random commands over a small key/group/consumer/ID space, replies compared each time.

    IDs are mostly picked among those the streams really hold (so deletes, claims and acks
    hit), sometimes near them, sometimes special or invalid. Node sizes are small for some
    seeds so `~` trimming crosses node boundaries."""

    def __init__(self, both: Both, seed: int) -> None:
        self.both = both
        self.rnd = random.Random(seed)
        self.added: dict[str, list[tuple[int, int]]] = {k: [] for k in KEYS + ["nokey"]}
        node_entries = self.rnd.choice([100, 2, 3, 5])
        node_bytes = self.rnd.choice([4096, 4096, 60, 150])
        both.config("stream-node-max-entries", node_entries)
        both.config("stream-node-max-bytes", node_bytes)

    def run(self, ops: int) -> None:
        makers = [
            (12, self.xadd), (2, self.xadd_trim), (3, self.xdel), (2, self.xtrim),
            (4, self.xrange), (2, self.xread), (1, self.xlen), (2, self.xgroup_create),
            (1, self.xgroup_setid), (1, self.xgroup_misc), (10, self.xreadgroup),
            (5, self.xack), (4, self.xpending), (4, self.xclaim), (3, self.xautoclaim),
            (2, self.xinfo), (1, self.xsetid), (1, self.delete_key),
        ]
        weights = [w for w, _ in makers]
        funcs = [f for _, f in makers]
        for _ in range(ops):
            self.rnd.choices(funcs, weights)[0]()

    # --- random arguments ----------------------------------------------------------------------

    def key(self) -> str:
        return self.rnd.choice(KEYS + ["nokey"] if self.rnd.random() < 0.05 else KEYS)

    def group(self) -> str:
        return self.rnd.choice(GROUPS + ["nogroup"] if self.rnd.random() < 0.05 else GROUPS)

    def consumer(self) -> str:
        return self.rnd.choice(CONSUMERS)

    def fields(self) -> list[str]:
        n = self.rnd.choice([1, 1, 2])
        value = lambda: self.rnd.choice(["v", str(self.rnd.randint(-99, 99)), "x" * 40])  # noqa: E731
        names = ["f0", "f1"] if self.rnd.random() < 0.8 else ["g0", "g1"]
        return [x for i in range(n) for x in (names[i], value())]

    def some_id(self, key: str, plus: bool = True) -> str:
        """An ID argument. `plus=False` for XREAD and XREADGROUP, where `+` means something
        else in 8.x (test_redis8)."""
        rnd = self.rnd
        added = self.added[key]
        r = rnd.random()
        if added and r < 0.6:
            ms, seq = rnd.choice(added)
            return f"{ms}-{seq}" if rnd.random() < 0.85 else str(ms)
        if r < 0.85:
            top = added[-1][0] if added else 5
            return f"{rnd.randint(0, top + 1)}-{rnd.randint(0, 3)}"
        specials = SPECIAL_IDS + ["+"] if plus else SPECIAL_IDS
        return rnd.choice(specials)

    def bound(self, key: str) -> str:
        r = self.rnd.random()
        if r < 0.25:
            return self.rnd.choice(["-", "+"])
        if r < 0.4:
            return "(" + self.some_id(key)
        return self.some_id(key)

    def new_id(self, key: str) -> str:
        rnd = self.rnd
        r = rnd.random()
        if r < 0.08:
            return self.some_id(key)  # usually too small: an error both sides agree on
        last_ms, last_seq = self.added[key][-1] if self.added[key] else (1, 0)
        if rnd.random() < 0.5:
            ms, seq = last_ms, last_seq + rnd.randint(1, 3)
        else:
            ms, seq = last_ms + rnd.randint(1, 3), rnd.randint(0, 2)
        return f"{ms}-*" if r < 0.3 else f"{ms}-{seq}"

    def record_add(self, key: str, reply: object) -> None:
        if isinstance(reply, bytes):
            ms, seq = map(int, reply.split(b"-"))
            self.added[key].append((ms, seq))

    def trim_args(self, key: str) -> list[str]:
        rnd = self.rnd
        if rnd.random() < 0.5:
            out = ["MAXLEN", rnd.choice(["=", "~", ""]), str(rnd.randint(0, 12))]
        else:
            out = ["MINID", rnd.choice(["=", "~", ""]), self.some_id(key)]
        out = [x for x in out if x]
        if out[1] == "~" and rnd.random() < 0.3:
            out += ["LIMIT", str(rnd.randint(0, 8))]
        return out

    def precreate(self, key: str, group: str, consumer: str) -> None:
        """Redis 7.0 creates the consumer only once something is served or claimed; 8.x
        always (test_redis8). Creating it first keeps both oracles in step."""
        self.both("XGROUP", "CREATECONSUMER", key, group, consumer)

    # --- commands ------------------------------------------------------------------------------

    def xadd(self) -> None:
        key = self.key()
        args = ["NOMKSTREAM"] if self.rnd.random() < 0.05 else []
        self.record_add(key, self.both("XADD", key, *args, self.new_id(key), *self.fields()))

    def xadd_trim(self) -> None:
        key = self.key()
        reply = self.both("XADD", key, *self.trim_args(key), self.new_id(key), *self.fields())
        self.record_add(key, reply)

    def xdel(self) -> None:
        key = self.key()
        self.both("XDEL", key, *[self.some_id(key) for _ in range(self.rnd.randint(1, 3))])

    def xtrim(self) -> None:
        key = self.key()
        self.both("XTRIM", key, *self.trim_args(key))

    def xrange(self) -> None:
        key = self.key()
        cmd = self.rnd.choice(["XRANGE", "XREVRANGE"])
        extra = ["COUNT", str(self.rnd.randint(-1, 4))] if self.rnd.random() < 0.4 else []
        self.both(cmd, key, self.bound(key), self.bound(key), *extra)

    def xread(self) -> None:
        keys = self.rnd.sample(KEYS, self.rnd.randint(1, 2))
        ids = [self.rnd.choice(["$", "0", self.some_id(k, plus=False)]) for k in keys]
        extra = ["COUNT", str(self.rnd.randint(0, 3))] if self.rnd.random() < 0.5 else []
        self.both("XREAD", *extra, "STREAMS", *keys, *ids)

    def xlen(self) -> None:
        self.both("XLEN", self.key())

    def xgroup_create(self) -> None:
        key = self.key()
        start = self.rnd.choice(["0", "$", self.some_id(key)])
        extra = ["MKSTREAM"] if self.rnd.random() < 0.3 else []
        self.both("XGROUP", "CREATE", key, self.group(), start, *extra)

    def xgroup_setid(self) -> None:
        key = self.key()
        self.both("XGROUP", "SETID", key, self.group(),
                  self.rnd.choice(["0", "$", self.some_id(key)]))

    def xgroup_misc(self) -> None:
        sub = self.rnd.choice(["DESTROY", "CREATECONSUMER", "DELCONSUMER"])
        if sub == "DESTROY":
            if self.rnd.random() < 0.3:
                self.both("XGROUP", "DESTROY", self.key(), self.group())
        else:
            self.both("XGROUP", sub, self.key(), self.group(), self.consumer())

    def xreadgroup(self) -> None:
        rnd = self.rnd
        keys = rnd.sample(KEYS, rnd.randint(1, 2))
        group, consumer = self.group(), self.consumer()
        for key in keys:
            self.precreate(key, group, consumer)
        ids = [">" if rnd.random() < 0.7 else rnd.choice(["0", self.some_id(k, plus=False)])
               for k in keys]
        extra = []
        if rnd.random() < 0.5:
            extra += ["COUNT", str(rnd.randint(0, 3))]
        if rnd.random() < 0.15:
            extra += ["NOACK"]
        self.both("XREADGROUP", "GROUP", group, consumer, *extra, "STREAMS", *keys, *ids)

    def xack(self) -> None:
        key = self.key()
        self.both("XACK", key, self.group(),
                  *[self.some_id(key) for _ in range(self.rnd.randint(1, 3))])

    def xpending(self) -> None:
        rnd = self.rnd
        key, group = self.key(), self.group()
        if rnd.random() < 0.4:
            self.both("XPENDING", key, group)
            return
        args = []
        if rnd.random() < 0.3:
            args += ["IDLE", rnd.choice(["0", "50000", "10000000"])]
        args += [self.bound(key), self.bound(key), str(rnd.randint(-1, 5))]
        if rnd.random() < 0.4:
            args.append(self.consumer())
        self.both("XPENDING", key, group, *args, normalise=pending_norm)

    def xclaim(self) -> None:
        rnd = self.rnd
        key, group, consumer = self.key(), self.group(), self.consumer()
        self.precreate(key, group, consumer)
        pending = []
        if rnd.random() < 0.6:  # mostly IDs that are pending, so that claims happen
            reply = self.both("XPENDING", key, group, "-", "+", "20", normalise=pending_norm)
            pending = [p[0].decode() for p in reply] if isinstance(reply, list) else []
        ids = [rnd.choice(pending) if pending and rnd.random() < 0.8 else self.some_id(key)
               for _ in range(rnd.randint(1, 3))]
        opts: list[str] = []
        for opt in ("FORCE", "JUSTID"):
            if rnd.random() < 0.25:
                opts.append(opt)
        if rnd.random() < 0.2:
            opts += ["IDLE", rnd.choice(["0", "100000", "20000000"])]
        if rnd.random() < 0.15:
            opts += ["RETRYCOUNT", str(rnd.randint(0, 5))]
        if rnd.random() < 0.1:
            opts += ["LASTID", self.some_id(key)]
        rnd.shuffle(opts) if rnd.random() < 0.2 else None
        min_idle = rnd.choice(["0", "0", "0", "50000", "10000000"])
        self.both("XCLAIM", key, group, consumer, min_idle, *ids, *opts)

    def xautoclaim(self) -> None:
        rnd = self.rnd
        key, group, consumer = self.key(), self.group(), self.consumer()
        self.precreate(key, group, consumer)
        opts = ["COUNT", str(rnd.randint(1, 4))] if rnd.random() < 0.6 else []
        if rnd.random() < 0.3:
            opts.append("JUSTID")
        self.both("XAUTOCLAIM", key, group, consumer, rnd.choice(["0", "50000", "10000000"]),
                  self.bound(key), *opts)

    def xinfo(self) -> None:
        key = self.key()
        r = self.rnd.random()
        if r < 0.4:
            self.both("XINFO", "STREAM", key)
        elif r < 0.7:
            self.both("XINFO", "GROUPS", key, normalise=groups_norm)
        else:
            self.both("XINFO", "CONSUMERS", key, self.group(), normalise=consumers_norm)

    def xsetid(self) -> None:
        key = self.key()
        # Only IDs >= the stream's max deleted ID: below it 8.x and 7.0 differ (test_redis8).
        info = self.both("XINFO", "STREAM", key)
        if not isinstance(info, list):
            return
        fields = dict(zip(info[0::2], info[1::2], strict=True))
        ms, seq = map(int, fields[b"last-generated-id"].split(b"-"))
        ms += self.rnd.randint(0, 2)
        if self.both("XSETID", key, f"{ms}-{seq}") == "OK":
            self.added[key].append((ms, seq))

    def delete_key(self) -> None:
        if self.rnd.random() < 0.3:
            key = self.key()
            self.both("DEL", key)
            self.added[key] = []

    def final_state(self) -> None:
        for key in KEYS:
            self.both("XRANGE", key, "-", "+")
            self.both("XINFO", "STREAM", key)
            self.both("XINFO", "GROUPS", key, normalise=groups_norm)
            for group in GROUPS:
                self.both("XPENDING", key, group)
                self.both("XPENDING", key, group, "-", "+", "1000", normalise=pending_norm)
                self.both("XINFO", "CONSUMERS", key, group, normalise=consumers_norm)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_differential(both, seed):
    fuzz = Fuzzer(both, seed)
    fuzz.run(300)
    fuzz.final_state()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 110))
def test_random_differential_long(both, seed):
    fuzz = Fuzzer(both, seed)
    fuzz.run(3000)
    fuzz.final_state()


def test_auto_ids_shape(both):
    both.ok("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    for _ in range(3):
        both("XADD", "s", "*", "f", "v", normalise=id_shape)
    both("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", normalise=id_shape)
    both("XPENDING", "s", "g", normalise=id_shape)


MAX_ID = "18446744073709551615-18446744073709551615"


def test_xreadgroup_maximal_id_reads_as_gt(both):
    """Redis stores `>` as the maximal ID (UINT64_MAX-UINT64_MAX), so XREADGROUP given that ID
    literally delivers new entries, as `>` does (xreadCommand in
    https://github.com/redis/redis/blob/7.0/src/t_stream.c); found by a differential fuzz."""
    entries(both, "s", "1-1", "2-2", "3-3")
    both.ok("XGROUP", "CREATE", "s", "g", "0")
    both.script(
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", MAX_ID),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", MAX_ID),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", MAX_ID),
        ("XREADGROUP", "GROUP", "g", "bob", "BLOCK", "10", "STREAMS", "s", MAX_ID),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "18446744073709551615-0"),
        ("XREAD", "STREAMS", "s", MAX_ID),
    )
    check_state(both, "s", "g")
