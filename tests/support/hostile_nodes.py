"""Hostile stream nodes for RESTORE and import tests: a stream of several nodes made by the
engine, its DUMP payload or RDB file with one node's listpack replaced (the CRC-64 made right
again, so that the damage reaches the node's own checks), a catalogue of hostile node listpacks
by kind, random damage, and what RESTORE makes of a payload (its error line, or "OK" once the
stream it made has been through every stream command).
"""

from __future__ import annotations

import contextlib
import functools
import random
import struct

from streamkeep import Engine, ReplyError
from streamkeep.snapshot import rdb

BAD = "ERR Bad data format"
NAMES = (b"f", b"g")


@functools.cache
def engine_stream() -> Engine:
    """A stream `s` of four nodes (SAMEFIELDS entries, others, a deleted one, a long value),
    a group with pending entries."""
    e = Engine(clock=lambda: 1_700_000_000_000, dump_rdb_version=10)
    e.execute("CONFIG", "SET", "stream-node-max-entries", "4")
    for i in range(14):
        fields = ["f", str(i), "g", "x" * (i * 7)] if i % 3 else ["other", str(-i)]
        e.execute("XADD", "s", f"{10 + i}-{i % 2}", *fields)
    e.execute("XDEL", "s", "15-1")
    e.execute("XGROUP", "CREATE", "s", "grp", "0")
    e.execute("XREADGROUP", "GROUP", "grp", "c", "COUNT", "3", "STREAMS", "s", ">")
    return e


def node_of(k: int) -> tuple[int, bytes]:
    """The master ID and listpack of node `k` of the stream."""
    node = engine_stream().dbs[0][b"s"].nodes[k]
    return node.master, bytes(node.buffer())


def payload() -> bytes:
    return engine_stream().execute("DUMP", "s")


def _with_crc(body: bytes) -> bytes:
    return body + struct.pack("<Q", rdb.crc64(body))


def with_node(data: bytes, k: int, lp: bytes) -> bytes:
    """A DUMP payload or RDB file (CRC-64 last) with node `k`'s listpack replaced by `lp`
    (its RDB string length too) and the CRC made right again."""
    old = rdb.encode_string(node_of(k)[1])
    assert data.count(old) == 1
    return _with_crc(data[:-8].replace(old, rdb.encode_string(lp)))


# --- a catalogue of hostile nodes -------------------------------------------------------------


def _lp(items: list, total: int | None = None, count: int | None = None) -> bytes:
    """A listpack of `items` (ints and bytes), its header's total and count overridable."""
    lp = bytearray(rdb.listpack(items))
    if total is not None:
        lp[0:4] = struct.pack("<I", total & 0xFFFFFFFF)
    if count is not None:
        lp[4:6] = struct.pack("<H", count)
    return bytes(lp)


def _entry(flags: int, dms: int, dseq: int, values: list, fields: list | None = None) -> list:
    if fields is None:  # SAMEFIELDS: the values alone
        return [flags, dms, dseq, *values, 3 + len(values)]
    pairs = [x for f, v in zip(fields, values, strict=True) for x in (f, v)]
    return [flags, dms, dseq, len(fields), *pairs, 4 + len(pairs)]


def _master(live: int, deleted: int, names: tuple = NAMES) -> list:
    return [live, deleted, len(names), *names, 0]


def _good_items() -> list:
    return _master(3, 0) + _entry(2, 0, 0, [b"1", b"a"]) + _entry(2, 0, 1, [b"2", b"b"]) + \
        _entry(0, 1, 0, [b"v"], [b"h"])


def _raw_with(value_element: bytes) -> bytes:
    """A valid node whose last value is replaced by these raw element bytes (lengths planted
    in an element's own header)."""
    head = rdb.listpack(_master(1, 0, (b"f",)) + [2, 0, 0])
    tail = rdb.lp_element(4)
    body = head[6:-1] + value_element + tail
    return struct.pack("<IH", len(body) + 7, 65535) + body + b"\xff"


