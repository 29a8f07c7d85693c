"""Trimming arguments and reference policies (engine.commands.trimming): `parse_add_trim`'s
grammar, defaults and error lines (XADD's and XTRIM's), the reference policies on a stream built
by hand (`referenced`, `drop_references`, `run_trim`), the exact clause or IDs a trim replays
with (`trim_effects`), and those effects replayed through the commands."""

from __future__ import annotations

import pytest

from streamkeep import Engine, Session
from streamkeep.engine.commands.trimming import (
    ACKED,
    DELREF,
    KEEPREF,
    TrimArgs,
    drop_references,
    obeys_exactly,
    parse_add_trim,
    parse_policy,
    referenced,
    run_trim,
    trim_effects,
)
from streamkeep.engine.exec.context import Ctx, ReplayCtx
from streamkeep.engine.model.consumer_groups import ConsumerGroup
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.errors import ReplyError
from tests.support.effects_util import Recorded, argv_bytes


def sid(ms: int) -> int:
    return ms << 64


def stream(n: int, node_entries: int = 100) -> Stream:
    """Entries 1-0 .. n-0, `node_entries` to a node."""
    s = Stream()
    for i in range(1, n + 1):
        s.append(sid(i), (b"f", b"v"), node_entries, 1 << 20)
    return s


def with_group(s: Stream, name: bytes, last: int, pending: tuple[int, ...]) -> ConsumerGroup:
    """A group delivered up to `last`-0 with `pending` entries still pending."""
    group = s.groups[name] = ConsumerGroup(name, sid(last), last)
    consumer = group.create_consumer(b"c", 0)
    for ms in pending:
        group.add_pending(sid(ms), consumer, 0, 1)
    return group


def xtrim(*args: str, exact: bool = False, max_entries: int = 100) -> TrimArgs:
    return parse_add_trim(argv_bytes(("XTRIM", "s", *args)), False, exact, max_entries)


def xadd(*args: str, max_entries: int = 100) -> TrimArgs:
    return parse_add_trim(argv_bytes(("XADD", "s", *args)), True, False, max_entries)


# --- parsing -----------------------------------------------------------------------------------


def test_parse_policy() -> None:
    assert [parse_policy(w) for w in (b"keepref", b"DelRef", b"ACKED", b"ack")] == [
        KEEPREF, DELREF, ACKED, None]


def test_parse_xtrim_arguments() -> None:
    a = xtrim("MAXLEN", "=", "5", "DELREF")
    assert (a.strategy, a.maxlen, a.approx, a.limit, a.policy, a.field_pos) == (
        b"MAXLEN", 5, False, 0, DELREF, 6)
    a = xtrim("minid", "~", "7-3", "LIMIT", "50")
    assert (a.strategy, a.minid, a.approx, a.limit, a.limit_given) == (
        b"MINID", (7 << 64) | 3, True, 50, True)
    assert xtrim("MINID", "7").minid == sid(7)  # a missing sequence is 0


@pytest.mark.parametrize(("max_entries", "limit"), [(100, 10_000), (0, 10_000), (7, 700),
                                                    (20_000, 1_000_000)])
def test_approximate_trims_default_their_limit(max_entries: int, limit: int) -> None:
    assert xtrim("MAXLEN", "~", "5", max_entries=max_entries).limit == limit
    assert xtrim("MAXLEN", "5", max_entries=max_entries).limit == 0


def test_an_exact_context_drops_the_limit() -> None:
    """Replayed effects and a primary's rewrites obey the threshold whatever LIMIT says."""
    assert xtrim("MAXLEN", "~", "5", "LIMIT", "3", exact=True).limit == 0
    assert xtrim("MAXLEN", "5", "LIMIT", "3", exact=True).limit == 0  # no `~` needed then
    engine = Engine()
    replaying = ReplayCtx(engine, Session(), 0)
    primary_session = Session()
    primary_session.from_primary = True
    primary = Ctx(engine, primary_session, 0)
    client = Ctx(engine, Session(), 0)
    assert obeys_exactly(replaying) and obeys_exactly(primary) and not obeys_exactly(client)


