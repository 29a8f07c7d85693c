"""Snapshots on real LMDB files: write -> load round trips, the read-only API against the engine's
own replies, concurrent readers, error handling, map growth and the pinned on-disk layout.

The round trip is a property over random command sequences (the effects-replay generator of
tests/support/command_strategies.py, with binary names, more databases and node-splitting
configs): a loaded engine has the same digest and the same `XINFO STREAM FULL` (node layout
included) as the one that wrote the snapshot, and both stay identical under the same further
commands."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import lmdb
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from streamkeep.engine.model import packed_node
from streamkeep.snapshot import layout
from streamkeep.snapshot import writer as snapshot_writer
from streamkeep.snapshot.layout import ID
from streamkeep.snapshot.reader import Snapshot, SnapshotError
from streamkeep.snapshot.services.load import load_snapshot
from streamkeep.snapshot.writer import write_snapshot
from tests.support import v3_snapshot as v3
from tests.support.command_strategies import SETUP, Clock, commands
from tests.support.snapshot_util import body, fingerprint, sealed

MAX_ID = (1 << 128) - 1
U64 = (1 << 64) - 1
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# --- helpers ---------------------------------------------------------------------------------

def pid(raw: bytes) -> int:
    ms, seq = raw.split(b"-")
    return int(ms) << 64 | int(seq)


def fid(value: int) -> bytes:
    return b"%d-%d" % (value >> 64, value & U64)


def kv(reply: list) -> dict:
    return dict(zip(reply[0::2], reply[1::2], strict=True))


def select(engine: Engine, db: int) -> None:
    engine.execute("SELECT", str(db))


def on_db(engine: Engine, db: int, *argv: object) -> object:
    """Run one command in database `db`, leaving the session's database as it was."""
    saved = engine.session.db
    select(engine, db)
    try:
        return engine.execute(*argv)
    finally:
        select(engine, saved)


def all_streams(engine: Engine) -> list[tuple[int, bytes]]:
    return [(db, key) for db, keys in enumerate(engine.dbs) for key in sorted(keys)]


def full_infos(engine: Engine) -> dict[tuple[int, bytes], object]:
    return {(db, key): on_db(engine, db, "XINFO", "STREAM", key, "FULL", "COUNT", "0")
            for db, key in all_streams(engine)}


def node_layout(engine: Engine) -> dict[tuple[int, bytes], list]:
    """Every node as a restore must reproduce it: what it holds and the listpack size and
    master fields later appends are sized against."""
    return {(db, key): [(n.master, bytes(n.buffer()), n.count, n.live, n.master_fields)
                        for n in engine.dbs[db][key].nodes]
            for db, key in all_streams(engine)}


def snap_path(directory: str, name: str = "snapshot-000000000001.mdb") -> str:
    return os.path.join(directory, name)


def write(engine: Engine, path: str, lsn: int = 7) -> None:
    write_snapshot(engine.dbs, path, lsn, 1234, "replid-x")


def restored(path: str, clock: Clock | None = None, **config: object) -> Engine:
    engine = Engine(clock=clock, **config)
    load_snapshot(engine, path)
    return engine


def as_xrange(entries: Iterator) -> list:
    return [[str(e.id).encode(), list(e.fields)] for e in entries]


def check_reader(engine: Engine, snap: Snapshot) -> None:
    """Everything the read API says about every stream agrees with the engine's replies."""
    expected = all_streams(engine)
    infos = snap.streams()
    assert [(i.db, i.key) for i in infos] == expected
    for db in {db for db, _ in expected} | {15}:
        assert [(i.db, i.key) for i in snap.streams(db)] == [x for x in expected if x[0] == db]
    total = 0
    for info in infos:
        db, key = info.db, info.key
        plain = kv(on_db(engine, db, "XINFO", "STREAM", key))
        assert snap.stream(db, key) == info
        assert info.length == plain[b"length"]
        total += info.length
        assert info.first_id == ID.of(pid(plain[b"recorded-first-entry-id"]))
        assert info.last_id == ID.of(pid(plain[b"last-generated-id"]))
        assert info.max_deleted_id == ID.of(pid(plain[b"max-deleted-entry-id"]))
        assert info.entries_added == plain[b"entries-added"]
        assert info.nodes == plain[b"radix-tree-keys"]
        assert info.groups == plain[b"groups"]
        everything = on_db(engine, db, "XRANGE", key, "-", "+")
        assert as_xrange(snap.entries(db, key)) == everything
        for parts in (1, 2, 3, info.nodes + 1):
            ranges = snap.split(db, key, parts)
            assert as_xrange(e for lo, hi in ranges for e in snap.entries(db, key, lo, hi)) \
                == everything
        full = kv(on_db(engine, db, "XINFO", "STREAM", key, "FULL", "COUNT", "0"))
        groups = snap.groups(db, key)
        assert len(groups) == len(full[b"groups"])
        for group, g in zip(groups, sorted(map(kv, full[b"groups"]),
                                           key=lambda g: g[b"name"]), strict=True):
            assert group.name == g[b"name"]
            assert group.last_id == ID.of(pid(g[b"last-delivered-id"]))
            assert group.entries_read == (-1 if g[b"entries-read"] is None
                                          else g[b"entries-read"])
            assert group.pending == g[b"pel-count"]
            assert group.consumers == len(g[b"consumers"])
            # An XNACK-released entry has no consumer: nil in the snapshot, "" in XINFO.
            assert [(str(p.id).encode(), p.consumer or b"", p.delivery_time, p.delivery_count)
                    for p in snap.pending(db, key, group.name)] \
                == [tuple(p) for p in g[b"pending"]]
            consumers = sorted(map(kv, g[b"consumers"]), key=lambda c: c[b"name"])
            assert snap.consumers(db, key, group.name) == [
                (c[b"name"], c[b"seen-time"], c[b"active-time"]) for c in consumers]
    assert snap.meta.streams == len(expected)
    assert snap.meta.entries == total


