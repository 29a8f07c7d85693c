"""Reply encoding (engine/wire/reply_encoder.py), run against each twin: exact bytes for every
reply type in RESP2 and RESP3, round trips through the reply parser, the entries fast path byte
for byte as the generic path, and the output buffer (big bulks kept by reference, the limit
checked while encoding).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.wire.errors import ProtocolError, ReplyError
from streamkeep.engine.wire.reply import (
    NULL_ARRAY,
    EntryArray,
    HumanDouble,
    PlainEntries,
    Push,
    RespMap,
    RespSet,
    Verbatim,
    to_plain,
)
from streamkeep.engine.wire.reply_encoder import (
    BIG_BULK,
    OutputLimitReached,
    ReplyBuffer,
    encode_reply,
    format_double,
    write_reply,
)
from streamkeep.engine.wire.reply_parser import NEED_MORE, ReplyParser
from streamkeep.engine.wire.request_parser import ERR_MBULK_LEN as MBULK_LEN
from tests.support.kernels import kernel_fixture
from tests.support.resp_cases import canon, chunked, decode_all

encoder_twin = kernel_fixture("streamkeep.engine.wire", "reply_encoder")


@pytest.fixture(scope="module")
def twin(encoder_twin: Any) -> Iterator[Any]:
    """Runs a test against each twin of the reply encoder (`_reply_encoder_py`,
    `_reply_encoder_c`): while it runs, this module's `encode_reply` and `write_reply` are the
    twin's."""
    names = ("encode_reply", "write_reply")
    saved = {name: globals()[name] for name in names}
    globals().update({name: getattr(encoder_twin, name) for name in names})
    yield encoder_twin
    globals().update(saved)


PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------
# Encoding replies: exact bytes
# ---------------------------------------------------------------------------------------------

