"""engine.model.list_node: a list's listpack node, on both twins.

Each test runs on both twins (`list_impl`); the property test drives both twins and a plain
Python list with the same random pushes, pops and splices (the elements mix canonical and
non-canonical integers, the empty string and strings either side of each length form) and
checks after every step that the node reads as the list, that its header holds its size and
count, and that both twins hold the same bytes, those of a node built from the list at once.
Bad indexes are an IndexError on both, other argument types take the pure path on both, and
the compiled twin, given damaged nodes, raises rather than reading outside them (in a child
process: a bad read fails the test rather than killing pytest). Redis's own bytes for the
same lists are compared in tests/differential/test_list_node_redis.py."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import kernels
from tests.support.kernels import kernel_fixture, outcome

list_impl = kernel_fixture("streamkeep.engine.model", "list_node")

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
CANONICAL = [b"0", b"1", b"127", b"128", b"-1", b"-4096", b"-4097", b"4095", b"4096",
             b"32767", b"-32769", b"8388607", b"-8388609", b"2147483648", b"-2147483649",
             b"%d" % I64_MIN, b"%d" % I64_MAX]
NON_CANONICAL = [b"01", b"+1", b"-0", b" 1", b"1 ", b"-", b"00", b"9223372036854775808",
                 b"-9223372036854775809", b"1.5", b"0x10", b"\x001"]
SIZES = [63, 64, 4095, 4096, 70000]
ELEMENTS = st.one_of(
    st.sampled_from(CANONICAL + NON_CANONICAL + [b""]),
    st.integers(min_value=I64_MIN, max_value=I64_MAX).map(lambda v: b"%d" % v),
    st.binary(max_size=80),
    st.sampled_from(SIZES).map(lambda n: b"s" * n))


def _twins() -> list[ModuleType]:
    """The pure twin, and the compiled one when it is built (a failure when it must be)."""
    compiled = kernels.compiled("streamkeep.engine.model", "list_node")
    pure = kernels.pure("streamkeep.engine.model", "list_node")
    return [pure] if compiled is None else [pure, compiled]


def _header(lp: bytearray) -> tuple[int, int]:
    return int.from_bytes(lp[0:4], "little"), int.from_bytes(lp[4:6], "little")


def _same_as_model(impl: ModuleType, lp: bytearray, model: list[bytes]) -> None:
    assert impl.node_count(lp) == len(model)
    assert impl.node_range(lp, 0, len(model)) == model
    assert _header(lp) == (len(lp), min(len(model), 65535))
    assert lp[-1] == 0xFF


OPS = st.one_of(
    st.tuples(st.just("push"), st.booleans(), ELEMENTS),
    st.tuples(st.just("pop"), st.booleans()),
    st.tuples(st.just("splice"), st.floats(0, 1), st.floats(0, 1),
              st.lists(ELEMENTS, max_size=4)))


@settings(max_examples=200, deadline=None)
@given(st.lists(ELEMENTS, max_size=8), st.lists(OPS, max_size=40), st.data())
def test_pushes_pops_and_splices_agree_with_a_python_list(start, ops, data) -> None:
    twins = _twins()
    model = list(start)
    nodes = [impl.node_new(start) for impl in twins]
    for op in ops:
        if op[0] == "push":
            _, tail, element = op
            model.insert(len(model) if tail else 0, element)
            for impl, lp in zip(twins, nodes, strict=True):
                assert impl.node_push(lp, element, tail) is None
        elif op[0] == "pop":
            tail = op[1]
            if not model:
                for impl, lp in zip(twins, nodes, strict=True):
                    with pytest.raises(IndexError):
                        impl.node_pop(lp, tail)
                continue
            want = model.pop() if tail else model.pop(0)
            for impl, lp in zip(twins, nodes, strict=True):
                got = impl.node_pop(lp, tail)
                assert type(got) is bytes and got == want
        else:
            _, a, b, elements = op
            lo, hi = sorted((int(a * len(model)), int(b * len(model))))
            model[lo:hi] = elements
            for impl, lp in zip(twins, nodes, strict=True):
                assert impl.node_splice(lp, lo, hi, elements) is None
        for impl, lp in zip(twins, nodes, strict=True):
            _same_as_model(impl, lp, model)
        assert len({bytes(lp) for lp in nodes}) == 1
        assert bytes(nodes[0]) == bytes(twins[0].node_new(model))  # as if built at once
    for impl, lp in zip(twins, nodes, strict=True):  # reads, on the final node
        if model:
            index = data.draw(st.integers(0, len(model) - 1))
            assert impl.node_get(lp, index) == model[index]
            lo = data.draw(st.integers(0, len(model)))
            hi = data.draw(st.integers(0, len(model)))
            assert impl.node_range(lp, lo, hi) == model[lo:hi]
        for element in {*model[:3], b"", b"1", b"01", b"s" * 64}:
            want = [i for i, value in enumerate(model) if value == element]
            assert impl.node_matches(lp, element) == want


@settings(max_examples=300, deadline=None)
@given(ELEMENTS)
def test_encode_is_the_node_entry_and_reads_back(element) -> None:
    entries = {impl.encode(element) for impl in _twins()}
    assert len(entries) == 1
    entry = entries.pop()
    for impl in _twins():
        lp = impl.node_new([element])
        assert bytes(lp[6:-1]) == entry
        assert impl.node_get(lp, 0) == element
        assert impl.node_matches(lp, element) == [0]


def test_entries_are_listpack_bytes(list_impl) -> None:
    """Each integer form and each string form, as Redis's listpack.c writes them."""
    known = {
        b"0": b"\x00\x01", b"127": b"\x7f\x01",  # 7-bit uint
        b"128": b"\xc0\x80\x02", b"-1": b"\xdf\xff\x02", b"-4096": b"\xd0\x00\x02",  # 13-bit
        b"4095": b"\xcf\xff\x02",
        b"4096": b"\xf1\x00\x10\x03", b"-32768": b"\xf1\x00\x80\x03",  # 16-bit
        b"8388607": b"\xf2\xff\xff\x7f\x04",  # 24-bit
        b"2147483648": b"\xf4\x00\x00\x00\x80\x00\x00\x00\x00\x09",  # 64-bit
        b"%d" % I64_MIN: b"\xf4" + (1 << 63).to_bytes(8, "little") + b"\x09",
        b"": b"\x80\x01", b"a": b"\x81a\x02", b"01": b"\x8201\x03", b"-0": b"\x82-0\x03",
        b"9223372036854775808": b"\x93" + b"9223372036854775808" + b"\x14",
        b"x" * 63: b"\xbf" + b"x" * 63 + b"\x40",  # 6-bit length
        b"x" * 64: b"\xe0\x40" + b"x" * 64 + b"\x42",  # 12-bit length
        b"x" * 126: b"\xe0\x7e" + b"x" * 126 + b"\x01\x80",  # backlen 128: two bytes
        b"x" * 4095: b"\xef\xff" + b"x" * 4095 + b"\x20\x81",
        b"x" * 4096: b"\xf0\x00\x10\x00\x00" + b"x" * 4096 + b"\x20\x85",  # 32-bit length
        b"x" * 70000: b"\xf0\x70\x11\x01\x00" + b"x" * 70000 + b"\x04\xa2\xf5",
    }
    for element, entry in known.items():
        assert list_impl.encode(element) == entry, element[:20]
    lp = list_impl.node_new(list(known))
    assert bytes(lp) == (len(lp).to_bytes(4, "little") + len(known).to_bytes(2, "little")
                         + b"".join(known.values()) + b"\xff")
    assert list_impl.node_new([]) == bytearray(b"\x07\x00\x00\x00\x00\x00\xff")
    assert list_impl.node_range(lp, 0, len(known)) == list(known)


