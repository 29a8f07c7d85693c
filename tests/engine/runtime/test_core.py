"""Replay's fast path (Engine.apply_many).

Engine.apply_many applies a record made of one `XADD key id field value ...` effect without the
command dispatch, through cmd_streams.add_entry (the XADD handler's own validated append), and
the AOF is decoded batch by batch while it is applied (aof.codec.scan_batches, checked on its
own in tests/aof/test_codec.py). Checked here:

* replayed state equals the live state, digest and node layout (boundaries, listpack sizes,
  ID bytes) alike, for records mixing fast-path XADDs with trims, deletions, several keys,
  SELECTed databases, transactions and group reads, through Engine.open, through apply_many
  and through the general path (Engine.apply);
* hand-written XADD effects in every spelling (leading zeros, `*`, `ms`, `ms-*`, options,
  lowercase, list effects) give the same state through apply_many as through the handler;
* a record whose XADD is refused (ID not greater than the last, 0-0, exhausted stream) makes
  Engine.open raise the XADD handler's own error, as before the fast path;
* Engine.execute_batch (a redis-server primary's stream on a replica) takes the same fast path
  for plain XADDs live: one record, the same replies and state as command by command, and
  the same state replayed.
"""

from __future__ import annotations

import glob
import os
import random
from pathlib import Path

import pytest

from streamkeep import Engine, Record, ReplyError, Session
from streamkeep.aof.codec import encode

LIMITS = {"stream_node_max_entries": 7, "stream_node_max_bytes": 160}
MAX = 18446744073709551615


def layout(engine: Engine) -> list:
    """Everything about each stream's storage that the digest may not show."""
    out = []
    for db, streams in enumerate(engine.dbs):
        for key, s in sorted(streams.items()):
            nodes = [(n.master, bytes(n.buffer()), n.live, n.count)
                     for n in s.nodes]
            out.append((db, key, s.length, s.first_id, s.last_id, s.max_deleted_id,
                        s.entries_added, nodes))
    return out


def workload(engine: Engine, clock: list[int], seed: int, n: int = 400) -> None:
    """Mostly XADDs (as real logs are) to several keys in two databases, with explicit IDs in
    canonical and odd spellings, values that size differently (numeric, empty, long, several
    fields), trims, deletions, transactions and group reads in between."""
    rnd = random.Random(seed)
    values = [b"v", b"", b"12", b"-3", b"0", b"007", b"x" * 70, b"9" * 25, b"hello world"]
    engine.execute("XGROUP", "CREATE", "a", "g", "$", "MKSTREAM")
    for _ in range(n):
        clock[0] += rnd.choice([0, 0, 0, 1, 1, 3, 200, 5000, -2])
        key = rnd.choice([b"a", b"a", b"b", b"c"])
        r = rnd.random()
        if r < 0.55:
            fields = [b"f", rnd.choice(values)]
            if rnd.random() < 0.15:
                fields += [rnd.choice([b"f", b"g"]), rnd.choice(values)]
            argv = [b"XADD", key, b"*", *fields]
            if rnd.random() < 0.3:  # an explicit ID just past the last one, spelled oddly
                last = b"0-0"
                if engine.execute("EXISTS", key):
                    info = engine.execute("XINFO", "STREAM", key)
                    last = dict(zip(info[::2], info[1::2], strict=True))[b"last-generated-id"]
                ms, seq = map(int, last.split(b"-"))
                ms, seq = rnd.choice([(ms, seq + 1), (ms, seq + 1500), (ms + 130, 0),
                                      (ms + 5000, 3), (max(ms, clock[0]) + 1, 0)])
                spelled = rnd.choice([b"%d-%d", b"0%d-%d", b"%d-0%d"]) % (ms, seq)
                argv[2] = spelled
            engine.execute(*argv)
        elif r < 0.65:
            engine.execute("XADD", key, "MAXLEN", rnd.choice(["~", "="]), str(rnd.randint(3, 12)),
                           "*", "f", "t")
        elif r < 0.7:
            engine.execute("XTRIM", key, "MINID", "~", f"{clock[0] - 3}-0")
        elif r < 0.75:
            engine.execute("XDEL", key, f"{clock[0]}-{rnd.randint(0, 3)}")
        elif r < 0.82:
            engine.execute("SELECT", rnd.choice(["0", "0", "3"]))
        elif r < 0.85:
            engine.execute("MULTI")
            engine.execute("XADD", key, "*", "m", "1")
            engine.execute("SELECT", "5")
            engine.execute("XADD", key, "*", "m", "2")
            engine.execute("EXEC")
        elif r < 0.9 and engine.execute("EXISTS", "a"):
            engine.execute("SELECT", "0")
            reply = engine.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "STREAMS", "a",
                                   ">")
            if reply and rnd.random() < 0.5:
                engine.execute("XACK", "a", "g", *[entry[0] for entry in reply[0][1]])


