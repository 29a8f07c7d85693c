"""Stream entry commands (engine.commands.streams): XADD (one handler for a client's command
and a replayed effect: its ID forms, checks and effects), XRANGE/XREVRANGE, XLEN, XDEL, XDELEX,
XTRIM, XSETID and the SK.XTRIMIDS effect. Error lines, replies, the effects each write logs
(resolved IDs, exact trim clauses, only what changed) and their replay."""

from __future__ import annotations

import pytest

from streamkeep import Record
from streamkeep.engine.commands.streams import parse_ids_args
from streamkeep.engine.wire.errors import ReplyError
from tests.support.effects_util import Recorded, argv_bytes

EDOM = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ZERO = "ERR The ID specified in XADD must be greater than 0-0"
ARITY = "ERR wrong number of arguments for 'xadd' command"
MAX = "18446744073709551615-18446744073709551615"


@pytest.fixture
def rec() -> Recorded:
    return Recorded(now=5)


def fill(rec: Recorded, key: str, n: int) -> None:
    for i in range(1, n + 1):
        rec("XADD", key, f"{i}-0", "f", f"v{i}")


# --- XADD --------------------------------------------------------------------------------------


def test_xadd_id_forms_read_alike() -> None:
    # `*` and digits-only `ms-seq` (every XADD effect) skip the general parse; the other forms
    # take it and resolve the same way.
    rec = Recorded(now=10)
    assert rec("XADD", "s", "3-4", "f", "v") == b"3-4"
    assert rec("XADD", "s", "*", "f", "v") == b"10-0"
    rec.clock.now = 9
    assert rec("XADD", "s", "*", "f", "v") == b"10-1"
    assert rec("XADD", "s", "011-0", "f", "v") == b"11-0"
    assert rec("XADD", "s", "+12-0", "f", "v") == b"12-0"
    assert rec("XADD", "s", "13", "f", "v") == b"13-0"
    assert rec("XADD", "s", "13-*", "f", "v") == b"13-1"
    assert rec("XADD", "s", "MAXLEN", "9", "14-0", "f", "v") == b"14-0"
    assert rec("XLEN", "s") == 8
    rec.assert_replays()


@pytest.mark.parametrize(("argv", "line"), [
    (("XADD", "s", "0-0", "f", "v"), ZERO),
    (("XADD", "s", "11-0", "f"), ARITY),
    (("XADD", "s", "*", "f", "v", "g"), ARITY),
    (("XADD", "s", "2-0", "f", "v"), EDOM),
    (("XADD", "s", "1", "f", "v"), EDOM),
    (("XADD", "s", "MAXLEN", "5", "0-0", "f", "v"), ZERO),
    (("XADD", "s", "MAXLEN", "5", "2-0", "f", "v", "g"), ARITY),
])
def test_xadd_refuses_a_replayed_effect_as_a_client(argv: tuple[str, ...], line: str) -> None:
    rec = Recorded(now=5)
    rec("XADD", "s", "2-0", "f", "v")
    assert rec.err(*argv) == line
    replica = rec.replay()
    with pytest.raises(ReplyError) as refused:  # a replayed record is refused the same way
        replica.replay.apply(Record(0, 5, 0, [argv_bytes(argv)]))
    assert refused.value.line == line


@pytest.mark.parametrize(("ids", "now", "resolved"), [
    (("*", "*"), 5, [b"5-0", b"5-1"]),
    (("7-0", "*"), 5, [b"7-0", b"7-1"]),            # a clock behind the last ID: last + 1
    (("5", "5-*", "6-*"), 1, [b"5-0", b"5-1", b"6-0"]),
    (("007-1", "8-01"), 1, [b"7-1", b"8-1"]),      # odd spellings are logged canonical
    ((f"5-{2**64 - 1}", "*"), 1, [b"5-18446744073709551615", b"6-0"]),
])
def test_xadd_ids_and_their_effects(ids: tuple[str, ...], now: int,
                                    resolved: list[bytes]) -> None:
    rec = Recorded(now=now)
    for sid, expected in zip(ids, resolved, strict=True):
        assert rec.effects("XADD", "s", sid, "f", "v") == (
            expected, [[b"XADD", b"s", expected, b"f", b"v"]])
    rec.assert_replays()


