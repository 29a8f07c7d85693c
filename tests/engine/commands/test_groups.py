"""Consumer-group commands (engine.commands.groups): XGROUP's subcommands, XACK, XACKDEL, XNACK,
XPENDING, XCLAIM, XAUTOCLAIM and the SK.XCONSUMER effect. Their error lines, replies and the
exact effects each logs (claims as the 14-argument XCLAIM, the claiming consumer pinned by
SK.XCONSUMER), and replay of those effects reproducing the state."""

from __future__ import annotations

import functools

import pytest

from streamkeep.engine.commands import groups
from streamkeep.engine.wire.args import LLONG_MAX
from tests.support.effects_util import Recorded, logged_claim

NOW = 1_000_000
T = b"%d" % NOW
NO_KEY = ("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
          "want to use the MKSTREAM option to create an empty stream automatically.")


@pytest.fixture
def rec() -> Recorded:
    """Stream s with entries 1-0 .. 4-0 and group g at 0 (nothing delivered)."""
    rec = Recorded(now=NOW)
    for i in range(1, 5):
        rec("XADD", "s", f"{i}-0", "f", f"v{i}")
    rec("XGROUP", "CREATE", "s", "g", "0")
    return rec


claim = functools.partial(logged_claim, b"s", b"g")


def deliver(rec: Recorded, consumer: str, count: int) -> None:
    rec("XREADGROUP", "GROUP", "g", consumer, "COUNT", str(count), "STREAMS", "s", ">")


# --- XGROUP ------------------------------------------------------------------------------------


def test_xgroup_create_logs_the_resolved_id_and_entries_read(rec: Recorded) -> None:
    assert rec.effects("XGROUP", "CREATE", "s", "tail", "$") == ("OK", [
        [b"XGROUP", b"CREATE", b"s", b"tail", b"4-0", b"ENTRIESREAD", b"-1", b"MKSTREAM"]])
    # ENTRIESREAD beyond what was ever added is clamped to it (Redis 8.4).
    assert rec.effects("XGROUP", "CREATE", "s", "read", "0", "ENTRIESREAD", "10")[1] == [
        [b"XGROUP", b"CREATE", b"s", b"read", b"0-0", b"ENTRIESREAD", b"4", b"MKSTREAM"]]
    assert rec.effects("XGROUP", "CREATE", "new", "g", "$", "MKSTREAM") == ("OK", [
        [b"XGROUP", b"CREATE", b"new", b"g", b"0-0", b"ENTRIESREAD", b"-1", b"MKSTREAM"]])
    assert rec("XLEN", "new") == 0 and rec("TYPE", "new") == "stream"
    rec.assert_replays()


@pytest.mark.parametrize(("argv", "line"), [
    (("XGROUP", "CREATE", "nokey", "g", "$"), NO_KEY),
    (("XGROUP", "CREATE", "s", "g", "$"), "BUSYGROUP Consumer Group name already exists"),
    (("XGROUP", "CREATE", "s", "h", "0", "ENTRIESREAD", "-2"),
     "ERR value for ENTRIESREAD must be positive or -1"),
    (("XGROUP", "CREATE", "s", "h", "0", "ENTRIESREAD", "x"),
     "ERR value is not an integer or out of range"),
    (("XGROUP", "CREATE", "s", "h", "0", "BOGUS"),
     "ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."),
    (("XGROUP", "CREATE", "s", "h", "0", "MKSTREAM", "ENTRIESREAD", "1", "x"),
     "ERR unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."),
    (("XGROUP", "CREATE", "s", "h", "bad-id"),
     "ERR Invalid stream ID specified as stream command argument"),
    (("XGROUP", "SETID", "s", "g", "0", "MKSTREAM"),
     "ERR unknown subcommand or wrong number of arguments for 'SETID'. Try XGROUP HELP."),
    (("XGROUP", "SETID", "s", "nog", "0"), "NOGROUP No such consumer group 'nog' for key name 's'"),
    (("XGROUP", "DESTROY", "nokey", "g"), NO_KEY),
    (("XGROUP", "CREATECONSUMER", "s", "nog", "c"),
     "NOGROUP No such consumer group 'nog' for key name 's'"),
    (("XGROUP", "DELCONSUMER", "nokey", "g", "c"), NO_KEY),
])
def test_xgroup_errors(rec: Recorded, argv: tuple[str, ...], line: str) -> None:
    count = len(rec.records)
    assert rec.err(*argv) == line
    assert len(rec.records) == count