def decoded(records: list[Record]) -> list[tuple]:
    """Records as the AOF decoder yields them (tuples all the way down)."""
    return [(r.lsn, r.time_ms, r.db, tuple(map(tuple, r.effects))) for r in records]


@pytest.mark.parametrize("seed", range(4))
def test_replayed_state_equals_live_state(tmp_path: Path, seed: int) -> None:
    clock = [1_000]
    path = str(tmp_path / "d")
    live = Engine.open(path, clock=lambda: clock[0], **LIMITS)
    records: list[Record] = []
    live.add_sink(records.append)
    try:
        workload(live, clock, seed)
        digest, nodes = live.digest(), layout(live)
    finally:
        live.close()
    assert sum(len(r.effects) == 1 and r.effects[0][0] == b"XADD" for r in records) > 200
    assert {r.db for r in records} >= {0, 3}

    reopened = Engine.open(path, **LIMITS)  # AOF replay: scan_batches + apply_many
    try:
        assert reopened.digest() == digest
        assert layout(reopened) == nodes
    finally:
        reopened.close()

    fast = Engine(**LIMITS)
    fast.apply_many(decoded(records))
    assert fast.digest() == digest and layout(fast) == nodes
    fast_lists = Engine(**LIMITS)
    fast_lists.apply_many(records)  # Record objects, list effects
    assert fast_lists.digest() == digest and layout(fast_lists) == nodes
    general = Engine(**LIMITS)
    for record in records:
        general.apply(record)  # the command table, one effect at a time
    assert general.digest() == digest and layout(general) == nodes


HAND_WRITTEN = [
    [b"XADD", b"k", b"5-1", b"f", b"v"],
    [b"XADD", b"k", b"05-02", b"f", b"v"],  # leading zeros: stored as 5-2
    [b"XADD", b"k", b"5-0003", b"f", b"1"],
    [b"XADD", b"k", b"5-1024", b"f", b"v"],  # past the small-sequence cache
    [b"XADD", b"k", b"6", b"f", b"v"],  # ms only: the general path
    [b"XADD", b"k", b"6-*", b"f", b"v"],
    [b"XADD", b"k", b"*", b"f", b"v", b"g", b"w"],
    [b"xadd", b"k", b"9000-0", b"f", b"v"],  # another spelling of the command
    [b"XADD", b"t", b"1-1", b"f", b"v"],
    [b"XADD", b"t", b"1-2", b"f", b"v"],
    [b"XADD", b"t", b"MAXLEN", b"=", b"1", b"9000-5", b"f", b"v"],
    [b"XADD", b"k2", b"0-1", b"f", b"v"],
    [b"XADD", b"k2", b"18446744073709551615-0", b"f", b"v"],
    [b"XADD", b"k2", b"*", b"f", b"v"],  # the last ms: seq + 1
]


def test_hand_written_xadds_apply_as_through_the_handler() -> None:
    records = [(i + 1, 7_000, 0, (tuple(e),)) for i, e in enumerate(HAND_WRITTEN)]
    records.append((len(records) + 1, 7_000, 2, ([b"XADD", b"k", b"1-1", b"f", b"v"],)))
    fast = Engine(**LIMITS)
    fast.apply_many(records)
    general = Engine(**LIMITS)
    for r in records:
        general.apply(Record(*r))
    assert fast.digest() == general.digest()
    assert layout(fast) == layout(general)
    assert [e[0] for e in fast.execute("XRANGE", "k", "-", "+")] == [
        b"5-1", b"5-2", b"5-3", b"5-1024", b"6-0", b"6-1", b"7000-0", b"9000-0"]
    assert [e[0] for e in fast.execute("XRANGE", "t", "-", "+")] == [b"9000-5"]
    assert fast.execute("XRANGE", "k2", "-", "+")[-1][0] == b"18446744073709551615-1"


def _data_dir_with(path: str, setup: list[list[str]], bad: list[bytes], db: int = 0) -> None:
    """A directory whose log is `setup`, then one hand-appended, CRC-valid record: `bad`."""
    e = Engine.open(path, clock=lambda: 50)
    try:
        for argv in setup:
            e.execute(*argv)
        lsn = e.journal.records_written  # type: ignore[union-attr]
    finally:
        e.close()
    segment = sorted(glob.glob(os.path.join(path, "segment-*.aof")))[-1]
    with open(segment, "ab") as f:
        f.write(encode(lsn + 1, 60, db, [bad]))