# --- 1. round trip property --------------------------------------------------------------------

# The effects-replay generator speaks of s1/s2, g1/g2, alice/bob/carol and fields a/b/c: rename
# those tokens to binary names (NUL, non-UTF-8, prefixes of each other, empty values) so every
# key, group, consumer, field and value the snapshot stores is binary.
RENAME = {
    b"s1": b"s", b"s2": b"s\x00\xfe\x80",
    b"g1": b"g\x00\xff", b"g2": b"\xc3(",  # byte order and (length, bytes) order disagree
    b"alice": b"a\x00", b"bob": b"\xff\xfe", b"carol": b"carol",
    b"a": b"\x00", b"b": b"b\xff\x00", b"c": b"c",
    b"va": b"\x00\x01\x02", b"vb": b"vb\x80", b"vc": b"",
}
KEYS = [RENAME[b"s1"], RENAME[b"s2"]]

# Commands built from the engine's state when they run: delete every entry (an empty stream
# that still exists), delete a node's first (master) entry.
DELALL, DELMASTER = b"!delall", b"!delmaster"
extras = st.one_of(
    st.builds(lambda k: [DELALL, k], st.sampled_from(KEYS)),
    st.builds(lambda k, i: [DELMASTER, k, i], st.sampled_from(KEYS), st.integers(0, 20)),
    st.sampled_from([[b"SELECT", b"0"], [b"SELECT", b"1"], [b"SELECT", b"2"]]),
    st.builds(lambda k: [b"XTRIM", k, b"MAXLEN", b"=", b"0"], st.sampled_from(KEYS)),
    st.builds(lambda k: [b"XGROUP", b"CREATE", k, b"\x00grp", b"$", b"MKSTREAM"],
              st.sampled_from(KEYS + [b"fresh\x00\xff"])),
)
script_command = st.integers(0, 4).flatmap(lambda i: extras if i == 0 else commands)
script = st.lists(st.tuples(script_command, st.integers(0, 3)), min_size=10, max_size=60)
# After the shared SETUP (5 entries in s1 and s2, groups g1 and g2 on both): PELs,
# tombstones (one of them a node's master entry) and a second database from the start.
MORE_SETUP = [
    [b"XREADGROUP", b"GROUP", b"g1", b"alice", b"COUNT", b"2", b"STREAMS", b"s1", b"s2", b">",
     b">"],
    [b"XREADGROUP", b"GROUP", b"g2", b"bob", b"STREAMS", b"s1", b">"],
    [b"XDEL", b"s2", b"2-1", b"4-1"],
    [b"SELECT", b"1"],
    *([b"XADD", b"s1", b"%d-1" % i, b"a", b"va", b"b", b"vb"] for i in range(1, 10)),
    [b"XGROUP", b"CREATE", b"s1", b"g1", b"0"],
    [b"XREADGROUP", b"GROUP", b"g1", b"carol", b"COUNT", b"4", b"STREAMS", b"s1", b">"],
    [b"SELECT", b"0"],
]
configs = st.sampled_from([
    {"stream_node_max_entries": 3},
    {"stream_node_max_entries": 4, "stream_node_max_bytes": 50},
    {"stream_node_max_entries": 0, "stream_node_max_bytes": 40},  # bytes alone cut nodes
])


def resolve(engine: Engine, argv: list[bytes]) -> list[list[bytes]]:
    argv = [RENAME.get(a, a) for a in argv]
    if argv[0] not in (DELALL, DELMASTER):
        return [argv]
    s = engine.dbs[engine.session.db].get(argv[1])
    if s is None or not s.nodes:
        return []
    if argv[0] == DELALL:
        return [[b"XDEL", argv[1], *(e[0] for e in engine.execute("XRANGE", argv[1], "-", "+"))]]
    return [[b"XDEL", argv[1], fid(s.nodes[argv[2] % len(s.nodes)].entry_ids()[0])]]


def run(engine: Engine, argv: list[bytes]) -> object:
    try:
        return engine.execute(*argv)
    except ReplyError as err:
        return ("error", str(err))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs, script, script)
def test_round_trip_then_same_commands(config: dict, before: list, after: list) -> None:
    clock = Clock()
    primary = Engine(clock=clock, **config)
    for argv, delta in [(argv, 0) for argv in SETUP + MORE_SETUP] + before:
        clock.now += delta
        for cmd in resolve(primary, argv):
            run(primary, cmd)
    with tempfile.TemporaryDirectory() as directory:
        path = snap_path(directory)
        write(primary, path, lsn=len(before) + 1)
        copy = restored(path, clock, **config)
        with Snapshot(path) as snap:
            check_reader(primary, snap)
    assert copy.digest() == primary.digest()
    assert all_streams(copy) == all_streams(primary)
    assert full_infos(copy) == full_infos(primary)
    assert node_layout(copy) == node_layout(primary)

    select(copy, primary.session.db)
    tail = [([b"XADD", k, b"*", b"f", b"%d" % n], 0) for k in KEYS for n in range(4)] + [
        ([b"XTRIM", k, b"MAXLEN", b"~", b"2"], 1) for k in KEYS]
    for argv, delta in after + tail:
        clock.now += delta
        for cmd in resolve(primary, argv):
            assert run(copy, cmd) == run(primary, cmd), cmd
            assert copy.digest() == primary.digest(), cmd
    assert full_infos(copy) == full_infos(primary)
    assert node_layout(copy) == node_layout(primary)


