"""DUMP here and on a real redis-server (7.0: RDB 10, stream type 19) is the same bytes for the
same stream, built command by command on both: one field, ten fields, changing field sets,
integer-looking values and names, values past the 63- and 4095-byte string forms, explicit IDs
with large sequence numbers, many nodes (the same stream-node-max-entries / -max-bytes on both),
consumer groups with pending entries and idle consumers, and after XDEL, XTRIM (MAXLEN, MINID,
`~`) and XADD's own trimming (deleted entries keep their values in a node, as in Redis).

redis-server runs with `rdbcompression no` for the comparison: with it on, Redis LZF-compresses
every string of a payload over 20 bytes (a node's listpack among them), which the engine never
does. What then still differs by construction is wall-clock time: a pending entry's delivery
time and a consumer's seen time are read at their offsets and zeroed on both sides before the
comparison. Separately: Redis's compressed payload RESTOREs here and DUMPs back exactly as
Redis's uncompressed one (times included: RESTORE keeps them).
(RESTORE of Redis-made payloads in general, and corrupt ones: test_dump_restore.py.)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamkeep import Engine
from streamkeep.snapshot import rdb
from tests.support.diffutil import WallClock
from tests.support.hostile_nodes import catalogue, restore_outcome, with_node
from tests.support.hostile_nodes import payload as base_payload
from tests.support.resp_client import RespError

U64 = (1 << 64) - 1
Cmd = tuple[str | bytes, ...]


@pytest.fixture
def redis_plain(redis_raw) -> Iterator:
    """The session's redis-server with rdbcompression off for this test (restored after)."""
    saved = {name: redis_raw.execute("CONFIG", "GET", name)[1]
             for name in ("rdbcompression", "stream-node-max-entries", "stream-node-max-bytes")}
    redis_raw.execute("CONFIG", "SET", "rdbcompression", "no")
    try:
        yield redis_raw
    finally:
        for name, value in saved.items():
            redis_raw.execute("CONFIG", "SET", name, value)


def _time_offsets(payload: bytes) -> list[int]:
    """Where a type-19 payload holds wall-clock milliseconds (8 bytes each): each pending
    entry's delivery time and each consumer's seen time."""
    r = rdb.Reader(payload, 0)
    assert r.byte() == 19
    for _ in range(r.length()):
        r.skip_string()
        r.skip_string()
    for _ in range(1 + 2 + 2 + 2):  # length, last, first and max-deleted IDs
        r.length()
    r.length()  # entries-added
    at = []
    for _ in range(r.length()):
        r.skip_string()
        r.length(), r.length(), r.length()  # last-delivered ID, entries-read
        for _ in range(r.length()):
            r.take(16)
            at.append(r.pos)
            r.millis()
            r.length()
        for _ in range(r.length()):
            r.skip_string()
            at.append(r.pos)
            r.millis()
            for _ in range(r.length()):
                r.take(16)
    assert r.pos == len(payload) - 10, "trailing bytes before the version and CRC"
    return at


def _timeless(payload: bytes) -> bytes:
    """The payload without its RDB version and CRC, its wall-clock times zeroed."""
    out = bytearray(payload[:-10])
    for at in _time_offsets(payload):
        out[at:at + 8] = bytes(8)
    return bytes(out)


def _first_difference(a: bytes, b: bytes) -> str:
    at = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"lengths {len(a)} / {len(b)}, first difference at {at}: " \
           f"{a[max(at - 8, 0):at + 24].hex()} / {b[max(at - 8, 0):at + 24].hex()}"


def _same_dumps(redis_raw, commands: list[Cmd], keys: list[str],
                limits: tuple[int, int] = (100, 4096)) -> None:
    engine = Engine(clock=WallClock(), dump_rdb_version=10)
    try:
        for name, value in zip(("stream-node-max-entries", "stream-node-max-bytes"), limits,
                               strict=True):
            redis_raw.execute("CONFIG", "SET", name, str(value))
            engine.execute("CONFIG", "SET", name, str(value))
        for cmd in commands:
            theirs = redis_raw.execute(*cmd)
            assert engine.execute(*cmd) == theirs or cmd[0] in ("XREADGROUP", "XCLAIM"), cmd
        for key in keys:
            theirs, ours = redis_raw.execute("DUMP", key), engine.execute("DUMP", key)
            assert ours[-10:-8] == theirs[-10:-8] == b"\x0a\x00"  # RDB 10
            a, b = _timeless(theirs), _timeless(ours)
            assert a == b, f"{key}: {_first_difference(a, b)}"
    finally:
        engine.close()


def _xadds(key: str, ids: list[str], fields: list[list[bytes | str]]) -> list[Cmd]:
    return [("XADD", key, sid, *f) for sid, f in zip(ids, fields, strict=True)]