@pytest.mark.parametrize(("setup", "bad", "error"), [
    ([["XADD", "s", "5-0", "f", "v"]], [b"XADD", b"s", b"5-0", b"f", b"v"],
     "ERR The ID specified in XADD is equal or smaller than the target stream top item"),
    ([["XADD", "s", "5-3", "f", "v"]], [b"XADD", b"s", b"4-9", b"f", b"v"],
     "ERR The ID specified in XADD is equal or smaller than the target stream top item"),
    ([["XADD", "s", "5-3", "f", "v"]], [b"XADD", b"s", b"5-03", b"f", b"v"],
     "ERR The ID specified in XADD is equal or smaller than the target stream top item"),
    ([], [b"XADD", b"s", b"0-0", b"f", b"v"],
     "ERR The ID specified in XADD must be greater than 0-0"),
    ([["XADD", "s", f"{MAX}-{MAX}", "f", "v"]], [b"XADD", b"s", b"*", b"f", b"v"],
     "ERR The stream has exhausted the last possible ID, unable to add more items"),
    ([["XADD", "s", f"{MAX}-{MAX}", "f", "v"]], [b"XADD", b"s", b"7-0", b"f", b"v"],
     "ERR The stream has exhausted the last possible ID, unable to add more items"),
])
def test_refused_xadd_record_refuses_to_open(tmp_path: Path, setup: list[list[str]],
                                             bad: list[bytes], error: str) -> None:
    path = str(tmp_path / "d")
    _data_dir_with(path, setup, bad)
    for _ in range(2):  # the same error each time: the directory's lock was released
        with pytest.raises(ReplyError) as exc:
            Engine.open(path)
        assert str(exc.value) == error
    # ... the error a client sending that XADD gets
    live = Engine(clock=lambda: 50)
    for argv in setup:
        live.execute(*argv)
    with pytest.raises(ReplyError) as exc:
        live.execute(*bad)
    assert str(exc.value) == error


def test_execute_atomic_is_one_transaction_and_one_record() -> None:
    from streamkeep.engine.runtime.core import Session

    engine = Engine()
    records: list[Record] = []
    engine.add_sink(records.append)
    session = Session()
    replies = engine.execute_atomic(session, [
        (b"XADD", b"s", b"1-1", b"f", b"v"), (b"XADD", b"s", b"1-0", b"f", b"v"),
        (b"XLEN", b"s")])
    assert replies[0] == b"1-1" and isinstance(replies[1], ReplyError) and replies[2] == 1
    assert len(records) == 1 and [e[0] for e in records[0].effects] == [b"XADD"]
    with pytest.raises(ReplyError, match="EXECABORT Transaction discarded because of "
                                         "previous errors"):
        engine.execute_atomic(session, [(b"XADD", b"s", b"*", b"f", b"v"), (b"NOPE",)])
    with pytest.raises(ReplyError, match="EXECABORT"):
        engine.execute_atomic(session, [(b"MULTI",)])
    assert engine.execute("XLEN", "s") == 1 and session.multi is None
    engine.execute_raw(session, (b"MULTI",))
    with pytest.raises(ReplyError, match="MULTI calls can not be nested"):
        engine.execute_atomic(session, [(b"XLEN", b"s")])


def _transaction_outcome(engine: Engine, session: object, argvs: list) -> tuple:
    """A transaction's replies (errors as their lines), records and stats."""
    records: list[Record] = []
    engine.add_sink(records.append)
    try:
        replies = engine.execute_atomic(session, argvs)  # type: ignore[arg-type]
    except ReplyError as err:
        replies = err.line
    lines = replies if isinstance(replies, str) else [
        r.line if isinstance(r, ReplyError) else r for r in replies]
    calls = {name: (engine.stats.counters(name).calls, engine.stats.counters(name).failed)
             for name in ("xadd", "exec")}
    return lines, [list(map(list, r.effects)) for r in records], calls


