"""Replay (engine.runtime.replay: `engine.replay.apply_many`).

Replay.apply_many applies a record made of one `XADD key id field value ...` effect without the
command dispatch, through cmd_streams.add_entry (the XADD handler's own validated append), and
the AOF is decoded batch by batch while it is applied (aof.codec.scan_batches, checked on its
own in tests/aof/test_codec.py). Checked here:

* replayed state equals the live state, digest and node layout (boundaries, listpack sizes,
  ID bytes) alike, for records mixing fast-path XADDs with trims, deletions, several keys,
  SELECTed databases, transactions and group reads, through Engine.open, through apply_many
  and through the general path (Replay.apply, one record at a time);
* hand-written XADD effects in every spelling (leading zeros, `*`, `ms`, `ms-*`, options,
  lowercase, list effects) give the same state through apply_many as through the handler;
* a record whose XADD is refused (ID not greater than the last, 0-0, exhausted stream) makes
  Engine.open raise the XADD handler's own error, as before the fast path.
"""

from __future__ import annotations

import glob
import os
import random
from pathlib import Path

import pytest

from streamkeep import Engine, Record, ReplyError
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
    fast.replay.apply_many(decoded(records))
    assert fast.digest() == digest and layout(fast) == nodes
    fast_lists = Engine(**LIMITS)
    fast_lists.replay.apply_many(records)  # Record objects, list effects
    assert fast_lists.digest() == digest and layout(fast_lists) == nodes
    general = Engine(**LIMITS)
    for record in records:
        general.replay.apply(record)  # the command table, one effect at a time
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
    fast.replay.apply_many(records)
    general = Engine(**LIMITS)
    for r in records:
        general.replay.apply(Record(*r))
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