@pytest.mark.parametrize("fields", [("f",), ("f", "g"), ("f", "g", "h")])
def test_round_trip_keeps_byte_split_nodes(fields: tuple[str, ...]) -> None:
    """Node sizes and master fields survive: appends after a restore, into the restored last
    node first, are sized as before and start new nodes exactly where they would."""
    clock = Clock()
    config = {"stream_node_max_entries": 0, "stream_node_max_bytes": 400}
    primary = Engine(clock=clock, **config)
    rng = random.Random(3)

    def entry() -> list[str]:  # mostly the master's fields, sometimes others
        names = fields if rng.random() < 0.8 else ("other",)
        return [x for name in names for x in (name, "x" * rng.randrange(0, 30))]

    for i in range(1, 40):
        primary.execute("XADD", "k", f"{i}-{rng.randrange(3)}", *entry())
    with tempfile.TemporaryDirectory() as directory:
        write(primary, snap_path(directory))
        copy = restored(snap_path(directory), clock, **config)
    assert len(primary.dbs[0][b"k"].nodes) >= 3
    assert node_layout(copy) == node_layout(primary)
    for i in range(40, 120):
        argv = ("XADD", "k", f"{i}-0", *entry())
        assert copy.execute(*argv) == primary.execute(*argv)
        assert node_layout(copy) == node_layout(primary)
    assert full_infos(copy) == full_infos(primary)


# --- 2. the read API against the engine ----------------------------------------------------------

BIG = (1 << 64) - 1  # the largest millisecond time


def rich_engine() -> tuple[Engine, Clock]:
    """Many nodes, tombstones (node masters among them), groups, PELs, idle consumers, empty
    streams, several databases, binary names, IDs at the top of the ID space."""
    clock = Clock()
    clock.now = 1000
    e = Engine(clock=clock, stream_node_max_entries=3)
    rng = random.Random(11)
    ms = 1
    for _ in range(70):
        gap = rng.choice([0, 1, 1, 7, 1 << 33])
        ms += gap
        sid = f"{ms}-*" if not gap else f"{ms}-{rng.choice([0, 1, 5, U64])}"
        with contextlib.suppress(ReplyError):  # `ms-*` after `ms-<max seq>`
            e.execute("XADD", "alpha", sid, "f", str(rng.randrange(100)), b"\x00\xff", b"v\x80")
    s = e.dbs[0][b"alpha"]
    e.execute("XDEL", "alpha", *[fid(n.entry_ids()[0]) for n in s.nodes[2:12:3]])  # node masters
    ids = [sid for n in s.nodes for sid, f in zip(n.entry_ids(), n.entry_fields(), strict=True) if f]
    e.execute("XDEL", "alpha", *[fid(i) for i in rng.sample(ids, 12)])
    e.execute("XTRIM", "alpha", "MINID", "=", fid(s.nodes[1].entry_ids()[1]))  # tombstones at the head
    e.execute("XGROUP", "CREATE", "alpha", "g1", "0")
    e.execute("XREADGROUP", "GROUP", "g1", "c1", "COUNT", "5", "STREAMS", "alpha", ">")
    clock.now = 1100
    e.execute("XREADGROUP", "GROUP", "g1", b"c\x002", "COUNT", "7", "STREAMS", "alpha", ">")
    clock.now = 1200
    pending = [p[0] for p in e.execute("XPENDING", "alpha", "g1", "-", "+", "100")]
    e.execute("XCLAIM", "alpha", "g1", "c3", "0", *pending[3:9:2])
    e.execute("XACK", "alpha", "g1", pending[0], pending[4])
    clock.now = 1300
    e.execute("XGROUP", "CREATECONSUMER", "alpha", "g1", "idle")
    e.execute("XGROUP", "CREATE", "alpha", "g2", "$")
    e.execute("XGROUP", "CREATE", "alpha", b"\xff\x00g", fid(ids[20]))
    clock.now = 1400
    e.execute("XREADGROUP", "GROUP", b"\xff\x00g", "x", "COUNT", "2", "STREAMS", "alpha", ">")
    e.execute("XADD", b"\x00bin\xff", "1-1", "f", "v")  # one node
    e.execute("XADD", b"\x00bin\xff", "2-1", "f", "w")
    e.execute("XADD", "empty", "5-5", "f", "v")
    e.execute("XDEL", "empty", "5-5")
    e.execute("XADD", "top", f"{BIG - 1}-{U64}", "f", "v")
    for _ in range(5):
        e.execute("XADD", "top", f"{BIG}-*", "f", "v")
    select(e, 1)
    e.execute("XADD", "alpha", "3-0", "other", "db")
    e.execute("XGROUP", "CREATE", "mk", "g", "$", "MKSTREAM")
    select(e, 3)
    for i in range(10):
        e.execute("XADD", b"z\xff", f"{i + 1}-0", "f", str(i))
    e.execute("XGROUP", "CREATE", b"z\xff", b"\x00", "0")
    e.execute("XREADGROUP", "GROUP", b"\x00", b"\x01", "STREAMS", b"z\xff", ">")
    select(e, 0)
    clock.now = 5000
    return e, clock


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, Clock, Snapshot]]:
    engine, clock = rich_engine()
    path = str(tmp_path_factory.mktemp("rich") / "snapshot.mdb")
    write_snapshot(engine.dbs, path, 4242, 1700000000123, "0123456789abcdef")
    with Snapshot(path) as snap:
        yield engine, clock, snap