BOTH = [
    ("OK", b"+OK\r\n", b"+OK\r\n"),
    ("h\xe9\udcff", b"+h\xc3\xa9\xff\r\n", b"+h\xc3\xa9\xff\r\n"),
    (b"", b"$0\r\n\r\n", b"$0\r\n\r\n"),
    (b"a\r\nb", b"$4\r\na\r\nb\r\n", b"$4\r\na\r\nb\r\n"),
    (bytearray(b"xy"), b"$2\r\nxy\r\n", b"$2\r\nxy\r\n"),
    (memoryview(b"xyz"), b"$3\r\nxyz\r\n", b"$3\r\nxyz\r\n"),
    (None, b"$-1\r\n", b"_\r\n"),
    (NULL_ARRAY, b"*-1\r\n", b"_\r\n"),
    (0, b":0\r\n", b":0\r\n"),
    (1023, b":1023\r\n", b":1023\r\n"),
    (1024, b":1024\r\n", b":1024\r\n"),
    (-7, b":-7\r\n", b":-7\r\n"),
    (2**63 - 1, b":9223372036854775807\r\n", b":9223372036854775807\r\n"),
    (-(2**63), b":-9223372036854775808\r\n", b":-9223372036854775808\r\n"),
    (2**64, b"$20\r\n18446744073709551616\r\n", b"(18446744073709551616\r\n"),
    (True, b":1\r\n", b"#t\r\n"),
    (False, b":0\r\n", b"#f\r\n"),
    (1.5, b"$3\r\n1.5\r\n", b",1.5\r\n"),
    (3.0, b"$1\r\n3\r\n", b",3\r\n"),
    (0.1, b"$19\r\n0.10000000000000001\r\n", b",0.10000000000000001\r\n"),
    (1e300, b"$23\r\n1.0000000000000001e+300\r\n", b",1.0000000000000001e+300\r\n"),
    (-0.0, b"$2\r\n-0\r\n", b",-0\r\n"),
    (math.inf, b"$3\r\ninf\r\n", b",inf\r\n"),
    (-math.inf, b"$4\r\n-inf\r\n", b",-inf\r\n"),
    (math.nan, b"$3\r\nnan\r\n", b",nan\r\n"),
    ([], b"*0\r\n", b"*0\r\n"),
    ((), b"*0\r\n", b"*0\r\n"),
    (
        [b"a", 1, [b"b", (b"c", None)], "s"],
        b"*4\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n*2\r\n$1\r\nc\r\n$-1\r\n+s\r\n",
        b"*4\r\n$1\r\na\r\n:1\r\n*2\r\n$1\r\nb\r\n*2\r\n$1\r\nc\r\n_\r\n+s\r\n",
    ),
    (
        [[[[b"deep", True]]]],
        b"*1\r\n*1\r\n*1\r\n*2\r\n$4\r\ndeep\r\n:1\r\n",
        b"*1\r\n*1\r\n*1\r\n*2\r\n$4\r\ndeep\r\n#t\r\n",
    ),
    (
        RespMap([(b"k", 1), ("s", [b"v"])]),
        b"*4\r\n$1\r\nk\r\n:1\r\n+s\r\n*1\r\n$1\r\nv\r\n",
        b"%2\r\n$1\r\nk\r\n:1\r\n+s\r\n*1\r\n$1\r\nv\r\n",
    ),
    (
        RespMap([(b"stream", [[b"1-1", (b"f", b"v")]])], as_pairs=True),
        b"*1\r\n*2\r\n$6\r\nstream\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        b"%1\r\n$6\r\nstream\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    ),
    (RespMap([]), b"*0\r\n", b"%0\r\n"),
    (
        RespMap.of_columns([b"f1", b"f2", b"v1", b"v2"]),
        b"*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n",
        b"%2\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$2\r\nv2\r\n",
    ),
    (RespMap.of_columns([]), b"*0\r\n", b"%0\r\n"),
    (RespSet([b"a", 2]), b"*2\r\n$1\r\na\r\n:2\r\n", b"~2\r\n$1\r\na\r\n:2\r\n"),
    (Verbatim("hé"), b"$3\r\nh\xc3\xa9\r\n", b"=7\r\ntxt:h\xc3\xa9\r\n"),
    (Verbatim("# x\r\n", "mkd"), b"$5\r\n# x\r\n\r\n", b"=9\r\nmkd:# x\r\n\r\n"),
    (HumanDouble(b"0.1"), b"$3\r\n0.1\r\n", b",0.1\r\n"),
    (
        [HumanDouble(b"-1e+4932"), HumanDouble(b"0")],
        b"*2\r\n$8\r\n-1e+4932\r\n$1\r\n0\r\n",
        b"*2\r\n,-1e+4932\r\n,0\r\n",
    ),
    (
        Push([b"message", b"ch", b"hi"]),
        b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n",
    ),
    (ReplyError("ERR syntax error"), b"-ERR syntax error\r\n", b"-ERR syntax error\r\n"),
    (ReplyError("ERR a\r\nb\nc"), b"-ERR a  b c\r\n", b"-ERR a  b c\r\n"),
    (
        ProtocolError(MBULK_LEN),
        b"-" + MBULK_LEN.encode() + b"\r\n",
        b"-" + MBULK_LEN.encode() + b"\r\n",
    ),
    (
        [ReplyError("ERR x"), b"ok"],
        b"*2\r\n-ERR x\r\n$2\r\nok\r\n",
        b"*2\r\n-ERR x\r\n$2\r\nok\r\n",
    ),
    ([NULL_ARRAY, False, 2.5], b"*3\r\n*-1\r\n:0\r\n$3\r\n2.5\r\n", b"*3\r\n_\r\n#f\r\n,2.5\r\n"),
]


@pytest.mark.parametrize(
    ("value", "resp2", "resp3"),
    BOTH,
    ids=[f"{i}-{type(c[0]).__name__}" for i, c in enumerate(BOTH)],
)
@pytest.mark.usefixtures("twin")
def test_encode_exact_bytes(value: Any, resp2: bytes, resp3: bytes) -> None:
    assert encode_reply(value) == resp2
    assert encode_reply(value, 2) == resp2
    assert encode_reply(value, 3) == resp3


@pytest.mark.usefixtures("twin")
def test_encode_large_headers_not_from_cache() -> None:
    big = b"x" * 5000
    assert encode_reply(big) == b"$5000\r\n" + big + b"\r\n"
    items = [1] * 1500
    assert encode_reply(items) == b"*1500\r\n" + b":1\r\n" * 1500
    nested = [[b"y" * 2000], (b"z" * 1024,)]
    assert encode_reply(nested) == (
        b"*2\r\n*1\r\n$2000\r\n" + b"y" * 2000 + b"\r\n*1\r\n$1024\r\n" + b"z" * 1024 + b"\r\n"
    )


@pytest.mark.usefixtures("twin")
def test_write_reply_appends_in_place() -> None:
    out = bytearray(b"+PREVIOUS\r\n")
    write_reply(out, [b"a", 1], 2)
    write_reply(out, None, 3)
    assert out == b"+PREVIOUS\r\n*2\r\n$1\r\na\r\n:1\r\n_\r\n"


