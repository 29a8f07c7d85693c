"""The RDB codec's kernel: its compiled twin (snapshot/_rdb_c.pyx) against the pure reference
(snapshot/_rdb_py.py) on the same inputs, which must give the same bytes, the same decoded
listpacks and the same errors (type and message): random listpacks and streams encoded then
decoded, random damage to listpacks (stream nodes among them), LZF data, stream values walked
(`stream_end`, `stream_nodes`) and whole DUMP payloads, and hand-made hostile lengths (run in a child process, so that a crash fails the
test instead of the run). A stream node's own checks are engine.model.packed_node's
(tests/engine/model/); RESTORE and import of damaged nodes: tests/attacks/test_rdb_hostile_nodes.py.
Both twins' direct unit tests are in test_rdb.py (the `codec` fixture)."""

from __future__ import annotations

import contextlib
import os
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine
from streamkeep.snapshot import rdb
from tests.support.kernels import outcome, pure_and_compiled

ROOT = Path(__file__).resolve().parents[2]
U64 = (1 << 64) - 1
# First bytes of each listpack form (and of none: 0xF5, 0xFF).
FORMS = [0, 0x7F, 0x80, 0xBF, 0xC0, 0xDF, 0xE0, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xFF]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


def twins() -> tuple[ModuleType, ModuleType]:
    return pure_and_compiled("streamkeep.snapshot", "rdb")


def same(name: str, *args: object) -> object:
    """Both twins' outcome of `name(*args)`, asserted equal; the pure one returned."""
    pure, compiled = twins()
    expected = outcome(getattr(pure, name), *args)
    assert outcome(getattr(compiled, name), *args) == expected, (name, args)
    return expected


# --- strategies -----------------------------------------------------------------------------------

# Strings a listpack stores as integers (strict int64 decimals) and ones it must keep as text.
texts = st.one_of(
    st.binary(max_size=12),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: b"%d" % v),
    st.sampled_from([b"", b"0", b"-0", b"007", b"+1", b"9223372036854775808",
                     b"-9223372036854775809", b"18446744073709551615", b" 1", b"1 "]),
    st.binary(min_size=60, max_size=70), st.binary(min_size=4090, max_size=4100))
u64s = st.one_of(st.integers(0, U64), st.sampled_from([0, 1, 2**63 - 1, 2**63, U64 - 1, U64]))