def test_every_element_reads_back_from_both_ends(list_impl) -> None:
    elements = CANONICAL + NON_CANONICAL + [b""] + [b"s" * n for n in SIZES]
    lp = list_impl.node_new(elements)
    for i, element in enumerate(elements):
        assert list_impl.node_get(lp, i) == element
        assert list_impl.node_range(lp, i, i + 1) == [element]
    assert list_impl.node_range(lp, 3, 3) == [] and list_impl.node_range(lp, 5, 2) == []
    for element in elements:
        assert list_impl.node_matches(lp, element) == [elements.index(element)]
    tails = [list_impl.node_pop(lp, True) for _ in range(len(elements))]
    assert tails == elements[::-1] and lp == list_impl.node_new([])
    for element in elements:
        list_impl.node_push(lp, element, False)
    heads = [list_impl.node_pop(lp, False) for _ in range(len(elements))]
    assert heads == elements[::-1] and lp == list_impl.node_new([])


def test_matches_compares_integers_by_their_decimal(list_impl) -> None:
    lp = list_impl.node_new([b"1", b"01", b"+1", b"1", b"-0", b"0", b"x", b"%d" % I64_MAX])
    assert list_impl.node_matches(lp, b"1") == [0, 3]
    assert list_impl.node_matches(lp, b"01") == [1]
    assert list_impl.node_matches(lp, b"-0") == [4]
    assert list_impl.node_matches(lp, b"0") == [5]
    assert list_impl.node_matches(lp, b"%d" % I64_MAX) == [7]
    assert list_impl.node_matches(lp, b"9223372036854775808") == []
    assert list_impl.node_matches(lp, b"") == []
    assert list_impl.node_matches(list_impl.node_new([]), b"1") == []