def _ids(n: int, start: int = 1_700_000_000_000) -> list[str]:
    return [f"{start + i // 3}-{i % 3}" for i in range(n)]


INTEGERS = ["0", "-1", "007", "12345678901234567890", "-0", "127", "128", "-4096", "4095",
            "9223372036854775807", "9223372036854775808", "-9223372036854775808", "+1", " 1"]


def _streams() -> dict[str, list[Cmd]]:
    n = 30
    cases: dict[str, list[Cmd]] = {
        "one": _xadds("one", _ids(n), [["f", str(i)] for i in range(n)]),
        "ten": _xadds("ten", _ids(n), [[x for k in range(10) for x in (f"f{k}", f"v{i}.{k}")]
                                       for i in range(n)]),
        "varied": _xadds("varied", _ids(n), [
            ["a", str(i)] if i % 4 == 0 else ["a", str(i), "b", "x"] if i % 4 == 1
            else ["b", "y", "a", str(i)] if i % 4 == 2 else ["c", "z" * (i % 7)]
            for i in range(n)]),
        "ints": _xadds("ints", _ids(len(INTEGERS)), [[v, v, "n", v] for v in INTEGERS]),
        "big": _xadds("big", _ids(8), [["v", "x" * size] for size in
                                       (63, 64, 100, 4095, 4096, 5000, 16383, 16384)]),
        "ids": _xadds("ids", ["1-18446744073709551613", "1-18446744073709551614",
                              "2-0", "2-9223372036854775808", "1700000000000-5",
                              "18446744073709551615-0", "18446744073709551615-18446744073709551614"],
                      [["f", str(i)] for i in range(7)]),
    }
    groups: list[Cmd] = _xadds("grp", _ids(40), [["f", str(i), "g", "x"] for i in range(40)])
    groups += [("XGROUP", "CREATE", "grp", "g1", "0"),
               ("XREADGROUP", "GROUP", "g1", "alice", "COUNT", "7", "STREAMS", "grp", ">"),
               ("XREADGROUP", "GROUP", "g1", "bob", "COUNT", "3", "STREAMS", "grp", ">"),
               ("XACK", "grp", "g1", _ids(40)[1], _ids(40)[8]),
               ("XGROUP", "CREATECONSUMER", "grp", "g1", "idle"),
               ("XCLAIM", "grp", "g1", "bob", "0", _ids(40)[2], "JUSTID"),
               ("XGROUP", "CREATE", "grp", "g2", "$"),
               ("XGROUP", "CREATE", "grp", "g3", _ids(40)[5], "ENTRIESREAD", "6"),
               ("XGROUP", "CREATE", "grp", "a0", "0"),
               ("XREADGROUP", "GROUP", "a0", "c", "STREAMS", "grp", ">")]
    cases["grp"] = groups
    return cases


STREAMS = _streams()


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_streams_dump_to_the_same_bytes(redis_plain, name: str) -> None:
    _same_dumps(redis_plain, STREAMS[name], [name])


@pytest.mark.parametrize("limits", [(5, 4096), (100, 200), (7, 300), (0, 500), (3, 0)])
def test_many_nodes_dump_to_the_same_bytes(redis_plain, limits: tuple[int, int]) -> None:
    n = 60
    commands = _xadds("s", _ids(n), [["f", str(i), "g", "v" * (i % 50)] if i % 6
                                     else ["other", str(i)] for i in range(n)])
    _same_dumps(redis_plain, commands, ["s"], limits)


def _deleting(key: str, n: int) -> list[Cmd]:
    ids = _ids(n)
    cmds = _xadds(key, ids, [["f", str(i), "g", "w" * (i % 90)] if i % 5
                             else ["h", str(i)] for i in range(n)])
    cmds += [("XGROUP", "CREATE", key, "g", "0"),
             ("XREADGROUP", "GROUP", "g", "c", "COUNT", "12", "STREAMS", key, ">")]
    return cmds


def test_after_xdel_the_same_bytes(redis_plain) -> None:
    ids = _ids(60)
    commands = _deleting("s", 60)
    # The first entry, the last, one in the middle of a node, and every entry of one node
    # (freed there), a pending one among them.
    commands.append(("XDEL", "s", ids[0], ids[59], ids[17], ids[3], "1-1"))
    commands.append(("XDEL", "s", *ids[10:15]))
    _same_dumps(redis_plain, commands, ["s"], (5, 4096))