@pytest.mark.parametrize("argvs", [
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"XADD", b"t", b"*", b"n", b"1", b"m", b"2")],
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"XADD", b"str", b"*", b"f", b"v")],  # WRONGTYPE
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"XADD", b"s", b"*", b"f")],  # arity: EXECABORT
    [(b"XADD", b"s", b"*", b"f", b"v"), (b"xadd", b"s", b"*", b"f", b"v")],
])
def test_a_transaction_of_plain_xadds_is_exec_as_the_table_runs_it(argvs: list) -> None:
    """execute_atomic runs a transaction of plain `XADD key * ...` without queueing (as
    execute_batch does): the replies, the one record, the call counts are EXEC's."""
    from streamkeep.engine.runtime import batches
    from streamkeep.engine.runtime.core import Session

    outcomes = []
    for fast in (True, False):
        engine = Engine(clock=lambda: 1_000)
        engine.execute("SET", "str", "x")
        engine.execute("XADD", "s", "999-0", "f", "v")
        if not fast:  # the general path: MULTI, the queued commands, EXEC
            engine.execute_raw(Session(), (b"WATCH", b"other"))  # (another session's)
            original = batches.plain_xadd
            batches.plain_xadd = lambda argv: False  # type: ignore[assignment]
            try:
                outcomes.append(_transaction_outcome(engine, Session(), argvs))
            finally:
                batches.plain_xadd = original
        else:
            outcomes.append(_transaction_outcome(engine, Session(), argvs))
    assert outcomes[0] == outcomes[1]


def test_a_watching_session_takes_the_general_transaction() -> None:
    from streamkeep.engine.runtime.core import Session

    engine = Engine()
    session = Session()
    engine.execute_raw(session, (b"WATCH", b"s"))
    engine.execute("XADD", "s", "*", "f", "v")  # another client changes the watched key
    assert engine.execute_atomic(session, [(b"XADD", b"s", b"*", b"f", b"v")]) is None \
        or engine.execute("XLEN", "s") == 1


BATCH = [  # a redis-server primary's stream between transactions, as a replica applies it
    (b"SELECT", b"1"), (b"XADD", b"a", b"1-1", b"f", b"v"), (b"XADD", b"a", b"1-1", b"f", b"v"),
    (b"SELECT", b"2"), (b"XADD", b"b", b"MAXLEN", b"=", b"1", b"5-1", b"f", b"v"),
    (b"XADD", b"b", b"6-1", b"f", b"w"), (b"XGROUP", b"CREATE", b"b", b"g", b"0"),
    (b"XCLAIM", b"b", b"g", b"c", b"0", b"6-1", b"FORCE", b"JUSTID"), (b"NOPE",),
    (b"SELECT", b"0"), (b"XADD", b"c", b"0-0", b"f", b"v"), (b"XADD", b"c", b"7-1", b"f", b"v"),
    (b"XDEL", b"c", b"7-1"),
]


def test_execute_batch_is_one_record_that_replays_to_the_same_state(tmp_path: Path) -> None:
    """Engine.execute_batch: plain XADDs by add_entry, the rest through the command table,
    each command's database SELECTed in the record; the same replies and state as the
    commands run one by one, and the same state again once the record is replayed."""
    from streamkeep.engine.runtime.core import Session

    def clock() -> int:
        return 1_700_000_000_000

    one_by_one = Engine(clock=clock)
    expected: list = []
    for argv in BATCH:
        try:
            expected.append(one_by_one.execute_raw(one_by_one.session, argv))
        except ReplyError as err:
            expected.append(err)
    path = str(tmp_path / "d")
    with Engine.open(path, clock=clock) as engine:
        records: list[Record] = []
        engine.add_sink(records.append)
        session = Session()
        replies = engine.execute_batch(session, BATCH)
        assert [r.line if isinstance(r, ReplyError) else r for r in replies] == \
            [r.line if isinstance(r, ReplyError) else r for r in expected]
        assert isinstance(replies[2], ReplyError) and isinstance(replies[8], ReplyError)
        assert len(records) == 1 and session.db == 0
        assert engine.digest() == one_by_one.digest()
    with Engine.open(path, clock=clock) as again:
        assert again.digest() == one_by_one.digest()
        again.execute("SELECT", "2")
        assert again.execute("XLEN", "b") == 2 and again.execute("XPENDING", "b", "g")[0] == 1


# --- the one command path ---------------------------------------------------------------------
#
# Every way a command runs goes through EngineCore.run_command, which asks the one write gate
# (EngineCore.write_gate). Two checks: the gate closed (a replica's read-only line) is seen by
# a client's command, a queued command at EXEC, a batch and a blocked read's re-run, while a
# replayed record still applies; and, on the interpreted build (in a child process, since a
# compiled method cannot be patched), a planted change to the gate and a planted change to the
# path are seen on every entry point.

GATE = "READONLY You can't write against a read only replica."