def catalogue() -> list[tuple[str, bytes]]:
    """(what, a node listpack no stream may hold)."""
    good = _lp(_good_items())
    cases = [("the node of the catalogue, valid", good)]  # checked to restore, then dropped
    # Truncations, the header's total left as it was or made to agree.
    for cut in sorted({1, 2, 5, 6, 7, 8, 9, 12, len(good) // 2, len(good) - 2, len(good) - 1}):
        short = good[:-cut]
        cases.append((f"cut by {cut}", short))
        if len(short) >= 6:
            cases.append((f"cut by {cut}, header agreeing",
                          struct.pack("<I", len(short)) + short[4:]))
    # The header lying about the length, or about the element count.
    for total in (0, 6, 7, len(good) - 1, len(good) + 1, 2**31, 2**32 - 1):
        cases.append((f"header total {total}", _lp(_good_items(), total=total)))
    for count in (0, 1, len(_good_items()) - 1, len(_good_items()) + 1):
        cases.append((f"header count {count}", _lp(_good_items(), count=count)))
    cases.append(("no end byte", good[:-1] + b"\xfe"))
    # Element lengths near 2**32 (32-bit string form), and 12/6-bit forms past the end.
    for n in (2**32 - 1, 2**32 - 2, 2**31, 2**31 - 1, 2**16, 100):
        cases.append((f"string length {n}", _raw_with(b"\xf0" + struct.pack("<I", n) + b"xy\x07")))
    cases.append(("12-bit length past the end", _raw_with(b"\xef\xff" + b"x" * 5 + b"\x07")))
    cases.append(("6-bit length past the end", _raw_with(b"\xbf" + b"x" * 5 + b"\x06")))
    cases.append(("unknown encoding", _raw_with(b"\xf5\x01")))
    cases.append(("wrong backlen", _raw_with(b"\x81v\x05")))
    cases.append(("int cut short", _raw_with(b"\xf4\x01\x02")))
    # Counters that disagree with the entries.
    entries = _good_items()[len(_master(3, 0)):]
    for live, deleted in ((2, 0), (4, 0), (2, 1), (3, 1), (0, 3), (-1, 4), (2**63 - 1, 0),
                          (3, -1), (0, 0)):
        cases.append((f"counters {live}/{deleted}", _lp(_master(live, deleted) + entries)))
    deleted_one = _master(3, 0) + _entry(3, 0, 0, [b"1", b"a"]) + entries[5:]
    cases.append(("a deleted entry counted live", _lp(deleted_one)))
    # IDs out of order, repeated, before the master ID.
    # (A negative delta alone may be valid: deltas wrap as uint64.)
    for name, ids in (("descending", [(0, 5), (0, 4)]), ("repeated", [(0, 1), (0, 1)]),
                      ("ms before the master", [(-1, 0)]), ("ms before, seq after", [(-1, 9)]),
                      ("the first after the master, then back", [(3, 0), (1, 9)])):
        items = _master(len(ids), 0)
        for dms, dseq in ids:
            items += _entry(2, dms, dseq, [b"1", b"2"])
        cases.append((f"IDs {name}", _lp(items)))
    # Empty nodes: no entry, no element at all.
    cases.append(("empty node", _lp(_master(0, 0))))
    cases.append(("empty node, deleted counted", _lp(_master(0, 1))))
    cases.append(("no elements", _lp([])))
    cases.append(("the master entry cut", _lp([1, 0, 2, b"f"])))
    # Entry shapes: flags, field counts, element counts, a string for an int.
    for flags in (4, 8, -1, 255):
        cases.append((f"flags {flags}", _lp(_master(1, 0) + _entry(flags, 0, 0, [b"1", b"2"]))))
    for n in (-1, 2, 2**31, 2**63 - 1):
        items = _master(1, 0) + [0, 0, 0, n, b"h", b"v", 6]
        cases.append((f"field count {n}", _lp(items)))
    for n in (-1, 3, 100, 2**31):
        cases.append((f"master field count {n}", _lp([1, 0, n, b"f", b"g", 0, 2, 0, 0, b"1",
                                                      b"2", 5])))
    cases.append(("master terminator 1", _lp([1, 0, 2, b"f", b"g", 1, 2, 0, 0, b"1", b"2", 5])))
    for lpc in (0, 4, 6, -5):
        cases.append((f"element count {lpc}", _lp(_master(1, 0) + [2, 0, 0, b"1", b"2", lpc])))
    cases.append(("element count missing", _lp(_master(1, 0) + [2, 0, 0, b"1", b"2"])))
    cases.append(("a string for the flags", _lp(_master(1, 0) + [b"x", 0, 0, b"1", b"2", 5])))
    cases.append(("a string for a delta", _lp(_master(1, 0) + [2, b"x", 0, b"1", b"2", 5])))
    cases.append(("a string for the live count", _lp([b"one", 0, 2, *NAMES, 0] + entries)))
    return cases


def usable(e: Engine, key: str) -> None:
    """What a stream RESTORE accepted must be for every command: replies or ReplyErrors."""
    for cmd in (("XRANGE", key, "-", "+"), ("XREVRANGE", key, "+", "-", "COUNT", "3"),
                ("XLEN", key), ("XINFO", "STREAM", key, "FULL"), ("XINFO", "GROUPS", key),
                ("XPENDING", key, "grp", "-", "+", "10"),
                ("XREADGROUP", "GROUP", "grp", "d", "STREAMS", key, ">"),
                ("XADD", key, "*", "f", "new"), ("XDEL", key, "12-0", "13-1"),
                ("XTRIM", key, "MAXLEN", "5"), ("DUMP", key)):
        with contextlib.suppress(ReplyError):
            e.execute(*cmd)
    again = e.execute("DUMP", key)
    e.execute("RESTORE", key + ":again", "0", again, "REPLACE")


def restore_outcome(e: Engine, data: bytes) -> str:
    """"OK" (the stream then exercised) or the RESTORE error line."""
    try:
        e.execute("RESTORE", "t", "0", data, "REPLACE")
    except ReplyError as err:
        return err.line
    usable(e, "t")
    return "OK"


def damaged(rng: random.Random, lp: bytes) -> bytes:
    """`lp` with a few bytes set, cut or inserted, or a 4-byte length planted; its header's
    total fixed most of the time (so that the damage reaches past that check)."""
    out = bytearray(lp)
    for _ in range(rng.randrange(1, 5)):
        at = rng.randrange(len(out)) if out else 0
        what = rng.random()
        if what < 0.45 and out:
            out[at] = rng.choice([0, 0x7F, 0x80, 0xBF, 0xC0, 0xE0, 0xEF, 0xF0, 0xF4, 0xFF,
                                  rng.randrange(256)])
        elif what < 0.6:
            del out[at:at + rng.randrange(1, 9)]
        elif what < 0.75:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif what < 0.9:
            out[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 2**31, 2**32 - 1,
                                                          rng.randrange(2**32)]))
        else:
            del out[at:]
    if rng.random() < 0.8 and len(out) >= 4:
        out[0:4] = struct.pack("<I", len(out))
    return bytes(out)