@pytest.mark.parametrize(("first", "then", "line"), [
    ("5-5", "5-5", EDOM), ("5-5", "5", EDOM), ("5-5", "4-*", EDOM), ("5-5", "0", ZERO),
    (f"5-{2**64 - 1}", "5-*", EDOM), (MAX, "*", EXHAUSTED), (MAX, "MAXLEN 5 *", EXHAUSTED),
    ("5-5", "bad", "ERR Invalid stream ID specified as stream command argument"),
])
def test_xadd_refusals(rec: Recorded, first: str, then: str, line: str) -> None:
    rec("XADD", "s", first, "f", "v")
    assert rec.err("XADD", "s", *then.split(), "f", "v") == line
    assert rec("XLEN", "s") == 1


def test_xadd_trims_log_an_exact_clause() -> None:
    rec = Recorded(now=5, **{"stream-node-max-entries": 2})
    for key in ("a", "b", "c", "d"):
        fill(rec, key, 5)
    assert rec.effects("XADD", "a", "MAXLEN", "3", "6-0", "f", "v")[1] == [
        [b"XADD", b"a", b"MAXLEN", b"=", b"3", b"6-0", b"f", b"v"]]
    # `~` removes whole nodes only (here two of 1-0 2-0 | 3-0 4-0 | 5-0 6-0): logged as the
    # exact length it left.
    assert rec.effects("XADD", "b", "MAXLEN", "~", "1", "6-0", "f", "v")[1] == [
        [b"XADD", b"b", b"MAXLEN", b"=", b"2", b"6-0", b"f", b"v"]]
    assert rec("XLEN", "b") == 2
    assert rec.effects("XADD", "c", "MINID", "3", "6-0", "f", "v")[1] == [
        [b"XADD", b"c", b"MINID", b"=", b"3-0", b"6-0", b"f", b"v"]]
    # A trim that removes nothing is not logged.
    assert rec.effects("XADD", "d", "MAXLEN", "10", "6-0", "f", "v")[1] == [
        [b"XADD", b"d", b"6-0", b"f", b"v"]]
    rec.assert_replays()


def test_xadd_nomkstream(rec: Recorded) -> None:
    assert rec.effects("XADD", "s", "NOMKSTREAM", "*", "f", "v") == (None, [])
    assert rec("EXISTS", "s") == 0
    rec("XADD", "s", "1-0", "f", "v")
    assert rec.effects("XADD", "s", "NOMKSTREAM", "2-0", "f", "v")[0] == b"2-0"


# --- XRANGE / XREVRANGE / XLEN -----------------------------------------------------------------


def test_ranges(rec: Recorded) -> None:
    fill(rec, "s", 4)
    entries = [[b"%d-0" % i, [b"f", b"v%d" % i]] for i in range(1, 5)]
    assert rec.effects("XRANGE", "s", "-", "+") == (entries, [])
    assert rec("XRANGE", "s", "(1-0", "3") == entries[1:3]
    assert rec("XRANGE", "s", "-", "+", "COUNT", "2", "count", "3") == entries[:3]  # the last wins
    assert rec("XREVRANGE", "s", "+", "-", "COUNT", "2") == entries[:1:-1]
    assert rec("XREVRANGE", "s", "3", "(1-0") == [entries[2], entries[1]]
    # COUNT 0 (or negative) is a null reply, except on a missing key.
    assert rec("XRANGE", "s", "-", "+", "COUNT", "0") is None
    assert rec("XREVRANGE", "s", "+", "-", "COUNT", "-3") is None
    assert rec("XRANGE", "nokey", "-", "+", "COUNT", "0") == []
    assert rec("XRANGE", "s", "3", "2") == []
    assert (rec("XLEN", "s"), rec("XLEN", "nokey")) == (4, 0)


@pytest.mark.parametrize(("argv", "line"), [
    (("XRANGE", "s", "-", "+", "LIMIT", "1"), "ERR syntax error"),
    (("XRANGE", "s", "-", "+", "COUNT"), "ERR syntax error"),
    (("XRANGE", "s", "-", "+", "COUNT", "x"), "ERR value is not an integer or out of range"),
    (("XRANGE", "s", "x", "+"), "ERR Invalid stream ID specified as stream command argument"),
    (("XRANGE", "s", "(-", "+"), "ERR Invalid stream ID specified as stream command argument"),
    (("XRANGE", "s", f"({MAX}", "+"), "ERR invalid start ID for the interval"),
    (("XRANGE", "s", "-", "(0-0"), "ERR invalid end ID for the interval"),
    (("XLEN", "s", "t"), "ERR wrong number of arguments for 'xlen' command"),
])
def test_range_errors(rec: Recorded, argv: tuple[str, ...], line: str) -> None:
    fill(rec, "s", 1)
    assert rec.err(*argv) == line