def test_the_gate_is_seen_on_every_way_a_command_runs() -> None:
    engine = Engine()
    engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    client, primary = engine.session, engine.primary_session()

    # A blocked XREADGROUP (a write: it moves the group) waits; then the engine becomes a
    # replica, and the primary's XADD wakes it: its re-run is refused by the gate.
    blocked, _ = engine.submit(client, (b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"0",
                                        b"STREAMS", b"s", b">"))
    from streamkeep.engine.exec.blocking import Waiter

    assert type(blocked) is Waiter
    # A transaction queued while writes were allowed, its EXEC after the gate closed.
    queued = Session()
    for argv in [(b"MULTI",), (b"XADD", b"s", b"*", b"f", b"queued")]:
        engine.submit(queued, argv)
    engine.read_only = GATE
    try:
        engine.submit(primary, (b"XADD", b"s", b"*", b"f", b"primary"))
        assert blocked.done and isinstance(blocked.result, ReplyError)
        assert blocked.result.line == GATE
        with pytest.raises(ReplyError, match="READONLY"):
            engine.execute("XADD", "s", "*", "f", "client")
        reply, _ = engine.submit(queued, (b"EXEC",))
        assert isinstance(reply[0], ReplyError) and reply[0].line == GATE
        with pytest.raises(ReplyError, match="READONLY"):  # a batch is refused whole
            engine.execute_batch(client, [(b"XADD", b"s", b"*", b"f", b"batch")])
        # A record applied (replay, a replica's stream) is never gated.
        engine.apply(Record(0, 1, 0, [[b"XADD", b"s", b"9999999999999-0", b"f", b"replayed"]]))
    finally:
        engine.read_only = None
    values = [fields[1] for _id, fields in engine.execute("XRANGE", "s", "-", "+")]
    assert values == [b"primary", b"replayed"]
    stats = dict(line.split(":", 1) for line in
                 engine.execute("INFO", "commandstats").decode().split("\r\n")[1:] if line)
    # The client's XADD was rejected, the queued one failed; the re-run XREADGROUP failed
    # once, when its wait ended.
    assert "rejected_calls=1,failed_calls=1" in stats["cmdstat_xadd"]
    assert "failed_calls=1" in stats["cmdstat_xreadgroup"]


PLANTED = r'''
from streamkeep import Engine, Record, ReplyError, Session
from streamkeep.engine.runtime import core
from streamkeep.compiled import running

assert not running(core), "the child must run the interpreted build"
seen = set()
original_path, original_gate = core.EngineCore.run_command, core.EngineCore.write_gate
def run_command(self, ctx, entry, argv, handler=None):
    seen.add((type(ctx).__name__, entry.name))
    return original_path(self, ctx, entry, argv, handler)
planted = [False]
def write_gate(self, session):
    if planted[0] and not session.from_primary:
        return "ERR planted gate"
    return original_gate(self, session)
core.EngineCore.run_command = run_command
core.EngineCore.write_gate = write_gate

engine = Engine()
engine.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
blocked, _ = engine.submit(engine.session, (b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK",
                                            b"0", b"STREAMS", b"s", b">"))
other = Session()
engine.submit(other, (b"MULTI",))
engine.submit(other, (b"XADD", b"s", b"*", b"f", b"queued"))
planted[0] = True
engine.submit(engine.primary_session(), (b"XADD", b"s", b"*", b"f", b"v"))
replies = []
try:
    engine.execute("XADD", "s", "*", "f", "client")
except ReplyError as err:
    replies.append(err.line)
replies.append(engine.submit(other, (b"EXEC",))[0][0].line)
try:
    engine.execute_batch(engine.session, [(b"XADD", b"s", b"*", b"f", b"b")])
except ReplyError as err:
    replies.append(err.line)
engine.apply(Record(0, 1, 0, [[b"XADD", b"s", b"9999999999999-0", b"f", b"replayed"]]))
print(repr((blocked.result.line, replies, sorted(seen))))
'''


def test_a_planted_gate_and_path_are_seen_on_every_entry_point() -> None:
    import ast
    import subprocess
    import sys

    env = {**os.environ, "STREAMKEEP_NO_EXTENSIONS": "1"}
    env.pop("STREAMKEEP_REQUIRE_EXTENSIONS", None)
    out = subprocess.run([sys.executable, "-c", PLANTED], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    rerun_line, replies, seen = ast.literal_eval(out.strip().splitlines()[-1])
    assert rerun_line == "ERR planted gate"  # the blocked read's re-run
    # The client's command, the queued one at EXEC, the batch (refused whole).
    assert replies == ["ERR planted gate"] * 3
    assert ("RerunCtx", "xreadgroup") in seen  # the re-run went through the path
    assert ("ReplayCtx", "xadd") in seen  # the replayed record too
    assert ("Ctx", "xadd") in seen and ("MultiCtx", "xadd") in seen