@pytest.mark.usefixtures("twin")
def test_encode_subclasses_and_errors() -> None:
    import enum

    class Code(enum.IntEnum):
        SEVEN = 7

    assert encode_reply(Code.SEVEN) == b":7\r\n"
    assert encode_reply([Code.SEVEN]) == b"*1\r\n:7\r\n"
    with pytest.raises(TypeError):
        encode_reply(object())
    with pytest.raises(ValueError):
        encode_reply(b"x", 4)
    with pytest.raises(ValueError):
        encode_reply(Verbatim("x", "text"), 3)


def test_format_double_is_percent_17g() -> None:
    assert format_double(1 / 3) == b"0.33333333333333331"
    assert format_double(1e-5) == b"1.0000000000000001e-05"
    assert format_double(123456789.0) == b"123456789"
    assert format_double(2.0**70) == b"1.1805916207174113e+21"


def test_to_plain_resp3_types() -> None:
    assert to_plain(Verbatim("hé")) == "hé".encode()
    assert to_plain(RespSet([b"a", RespMap([(b"k", 1)])])) == [b"a", [b"k", 1]]
    assert to_plain(Push([b"x", NULL_ARRAY])) == [b"x", None]
    assert to_plain([Verbatim("t"), RespSet([(b"f", b"v")]), 1.5, True]) == [
        b"t",
        [[b"f", b"v"]],
        1.5,
        True,
    ]
    assert RespSet([1]) == RespSet([1]) and RespSet([1]) != [1]
    assert Verbatim("a") == Verbatim("a", "txt") != Verbatim("a", "mkd")
    assert to_plain([HumanDouble(b"0.1")]) == [b"0.1"] and to_plain(HumanDouble(b"2")) == b"2"
    assert HumanDouble(b"1") == HumanDouble(b"1") != HumanDouble(b"1.0")
    assert Push([1]) == Push([1]) != RespSet([1])


def reference_encode(value: Any) -> bytes:
    """A naive RESP2 encoder for the shapes an XRANGE reply has."""
    if isinstance(value, bytes):
        return b"$" + str(len(value)).encode() + b"\r\n" + value + b"\r\n"
    return b"*" + str(len(value)).encode() + b"\r\n" + b"".join(map(reference_encode, value))


@pytest.mark.usefixtures("twin")
def test_xrange_sized_reply_sanity() -> None:
    """The micro benchmark's workload, without timing: 1000 entries encode and decode back."""
    entries = [
        [b"1700000000000-%d" % i, (b"item", b"book %d" % i, b"qty", b"%d" % i, b"x" * (i % 40))]
        for i in range(1000)
    ]
    wire = encode_reply(entries, 2)
    assert wire == reference_encode(entries)
    assert encode_reply(entries, 3) == wire
    assert decode_all(wire) == [[[e[0], list(e[1])] for e in entries]]


# ---------------------------------------------------------------------------------------------
# Properties: round trips through the reply parser
# ---------------------------------------------------------------------------------------------


def resp2_shape(value: Any) -> Any:
    """What a RESP2 client decodes a value to."""
    t = type(value)
    if t is bool:
        return int(value)
    if t is float:
        return format_double(value)
    if t in (list, tuple):
        return [resp2_shape(x) for x in value]
    if t is RespMap:
        if value.as_pairs:
            return [[resp2_shape(k), resp2_shape(v)] for k, v in value.items]
        return [resp2_shape(x) for kv in value.items for x in kv]
    if t is RespSet or t is Push:
        return [resp2_shape(x) for x in value.items]
    if t is Verbatim:
        return value.text.encode("utf-8", "surrogateescape")
    if value is NULL_ARRAY:
        return None
    return value


line_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12
)
any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
leaves = st.one_of(
    st.binary(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    line_text,
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.just(NULL_ARRAY),
    line_text.map(lambda s: ReplyError("ERR " + s)),
    st.builds(Verbatim, any_text, st.sampled_from(["txt", "mkd"])),
)
reply_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.builds(
            RespMap,
            st.lists(st.tuples(children, children), max_size=4),
            st.booleans(),
        ),
        st.lists(children, max_size=5).map(RespSet),
        st.lists(children, max_size=5).map(Push),
    ),
    max_leaves=25,
)


@pytest.mark.usefixtures("twin")
@PROPERTY
@given(reply_values, st.lists(st.integers(min_value=0), max_size=8))
def test_roundtrip_resp3(value: Any, cuts: list[int]) -> None:
    wire = encode_reply(value, 3)
    parser = ReplyParser()
    got = []
    for piece in chunked(wire, cuts):
        parser.feed(piece)
        while (v := parser.next()) is not NEED_MORE:
            got.append(v)
    assert [canon(v) for v in got] == [canon(value)]