def test_splices_replace_insert_and_remove(list_impl) -> None:
    model = [b"a", b"1", b"b" * 100, b"-7", b"c"]
    lp = list_impl.node_new(model)
    for lo, hi, new in [(1, 2, [b"x" * 5000]), (0, 0, [b"h", b"2"]), (7, 7, [b"t"]),
                        (2, 5, []), (0, 5, [b"only"]), (0, 1, []), (0, 0, [])]:
        model[lo:hi] = new
        list_impl.node_splice(lp, lo, hi, new)
        assert bytes(lp) == bytes(list_impl.node_new(model)), (lo, hi)
    assert model == [] and list_impl.node_count(lp) == 0
    list_impl.node_splice(lp, 0, 0, (b"tuple", b"12"))
    assert list_impl.node_range(lp, 0, 2) == [b"tuple", b"12"]


def test_bad_indexes_are_index_errors_on_both_twins() -> None:
    twins = _twins()
    calls = [("node_get", (-1,)), ("node_get", (3,)), ("node_get", (1 << 70,)),
             ("node_get", (-(1 << 70),)), ("node_range", (-1, 2)), ("node_range", (0, 4)),
             ("node_range", (4, 4)), ("node_range", (0, 1 << 70)),
             ("node_splice", (2, 1, [b"x"])), ("node_splice", (0, 4, [])),
             ("node_splice", (-1, 0, [b"x"])), ("node_splice", (4, 4, [b"x"])),
             ("node_splice", (0, -1, [])), ("node_splice", (1 << 70, 1 << 71, []))]
    for name, args in calls:
        got = []
        for impl in twins:
            lp = impl.node_new([b"a", b"1", b"c"])
            got.append(outcome(getattr(impl, name), lp, *args))
            assert lp == impl.node_new([b"a", b"1", b"c"]), (name, args)  # untouched
        assert got[0][0] == "error" and got[0][1][0] == "IndexError", (name, args, got)
        assert all(g == got[0] for g in got), (name, args, got)
    for impl in twins:
        for tail in (True, False):
            lp = impl.node_new([])
            with pytest.raises(IndexError, match="empty"):
                impl.node_pop(lp, tail)
            assert lp == impl.node_new([])


def test_the_header_count_saturates_and_is_walked(list_impl) -> None:
    lp = list_impl.node_new([b"7"] * 65536)
    assert _header(lp)[1] == 65535 and list_impl.node_count(lp) == 65536
    list_impl.node_pop(lp, True)
    assert _header(lp)[1] == 65535 and list_impl.node_count(lp) == 65535
    list_impl.node_pop(lp, False)
    assert _header(lp) == (len(lp), 65534)
    list_impl.node_push(lp, b"x", True)
    assert _header(lp)[1] == 65535 and list_impl.node_get(lp, 65534) == b"x"
    # a node whose count Redis left unknown while it shrank: walked, then written back
    small = list_impl.node_new([b"a", b"2", b"c"])
    small[4:6] = b"\xff\xff"
    assert list_impl.node_count(small) == 3
    assert list_impl.node_get(small, 2) == b"c" and list_impl.node_range(small, 1, 3) == [
        b"2", b"c"]
    list_impl.node_push(small, b"d", True)
    assert small == list_impl.node_new([b"a", b"2", b"c", b"d"])


def test_other_types_take_the_pure_path_on_both_twins() -> None:
    """A bytearray subclass as the node, a memoryview, bytearray or str as an element, a
    tuple of them: the compiled twin does what the pure one does."""

    class Node(bytearray):
        pass

    def run(impl: ModuleType) -> list:
        out = []
        lp = Node(impl.node_new([b"a", b"12"]))
        out.append(outcome(impl.node_push, lp, b"z", True))
        out.append(outcome(impl.node_pop, lp, False))
        out.append(outcome(impl.node_get, lp, 1))
        out.append(outcome(impl.node_range, lp, 0, 2))
        out.append(outcome(impl.node_matches, lp, b"z"))
        out.append(outcome(impl.node_splice, lp, 0, 1, [b"q"]))
        out.append(outcome(impl.node_count, lp))
        out.append(bytes(lp))
        lp = impl.node_new([b"a"])
        for element in (memoryview(b"12"), bytearray(b"x"), b"\x00" * 3):
            out.append(outcome(impl.node_push, lp, element, False))
            out.append(outcome(impl.node_matches, lp, element))
            out.append(outcome(impl.encode, element))
        out.append(outcome(impl.node_splice, lp, 0, 0, [bytearray(b"7"), b"8"]))
        out.append(outcome(impl.node_new, [memoryview(b"5"), b"6"]))
        out.append(outcome(impl.node_new, (bytearray(b"5"), b"6")))
        out.append(outcome(impl.node_push, bytes(lp), b"x", True))
        out.append(outcome(impl.node_count, bytes(lp)))
        out.append(bytes(lp))
        return out

    results = [run(impl) for impl in _twins()]
    assert all(r == results[0] for r in results[1:])
    assert results[0][-1] == bytes(_twins()[0].node_new([b"7", b"8", b"\x00" * 3, b"x", b"a"]))


