"""XREAD and XREADGROUP (engine.commands.read): the shared grammar and its error lines, the
MAXCOUNT/MAXSIZE caps, replies, what a group read logs (per entry the 14-argument XCLAIM, the
group's SETID, the consumer's SK.XCONSUMER; history reads without LASTID), blocking (a Waiter
whose re-run argv has `$` resolved; none inside MULTI) and replay of the effects."""

from __future__ import annotations

import functools

import pytest

from streamkeep import Session
from streamkeep.engine.commands.read import Caps, entry_reply_size, parse_read_args
from streamkeep.engine.exec.blocking import Waiter
from streamkeep.engine.wire.args import LLONG_MAX
from streamkeep.engine.wire.reply import to_plain
from tests.support.effects_util import Recorded, argv_bytes, logged_claim

NOW = 1_000_000
T = b"%d" % NOW


@pytest.fixture
def rec() -> Recorded:
    """s holds 1-0 .. 3-0 (group g at 0), t holds 5-0."""
    rec = Recorded(now=NOW)
    for i in range(1, 4):
        rec("XADD", "s", f"{i}-0", "f", f"v{i}")
    rec("XADD", "t", "5-0", "g", "w")
    rec("XGROUP", "CREATE", "s", "g", "0")
    return rec


def entry(i: int) -> list[object]:
    return [b"%d-0" % i, [b"f", b"v%d" % i]]


delivery = functools.partial(logged_claim, b"s", b"g")


# --- the grammar -------------------------------------------------------------------------------


def test_parse_read_args_values() -> None:
    a = parse_read_args(argv_bytes(("XREADGROUP", "group", "g", "c", "COUNT", "-3", "BLOCK", "50",
                                    "NOACK", "CLAIM", "7", "MAXCOUNT", "9", "MAXSIZE", "100",
                                    "STREAMS", "a", "b", ">", ">")), NOW, True)
    assert (a.group, a.consumer, a.count, a.timeout, a.noack, a.claim) == (
        b"g", b"c", 0, 50, True, 7)
    assert (a.maxcount, a.maxsize, a.streams_at, a.nstreams) == (9, 100, 16, 2)
    a = parse_read_args(argv_bytes(("XREAD", "STREAMS", "s", "0")), NOW, False)
    assert (a.group, a.timeout, a.count, a.claim, a.maxcount, a.maxsize) == (None, -1, 0, -1, 0, 0)


ONLY_GROUP = "ERR The {} option is only supported by XREADGROUP. You called XREAD instead."
MEANINGLESS = ("ERR The {0} ID is meaningless in the context of XREADGROUP: you want to read the "
               "history of this consumer by specifying a proper ID, or use the > ID to get new "
               "messages. The {0} ID would just return an empty result set.")