@pytest.mark.usefixtures("twin")
@PROPERTY
@given(reply_values, st.lists(st.integers(min_value=0), max_size=8))
def test_roundtrip_resp2(value: Any, cuts: list[int]) -> None:
    wire = encode_reply(value, 2)
    parser = ReplyParser()
    got = []
    for piece in chunked(wire, cuts):
        parser.feed(piece)
        while (v := parser.next()) is not NEED_MORE:
            got.append(v)
    assert [canon(v) for v in got] == [canon(resp2_shape(value))]


# --- big values and range replies ----------------------------------------------------------

_bulks = st.one_of(st.binary(max_size=12), st.sampled_from([b"", b"x" * 1023, b"y" * 1024,
                                                            b"z" * BIG_BULK]))
_entry_ids = st.integers(0, 2**64 - 1).map(lambda n: b"%d-%d" % (n, n % 7))


@st.composite
def _entries(draw: st.DrawFn) -> list:
    """XRANGE-shaped replies: mostly uniform [id, [f, v, ...]], sometimes not (other field
    counts, tuples, a non-bytes element), long enough for the fast path and its chunks."""
    k = draw(st.integers(1, 4))
    n = draw(st.sampled_from([8, 9, 40, 2049, 4100]))
    seqs = draw(st.sampled_from([list, tuple]))
    # Field names every entry shares (the usual stream) take the constant-element layout.
    names = draw(st.one_of(st.none(), st.lists(_bulks, min_size=k, max_size=k)))
    entries: list[Any] = []
    for _ in range(n):
        if draw(st.integers(0, 200)) == 0:
            entries.append(draw(st.sampled_from([
                [b"1-1", [b"f"] * (k + 1)], [b"1-1", [7, b"v"]], (b"1-1", (b"f", None)),
                b"not an entry", [b"1-1"], [b"1-1", [b"f"], b"extra"]])))
            continue
        flat = [draw(_bulks) for _ in range(2 * k)]
        if names is not None:
            flat[0::2] = names
        entries.append([draw(_entry_ids), seqs(flat)])
    return entries


@pytest.mark.usefixtures("twin")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries(), st.sampled_from([2, 3]))
def test_range_replies_encode_byte_for_byte_as_the_generic_path(entries: list, protocol: int):
    """The entries fast path, in a bytearray and in a ReplyBuffer (big bulks by reference), is
    byte-identical to the generic encoding: an array is its header and its elements' encodings,
    and one entry alone (2 elements) never takes the fast path."""
    generic = b"*%d\r\n" % len(entries) + b"".join(encode_reply(e, protocol) for e in entries)
    assert encode_reply(entries, protocol) == generic
    buf = ReplyBuffer()
    write_reply(buf, entries, protocol)
    assert b"".join(buf.parts()) == generic
    assert buf.size() == len(generic)
    assert all(value is not None for _, value in buf.big)


@pytest.mark.usefixtures("twin")
@pytest.mark.parametrize("n", [1, 200])
def test_plain_entries_encode_as_the_list_they_are(n: int) -> None:
    """A stream read's entries in their plain form (a list subclass, as EXEC and scripts get
    them) encode, nested too, exactly as the same plain list."""
    entries = [[b"%d-1" % i, [b"f", b"v%d" % i]] for i in range(n)]
    for protocol in (2, 3):
        assert encode_reply([[b"s", PlainEntries(entries)]], protocol) == \
            encode_reply([[b"s", entries]], protocol)


@pytest.mark.usefixtures("twin")
def test_reply_buffer_keeps_big_bulks_by_reference() -> None:
    value = b"v" * BIG_BULK
    buf = ReplyBuffer()
    write_reply(buf, [[b"1-1", [b"f", value]], b"tail"], 2)
    assert len(buf) < 100 and buf.size() == len(encode_reply([[b"1-1", [b"f", value]], b"tail"]))
    assert any(part is value for part in buf.parts())
    other = ReplyBuffer()
    other += b"+OK\r\n"
    other.extend_buffer(buf)
    assert b"".join(other.parts()) == b"+OK\r\n" + b"".join(buf.parts())
    assert other.materialized() == b"".join(other.parts())


@pytest.mark.usefixtures("twin")
@pytest.mark.parametrize("value_size", [2000, BIG_BULK])
def test_reply_buffer_stops_a_reply_over_its_limit_while_encoding(value_size: int) -> None:
    """A 100 MB reply into a buffer limited to 1 MB stops near 1 MB, not after the whole."""
    count = 100 * (1 << 20) // value_size
    entries = [[b"%d-1" % i, [b"f", b"v" * value_size]] for i in range(count)]
    buf = ReplyBuffer(limit=1 << 20)
    with pytest.raises(OutputLimitReached):
        write_reply(buf, entries, 2)
    assert buf.size() < 2 << 20
    small = ReplyBuffer(limit=1 << 20)
    write_reply(small, entries[:10], 2)  # within the limit: no error
    assert b"".join(small.parts()) == encode_reply(entries[:10])