def test_reader_streams_and_meta(rich: tuple[Engine, Clock, Snapshot]) -> None:
    engine, clock, snap = rich
    check_reader(engine, snap)
    assert [(i.db, i.key) for i in snap.streams()] == [
        (0, b"\x00bin\xff"), (0, b"alpha"), (0, b"empty"), (0, b"top"),
        (1, b"alpha"), (1, b"mk"), (3, b"z\xff")]
    assert [i.number for i in snap.streams()] == list(range(1, 8))
    assert snap.streams(2) == [] and snap.streams(16) == []
    empty = snap.stream(0, b"empty")
    assert (empty.length, empty.nodes, empty.last_id, empty.max_deleted_id) == (
        0, 0, ID(5, 5), ID(5, 5))
    assert snap.stream(0, b"missing") is None
    assert snap.stream(2, b"alpha") is None
    assert snap.stream(0, b"alph") is None and snap.stream(0, b"alpha\x00") is None
    assert snap.meta.format == "streamkeep-snapshot" and snap.meta.version == layout.VERSION
    assert (snap.meta.lsn, snap.meta.repl_offset, snap.meta.created_ms, snap.meta.repl_id) == (
        4242, 4242, 1700000000123, "0123456789abcdef")
    assert snap.meta.streams == 7
    assert snap.meta.entries == sum(s.length for db in engine.dbs for s in db.values())
    with pytest.raises(KeyError):
        list(snap.entries(0, b"missing"))
    with pytest.raises(KeyError):
        snap.groups(5, b"alpha")


def _points(engine: Engine, db: int, key: bytes) -> list[int]:
    s = engine.dbs[db][key]
    points = {0, 1, MAX_ID, s.first_id, s.last_id, min(s.last_id + 1, MAX_ID)}
    if s.first_id:
        points.add(s.first_id - 1)
    for node in s.nodes:
        points.update((node.master, node.master - 1, node.master + 1, node.entry_ids()[-1]))
        points.update(node.entry_ids()[1:3])  # inside a node, tombstones included
    return sorted(p for p in points if 0 <= p <= MAX_ID)


def _id_like(value: int, i: int) -> object:
    return (value, ID.of(value), str(ID.of(value)))[i % 3]


@pytest.mark.parametrize("db,key", [(0, b"alpha"), (0, b"top"), (0, b"\x00bin\xff"),
                                    (0, b"empty"), (3, b"z\xff")])