def test_parse_xadd_arguments() -> None:
    a = xadd("NOMKSTREAM", "ACKED", "MAXLEN", "~", "3", "LIMIT", "5", "5-*", "f", "v")
    assert (a.nomkstream, a.policy, a.maxlen, a.limit, a.field_pos) == (True, ACKED, 3, 5, 10)
    assert a.id is not None and (a.id.value, a.id.seq_given) == (sid(5), False)
    a = xadd("IDMP", "p", "i", "*", "f", "v")
    assert (a.idmp_pid, a.idmp_iid, a.id, a.field_pos) == (b"p", b"i", None, 6)
    a = xadd("IDMPAUTO", "p", "*", "f", "v")
    assert (a.idmp_pid, a.idmp_iid, a.field_pos) == (b"p", None, 5)
    # A second policy word is not an option: XADD reads it as the ID.
    with pytest.raises(ReplyError, match="^ERR Invalid stream ID"):
        xadd("KEEPREF", "ACKED", "*", "f", "v")


@pytest.mark.parametrize(("args", "line"), [
    (("MAXLEN", "1", "MINID", "1"),
     "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"),
    (("MAXLEN", "-1"), "ERR The MAXLEN argument must be >= 0."),
    (("MAXLEN", "x"), "ERR value is not an integer or out of range"),
    (("MINID", "x"), "ERR Invalid stream ID specified as stream command argument"),
    (("MAXLEN", "~", "1", "LIMIT", "-1"), "ERR The LIMIT argument must be >= 0."),
    (("LIMIT", "5"), "ERR syntax error, LIMIT cannot be used without specifying a trimming "
     "strategy"),
    (("MAXLEN", "1", "LIMIT", "5"), "ERR syntax error, LIMIT cannot be used without the "
     "special ~ option"),
    (("ACKED",), "ERR syntax error, XTRIM must be called with a trimming strategy"),
    (("MAXLEN", "1", "NOMKSTREAM"), "ERR syntax error"),
    (("MAXLEN", "1", "IDMP", "p", "i"), "ERR syntax error"),
])
def test_xtrim_parse_errors(args: tuple[str, ...], line: str) -> None:
    with pytest.raises(ReplyError) as refused:
        xtrim(*args)
    assert refused.value.line == line


@pytest.mark.parametrize(("args", "line"), [
    (("IDMP", "p", "i", "5-0", "f", "v"),
     "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"),
    (("IDMP", "p", "i", "IDMP", "q", "j", "*", "f", "v"),
     "ERR IDMP/IDMPAUTO specified multiple times"),
    (("IDMP", "", "i", "*", "f", "v"), "ERR IDMP requires a non-empty producer ID"),
    (("IDMP", "p", "", "*", "f", "v"), "ERR IDMP requires a non-empty idempotent ID"),
    (("IDMPAUTO", "", "*", "f", "v"), "ERR IDMPAUTO requires a non-empty producer ID"),
    (("LIMIT", "5", "*", "f", "v"),
     "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"),
])
def test_xadd_parse_errors(args: tuple[str, ...], line: str) -> None:
    with pytest.raises(ReplyError) as refused:
        xadd(*args)
    assert refused.value.line == line


# --- reference policies ------------------------------------------------------------------------


def test_referenced_means_undelivered_or_pending() -> None:
    s = stream(5)
    assert not referenced(s, sid(1))  # no groups: nothing is referenced
    with_group(s, b"g", 3, (2,))
    assert [referenced(s, sid(i)) for i in range(1, 6)] == [False, True, False, True, True]


def test_drop_references_per_group() -> None:
    s = stream(5)
    with_group(s, b"a", 5, (1, 2))
    with_group(s, b"b", 5, (2, 3))
    with_group(s, b"none", 5, ())
    assert drop_references(s, [sid(2), sid(3), sid(4)]) == {b"a": [sid(2)],
                                                            b"b": [sid(2), sid(3)]}
    assert list(s.groups[b"a"].pel) == [sid(1)] and not s.groups[b"b"].pel