def damaged(data: st.DataObject, raw: bytes, fix_header: bool) -> bytes:
    """`raw` with a few bytes changed, removed or added (and its listpack header's total
    length made right again, so that the damage reaches past the header check)."""
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        what = data.draw(st.sampled_from(["set", "cut", "insert", "truncate"]))
        at = data.draw(st.integers(0, max(len(out) - 1, 0)))
        if what == "set" and out:  # often an encoding's first byte, to change an element's form
            out[at] = data.draw(st.sampled_from(FORMS) if data.draw(st.booleans())
                                else st.integers(0, 255))
        elif what == "cut":
            del out[at:at + data.draw(st.integers(1, 8))]
        elif what == "insert":
            out[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        else:
            del out[at:]
    if fix_header and len(out) >= 4:
        out[0:4] = struct.pack("<I", len(out))
    return bytes(out)


@st.composite
def lzf_streams(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """(compressed, expanded): literal runs and back references (long ones, overlapping ones)
    as Redis's lzf_compress emits them."""
    out = bytearray()
    comp = bytearray()
    for _ in range(draw(st.integers(0, 25))):
        if not out or draw(st.booleans()):
            lit = draw(st.binary(min_size=1, max_size=40))
            for k in range(0, len(lit), 32):
                chunk = lit[k:k + 32]
                comp += bytes((len(chunk) - 1,)) + chunk
                out += chunk
            continue
        distance = draw(st.integers(1, min(len(out), 8192)))
        length = draw(st.integers(3, 264))
        off = distance - 1
        if length - 2 < 7:
            comp += bytes(((length - 2) << 5 | off >> 8, off & 0xFF))
        else:
            comp += bytes((7 << 5 | off >> 8, length - 2 - 7, off & 0xFF))
        ref = len(out) - distance
        for k in range(length):
            out.append(out[ref + k])
    return bytes(comp), bytes(out)


# --- round trips ----------------------------------------------------------------------------------


@SETTINGS
@given(items=st.lists(st.one_of(texts, st.integers(-(2**63), 2**63 - 1),
                                st.integers(-(2**70), 2**70)), max_size=30))
def test_listpacks_encode_identically(items: list) -> None:
    kind, lp = same("listpack", items)
    assert kind == "ok"
    same("listpack_items", lp)
    for item in items[:5]:
        same("lp_element", item)


@SETTINGS
@given(stream=lzf_streams(), extra=st.integers(-3, 3))
def test_lzf_decodes_identically(stream: tuple[bytes, bytes], extra: int) -> None:
    comp, expanded = stream
    assert same("lzf_decompress", comp, len(expanded)) == ("ok", expanded)
    same("lzf_decompress", comp, len(expanded) + extra)


@SETTINGS
@given(data=st.binary(max_size=3000), cut=st.integers(0, 3000), start=u64s)
def test_crc64_continues_identically(data: bytes, cut: int, start: int) -> None:
    pure, compiled = twins()
    whole = pure.crc64(data, start)
    assert compiled.crc64(data, start) == whole
    assert compiled.crc64(data[cut:], compiled.crc64(data[:cut], start)) == whole
    assert compiled.crc64(bytearray(data), start) == whole
    view = memoryview(bytes(8) + data + bytes(8))[8:-8]  # a slice of a larger buffer
    assert compiled.crc64(view, start) == pure.crc64(view, start) == whole
    strided = memoryview(data)[::2]  # (refused alike: not contiguous)
    assert outcome(compiled.crc64, strided, start) == outcome(pure.crc64, strided, start)


# --- random damage --------------------------------------------------------------------------------


@SETTINGS
@given(stream=lzf_streams(), data=st.data())
def test_damaged_lzf_fails_identically(stream: tuple[bytes, bytes], data: st.DataObject) -> None:
    comp, expanded = stream
    ulen = data.draw(st.sampled_from([len(expanded), len(expanded) + 1, 0, 2**64 - 1]))
    same("lzf_decompress", damaged(data, comp, False), ulen)


@contextlib.contextmanager
def facade_using(module: ModuleType) -> Iterator[None]:
    """snapshot.rdb running `module`'s kernel functions (its other code unchanged)."""
    names = ["crc64", "listpack", "listpack_items", "lp_element", "lzf_decompress",
             "stream_end", "stream_nodes"]
    saved = {name: getattr(rdb, name) for name in names}
    try:
        for name in names:
            setattr(rdb, name, getattr(module, name))
        yield
    finally:
        for name, value in saved.items():
            setattr(rdb, name, value)


def _stream_payload(ops: list[tuple[str, int]], version: int) -> bytes:
    e = Engine(clock=lambda: 1_700_000_000_000)
    e.execute("CONFIG", "SET", "stream-node-max-entries", "4")
    for i, (op, arg) in enumerate(ops):
        if op == "add":
            e.execute("XADD", "s", f"{i + 1}-{arg}", "f", str(arg), "g", "x" * (arg % 70))
        elif op == "other":
            e.execute("XADD", "s", f"{i + 1}-0", "h", str(arg))
        elif op == "del":
            e.execute("XDEL", "s", f"{arg + 1}-0")
    e.execute("XADD", "s", "*", "last", "1")
    e.execute("XGROUP", "CREATE", "s", "grp", "0")
    e.execute("XREADGROUP", "GROUP", "grp", "c", "COUNT", "3", "STREAMS", "s", ">")
    pure = twins()[0]
    with facade_using(pure):
        return rdb.dump_payload(e.dbs[0][b"s"], version)


def _load(payload: bytes) -> object:
    def run() -> bytes:
        rdb.check_payload(payload, rdb.MAX_VERSION)
        return rdb.write_stream(rdb.load_payload(payload), 19)  # a canonical form to compare
    return outcome(run)


ops = st.lists(st.tuples(st.sampled_from(["add", "other", "del"]), st.integers(0, 300)),
               max_size=30)


@SETTINGS
@given(ops=ops, version=st.sampled_from([9, 10, 11, 13]), data=st.data())
def test_whole_payloads_agree_and_damaged_ones_fail_identically(
        ops: list, version: int, data: st.DataObject) -> None:
    pure, compiled = twins()
    payload = _stream_payload(ops, version)
    with facade_using(compiled):
        assert rdb.dump_payload(rdb.load_payload(payload), version) == payload
    bad = bytearray(damaged(data, payload, False))
    if len(bad) >= 10 and data.draw(st.booleans()):  # a right checksum: the damage is decoded
        bad[-8:] = struct.pack("<Q", pure.crc64(bytes(bad[:-8])))
    with facade_using(pure):
        expected = _load(bytes(bad))
    with facade_using(compiled):
        assert _load(bytes(bad)) == expected


@SETTINGS
@given(ops=ops, version=st.sampled_from([9, 10, 11, 13]), data=st.data())
def test_stream_values_walk_identically_and_damaged_ones_fail_identically(
        ops: list, version: int, data: st.DataObject) -> None:
    """`stream_end` and `stream_nodes` on a stream value (LZF nodes among them), whole then
    damaged: the same end, nodes and first error (message and position) from both twins."""
    payload = _stream_payload(ops, version)
    rdb_type, value = payload[0], _with_lzf_node(payload[1:-10], data)
    assert same("stream_end", value, 0, rdb_type) == ("ok", (len(value), None))
    kind, (nodes, end, problem) = same("stream_nodes", value, 0)
    assert kind == "ok" and problem is None and all(lp is not None for _key, lp in nodes)
    bad = damaged(data, value, False)
    start = data.draw(st.integers(0, 3))
    same("stream_end", bad, start, rdb_type)
    same("stream_nodes", bad, start)


def _with_lzf_node(value: bytes, data: st.DataObject) -> bytes:
    """The value with its first node's listpack LZF-compressed (as Redis writes a long one),
    when a draw says so: a literal run of its first byte, then references to it."""
    r = rdb.Reader(value)
    if not r.length() or not data.draw(st.booleans()):
        return value
    r.skip_string()
    start = r.pos
    lp = r.string()
    comp = bytearray(b"\x00" + lp[:1])
    for b in lp[1:]:
        comp += b"\x00" + bytes((b,))
    encoded = b"\xc3" + rdb.encode_length(len(comp)) + rdb.encode_length(len(lp)) + bytes(comp)
    return value[:start] + encoded + value[r.pos:]


# --- hostile lengths, in a child process ----------------------------------------------------------

HOSTILE = textwrap.dedent(r'''
    import struct, sys
    from streamkeep.snapshot import _rdb_py as P, _rdb_c as C
    from tests.support.kernels import outcome

    def lp(body, total=None):
        return struct.pack("<IH", len(body) + 7 if total is None else total, 0) + body + b"\xff"

    def el(v):
        return P.lp_element(v)

    def node(*items):
        return lp(b"".join(map(el, items)))

    cases = []
    big = [2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]
    # LZF: announced sizes and references that point before the output or past the input.
    chain = b"\x00a" + b"\xe0\xff\x00" * 2000
    for ulen in [-1, 0, 1, 2, 1 + 2000 * 264, 2000 * 264, *big, -(2**70)]:
        for data in [chain, b"", b"\x00", b"\x1fab", b"\x40\x00", b"\x00a\xe0", b"\x00a\xe0\xff",
                     b"\x00a\x3f\xff", b"\x00a\xff\xff\xff", b"\x00a\x20\x00" * 3]:
            cases.append(("lzf_decompress", data, ulen))
    cases.append(("lzf_decompress", bytearray(b"\x00a"), 1))
    cases.append(("lzf_decompress", b"\x00a", 1.0))
    # Listpack headers and element lengths.
    for total in [0, 6, 7, 8, 2**32 - 1, 2**16]:
        cases.append(("listpack_items", lp(b"\x01\x01", total)))
    for body in [b"\xf0\xff\xff\xff\xff", b"\xf0\xff\xff\xff\x7f", b"\xf0\x00\x00\x00\x80",
                 b"\xf0\x01", b"\xf0", b"\xf0\x00\x00\x00", b"\xef\xff" + b"x" * 100,
                 b"\xe0", b"\xc0", b"\xdf", b"\xf4\x01\x02", b"\xf1\x01", b"\xf2\x01\x02",
                 b"\xf3", b"\xbf" + b"x" * 10, b"\x7f", b"\x7f\x01\x7f", b"\x01\xff",
                 b"\x01\x80\x80\x80\x80", *(bytes((b,)) for b in range(0xF5, 0x100)),
                 b"\x8a" + b"x" * 10 + b"\x00"]:
        cases.append(("listpack_items", lp(body)))
    cases += [("listpack_items", bytearray(node(1))), ("listpack_items", memoryview(node(1))),
              ("listpack_items", "text")]
    # Encoders: values outside int64, odd types.
    for v in [2**63, -(2**63) - 1, 2**64, -(2**64), 2**200, True, "text", 1.5, None]:
        cases.append(("lp_element", v))
        cases.append(("listpack", [b"a", v]))
    cases.append(("listpack", (b"a", 1)))
    cases.append(("listpack", [b"x" * 70000] * 3))

    # A stream value's walk (stream_end, stream_nodes): counts and lengths near 2**64 (16 *
    # a pending count wrapping to 0 among them), every length and string form, prefixes.
    L = lambda n: P_len(n)
    def P_len(n):
        if n < 64: return bytes((n,))
        if n < 16384: return bytes((0x40 | n >> 8, n & 0xFF))
        if n < 2**32: return b"\x80" + struct.pack(">I", n)
        return b"\x81" + struct.pack(">Q", n)
    key = b"\x10" + bytes(16)
    lpn = node(1)
    huge = [2**32 - 1, 2**32, 2**60, 2**60 + 1, 2**63, 2**64 // 16, 2**64 - 1]
    group = b"\x01g" + L(5) + L(0) + L(1)  # name, last ID, entries read
    meta = L(1) + L(5) + L(0) + L(1) + L(0) + L(0) + L(0) + L(1)  # length, IDs, added
    good = {15: L(1) + key + L(len(lpn)) + lpn + L(1) + L(5) + L(0),
            19: L(1) + key + L(len(lpn)) + lpn + meta + L(1) + group + L(1) + bytes(24) + L(1)
                + L(1) + b"\x01c" + bytes(8) + L(1) + bytes(16),
            21: L(0) + meta + L(1) + group + L(0) + L(1) + b"\x01c" + bytes(16) + L(2)
                + bytes(32),
            26: L(0) + meta + L(0) + L(9) + L(9) + L(1) + b"\x01p" + L(1) + b"\x01i" + L(5)
                + L(0) + L(1) + L(0)}
    for kind, value in good.items():
        for cut in range(len(value) + 1):
            cases.append(("stream_end", value[:cut], 0, kind))
            cases.append(("stream_nodes", value[:cut], 0))
        for at in range(len(value)):
            for b in (0x40, 0x7F, 0x80, 0x81, 0x82, 0xBF, 0xC0, 0xC2, 0xC3, 0xC4, 0xFF):
                broken = value[:at] + bytes((b,)) + value[at + 1:]
                cases.append(("stream_end", broken, 0, kind))
                cases.append(("stream_nodes", broken, 0))
    for n in huge:
        for tail in (b"", key, key + L(len(lpn)) + lpn):
            cases.append(("stream_end", L(n) + tail, 0, 19))
            cases.append(("stream_nodes", L(n) + tail, 0))
        cases.append(("stream_end", L(1) + L(n) + b"x" * 40, 0, 19))
        cases.append(("stream_nodes", L(1) + key + L(n) + b"x" * 40, 0))
        cases.append(("stream_nodes", L(1) + key + b"\xc3" + L(n) + L(4) + b"\x00abc", 0))
        cases.append(("stream_nodes", L(1) + key + b"\xc3" + L(2) + L(n) + b"\x00a", 0))
        cases.append(("stream_end", L(1) + key + b"\xc3" + L(n) + L(n) + b"\x00a", 0, 19))
        pel = L(0) + meta + L(1) + group + L(n) + bytes(24) + L(1)
        owners = L(0) + meta + L(1) + group + L(0) + L(1) + b"\x01c" + bytes(16) + L(n)
        cases.append(("stream_end", pel, 0, 21))
        cases.append(("stream_end", owners + bytes(64), 0, 21))
    for start in (-1, -(2**70), 2**70, 10**6, 1.0, None):
        cases.append(("stream_end", good[19], start, 19))
        cases.append(("stream_nodes", good[19], start))
    for kind in (2**70, -1, 0, 27, "19"):
        cases.append(("stream_end", good[19], 0, kind))
    for wrapped in (bytearray(good[19]), memoryview(good[19]), "text"):
        cases.append(("stream_end", wrapped, 0, 19))
        cases.append(("stream_nodes", wrapped, 0))
    # (ints as node strings: 8, 16, 32 bits; an LZF listpack whose output is its whole size)
    for s in (b"\xc0\x80", b"\xc1\x00\x80", b"\xc2\x00\x00\x00\x80", b"\xc2\xff\xff\xff\xff"):
        cases.append(("stream_nodes", L(1) + s + s, 0))
        cases.append(("stream_nodes", L(1) + key + s, 0))
    cases.append(("stream_nodes", L(1) + key + b"\xc3" + L(4) + L(300) + b"\x00a\xe0\xff\x00"[:4], 0))

    bad = 0
    for name, *args in cases:
        expected = outcome(getattr(P, name), *args)
        got = outcome(getattr(C, name), *args)
        if got != expected:
            bad += 1
            print("DIFFERENT", name, repr(args)[:200], expected, got, file=sys.stderr)
        if got[0] == "error" and got[1][0] not in ("RdbError", "TypeError", "ValueError",
                                                   "error", "OverflowError", "AttributeError",
                                                   "IndexError"):
            bad += 1
            print("UNEXPECTED", name, repr(args)[:200], got, file=sys.stderr)
    print("cases", len(cases), "different", bad)
    sys.exit(1 if bad else 0)
''')


def _child(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ}
    env.pop("STREAMKEEP_NO_EXTENSIONS", None)
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=timeout)


def test_hostile_lengths_fail_cleanly_and_identically() -> None:
    twins()  # (skips when the kernel is not built)
    done = _child(HOSTILE)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "different 0" in done.stdout


FUZZ = textwrap.dedent(r'''
    import random, struct, sys
    from streamkeep.engine.model import packed_node
    from streamkeep.snapshot import _rdb_py as P, _rdb_c as C
    from tests.support.kernels import outcome

    rng = random.Random(int(sys.argv[1]))
    rounds = int(sys.argv[2])
    forms = [0x00, 0x7F, 0x80, 0xBF, 0xC0, 0xDF, 0xE0, 0xEF, 0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0xFF]
    bad = 0
    for r in range(rounds):
        names = tuple(rng.choice([b"f", b"12", b"x" * 70]) for _ in range(rng.randrange(4)))
        ids = sorted({rng.randrange(2**70) for _ in range(rng.randrange(1, 8))})
        fields = [rng.choice([None, tuple(x for n in names for x in (n, b"%d" % r)),
                              (b"k", b"v" * rng.randrange(5000))]) for _ in ids]
        same = tuple(x for n in names for x in (n, b"%d" % r))
        lp = packed_node.build(ids, [same if f is None else f for f in fields])
        for sid, f in zip(ids, fields):
            if f is None:  # deleted in place, its values kept
                packed_node.mark_deleted(lp, ids[0], sid)
        for _ in range(rng.randrange(1, 6)):
            at = rng.randrange(len(lp))
            if rng.random() < 0.5:
                lp[at] = rng.choice(forms) if rng.random() < 0.5 else rng.randrange(256)
            else:
                lp[at:at + 4] = struct.pack("<I", rng.choice([0, 1, 2**31, 2**32 - 1,
                                                              rng.randrange(2**32)]))
        if rng.random() < 0.7:
            lp[0:4] = struct.pack("<I", len(lp))
        lp = bytes(lp)
        if outcome(P.listpack_items, lp) != outcome(C.listpack_items, lp):
            bad += 1
            print("DIFFERENT", lp.hex(), file=sys.stderr)
    print("rounds", rounds, "different", bad)
    sys.exit(1 if bad else 0)
''')


@pytest.mark.parametrize("seed", [1, 2])
def test_random_hostile_nodes_fail_identically(seed: int) -> None:
    twins()
    rounds = int(os.environ.get("STREAMKEEP_FUZZ_ROUNDS", "1500"))
    done = _child(FUZZ, str(seed), str(rounds))
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])


@pytest.mark.slow
def test_random_hostile_nodes_fail_identically_long() -> None:
    twins()
    done = _child(FUZZ, "1000", os.environ.get("STREAMKEEP_FUZZ_ROUNDS_LONG", "40000"),
                  timeout=1200)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