# --- XDEL / XDELEX -----------------------------------------------------------------------------


def test_xdel_logs_only_what_it_deleted(rec: Recorded) -> None:
    fill(rec, "s", 4)
    assert rec.effects("XDEL", "s", "3-0", "9-0", "1-0", "3-0") == (2, [
        [b"XDEL", b"s", b"3-0", b"1-0"]])
    assert rec.effects("XDEL", "s", "3-0") == (0, [])
    assert rec.effects("XDEL", "nokey", "1-0") == (0, [])
    assert rec.err("XDEL", "s", "2-0", "bad") == (
        "ERR Invalid stream ID specified as stream command argument")
    assert rec("XLEN", "s") == 2
    info = rec("XINFO", "STREAM", "s")
    assert info[info.index(b"max-deleted-entry-id") + 1] == b"3-0"
    rec.assert_replays()


def test_parse_ids_args() -> None:
    args = parse_ids_args(argv_bytes(("XDELEX", "s", "IDS", "2", "1-0", "2-0", "acked")), 2)
    assert (args.policy, list(args.ids)) == (b"ACKED", [b"1-0", b"2-0"])
    args = parse_ids_args(argv_bytes(("XDELEX", "s", "IDS", "1", "1-0")), 2)
    assert args.policy == b"KEEPREF"
    with pytest.raises(ReplyError, match="^ERR IDS option is required$"):
        parse_ids_args(argv_bytes(("XDELEX", "s", "DELREF")), 2)


@pytest.mark.parametrize(("tail", "line"), [
    (("IDS", "0", "1-0"), "ERR Number of IDs must be a positive integer"),
    (("IDS", "x", "1-0"), "ERR Number of IDs must be a positive integer"),
    (("IDS", "3", "1-0", "2-0"), "ERR The `numids` parameter must match the number of arguments"),
    (("KEEPREF", "ACKED", "IDS", "1", "1-0"), "ERR syntax error"),
    (("IDS", "1", "1-0", "2-0"), "ERR syntax error"),
    (("IDS", "1", "bad", "KEEPREF"), "ERR Invalid stream ID specified as stream command argument"),
])
def test_xdelex_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    fill(rec, "s", 2)
    assert rec.err("XDELEX", "s", *tail) == line