def test_reader_entries_match_xrange(rich: tuple[Engine, Clock, Snapshot], db: int,
                                     key: bytes) -> None:
    engine, _clock, snap = rich
    points = _points(engine, db, key)
    if len(points) > 40:
        points = points[:: len(points) // 40 + 1] + points[-3:]
    n = 0
    for lo in points:
        for hi in points:
            n += 1
            expected = on_db(engine, db, "XRANGE", key, fid(lo), fid(hi))
            got = as_xrange(snap.entries(db, key, _id_like(lo, n), _id_like(hi, n + 1)))
            assert got == expected, (fid(lo), fid(hi))
            count = 1 + n % 4
            assert as_xrange(snap.entries(db, key, lo, hi, count=count)) == on_db(
                engine, db, "XRANGE", key, fid(lo), fid(hi), "COUNT", count)
    assert list(snap.entries(db, key, count=0)) == []
    assert list(snap.entries(db, key, MAX_ID, 0)) == []


def test_reader_entries_start_positions(rich: tuple[Engine, Clock, Snapshot]) -> None:
    """Ranges that begin at a node's master, inside a node, on a tombstone, before the first
    entry and after the last, and whose node is not the stream's first."""
    engine, _clock, snap = rich
    s = engine.dbs[0][b"alpha"]
    node = s.nodes[5]
    tomb = next(sid for n in s.nodes for sid, f in zip(n.entry_ids(), n.entry_fields(), strict=True) if f is None)
    for start in (node.master, node.entry_ids()[1], node.entry_ids()[-1], tomb, tomb + 1, 0, s.last_id,
                  s.last_id + 1, s.nodes[-1].master):
        expected = engine.execute("XRANGE", "alpha", fid(start), "+")
        assert as_xrange(snap.entries(0, b"alpha", start)) == expected
        assert as_xrange(snap.entries(0, b"alpha", start, count=2)) == expected[:2]
    assert list(snap.entries(0, b"alpha", s.last_id + 1)) == []
    first = next(snap.entries(0, b"alpha"))
    assert first.id == ID.of(s.first_id) and first.id > ID.of(s.nodes[0].master)


@pytest.mark.parametrize("db,key", [(0, b"alpha"), (0, b"top"), (0, b"\x00bin\xff"),
                                    (0, b"empty"), (3, b"z\xff"), (1, b"mk")])
def test_reader_split(rich: tuple[Engine, Clock, Snapshot], db: int, key: bytes) -> None:
    engine, _clock, snap = rich
    masters = engine.dbs[db][key].masters
    everything = on_db(engine, db, "XRANGE", key, "-", "+")
    for parts in range(1, len(masters) + 3):
        ranges = snap.split(db, key, parts)
        assert len(ranges) == max(1, min(parts, len(masters)))
        assert ranges[0][0] == ID(0, 0) and ranges[-1][1] == ID.of(MAX_ID)
        for (lo, hi), (nlo, _nhi) in zip(ranges, ranges[1:], strict=False):
            assert lo <= hi and nlo.as_int() == hi.as_int() + 1
            assert nlo.as_int() in masters  # cut at node boundaries
        sizes = [sum(1 for m in masters if lo.as_int() <= m <= hi.as_int()) for lo, hi in ranges]
        assert sum(sizes) == len(masters) and max(sizes) - min(sizes) <= 1
        got = [e for lo, hi in ranges for e in snap.entries(db, key, lo, hi)]
        assert as_xrange(got) == everything
    with pytest.raises(ValueError):
        snap.split(db, key, 0)


def test_reader_split_single_node(rich: tuple[Engine, Clock, Snapshot]) -> None:
    _engine, _clock, snap = rich
    assert snap.stream(0, b"\x00bin\xff").nodes == 1
    for parts in (1, 2, 8):
        assert snap.split(0, b"\x00bin\xff", parts) == [(ID(0, 0), ID.of(MAX_ID))]


def test_reader_groups_consumers_pending(rich: tuple[Engine, Clock, Snapshot]) -> None:
    engine, clock, snap = rich
    now = clock.now
    groups = snap.groups(0, b"alpha")
    assert [g.name for g in groups] == sorted([b"g1", b"g2", b"\xff\x00g"])
    for g, reply in zip(groups, sorted((kv(r) for r in engine.execute("XINFO", "GROUPS", "alpha")),
                                       key=lambda r: r[b"name"]), strict=True):
        assert g.name == reply[b"name"]
        assert str(g.last_id).encode() == reply[b"last-delivered-id"]
        assert g.entries_read == (-1 if reply[b"entries-read"] is None
                                  else reply[b"entries-read"])
        assert g.pending == reply[b"pending"] and g.consumers == reply[b"consumers"]
        consumers = snap.consumers(0, b"alpha", g.name)
        replies = [kv(r) for r in engine.execute("XINFO", "CONSUMERS", "alpha", g.name)]
        assert [c.name for c in consumers] == sorted(r[b"name"] for r in replies)
        for c, r in zip(consumers, sorted(replies, key=lambda r: r[b"name"]), strict=True):
            assert c.seen_time == now - r[b"idle"]
            assert c.active_time == (-1 if r[b"inactive"] == -1 else now - r[b"inactive"])
        pending = list(snap.pending(0, b"alpha", g.name))
        xpending = engine.execute("XPENDING", "alpha", g.name, "-", "+", "1000")
        assert [(str(p.id).encode(), p.consumer, now - p.delivery_time, p.delivery_count)
                for p in pending] == [tuple(x) for x in xpending]
        assert len(pending) == g.pending
    g1 = {c.name: c for c in snap.consumers(0, b"alpha", b"g1")}
    assert set(g1) == {b"c1", b"c\x002", b"c3", b"idle"}
    assert (g1[b"c1"].seen_time, g1[b"c1"].active_time) == (1000, 1000)
    assert (g1[b"c3"].seen_time, g1[b"c3"].active_time) == (1200, 1200)
    assert (g1[b"idle"].seen_time, g1[b"idle"].active_time) == (1300, -1)
    times = {p.consumer: p.delivery_time for p in snap.pending(0, b"alpha", b"g1")}
    assert times == {b"c1": 1000, b"c\x002": 1100, b"c3": 1200}
    assert snap.consumers(0, b"alpha", b"g2") == [] and list(snap.pending(0, b"alpha", b"g2")) == []
    assert snap.consumers(0, b"alpha", b"nope") == []
    assert snap.groups(1, b"mk")[0].name == b"g" and snap.groups(0, b"top") == []
    z = snap.pending(3, b"z\xff", b"\x00")
    assert [(p.consumer, p.delivery_time, p.delivery_count) for p in z] == [(b"\x01", 1400, 1)] * 10


def test_load_rich_state(rich: tuple[Engine, Clock, Snapshot]) -> None:
    engine, clock, snap = rich
    copy = restored(snap.path, clock, stream_node_max_entries=3)
    assert copy.digest() == engine.digest()
    assert full_infos(copy) == full_infos(engine)
    assert copy.execute("XADD", "top", "*", "f", "v") == engine.execute("XADD", "top", "*", "f", "v")
    assert copy.digest() == engine.digest()


# --- 3. several readers at once ----------------------------------------------------------------

_CHILD = """
import sys
from streamkeep.snapshot.reader import Snapshot
from tests.support.snapshot_util import body, fingerprint, sealed
with Snapshot(sys.argv[1]) as snap:
    it = snap.entries(0, b"alpha")
    first = next(it)  # a read transaction is open while the parent reads too
    print("ready", flush=True)
    sys.stdin.readline()
    rest = list(it)
print(len(rest) + 1, fingerprint(sys.argv[1]), flush=True)
"""


def test_readers_in_two_objects_and_a_child_process(
        rich: tuple[Engine, Clock, Snapshot]) -> None:
    engine, _clock, snap = rich
    path = snap.path
    length = engine.execute("XLEN", "alpha")
    a, b = Snapshot(path), Snapshot(path)
    try:
        ia, ib = a.entries(0, b"alpha"), b.entries(0, b"alpha")
        ic = a.entries(0, b"top")
        assert next(ic).id == ID(BIG - 1, U64)  # two open read transactions on one object
        child = subprocess.Popen([sys.executable, "-c", _CHILD, path], cwd=ROOT,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline() == "ready\n"
            interleaved = [(x, y) for x, y in zip(ia, ib, strict=True)]
            assert all(x == y for x, y in interleaved) and len(interleaved) == length
            assert len(list(ic)) == 5
            parent = fingerprint(path)
            out, _ = child.communicate("go\n", timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert child.returncode == 0
        assert out.split() == [str(length), parent]
        assert fingerprint(path) == parent
    finally:
        a.close()
        b.close()


def _fork_child(path: str, out: multiprocessing.Queue) -> None:
    try:
        out.put(fingerprint(path))
    except Exception as err:  # reported to the parent, which compares
        out.put(repr(err))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_reader_in_a_forked_child_while_the_parent_has_it_open(
        rich: tuple[Engine, Clock, Snapshot]) -> None:
    """A forked child (Spark's Python workers fork) opens a file its parent has open: py-lmdb's
    once-per-process guard is inherited, the parent's environment is reused."""
    _engine, _clock, snap = rich
    parent = fingerprint(snap.path)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_fork_child, args=(snap.path, out))
    child.start()
    try:
        assert out.get(timeout=60) == parent
    finally:
        child.join(60)
    assert child.exitcode == 0
    assert fingerprint(snap.path) == parent


# --- 4. errors -------------------------------------------------------------------------------

def _small_engine(entries: int = 2000) -> Engine:
    e = Engine(clock=lambda: 1, stream_node_max_entries=3)
    for i in range(1, entries + 1):
        e.execute("XADD", "s", f"{i}-0", "f", "v" * 40)
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    return e


def _raises_naming(path: str) -> SnapshotError:
    with pytest.raises(SnapshotError) as info:
        Snapshot(path)
    assert path in str(info.value)
    return info.value


def test_error_not_lmdb(tmp_path) -> None:
    for i, data in enumerate([b"", b"hello", os.urandom(5000), b"\x00" * 20000]):
        path = str(tmp_path / f"junk{i}.mdb")
        with open(path, "wb") as f:
            f.write(data)
        _raises_naming(path)


def test_error_missing_file(tmp_path) -> None:
    _raises_naming(str(tmp_path / "nope.mdb"))
    assert not os.path.exists(tmp_path / "nope.mdb")  # a reader never creates anything


def _truncate_in_child(path: str) -> subprocess.CompletedProcess:
    """Open and read a snapshot in a child: a reader that maps pages past the end of a truncated
    file dies of SIGBUS, which must not take the test process with it."""
    code = ("import sys\nfrom snapshot.reader import Snapshot, SnapshotError\n"
            "try:\n    snap = Snapshot(sys.argv[1])\n"
            "except SnapshotError as err:\n    print('SnapshotError', err)\n    sys.exit(0)\n"
            "print('opened', sum(1 for _ in snap.entries(0, b's')))\n")
    return subprocess.run([sys.executable, "-c", code, path], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_error_truncated(tmp_path) -> None:
    path = str(tmp_path / "full.mdb")
    write(_small_engine(), path)
    with open(path, "rb") as f:
        data = f.read()
    psize = 4096
    assert len(data) > 20 * psize
    for cut in (0, 100, psize, 2 * psize, 3 * psize, len(data) // 2, len(data) - psize):
        cut_path = str(tmp_path / f"cut{cut}.mdb")
        with open(cut_path, "wb") as f:
            f.write(data[:cut])
        result = _truncate_in_child(cut_path)
        assert result.returncode == 0, (cut, result.returncode, result.stderr[-500:])
        assert result.stdout.startswith("SnapshotError"), (cut, result.stdout)
        assert cut_path in result.stdout


def test_error_lmdb_without_tables(tmp_path) -> None:
    bare = str(tmp_path / "bare.mdb")
    env = lmdb.open(bare, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
    with env.begin(write=True) as txn:
        txn.put(b"hello", b"world")
    env.close()
    assert "tables" in str(_raises_naming(bare))
    partial = str(tmp_path / "partial.mdb")
    env = lmdb.open(partial, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
    for name in layout.TABLES[:-1]:  # everything but "pel"
        env.open_db(name.encode())
    env.close()
    _raises_naming(partial)


@pytest.mark.parametrize("name,value", [("format", "redis-rdb"), ("version", 2),
                                        ("version", "1"), ("format", None)])
def test_error_wrong_format_or_version(tmp_path, name: str, value: object) -> None:
    path = str(tmp_path / "s.mdb")
    write(_small_engine(5), path)
    Snapshot(path).close()
    env = lmdb.open(path, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
    meta = env.open_db(b"meta")
    with env.begin(write=True, db=meta) as txn:
        if value is None:
            txn.delete(name.encode())
        else:
            txn.put(name.encode(), msgpack.packb(value))
    env.close()
    _raises_naming(path)


def test_error_incomplete_meta(tmp_path) -> None:
    path = str(tmp_path / "s.mdb")
    write(_small_engine(5), path)
    env = lmdb.open(path, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
    with env.begin(write=True, db=env.open_db(b"meta")) as txn:
        txn.delete(b"lsn")
    env.close()
    _raises_naming(path)


def test_load_into_non_empty_engine(tmp_path) -> None:
    path = str(tmp_path / "s.mdb")
    write(_small_engine(5), path)
    e = Engine(clock=lambda: 1)
    e.execute("SELECT", "9")
    e.execute("XGROUP", "CREATE", "other", "g", "$", "MKSTREAM")  # an empty stream counts
    before = e.digest()
    with pytest.raises(ValueError):
        load_snapshot(e, path)
    assert e.digest() == before
    fresh = Engine(clock=lambda: 1)
    meta = load_snapshot(fresh, path)
    assert meta.lsn == 7 and fresh.execute("XLEN", "s") == 5


# --- 5. map growth -------------------------------------------------------------------------------

def test_map_grows_past_initial_size(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot_writer, "_INITIAL_MAP_SIZE", 64 << 10)
    e = _small_engine(3000)
    e.execute("XREADGROUP", "GROUP", "g", "c", "COUNT", "1500", "STREAMS", "s", ">")
    path = str(tmp_path / "s.mdb")
    info = write_snapshot(e.dbs, path, 99, 5, "r")
    assert (info.lsn, info.streams, info.entries) == (99, 1, 3000)
    assert os.path.getsize(path) > 4 * (64 << 10)
    assert os.listdir(tmp_path) == ["s.mdb"]
    copy = restored(path, lambda: 1, stream_node_max_entries=3)
    assert copy.digest() == e.digest()
    assert full_infos(copy) == full_infos(e)
    with Snapshot(path) as snap:
        assert snap.meta.entries == 3000 and len(list(snap.pending(0, b"s", b"g"))) == 1500


# --- 6. the on-disk layout, decoded without the reader ----------------------------------------

def test_layout_is_pinned(tmp_path) -> None:
    clock = Clock()
    clock.now = 1000
    e = Engine(clock=clock, stream_node_max_entries=2)
    select(e, 2)
    e.execute("XADD", b"k\x00", "5-1", "f1", "v1")
    e.execute("XADD", b"k\x00", "5-2", "f1", "v2", "f2", b"\xff")
    e.execute("XADD", b"k\x00", "7-0", "a", "b")
    e.execute("XDEL", b"k\x00", "5-1")  # the first node's master becomes a tombstone
    e.execute("XGROUP", "CREATE", b"k\x00", "grp", "0")
    e.execute("XREADGROUP", "GROUP", "grp", "cons", "COUNT", "1", "STREAMS", b"k\x00", ">")
    clock.now = 1500
    e.execute("XGROUP", "CREATECONSUMER", b"k\x00", "grp", "idle")
    entries_read = kv(e.execute("XINFO", "GROUPS", b"k\x00")[0])[b"entries-read"]
    e.execute("SET", b"s\xff", b"v\x00", "PXAT", "99999")
    e.execute("PEXPIREAT", b"k\x00", "88888")
    sizes = [n.lp_bytes() for n in e.dbs[2][b"k\x00"].nodes]
    path = str(tmp_path / "layout.mdb")
    write_snapshot(e.dbs, path, 12, 34, "rid", values=e.keyspaces, expires=e.expires)
    assert os.listdir(tmp_path) == ["layout.mdb"]  # one file, no lock file

    def ident(ms: int, seq: int) -> bytes:
        return struct.pack(">QQ", ms, seq)

    u64, u16 = struct.Struct(">Q").pack, struct.Struct(">H").pack
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=layout.MAX_TABLES)
    try:
        with env.begin() as txn:
            assert [k for k, _ in txn.cursor()] == sorted(t.encode() for t in (*layout.TABLES, "nodeinfo", "keys"))

        def table(name: str) -> list[tuple[bytes, object]]:
            with env.begin(db=env.open_db(name.encode(), create=False)) as txn:
                return [(k, msgpack.unpackb(body(name, k, v), raw=False))
                        for k, v in txn.cursor()]

        assert dict(table("meta")) == {
            b"format": "streamkeep-snapshot", b"version": 4, b"lsn": 12, b"created_ms": 34,
            b"repl_id": "rid", b"repl_offset": 12, b"streams": 1, b"entries": 2}
        assert table("streams") == [(b"\x02k\x00", {
            "number": 1, "length": 2, "first_id": ident(5, 2), "last_id": ident(7, 0),
            "max_deleted_id": ident(5, 1), "entries_added": 3, "nodes": 2, "groups": 1})]
        with env.begin(db=env.open_db(b"nodes", create=False)) as txn:
            nodes = [(k, body("nodes", k, v)) for k, v in txn.cursor()]
        # each value is the node's listpack, as the engine holds it (and as Redis would)
        assert [k for k, _ in nodes] == [u64(1) + ident(5, 1), u64(1) + ident(7, 0)]
        assert [len(v) for _, v in nodes] == sizes
        first = 5 << 64 | 1
        assert packed_node.entries(bytearray(nodes[0][1]), first) == [
            (first, (b"f1", b"v1"), True), (first + 1, (b"f1", b"v2", b"f2", b"\xff"), False)]
        assert packed_node.entries(bytearray(nodes[1][1]), 7 << 64) == [
            (7 << 64, (b"a", b"b"), False)]
        assert table("nodeinfo") == [(u64(1) + ident(5, 1), [1, sizes[0], 2, [b"f1"]]),
                                     (u64(1) + ident(7, 0), [1, sizes[1], 1, [b"a"]])]
        assert table("groups") == [(u64(1) + b"grp", {
            "last_id": ident(5, 2), "entries_read": -1 if entries_read is None else entries_read,
            "pending": 1, "consumers": 2})]
        prefix = u64(1) + u16(3) + b"grp"
        assert table("consumers") == [(prefix + b"cons", [1000, 1000]),
                                      (prefix + b"idle", [1500, -1])]
        assert table("pel") == [(prefix + ident(5, 2), [b"cons", 1000, 1])]
        assert table("keys") == [(b"\x02k\x00", [None, 88888]),
                                 (b"\x02s\xff", [b"v\x00", 99999])]
    finally:
        env.close()


def test_layout_key_order_across_streams_and_groups(tmp_path) -> None:
    """Stream numbers follow (db, key) order; consumers/PEL keys of groups whose byte order and
    length order differ are still all present (the writer appends in key order)."""
    e = Engine(clock=lambda: 9, stream_node_max_entries=2)
    for db, key in [(1, b"b"), (0, b"b"), (0, b"a\xff"), (0, b"a"), (4, b"")]:
        select(e, db)
        for i in range(1, 6):
            e.execute("XADD", key, f"{i}-0", "f", "v")
        for group in (b"zz", b"\xff", b"a\x00b"):
            e.execute("XGROUP", "CREATE", key, group, "0")
            e.execute("XREADGROUP", "GROUP", group, b"c" + group, "COUNT", "2", "STREAMS", key,
                      ">")
    path = str(tmp_path / "order.mdb")
    write(e, path)
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=layout.MAX_TABLES)
    try:
        with env.begin(db=env.open_db(b"streams", create=False)) as txn:
            rows = [(k, msgpack.unpackb(body("streams", k, v))["number"])
                    for k, v in txn.cursor()]
        assert rows == [(b"\x00a", 1), (b"\x00a\xff", 2), (b"\x00b", 3), (b"\x01b", 4), (b"\x04", 5)]
        with env.begin(db=env.open_db(b"pel", create=False)) as txn:
            assert txn.stat(env.open_db(b"pel", create=False))["entries"] == 5 * 3 * 2
        with env.begin(db=env.open_db(b"consumers", create=False)) as txn:
            assert txn.stat(env.open_db(b"consumers", create=False))["entries"] == 5 * 3
    finally:
        env.close()
    copy = restored(path, lambda: 9, stream_node_max_entries=2)
    assert copy.digest() == e.digest()


def test_incomplete_string_ids_bound_like_xrange(tmp_path: os.PathLike[str]) -> None:
    """"7" as a start means 7-0 and as an end 7-<max>, as XRANGE reads incomplete IDs."""
    engine = Engine(clock=lambda: 1)
    for ms in (6, 7, 8):
        for seq in range(1, 4):
            engine.execute("XADD", "s", f"{ms}-{seq}", "f", "v")
    path = str(tmp_path / "snap.mdb")
    write_snapshot(engine.dbs, path, 1, 1, "0" * 40)
    with Snapshot(path) as snap:
        got = [str(e.id) for e in snap.entries(0, b"s", "7", "7")]
    assert got == [e[0].decode() for e in engine.execute("XRANGE", "s", "7", "7")]
    assert got == ["7-1", "7-2", "7-3"]


# --- idempotent producers (Redis 8.6 XADD IDMP) --------------------------------------------------

def _idmp_engine() -> Engine:
    e = Engine(clock=lambda: 5000)
    e.execute("XADD", "s", "IDMP", "p", "i1", "*", "f", "v")
    e.execute("XADD", "s", "IDMP", "p", "i1", "*", "f", "w")
    e.execute("XCFGSET", "s", "IDMP-MAXSIZE", "7")
    e.execute("XADD", "s", "IDMP", "q", "i2", "*", "f", "v")
    e.execute("XADD", "plain", "*", "f", "v")
    return e


def test_idmp_state_round_trips(tmp_path) -> None:
    path = str(tmp_path / "s.mdb")
    e = _idmp_engine()
    write(e, path)
    with Snapshot(path) as snap:
        info = snap.stream(0, b"s")
        plain = snap.stream(0, b"plain")
    assert info is not None and info.idmp is not None and plain is not None
    assert (info.idmp.duration, info.idmp.maxsize, info.idmp.added, info.idmp.duplicates) == (100, 7, 2, 1)
    assert [(pid, [r.iid for r in recorded]) for pid, recorded in info.idmp.producers] == [(b"q", [b"i2"])]
    assert plain.idmp is None
    back = restored(path, clock=lambda: 5000)
    assert back.digest() == e.digest()
    last = e.execute("XRANGE", "s", "-", "+")[-1][0]
    assert back.execute("XADD", "s", "IDMP", "q", "i2", "*", "f", "x") == last
    assert back.execute("XLEN", "s") == 2


def test_snapshot_without_idmp_field_loads_with_defaults(tmp_path) -> None:
    """A snapshot written before idempotent producers existed has no `idmp` item: it loads, and
    the stream reports the configured defaults and empty maps."""
    path = str(tmp_path / "s.mdb")
    write(_idmp_engine(), path)
    env = lmdb.open(path, subdir=False, lock=False, max_dbs=layout.MAX_TABLES)
    streams = env.open_db(b"streams")
    with env.begin(write=True, db=streams) as txn:
        for raw, value in list(txn.cursor()):
            doc = msgpack.unpackb(body("streams", raw, value), raw=False)
            doc.pop("idmp", None)
            txn.put(raw, sealed("streams", raw, msgpack.packb(doc, use_bin_type=True)))
    env.close()
    with Snapshot(path) as snap:
        assert all(s.idmp is None for s in snap.streams())
    back = restored(path, clock=lambda: 5000)
    flat = back.execute("XINFO", "STREAM", "s")
    got = dict(zip(flat[0::2], flat[1::2], strict=True))
    assert [got[k] for k in (b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked")] == [100, 100, 0, 0]
    assert back.execute("XLEN", "s") == 2


# --- a format 3 file the previous code wrote ------------------------------------------------------


def test_a_format_3_file_reads_as_the_engine_had_it() -> None:
    """Entries (split into ranges too), groups, pending entries (one XNACK released), string
    keys and TTLs, and a clean `check`, as XRANGE and XINFO STREAM FULL said when it was made."""
    want = v3.want()
    with Snapshot(str(v3.V3)) as snap:
        assert snap.meta.version == layout.UNPACKED_VERSION and not snap.packed
    got = v3.read_api(str(v3.V3))
    for row in v3.streams(want):
        mine = got[row["db"], row["key"]]
        assert [[str(e.id).encode(), list(e.fields)] for e in mine["entries"]] == row["xrange"]
        assert mine["info"][0] == v3.full(row, "length")
        groups = v3.full(row, "groups")
        assert [g.name for g in mine["groups"]] == [v3.field(g, "name") for g in groups]
        for pending, group in zip(mine["pending"], groups, strict=True):
            # XINFO shows an entry XNACK released (no owner) with an empty consumer name
            assert [[str(p.id).encode(), p.consumer or b"", p.delivery_time, p.delivery_count]
                    for p in pending] == [list(x) for x in v3.field(group, "pending")]
    assert sorted((k.db, k.key, k.value, k.expires_ms) for k in got["keys"]) == sorted(
        (row["db"], row["key"], row.get("value"),
         None if row["pexpiretime"] < 0 else row["pexpiretime"]) for row in want["keys"]
        if row["pexpiretime"] > 0 or row["type"] == "string")


def test_key_rows_of_a_key_range(tmp_path: os.PathLike[str]) -> None:
    """key_rows(db, first, last): one database's keys from first to last inclusive, in order
    (what the Spark export's key-table tasks read)."""
    strings: list[dict[bytes, bytes]] = [{b"a": b"1", b"b": b"2", b"b\x00": b"3", b"c": b"4"},
                                         {b"a": b"x"}]
    path = os.path.join(tmp_path, "s.mdb")
    write_snapshot([{}, {}], path, 1, 1, "r" * 40, values=[[{}, {}], strings],
                   expires=[{}, {}])
    with Snapshot(path) as snap:
        assert [r.key for r in snap.key_rows(0, b"b", b"b\x00")] == [b"b", b"b\x00"]
        assert [r.key for r in snap.key_rows(0, b"b\x00")] == [b"b\x00", b"c"]
        assert [r.key for r in snap.key_rows(0, last=b"a")] == [b"a"]
        assert [(r.db, r.key) for r in snap.key_rows(1, b"a", b"a")] == [(1, b"a")]
        assert snap.key_rows(0, b"d") == [] and snap.key_rows(0, b"b", b"a") == []