@pytest.mark.parametrize("trim", [
    ("XTRIM", "s", "MAXLEN", "23"), ("XTRIM", "s", "MAXLEN", "~", "23"),
    ("XTRIM", "s", "MINID", "1700000000007-1"), ("XTRIM", "s", "MINID", "~", "1700000000007-1"),
    ("XTRIM", "s", "MAXLEN", "0"), ("XTRIM", "s", "MAXLEN", "~", "40", "LIMIT", "5"),
    ("XADD", "s", "MAXLEN", "~", "30", "1800000000000-0", "f", "new"),
    ("XADD", "s", "MINID", "1700000000010-0", "1800000000000-0", "f", "new")])
def test_after_trims_the_same_bytes(redis_plain, trim: Cmd) -> None:
    ids = _ids(60)
    commands = _deleting("s", 60) + [("XDEL", "s", ids[30], ids[31], ids[44]), trim]
    _same_dumps(redis_plain, commands, ["s"], (6, 4096))


def test_deleting_everything_the_same_bytes(redis_plain) -> None:
    ids = _ids(12)
    commands = _deleting("s", 12) + [("XDEL", "s", *ids), ("XADD", "t", "5-5", "f", "v"),
                                     ("XDEL", "t", "5-5"), ("XSETID", "t", "9-9")]
    _same_dumps(redis_plain, commands, ["s", "t"], (4, 4096))


def test_redis_compressed_payloads_restore_here(redis_plain) -> None:
    """rdbcompression yes: Redis's payload holds LZF strings; RESTOREd here, the stream DUMPs
    back as Redis's own uncompressed payload, byte for byte (times kept by RESTORE)."""
    engine = Engine(clock=WallClock(), dump_rdb_version=10)
    try:
        redis_plain.execute("CONFIG", "SET", "stream-node-max-entries", "9")
        commands = _deleting("s", 80) + [("XDEL", "s", *_ids(80)[20:26])] + STREAMS["big"]
        for cmd in commands:
            redis_plain.execute(*cmd)
        for key in ("s", "big"):
            redis_plain.execute("CONFIG", "SET", "rdbcompression", "yes")
            compressed = redis_plain.execute("DUMP", key)
            redis_plain.execute("CONFIG", "SET", "rdbcompression", "no")
            plain = redis_plain.execute("DUMP", key)
            assert len(compressed) < len(plain)  # it did compress
            assert engine.execute("RESTORE", key, "0", compressed) == "OK"
            assert engine.execute("DUMP", key) == plain, key
            assert engine.execute("XRANGE", key, "-", "+") == redis_plain.execute("XRANGE", key,
                                                                                  "-", "+")
    finally:
        engine.close()


# --- damaged nodes: Redis's verdicts --------------------------------------------------------

# What redis-server accepts even with `sanitize-dump-payload yes` (its deep check follows the
# listpack's elements and the entries' shapes, but not the header's element count, the split of
# the counters, the IDs' order, the flags' unknown bits, or a node with no entry) and the
# engine refuses: its nodes are read without further checks once adopted.
REDIS_ACCEPTS = {"header count 0", "header count 1", "header count 24", "header count 26",
                 "counters 2/1", "counters 0/3", "counters -1/4", "IDs descending",
                 "IDs repeated", "IDs ms before the master", "IDs ms before, seq after",
                 "IDs the first after the master, then back", "empty node", "flags -1",
                 "flags 255"}


def _reply(client, *args: object) -> str:
    try:
        return str(client.execute(*args))
    except RespError as err:
        return str(err)


def test_damaged_nodes_get_redis_lines(redis_raw) -> None:
    """The catalogue of hostile nodes (tests/support/hostile_nodes.py) RESTOREd on
    redis-server (deep sanitisation on) and here: where Redis refuses, the same line; where it
    accepts, the engine still refuses (listed above)."""
    saved = redis_raw.execute("CONFIG", "GET", "sanitize-dump-payload")[1]
    redis_raw.execute("CONFIG", "SET", "sanitize-dump-payload", "yes")
    engine = Engine(clock=WallClock())
    accepted = set()
    try:
        for name, lp in catalogue()[1:]:
            payload = with_node(base_payload(), 1, lp)
            theirs = _reply(redis_raw, "RESTORE", "t", "0", payload, "REPLACE")
            ours = restore_outcome(engine, payload)
            assert ours == "ERR Bad data format", name
            if theirs == "OK":
                accepted.add(name)
            else:
                assert theirs == ours, name
            bad_crc = payload[:-1] + bytes([payload[-1] ^ 1])
            assert _reply(redis_raw, "RESTORE", "t", "0", bad_crc, "REPLACE") == \
                restore_outcome(engine, bad_crc) == \
                "ERR DUMP payload version or checksum are wrong", name
    finally:
        redis_raw.execute("CONFIG", "SET", "sanitize-dump-payload", saved)
        engine.close()
    assert accepted == REDIS_ACCEPTS