def test_a_node_with_a_view_held_is_not_resized(list_impl) -> None:
    lp = list_impl.node_new([b"a", b"b"])
    before = bytes(lp)
    with memoryview(lp):
        for call, args in [(list_impl.node_push, (b"c", True)),
                           (list_impl.node_push, (b"c", False)),
                           (list_impl.node_pop, (True,)), (list_impl.node_pop, (False,)),
                           (list_impl.node_splice, (0, 1, []))]:
            with pytest.raises(BufferError):
                call(lp, *args)
            assert bytes(lp) == before
        list_impl.node_splice(lp, 0, 1, [b"z"])  # the same size: no resize
    assert list_impl.node_range(lp, 0, 2) == [b"z", b"b"]


# --- damaged nodes (the compiled twin stays inside the buffer) -----------------------------------

def fuzz_damaged(seed: int, cases: int) -> int:
    """Every function of the compiled twin (the pure one when it is not built) on `cases`
    damaged nodes: a result or an exception, never a read or write outside the node (this runs
    in a child). How many calls raised."""
    impl = _twins()[-1]
    rng = random.Random(seed)
    raised = 0
    for _ in range(cases):
        elements = [rng.choice(CANONICAL + NON_CANONICAL + [b"", b"s" * rng.choice(SIZES)])
                    for _ in range(rng.randint(0, 6))]
        lp = impl.node_new(elements)
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if not lp:
                break
            if kind < 0.4:
                lp[rng.randrange(len(lp))] = rng.randrange(256)
            elif kind < 0.6 and len(lp) > 7:
                del lp[rng.randrange(6, len(lp) - 1)]
            elif kind < 0.8:
                lp[4:6] = rng.choice([b"\xff\xff", b"\x00\x00", b"\x09\x00"])
            else:
                del lp[rng.randrange(len(lp)):]
        for call, args in [(impl.node_count, ()), (impl.node_get, (0,)), (impl.node_get, (1,)),
                           (impl.node_range, (0, 2)), (impl.node_matches, (b"1",)),
                           (impl.node_matches, (b"s" * 64,)), (impl.node_pop, (True,)),
                           (impl.node_pop, (False,)), (impl.node_push, (b"x", True)),
                           (impl.node_push, (b"12", False)),
                           (impl.node_splice, (0, 1, [b"s" * 70])), (impl.node_count, ())]:
            try:
                call(lp, *args)
            except Exception:  # any error is fine, as long as it is one
                raised += 1
    return raised


ROOT = Path(__file__).resolve().parents[3]
FUZZ_CHILD = ("import sys; from tests.engine.model.test_list_node import fuzz_damaged; "
              "assert fuzz_damaged(int(sys.argv[1]), int(sys.argv[2])); print('ok')")


@pytest.mark.parametrize("seed", [1, 2])
def test_damaged_nodes_raise_rather_than_crash(seed: int) -> None:
    done = subprocess.run([sys.executable, "-c", FUZZ_CHILD, str(seed), "3000"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_the_arguments_are_named_as_the_pure_twin_names_them(list_impl) -> None:
    lp = list_impl.node_new(elements=[b"a", b"b"])
    list_impl.node_push(lp=lp, element=b"c", tail=True)
    list_impl.node_splice(lp=lp, start=0, stop=1, elements=[b"z"])
    assert list_impl.node_get(lp=lp, index=2) == b"c"
    assert list_impl.node_range(lp=lp, start=0, stop=3) == [b"z", b"b", b"c"]
    assert list_impl.node_matches(lp=lp, element=b"b") == [1]
    assert list_impl.node_pop(lp=lp, tail=False) == b"z"
    assert list_impl.node_count(lp=lp) == 2 and list_impl.encode(element=b"1") == b"\x01\x01"