def test_xgroup_setid_logs_only_a_change(rec: Recorded) -> None:
    assert rec.effects("XGROUP", "SETID", "s", "g", "0") == ("OK", [])
    assert rec.effects("XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "3") == ("OK", [
        [b"XGROUP", b"SETID", b"s", b"g", b"4-0", b"ENTRIESREAD", b"3"]])
    assert rec.effects("XGROUP", "SETID", "s", "g", "4-0", "ENTRIESREAD", "3")[1] == []
    group = rec("XINFO", "GROUPS", "s")[0]
    assert group[group.index(b"entries-read") + 1] == 3
    rec.assert_replays()


def test_xgroup_destroy_and_consumers(rec: Recorded) -> None:
    assert rec.effects("XGROUP", "CREATECONSUMER", "s", "g", "c") == (1, [
        [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"c"]])
    assert rec.effects("XGROUP", "CREATECONSUMER", "s", "g", "c") == (0, [])
    deliver(rec, "d", 3)
    # DELCONSUMER replies how many pending entries the consumer took with it.
    assert rec.effects("XGROUP", "DELCONSUMER", "s", "g", "d") == (3, [
        [b"XGROUP", b"DELCONSUMER", b"s", b"g", b"d"]])
    assert rec.effects("XGROUP", "DELCONSUMER", "s", "g", "d") == (0, [])
    assert rec("XPENDING", "s", "g")[0] == 0
    rec.assert_replays()
    assert rec.effects("XGROUP", "DESTROY", "s", "nog") == (0, [])
    assert rec.effects("XGROUP", "DESTROY", "s", "g") == (1, [[b"XGROUP", b"DESTROY", b"s", b"g"]])
    assert rec("XINFO", "GROUPS", "s") == []
    rec.assert_replays()


def test_xgroup_help_lists_every_subcommand(rec: Recorded) -> None:
    lines = rec("XGROUP", "HELP")
    for sub in ("CREATE", "CREATECONSUMER", "DELCONSUMER", "DESTROY", "SETID", "HELP"):
        assert any(line.startswith(sub) for line in lines), sub


# --- XACK / XACKDEL ----------------------------------------------------------------------------


def test_xack_logs_only_what_it_acknowledged(rec: Recorded) -> None:
    deliver(rec, "c", 2)
    assert rec.effects("XACK", "s", "g", "2-0", "3-0", "2-0") == (1, [
        [b"XACK", b"s", b"g", b"2-0"]])
    assert rec.effects("XACK", "s", "g", "2-0") == (0, [])
    assert rec.effects("XACK", "s", "nog", "1-0") == (0, [])
    assert rec.effects("XACK", "nokey", "g", "1-0") == (0, [])
    assert rec.err("XACK", "s", "g", "1-0", "bad") == (
        "ERR Invalid stream ID specified as stream command argument")
    assert rec("XPENDING", "s", "g")[:3] == [1, b"1-0", b"1-0"]  # the refused XACK acked nothing
    rec.assert_replays()


def test_xackdel_codes_and_effects(rec: Recorded) -> None:
    rec("XGROUP", "CREATE", "s", "other", "0")
    deliver(rec, "c", 4)
    assert rec.effects("XACKDEL", "nokey", "g", "IDS", "2", "1-0", "2-0") == ([-1, -1], [])
    # KEEPREF: acknowledged here and deleted, whatever another group still needs.
    assert rec.effects("XACKDEL", "s", "g", "IDS", "2", "1-0", "9-0") == ([1, -1], [
        [b"XACK", b"s", b"g", b"1-0"], [b"XDEL", b"s", b"1-0"]])
    # ACKED: kept while another group has not had it yet.
    assert rec.effects("XACKDEL", "s", "g", "ACKED", "IDS", "1", "2-0") == ([2], [
        [b"XACK", b"s", b"g", b"2-0"]])
    # DELREF: the other group's references go too (its XACK logged after this group's).
    rec("XREADGROUP", "GROUP", "other", "o", "STREAMS", "s", ">")
    assert rec.effects("XACKDEL", "s", "g", "DELREF", "IDS", "1", "3-0") == ([1], [
        [b"XACK", b"s", b"g", b"3-0"], [b"XACK", b"s", b"other", b"3-0"],
        [b"XDEL", b"s", b"3-0"]])
    assert rec.err("XACKDEL", "s", "g", "BOGUS", "IDS", "1", "4-0") == "ERR syntax error"
    assert rec.err("XACKDEL", "s", "g", "KEEPREF", "ACKED", "x") == "ERR syntax error"
    assert rec.err("XACKDEL", "s", "g", "KEEPREF", "NOIDS", "x") == "ERR syntax error"
    rec.assert_replays()