@pytest.mark.parametrize(("argv", "line"), [
    (("XREAD", "STREAMS", "s", "t", "0"), "ERR Unbalanced 'xread' list of streams: for each "
     "stream key an ID, '+', or '$' must be specified."),
    (("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">"), "ERR Unbalanced 'xreadgroup' "
     "list of streams: for each stream key an ID or '>' must be specified."),
    (("XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"), ONLY_GROUP.format("GROUP")),
    (("XREAD", "NOACK", "STREAMS", "s", "0"), ONLY_GROUP.format("NOACK")),
    (("XREAD", "CLAIM", "5", "STREAMS", "s", "0"), ONLY_GROUP.format("CLAIM")),
    (("XREAD", "STREAMS", "s", ">"), "ERR The > ID can be specified only when calling "
     "XREADGROUP using the GROUP <group> <consumer> option."),
    (("XREAD", "BOGUS", "STREAMS", "s", "0"), "ERR syntax error"),
    (("XREAD", "COUNT", "1", "BLOCK", "1"), "ERR syntax error"),
    (("XREAD", "MAXCOUNT", "1", "COUNT", "2", "STREAMS", "s", "0"),
     "ERR MAXCOUNT must be greater than or equal to COUNT"),
    (("XREAD", "MAXCOUNT", "0", "STREAMS", "s", "0"), "ERR MAXCOUNT must be a positive integer"),
    (("XREAD", "MAXSIZE", "-1", "STREAMS", "s", "0"), "ERR MAXSIZE must be a positive integer"),
    (("XREAD", "BLOCK", "-1", "STREAMS", "s", "0"), "ERR timeout is negative"),
    (("XREAD", "BLOCK", "x", "STREAMS", "s", "0"), "ERR timeout is not an integer or out of range"),
    (("XREAD", "BLOCK", str(LLONG_MAX), "STREAMS", "s", "0"), "ERR timeout is out of range"),
    (("XREAD", "COUNT", "x", "STREAMS", "s", "0"), "ERR value is not an integer or out of range"),
    (("XREAD", "STREAMS", "s", "bad"), "ERR Invalid stream ID specified as stream command argument"),
    (("XREADGROUP", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", ">"),
     "ERR Missing GROUP option for XREADGROUP"),
    (("XREADGROUP", "GROUP", "g", "c", "CLAIM", "-1", "STREAMS", "s", ">"),
     "ERR min-idle-time must be a positive integer"),
    (("XREADGROUP", "GROUP", "g", "c", "CLAIM", "x", "STREAMS", "s", ">"),
     "ERR min-idle-time is not an integer or out of range"),
    (("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"), MEANINGLESS.format("$")),
    (("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"), MEANINGLESS.format("+")),
    (("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", ">", ">"),
     "NOGROUP No such key 't' or consumer group 'g' in XREADGROUP with GROUP option"),
    (("XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"),
     "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"),
])
def test_read_errors(rec: Recorded, argv: tuple[str, ...], line: str) -> None:
    count = len(rec.records)
    assert rec.err(*argv) == line
    assert len(rec.records) == count  # a refused read delivers nothing


# --- the caps ----------------------------------------------------------------------------------


def test_entry_reply_size_is_its_resp_encoding() -> None:
    fields = (b"field", b"a value", b"k", b"")
    encoded = (b"*2\r\n$3\r\n1-0\r\n*4\r\n$5\r\nfield\r\n$7\r\na value\r\n$1\r\nk\r\n$0\r\n\r\n")
    assert entry_reply_size(b"1-0", fields) == len(encoded)
    long_id = b"1700000000000-12"
    assert entry_reply_size(long_id, (b"f", b"v")) == len(
        b"*2\r\n$16\r\n" + long_id + b"\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n")


def test_caps_arithmetic() -> None:
    a = parse_read_args(argv_bytes(("XREAD", "MAXCOUNT", "5", "MAXSIZE", "40", "STREAMS", "s",
                                    "0")), NOW, False)
    caps = Caps(a)
    assert (caps.stream_count(0), caps.stream_count(3), caps.stream_count(9)) == (5, 3, 5)
    caps.served(4)
    assert caps.stream_count(3) == 1 and not caps.exhausted()
    caps.take(b"1-0", (b"f", b"v"))  # 31 bytes
    assert caps.size_left == 9 and not caps.exhausted()
    caps.take(b"2-0", (b"f", b"v"))  # crosses MAXSIZE: nothing left, never negative
    assert caps.size_left == 0 and caps.exhausted()
    uncapped = Caps(parse_read_args(argv_bytes(("XREAD", "STREAMS", "s", "0")), NOW, False))
    assert (uncapped.count_left, uncapped.size_left, uncapped.stream_count(7)) == (-1, -1, 7)
    uncapped.served(100)
    assert not uncapped.exhausted()


# --- XREAD -------------------------------------------------------------------------------------


def test_xread_replies(rec: Recorded) -> None:
    assert rec.effects("XREAD", "STREAMS", "s", "t", "1-0", "0") == (
        [[b"s", [entry(2), entry(3)]], [b"t", [[b"5-0", [b"g", b"w"]]]]], [])
    assert rec("XREAD", "COUNT", "1", "STREAMS", "s", "0") == [[b"s", [entry(1)]]]
    assert rec("XREAD", "STREAMS", "s", "+") == [[b"s", [entry(3)]]]  # the last entry
    assert rec("XREAD", "STREAMS", "s", "$") is None
    assert rec("XREAD", "STREAMS", "nokey", "+") is None
    assert rec("XREAD", "STREAMS", "s", "nokey", "3-0", "0") is None


def test_xread_caps_span_the_streams(rec: Recorded) -> None:
    assert rec("XREAD", "MAXCOUNT", "2", "STREAMS", "s", "t", "0", "0") == [
        [b"s", [entry(1), entry(2)]]]
    assert rec("XREAD", "MAXCOUNT", "4", "COUNT", "1", "STREAMS", "s", "t", "0", "0") == [
        [b"s", [entry(1)]], [b"t", [[b"5-0", [b"g", b"w"]]]]]
    # The entry that crosses MAXSIZE is served: a capped read serves at least one.
    assert rec("XREAD", "MAXSIZE", "1", "STREAMS", "s", "t", "0", "0") == [[b"s", [entry(1)]]]
    two = entry_reply_size(b"1-0", (b"f", b"v1")) + 1
    assert rec("XREAD", "MAXSIZE", str(two), "STREAMS", "s", "t", "0", "0") == [
        [b"s", [entry(1), entry(2)]]]


# --- XREADGROUP --------------------------------------------------------------------------------


def test_new_entries_effects(rec: Recorded) -> None:
    reply, effects = rec.effects("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s",
                                 ">")
    assert reply == [[b"s", [entry(1), entry(2)]]]
    # One claim of every entry the read delivered (Redis propagates one per entry).
    assert effects == [[b"XCLAIM", b"s", b"g", b"c", b"0", b"1-0", b"2-0", b"TIME", T,
                        b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", b"2-0"],
                       [b"XGROUP", b"SETID", b"s", b"g", b"2-0", b"ENTRIESREAD", b"2"],
                       [b"SK.XCONSUMER", b"s", b"g", b"c", T, T]]
    rec.assert_replays()


def test_noack_moves_the_group_without_a_pel(rec: Recorded) -> None:
    reply, effects = rec.effects("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">")
    assert reply == [[b"s", [entry(1), entry(2), entry(3)]]]
    assert effects == [[b"XGROUP", b"SETID", b"s", b"g", b"3-0", b"ENTRIESREAD", b"3"],
                       [b"SK.XCONSUMER", b"s", b"g", b"c", T, b"-1"]]
    assert rec("XPENDING", "s", "g")[0] == 0
    rec.assert_replays()


def test_history_reads_count_deliveries(rec: Recorded) -> None:
    rec("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    rec("XDEL", "s", "2-0")
    rec.clock.now += 10
    later = b"%d" % rec.clock.now
    reply, effects = rec.effects("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0")
    # A pending entry deleted from the stream replies with a null body and logs nothing.
    assert reply == [[b"s", [entry(1), [b"2-0", None], entry(3)]]]
    assert effects == [delivery(b"c", b"1-0", later, b"2"), delivery(b"c", b"3-0", later, b"2"),
                       [b"SK.XCONSUMER", b"s", b"g", b"c", later, T]]
    assert rec("XREADGROUP", "GROUP", "g", "other", "STREAMS", "s", "0") == [[b"s", []]]
    rec.assert_replays()


def test_a_read_that_serves_nothing_still_pins_the_seen_time(rec: Recorded) -> None:
    rec("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert rec.effects("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">") == (None, [])
    rec.clock.now += 5
    assert rec.effects("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">") == (None, [
        [b"SK.XCONSUMER", b"s", b"g", b"c", b"%d" % (NOW + 5), T]])
    rec.assert_replays()


def test_claim_takes_idle_entries_first(rec: Recorded) -> None:
    rec("XREADGROUP", "GROUP", "g", "old", "COUNT", "2", "STREAMS", "s", ">")
    rec.clock.now += 100
    now = b"%d" % rec.clock.now
    reply, effects = rec.effects("XREADGROUP", "GROUP", "g", "new", "CLAIM", "50", "STREAMS",
                                 "s", ">")
    # Claimed entries carry their idle time and delivery count; new ones 0 and 0.
    assert reply == [[b"s", [[*entry(1), 100, 1], [*entry(2), 100, 1], [*entry(3), 0, 0]]]]
    assert effects[:3] == [delivery(b"new", b"1-0", now, b"2", b"2-0"),
                           delivery(b"new", b"2-0", now, b"2", b"2-0"),
                           delivery(b"new", b"3-0", now, b"1", b"3-0")]
    assert rec("XPENDING", "s", "g")[3] == [[b"new", b"3"]]
    rec.assert_replays()


def test_maxcount_leaves_later_streams_untouched(rec: Recorded) -> None:
    rec("XGROUP", "CREATE", "t", "g", "0")
    reply, effects = rec.effects("XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", "3", "STREAMS",
                                 "s", "t", ">", ">")
    assert reply == [[b"s", [entry(1), entry(2), entry(3)]]]
    assert effects[-1] == [b"SK.XCONSUMER", b"s", b"g", b"c", T, T]
    assert all(b"t" not in effect for effect in effects)
    assert rec("XINFO", "CONSUMERS", "t", "g") == []
    rec.assert_replays()


# --- blocking ----------------------------------------------------------------------------------


def test_a_blocked_read_waits_with_dollar_resolved(rec: Recorded) -> None:
    reader = Session()
    waiter, lsn = rec.engine.submit(reader, argv_bytes(("XREAD", "BLOCK", "0", "STREAMS", "s",
                                                        "t", "$", "5-0")))
    assert isinstance(waiter, Waiter) and lsn == 0
    # `$` re-run as-is would wait for entries after the *new* last ID forever.
    assert waiter.argv == argv_bytes(("XREAD", "BLOCK", "0", "STREAMS", "s", "t", "3-0", "5-0"))
    rec("XADD", "u", "1-0", "f", "v")  # a key it does not wait for
    assert waiter.result is None
    rec("XADD", "s", "4-0", "f", "v4")
    assert to_plain(waiter.result) == [[b"s", [entry(4)]]]


def test_a_served_blocked_group_read_logs_a_record_of_its_own(rec: Recorded) -> None:
    rec("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    reader = Session()
    waiter, _ = rec.engine.submit(reader, argv_bytes(("XREADGROUP", "GROUP", "g", "c", "BLOCK",
                                                      "0", "STREAMS", "s", ">")))
    assert isinstance(waiter, Waiter)
    count = len(rec.records)
    reply, effects = rec.effects("XADD", "s", "4-0", "f", "v4")
    assert effects == [[b"XADD", b"s", b"4-0", b"f", b"v4"]]  # the writer's own effects only
    assert [r.effects[0][0] for r in rec.records[count:]] == [b"XADD", b"XCLAIM"]
    assert rec("XPENDING", "s", "g")[:3] == [4, b"1-0", b"4-0"]
    rec.assert_replays()


def test_blocking_reads_do_not_block_inside_multi(rec: Recorded) -> None:
    rec("MULTI")
    rec("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    rec("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "0")
    assert rec("EXEC") == [None, [[b"s", []]]]