def test_xdelex_codes_and_effects(rec: Recorded) -> None:
    fill(rec, "s", 4)
    assert rec.effects("XDELEX", "nokey", "IDS", "2", "1-0", "x") == ([-1, -1], [])
    rec("XGROUP", "CREATE", "s", "g", "0")
    rec("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    # ACKED keeps what a group still needs (1-0 pending, 3-0 not delivered yet).
    assert rec.effects("XDELEX", "s", "ACKED", "IDS", "3", "1-0", "3-0", "9-0") == (
        [2, 2, -1], [])
    # DELREF drops the references as well.
    assert rec.effects("XDELEX", "s", "DELREF", "IDS", "2", "1-0", "3-0") == ([1, 1], [
        [b"XACK", b"s", b"g", b"1-0"], [b"XDEL", b"s", b"1-0", b"3-0"]])
    # KEEPREF (the default) deletes and leaves the PEL alone.
    assert rec.effects("XDELEX", "s", "IDS", "1", "2-0") == ([1], [[b"XDEL", b"s", b"2-0"]])
    assert rec("XPENDING", "s", "g")[0] == 1
    rec.assert_replays()


# --- XTRIM and SK.XTRIMIDS ---------------------------------------------------------------------


def test_xtrim_effects() -> None:
    rec = Recorded(now=5, **{"stream-node-max-entries": 2})
    fill(rec, "s", 9)
    assert rec.effects("XTRIM", "s", "MAXLEN", "8") == (1, [[b"XTRIM", b"s", b"MAXLEN", b"=", b"8"]])
    assert rec.effects("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "2") == (
        1, [[b"XTRIM", b"s", b"MAXLEN", b"=", b"7"]])   # LIMIT 2: one whole node (2-0) only
    # An approximate MINID is logged as the first ID it left (tombstones included).
    assert rec.effects("XTRIM", "s", "MINID", "~", "6") == (2, [
        [b"XTRIM", b"s", b"MINID", b"=", b"5-0"]])
    assert rec.effects("XTRIM", "s", "MINID", "6-0") == (1, [
        [b"XTRIM", b"s", b"MINID", b"=", b"6-0"]])
    assert rec.effects("XTRIM", "s", "MAXLEN", "100") == (0, [])
    assert rec.effects("XTRIM", "nokey", "MAXLEN", "0") == (0, [])
    rec.assert_replays()


def test_xtrim_with_references_logs_the_exact_ids(rec: Recorded) -> None:
    fill(rec, "s", 5)
    rec("XGROUP", "CREATE", "s", "g", "0")
    rec("XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">")
    rec("XACK", "s", "g", "2-0")
    # ACKED skips what the group still needs: 1-0 and 3-0 pending; 2-0 acknowledged.
    assert rec.effects("XTRIM", "s", "MAXLEN", "0", "ACKED") == (1, [
        [b"SK.XTRIMIDS", b"s", b"2-0"]])
    assert rec.effects("XTRIM", "s", "MAXLEN", "2", "DELREF") == (2, [
        [b"SK.XTRIMIDS", b"s", b"1-0", b"3-0"], [b"XACK", b"s", b"g", b"1-0", b"3-0"]])
    assert rec("XPENDING", "s", "g")[0] == 0
    rec.assert_replays()
    assert rec.err("SK.XTRIMIDS", "s", "4-0").startswith("ERR unknown command 'SK.XTRIMIDS'")


@pytest.mark.parametrize(("tail", "line"), [
    (("MAXLEN", "1", "LIMIT", "10"),
     "ERR syntax error, LIMIT cannot be used without the special ~ option"),
    (("LIMIT", "10", "KEEPREF"),
     "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"),
    (("LIMIT", "0"), "ERR syntax error, XTRIM must be called with a trimming strategy"),
    (("KEEPREF", "ACKED"), "ERR syntax error"),
    (("MAXLEN", "1", "NOMKSTREAM"), "ERR syntax error"),
    (("MAXLEN", "-1"), "ERR The MAXLEN argument must be >= 0."),
])
def test_xtrim_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    fill(rec, "s", 3)
    assert rec.err("XTRIM", "s", *tail) == line
    assert rec("XLEN", "s") == 3


# --- XSETID ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tail", "line"), [
    (("100-0", "ENTRIESADDED", "-1"), "ERR entries_added must be positive"),
    (("100-0", "ENTRIESADDED", "1"),
     "ERR The entries_added specified in XSETID is smaller than the target stream length"),
    (("100-0", "MAXDELETEDID", "200-0"),
     "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"),
    (("1-0",), "ERR The ID specified in XSETID is smaller than the target stream top item"),
    (("100-0", "BOGUS", "1"), "ERR syntax error"),
    (("100-0", "ENTRIESADDED"), "ERR syntax error"),
    (("bad",), "ERR Invalid stream ID specified as stream command argument"),
])
def test_xsetid_errors(rec: Recorded, tail: tuple[str, ...], line: str) -> None:
    fill(rec, "s", 3)
    assert rec.err("XSETID", "s", *tail) == line


def test_xsetid_checks_the_max_deleted_id(rec: Recorded) -> None:
    fill(rec, "s", 3)
    rec("XDEL", "s", "3-0")
    assert rec.err("XSETID", "s", "2-5") == (
        "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id")
    assert rec.err("XSETID", "nokey", "1-0") == "ERR no such key"


def test_xsetid_logs_all_three_values_on_a_change(rec: Recorded) -> None:
    fill(rec, "s", 3)
    assert rec.effects("XSETID", "s", "3-0") == ("OK", [])
    assert rec.effects("XSETID", "s", "100-0", "MAXDELETEDID", "1-5") == ("OK", [
        [b"XSETID", b"s", b"100-0", b"ENTRIESADDED", b"3", b"MAXDELETEDID", b"1-5"]])
    assert rec.effects("XSETID", "s", "100-0", "ENTRIESADDED", "10")[1] == [
        [b"XSETID", b"s", b"100-0", b"ENTRIESADDED", b"10", b"MAXDELETEDID", b"1-5"]]
    assert rec.err("XADD", "s", "99-0", "f", "v") == EDOM
    rec.assert_replays()