# --- XNACK -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "before", "retrycount", "after"), [
    (b"silent", 3, -1, 2), (b"silent", 0, -1, 0), (b"fail", 3, -1, 3), (b"fatal", 3, -1, LLONG_MAX),
    (b"silent", None, -1, 0), (b"fail", None, -1, 0), (b"fatal", None, -1, LLONG_MAX),
    (b"fatal", 3, 7, 7), (b"silent", None, 0, 0),
])
def test_nacked_count(mode: bytes, before: int | None, retrycount: int, after: int) -> None:
    assert groups.nacked_count(mode, before, retrycount) == after


def test_parse_xnack_args() -> None:
    a = groups.parse_xnack_args((b"XNACK", b"s", b"g", b"Fatal", b"ids", b"2", b"1-0", b"2-5",
                                 b"force", b"RETRYCOUNT", b"4"))
    assert (a.mode, a.sids, a.retrycount, a.force) == (b"fatal", [1 << 64, (2 << 64) | 5], 4,
                                                       True)
    a = groups.parse_xnack_args((b"XNACK", b"s", b"g", b"SILENT", b"IDS", b"1", b"1-0"))
    assert (a.retrycount, a.force) == (-1, False)


@pytest.mark.parametrize(("tail", "line"), [
    (("MAYBE", "IDS", "1", "1-0"), "ERR syntax error"),
    (("FAIL", "ID", "1", "1-0"), "ERR syntax error"),
    (("FAIL", "IDS", "0", "1-0"), "ERR Number of IDs must be a positive integer"),
    (("FAIL", "IDS", "3", "1-0"), "ERR The `numids` parameter must match the number of arguments"),
    (("FAIL", "IDS", "1", "x"), "ERR Invalid stream ID specified as stream command argument"),
    (("FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "-1"),
     "ERR Invalid RETRYCOUNT option argument for XNACK"),
    (("FAIL", "IDS", "1", "1-0", "RETRYCOUNT"), "ERR syntax error"),
    (("FAIL", "IDS", "1", "1-0", "EXTRA"), "ERR syntax error"),
])
def test_xnack_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    assert rec.err("XNACK", "s", "g", *tail) == line


def test_xnack_releases_and_logs_the_exact_count(rec: Recorded) -> None:
    assert rec.err("XNACK", "s", "nog", "FAIL", "IDS", "1", "1-0") == (
        "NOGROUP No such key 's' or consumer group 'nog'")
    deliver(rec, "c", 2)
    rec.clock.now += 10
    assert rec.effects("XNACK", "s", "g", "SILENT", "IDS", "3", "1-0", "2-0", "3-0") == (2, [
        [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"1", b"1-0", b"RETRYCOUNT", b"0", b"FORCE"],
        [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"1", b"2-0", b"RETRYCOUNT", b"0", b"FORCE"]])
    # FORCE takes an entry that is in the stream but not pending; a missing entry is skipped.
    assert rec.effects("XNACK", "s", "g", "FATAL", "IDS", "2", "4-0", "9-0", "FORCE") == (1, [
        [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"1", b"4-0", b"RETRYCOUNT",
         b"%d" % LLONG_MAX, b"FORCE"]])
    # Released entries are unowned (an empty consumer, idle -1) and claimable at once.
    assert rec("XPENDING", "s", "g", "-", "+", "10") == [
        [b"1-0", b"", -1, 0], [b"2-0", b"", -1, 0], [b"4-0", b"", -1, LLONG_MAX]]
    assert rec("XCLAIM", "s", "g", "d", "3600000", "1-0", "JUSTID") == [b"1-0"]
    rec.assert_replays()


# --- XPENDING ----------------------------------------------------------------------------------


def test_xpending_summary_and_extended_forms(rec: Recorded) -> None:
    assert rec("XPENDING", "s", "g") == [0, None, None, None]
    deliver(rec, "bob", 1)
    deliver(rec, "alice", 2)
    rec.clock.now += 100
    assert rec("XPENDING", "s", "g") == [3, b"1-0", b"3-0", [[b"alice", b"2"], [b"bob", b"1"]]]
    assert rec("XPENDING", "s", "g", "-", "+", "2") == [
        [b"1-0", b"bob", 100, 1], [b"2-0", b"alice", 100, 1]]
    assert rec("XPENDING", "s", "g", "(1-0", "+", "10", "alice") == [
        [b"2-0", b"alice", 100, 1], [b"3-0", b"alice", 100, 1]]
    assert rec("XPENDING", "s", "g", "-", "+", "10", "nobody") == []
    assert rec("XPENDING", "s", "g", "-", "+", "-5") == []  # a negative COUNT is 0
    assert rec("XPENDING", "s", "g", "IDLE", "101", "-", "+", "10") == []
    assert len(rec("XPENDING", "s", "g", "IDLE", "100", "-", "+", "10")) == 3
    assert rec.effects("XPENDING", "s", "g")[1] == []


@pytest.mark.parametrize(("tail", "line"), [
    (("-", "+"), "ERR syntax error"),
    (("IDLE", "10", "-", "+"), "ERR syntax error"),
    (("-", "+", "10", "c", "extra", "more", "x"), "ERR syntax error"),
    (("IDLE", "x", "-", "+", "10"), "ERR value is not an integer or out of range"),
    (("-", "+", "x"), "ERR value is not an integer or out of range"),
    (("bad", "+", "10"), "ERR Invalid stream ID specified as stream command argument"),
])
def test_xpending_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    assert rec.err("XPENDING", "s", "g", *tail) == line


def test_xpending_checks_the_group_after_the_arguments(rec: Recorded) -> None:
    assert rec.err("XPENDING", "s", "nog") == "NOGROUP No such key 's' or consumer group 'nog'"
    assert rec.err("XPENDING", "nokey", "g", "-", "+", "x") == (
        "ERR value is not an integer or out of range")


# --- XCLAIM / XAUTOCLAIM -----------------------------------------------------------------------


def test_xclaim_effects(rec: Recorded) -> None:
    deliver(rec, "alice", 2)
    rec.clock.now += 50
    now = b"%d" % rec.clock.now
    # min-idle-time not reached: nothing moves, but the new consumer exists and is pinned.
    assert rec.effects("XCLAIM", "s", "g", "bob", "100", "1-0") == ([], [
        [b"SK.XCONSUMER", b"s", b"g", b"bob", now, b"-1"]])
    # JUSTID does not count a delivery; a plain claim does.
    assert rec.effects("XCLAIM", "s", "g", "bob", "50", "1-0", "JUSTID") == ([b"1-0"], [
        claim(b"bob", b"1-0", now, b"1", b"2-0"),
        [b"SK.XCONSUMER", b"s", b"g", b"bob", now, now]])
    assert rec.effects("XCLAIM", "s", "g", "carol", "0", "2-0")[1][0] == claim(
        b"carol", b"2-0", now, b"2", b"2-0")
    # FORCE takes an entry no one had; LASTID moves the group forward (logged as SETID).
    reply, effects = rec.effects("XCLAIM", "s", "g", "carol", "0", "4-0", "FORCE",
                                 "RETRYCOUNT", "7", "TIME", "5", "LASTID", "4-0")
    assert reply == [[b"4-0", [b"f", b"v4"]]]
    assert effects[:2] == [claim(b"carol", b"4-0", b"5", b"7", b"4-0"),
                           [b"XGROUP", b"SETID", b"s", b"g", b"4-0", b"ENTRIESREAD", b"2"]]
    rec.assert_replays()


def test_xclaim_of_a_deleted_entry_acknowledges_it(rec: Recorded) -> None:
    deliver(rec, "alice", 2)
    rec("XDEL", "s", "1-0")
    reply, effects = rec.effects("XCLAIM", "s", "g", "bob", "0", "1-0", "2-0")
    assert reply == [[b"2-0", [b"f", b"v2"]]]
    assert effects[0] == [b"XACK", b"s", b"g", b"1-0"]
    assert rec("XPENDING", "s", "g")[:3] == [1, b"2-0", b"2-0"]
    rec.assert_replays()


def test_xclaim_options_parse_as_redis_does(rec: Recorded) -> None:
    deliver(rec, "alice", 1)
    rec.clock.now += 1000
    # IDLE sets the delivery time back; a TIME in the future means now.
    rec("XCLAIM", "s", "g", "bob", "0", "1-0", "IDLE", "300")
    assert rec("XPENDING", "s", "g", "-", "+", "1")[0][2] == 300
    rec("XCLAIM", "s", "g", "bob", "0", "1-0", "TIME", str(rec.clock.now + 10**6))
    assert rec("XPENDING", "s", "g", "-", "+", "1")[0][2] == 0
    assert rec.err("XCLAIM", "s", "g", "bob", "0", "1-0", "BOGUS") == (
        "ERR Unrecognized XCLAIM option 'BOGUS'")
    assert rec.err("XCLAIM", "s", "g", "bob", "0", "1-0", "IDLE") == (
        "ERR Unrecognized XCLAIM option 'IDLE'")
    assert rec.err("XCLAIM", "s", "g", "bob", "x", "1-0") == (
        "ERR Invalid min-idle-time argument for XCLAIM")
    for option in ("IDLE", "TIME", "RETRYCOUNT"):
        assert rec.err("XCLAIM", "s", "g", "bob", "0", "1-0", option, "x") == (
            f"ERR Invalid {option} option argument for XCLAIM")
    assert rec.err("XCLAIM", "s", "nog", "bob", "0", "1-0") == (
        "NOGROUP No such key 's' or consumer group 'nog'")


def test_the_propagated_claim_shape_means_what_the_general_parse_does() -> None:
    """The 14-argument XCLAIM every delivery logs is read by a shortcut; other spellings of
    the same claim (lower case, options in another order) take the general parse: the same
    state."""
    shortcut = ("XCLAIM", "s", "g", "bob", "0", "1-0", "TIME", "123", "RETRYCOUNT", "9",
                "FORCE", "JUSTID", "LASTID", "3-0")
    spelled = ("xclaim", "s", "g", "bob", "0", "1-0", "justid", "force", "retrycount", "9",
               "time", "123", "lastid", "3-0")
    digests = []
    for argv in (shortcut, spelled):
        rec = Recorded(now=NOW)
        for i in range(1, 5):
            rec("XADD", "s", f"{i}-0", "f", f"v{i}")
        rec("XGROUP", "CREATE", "s", "g", "0")
        deliver(rec, "alice", 2)
        assert rec(*argv) == [b"1-0"]
        assert rec("XPENDING", "s", "g", "-", "+", "1", "bob") == [[b"1-0", b"bob", NOW - 123, 9]]
        digests.append(rec.digest())
        rec.assert_replays()
    assert digests[0] == digests[1]


def test_xautoclaim_reply_and_effects(rec: Recorded) -> None:
    deliver(rec, "alice", 4)
    rec("XDEL", "s", "2-0")
    rec.clock.now += 10
    now = b"%d" % rec.clock.now
    reply, effects = rec.effects("XAUTOCLAIM", "s", "g", "bob", "5", "0", "COUNT", "1")
    assert reply == [b"2-0", [[b"1-0", [b"f", b"v1"]]], []]
    assert effects == [claim(b"bob", b"1-0", now, b"2", b"4-0"),
                       [b"SK.XCONSUMER", b"s", b"g", b"bob", now, now]]
    # A deleted entry is acknowledged and named in the third element; JUSTID counts nothing.
    reply, effects = rec.effects("XAUTOCLAIM", "s", "g", "bob", "5", "2-0", "JUSTID")
    assert reply == [b"0-0", [b"3-0", b"4-0"], [b"2-0"]]
    assert effects[0] == [b"XACK", b"s", b"g", b"2-0"]
    assert effects[1] == claim(b"bob", b"3-0", now, b"1", b"4-0")
    # Nothing idle enough: an empty claim, only the consumer's seen time logged if it moved.
    assert rec.effects("XAUTOCLAIM", "s", "g", "bob", "1000", "0") == ([b"0-0", [], []], [])
    rec.assert_replays()


def test_bulk_claims_log_what_replays_exactly() -> None:
    """Claims of many entries at once (a PEL spanning several packed chunks, interleaved
    owners, deleted and XNACK-released entries, repeated and unordered XCLAIM IDs) log one
    XCLAIM (or XACK) an entry, in ID order for XAUTOCLAIM, that replay turns into the same
    state: delivery counts and times, owners, consumers."""
    rec = Recorded(now=NOW)
    n = 2300
    for i in range(1, n + 1):
        rec("XADD", "s", f"{i}-0", "f", "v")
    rec("XGROUP", "CREATE", "s", "g", "0")
    for k in range(12):
        deliver(rec, "ab"[k % 2], 200)
    rec("XDEL", "s", *[f"{i}-0" for i in range(3, n + 1, 17)])
    rec("XNACK", "s", "g", "FAIL", "IDS", "3", "4-0", "900-0", "1800-0")
    rec.clock.now += 100
    now = b"%d" % rec.clock.now
    reply, effects = rec.effects("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "40")
    assert reply[0] == b"41-0" and reply[2] == [b"3-0", b"20-0", b"37-0"]
    assert [e[0] for e in effects[:5]] == [b"XCLAIM", b"XCLAIM", b"XACK", b"XCLAIM", b"XCLAIM"]
    assert effects[3] == claim(b"c", b"4-0", now, b"2", b"2300-0")  # released: now owned by c
    cursor = reply[0]
    while cursor != b"0-0":
        cursor = rec("XAUTOCLAIM", "s", "g", "d", "50", cursor, "COUNT", "97", "JUSTID")[0]
    rec("XCLAIM", "s", "g", "a", "0", *[f"{i}-0" for i in range(n, 0, -5)], "RETRYCOUNT", "9")
    rec("XCLAIM", "s", "g", "b", "0", "10-0", "11-0", "10-0", "5000-0", "FORCE")
    assert rec("XPENDING", "s", "g", "10-0", "11-0", "2") == [
        [b"10-0", b"b", 0, 11], [b"11-0", b"b", 0, 3]]
    pending = rec("XPENDING", "s", "g")
    assert pending[0] == n - len(range(3, n + 1, 17))
    rec.assert_replays()


@pytest.mark.parametrize(("tail", "line"), [
    (("x", "0"), "ERR Invalid min-idle-time argument for XAUTOCLAIM"),
    (("0", "bad"), "ERR Invalid stream ID specified as stream command argument"),
    (("0", "0", "COUNT", "0"), "ERR COUNT must be > 0"),
    (("0", "0", "COUNT", str(LLONG_MAX // 16 + 1)), "ERR COUNT must be > 0"),
    (("0", "0", "COUNT", str(1 << 44)),
     "ERR Insufficient memory, failed allocating transient memory, COUNT too high."),
    (("0", "0", "JUSTID", "x"), "ERR syntax error"),
])
def test_xautoclaim_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    assert rec.err("XAUTOCLAIM", "s", "g", "c", *tail) == line


def test_sk_xconsumer_is_an_effect_only(rec: Recorded) -> None:
    assert rec.err("SK.XCONSUMER", "s", "g", "c", "1", "2").startswith(
        "ERR unknown command 'SK.XCONSUMER'")
    deliver(rec, "alice", 1)
    rec.clock.now += 5
    rec("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")  # seen moves, active does not
    assert rec.records[-1].effects[-1] == [
        b"SK.XCONSUMER", b"s", b"g", b"alice", b"%d" % (NOW + 5), T]
    rec.assert_replays()
    # Without it the consumer's times would drift on replay (they are part of the state).
    stripped = [r._replace(effects=[e for e in r.effects if e[0] != b"SK.XCONSUMER"])
                for r in rec.records]
    assert rec.replay(stripped).execute("DEBUG", "DIGEST") != rec.digest()