def test_run_trim_keepref_acked_delref() -> None:
    s = stream(6)
    with_group(s, b"g", 4, (2, 3))
    assert run_trim(s, xtrim("MAXLEN", "4")) == ([sid(1), sid(2)], {})  # KEEPREF: the PEL stays
    assert sid(2) in s.groups[b"g"].pel
    s = stream(6)
    with_group(s, b"g", 4, (2, 3))
    removed, dropped = run_trim(s, xtrim("MAXLEN", "0", "ACKED"))
    assert (removed, dropped, s.length) == ([sid(1), sid(4)], {}, 4)  # 2, 3 pending; 5, 6 new
    s = stream(6)
    with_group(s, b"g", 4, (2, 3))
    removed, dropped = run_trim(s, xtrim("MINID", "4", "DELREF"))
    assert (removed, dropped) == ([sid(1), sid(2), sid(3)], {b"g": [sid(2), sid(3)]})
    assert not s.groups[b"g"].pel


def test_trim_effects_clauses() -> None:
    s = stream(9, node_entries=2)
    exact = xtrim("MAXLEN", "4")
    assert trim_effects(b"s", s, exact, *run_trim(s, exact)) == (
        [b"MAXLEN", b"=", b"4"], [])
    s = stream(9, node_entries=2)
    approx = xtrim("MAXLEN", "~", "4")
    removed, dropped = run_trim(s, approx)
    assert s.length == 5  # whole nodes only: 1-0 2-0 | 3-0 4-0 went, 5-0 .. 9-0 stay
    assert trim_effects(b"s", s, approx, removed, dropped) == ([b"MAXLEN", b"=", b"5"], [])
    s = stream(9, node_entries=2)
    by_id = xtrim("MINID", "~", "4")
    assert trim_effects(b"s", s, by_id, *run_trim(s, by_id)) == ([b"MINID", b"=", b"3-0"], [])
    assert trim_effects(b"s", s, xtrim("MINID", "4"), [], {}) == ([b"MINID", b"=", b"4-0"], [])


def test_trim_effects_with_references_are_exact_ids() -> None:
    s = stream(6)
    with_group(s, b"g", 4, (2, 3))
    delref = xtrim("MAXLEN", "3", "DELREF")
    assert trim_effects(b"s", s, delref, *run_trim(s, delref)) == ([], [
        [b"SK.XTRIMIDS", b"s", b"1-0", b"2-0", b"3-0"], [b"XACK", b"s", b"g", b"2-0", b"3-0"]])
    assert trim_effects(b"s", s, xtrim("MAXLEN", "0", "ACKED"), [], {}) == ([], [])


def test_trims_replay_through_the_commands() -> None:
    rec = Recorded(now=5, **{"stream-node-max-entries": 3})
    for i in range(1, 10):
        rec("XADD", "s", f"{i}-0", "f", "v")
    rec("XGROUP", "CREATE", "s", "g", "0")
    rec("XREADGROUP", "GROUP", "g", "c", "COUNT", "4", "STREAMS", "s", ">")
    rec("XACK", "s", "g", "1-0", "3-0")
    for argv in (("XTRIM", "s", "MAXLEN", "0", "ACKED"),  # 1-0 and 3-0 (2-0, 4-0 pending)
                 ("XADD", "s", "MINID", "3", "DELREF", "10-0", "f", "v"),  # 2-0 and its PEL entry
                 ("XTRIM", "s", "MAXLEN", "~", "1", "LIMIT", "3")):  # the node 4-0 5-0 6-0
        rec(*argv)
        rec.assert_replays()
    assert [entry[0] for entry in rec("XRANGE", "s", "-", "+")] == [b"7-0", b"8-0", b"9-0",
                                                                     b"10-0"]
    assert rec("XPENDING", "s", "g")[:3] == [1, b"4-0", b"4-0"]