def fuzz(seed: int, rounds: int) -> dict[str, int]:
    """`rounds` payloads whose node (one of the stream's, at random) is damaged at random,
    RESTOREd: Bad data format or an ordinary stream, nothing else (an exception fails)."""
    rng = random.Random(seed)
    e = Engine(clock=lambda: 1_700_000_000_000)
    base = payload()
    nodes = len(engine_stream().dbs[0][b"s"].nodes)
    seen: dict[str, int] = {}
    for _ in range(rounds):
        k = rng.randrange(nodes)
        line = restore_outcome(e, with_node(base, k, damaged(rng, node_of(k)[1])))
        assert line in ("OK", BAD), line
        seen[line] = seen.get(line, 0) + 1
    return seen


def rdb_file() -> bytes:
    """A dump.rdb (RDB 10) holding the stream as key `s` in db 0."""
    e = engine_stream()
    return b"".join(rdb.write_rdb(10, [(b"redis-ver", b"7.0.15")],
                                  [(0, 1, [(b"s", e.dbs[0][b"s"])])]))


def fuzz_file(seed: int, rounds: int) -> dict[str, int]:
    """`rounds` dump.rdb files whose stream value (nodes, metadata, group, PEL, consumers) is
    damaged at random, huge lengths planted among it, the file's CRC-64 made right again: read
    as `streamkeep import` does (the file's keys found, then each stream's payload loaded),
    refused with an RdbError saying where, or read; nothing else (an exception fails)."""
    rng = random.Random(seed)
    base = rdb_file()
    start = base.index(b"\x01s") + 2  # the stream's value, after its key's name
    seen: dict[str, int] = {}
    for _ in range(rounds):
        body = bytearray(base[:-8])
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(start, max(len(body), start + 1))
            what = rng.random()
            if what < 0.4 and at < len(body):
                body[at] = rng.choice([0x40, 0x80, 0x81, 0x82, 0xC0, 0xC3, 0xC4, 0xFF,
                                       rng.randrange(256)])
            elif what < 0.7:
                body[at:at] = rng.choice([b"\x81" + b"\xff" * 8, b"\x81\x10" + bytes(7),
                                          b"\x80\xff\xff\xff\xff", b"\xc3\x81" + b"\xff" * 8])
            elif what < 0.85:
                del body[at:at + rng.randrange(1, 9)]
            else:
                del body[at:]
        data = _with_crc(bytes(body))
        try:
            version, _aux, keys, _end = rdb.read_rdb_prefix(data)
        except rdb.RdbError as err:
            assert " at byte " in str(err), str(err)
            seen["file refused"] = seen.get("file refused", 0) + 1
            continue
        for key in keys:
            outcome = "loaded"
            try:
                rdb.load_payload(rdb.payload_from(key.rdb_type, key.value, version))
            except rdb.RdbError:
                outcome = "value refused"
            seen[outcome] = seen.get(outcome, 0) + 1
    return seen