@pytest.mark.usefixtures("twin")
@pytest.mark.parametrize("protocol", [2, 3])
def test_a_map_of_columns_is_the_map_of_its_pairs(protocol: int) -> None:
    """A map made of its keys then its values (a packed hash's HGETALL) encodes, reads as pairs
    and converts exactly as the map of the same pairs; a big one is stopped at the limit."""
    n = 5000
    columns = [b"f%d" % i for i in range(n)] + [b"v%d" % i for i in range(n)]
    pairs = list(zip(columns[:n], columns[n:], strict=True))
    assert encode_reply(RespMap.of_columns(columns), protocol) == encode_reply(
        RespMap(pairs), protocol)
    kept = RespMap.of_columns(list(columns))
    assert kept.items == pairs and to_plain(kept) == to_plain(RespMap(pairs))
    kept.items = pairs[:1]  # a script's conversion replaces the items: the columns go
    assert encode_reply(kept, protocol) == encode_reply(RespMap(pairs[:1]), protocol)
    big = [b"f%d" % i for i in range(n)] + [b"v" * 1000] * n
    buf = ReplyBuffer(limit=1 << 20)
    with pytest.raises(OutputLimitReached):
        write_reply(buf, RespMap.of_columns(big), protocol)
    assert buf.size() < 2 << 20


@pytest.mark.usefixtures("twin")
@pytest.mark.parametrize("protocol", [2, 3])
def test_entries_with_a_deleted_entrys_nil_encode_like_the_generic_path(protocol: int) -> None:
    """XAUTOCLAIM / XINFO STREAM FULL reply [id, nil] for a deleted entry: the entries fast path
    must hand such a chunk to the generic loop (it once raised TypeError, killing the
    connection, on arrays of 8 or more)."""
    entries = [[b"%d-0" % i, NULL_ARRAY if i % 3 == 1 else [b"f", b"v"]] for i in range(20)]
    expected = (b"*%d\r\n" % len(entries)) + b"".join(encode_reply(e, protocol)
                                                      for e in entries)
    assert encode_reply(entries, protocol) == expected


@pytest.mark.usefixtures("twin")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_entries(), st.sampled_from([2, 3]))
def test_entry_arrays_encode_byte_for_byte_as_plain_lists(entries: list, protocol: int) -> None:
    """The model's EntryArray (two columns, types trusted) encodes exactly as the same entries
    in a plain list through the generic path, in a bytearray and in a ReplyBuffer."""
    valid = [[e[0], tuple(e[1])] for e in entries
             if type(e) is list and len(e) == 2 and type(e[0]) is bytes
             and type(e[1]) in (list, tuple) and all(type(x) is bytes for x in e[1])]
    array = EntryArray([e[0] for e in valid], [e[1] for e in valid])
    generic = b"*%d\r\n" % len(valid) + b"".join(encode_reply(e, protocol) for e in valid)
    assert encode_reply(array, protocol) == generic
    buf = ReplyBuffer()
    write_reply(buf, [b"key", array], protocol)
    assert b"".join(buf.parts()) == b"*2\r\n$3\r\nkey\r\n" + generic


@pytest.mark.usefixtures("twin")
def test_entry_array_reads_as_the_list_of_its_entries() -> None:
    array = EntryArray([b"1-1", b"2-1", b"3-1"], [(b"f", b"a"), (b"f", b"b"), (b"g", b"c", b"h", b"d")])
    plain = [[b"1-1", (b"f", b"a")], [b"2-1", (b"f", b"b")], [b"3-1", (b"g", b"c", b"h", b"d")]]
    assert len(array) == 3 and bool(array) and not EntryArray()
    assert array[0] == plain[0] and array[-1] == plain[-1]
    assert array[1:] == plain[1:] and type(array[1:]) is EntryArray
    assert list(array) == plain and array == plain and array != plain[:2]
    assert array == EntryArray(list(array.ids), list(array.fields))
    assert to_plain(array) == [[i, list(f)] for i, f in plain]
    assert to_plain([b"k", array]) == [b"k", [[i, list(f)] for i, f in plain]]
    # A wrong element (never built by the model) fails the fast path in C, before anything is
    # written, and the chunk goes the generic way.
    bad = EntryArray([b"1-1"] * 9, [(b"f", 7)] * 9)
    assert encode_reply(bad, 2) == encode_reply([[b"1-1", [b"f", 7]]] * 9, 2)
