"""engine.wire.reply: the reply values handlers return (maps, sets, verbatim strings, pushes,
entry arrays, the null array) and `to_plain`, which turns them into the embedded API's plain
RESP2-shaped values."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streamkeep.engine.wire.reply import (
    NO_REPLY,
    NULL_ARRAY,
    EntryArray,
    Push,
    RespMap,
    RespSet,
    Verbatim,
    help_reply,
    to_plain,
)


def entries() -> EntryArray:
    return EntryArray([b"1-0", b"2-0", b"3-0"],
                      [(b"f", b"a"), (b"f", b"b", b"g", b"c"), (b"f", b"d")])


def test_markers_are_singletons_with_readable_reprs() -> None:
    assert repr(NULL_ARRAY) == "NULL_ARRAY"
    assert repr(NO_REPLY) == "NO_REPLY"
    assert NULL_ARRAY is not NO_REPLY
    assert NULL_ARRAY != None  # noqa: E711 (a null array is not a null bulk)


def test_entry_array_reads_as_a_list_of_pairs() -> None:
    array = entries()
    assert len(array) == 3
    assert array[1] == [b"2-0", (b"f", b"b", b"g", b"c")]
    assert array[-1] == [b"3-0", (b"f", b"d")]
    assert list(array) == [[b"1-0", (b"f", b"a")], [b"2-0", (b"f", b"b", b"g", b"c")],
                           [b"3-0", (b"f", b"d")]]
    assert array == list(array)
    assert array != list(array)[:2]
    assert repr(array).startswith("EntryArray([[b'1-0'")


def test_entry_array_slices_are_entry_arrays() -> None:
    head = entries()[:2]
    assert type(head) is EntryArray
    assert head.ids == [b"1-0", b"2-0"]
    assert head == EntryArray([b"1-0", b"2-0"], [(b"f", b"a"), (b"f", b"b", b"g", b"c")])
    assert head != entries()


def test_empty_entry_arrays_do_not_share_their_columns() -> None:
    one, two = EntryArray(), EntryArray()
    one.ids.append(b"1-0")
    one.fields.append((b"f", b"v"))
    assert len(one) == 1 and len(two) == 0


@pytest.mark.parametrize("value", [EntryArray(), RespSet([1]), Verbatim("x"), Push([1])])
def test_reply_values_with_equality_are_unhashable(value: object) -> None:
    with pytest.raises(TypeError):
        hash(value)


def test_equality_needs_the_same_type_and_contents() -> None:
    assert RespSet([b"a", b"b"]) == RespSet([b"a", b"b"])
    assert RespSet([b"a", b"b"]) != RespSet([b"b", b"a"])  # a set reply keeps its order
    assert RespSet([1]) != Push([1]) and Push([1]) != [1]
    assert Verbatim("text") == Verbatim("text", "txt")
    assert Verbatim("text", "mkd") != Verbatim("text")
    assert repr(Verbatim("x", "mkd")) == "Verbatim('x', 'mkd')"
    assert repr(RespMap([(b"k", 1)])) == "RespMap([(b'k', 1)])"


@pytest.mark.parametrize("value", ["OK", b"bulk", None, 7, True, 1.5])
def test_scalars_are_plain_already(value: object) -> None:
    assert to_plain(value) is value


def test_to_plain_flattens_maps_or_pairs_them() -> None:
    items = [(b"a", 1), (b"b", [b"x", NULL_ARRAY])]
    assert to_plain(RespMap(items)) == [b"a", 1, b"b", [b"x", None]]
    assert to_plain(RespMap(items, as_pairs=True)) == [[b"a", 1], [b"b", [b"x", None]]]


def test_to_plain_converts_lists_in_place_and_copies_tuples() -> None:
    fields = (b"f", b"v")
    reply = [b"x", 3, fields, [NULL_ARRAY, RespMap([(b"k", b"v")])], NULL_ARRAY]
    plain = to_plain(reply)
    assert plain is reply
    assert plain == [b"x", 3, [b"f", b"v"], [None, [b"k", b"v"]], None]
    assert fields == (b"f", b"v")  # the stream's own tuple is not touched


def test_to_plain_entry_arrays_give_fresh_field_lists() -> None:
    array = entries()
    plain = to_plain(array)
    assert plain == [[b"1-0", [b"f", b"a"]], [b"2-0", [b"f", b"b", b"g", b"c"]],
                     [b"3-0", [b"f", b"d"]]]
    assert all(type(pair[1]) is list for pair in plain)
    assert to_plain([b"s", array]) == [b"s", plain]


def test_to_plain_resp3_shapes_as_resp2_sends_them() -> None:
    assert to_plain(NULL_ARRAY) is None
    assert to_plain(Verbatim("caf\udce9")) == b"caf\xe9"  # any byte survives the round trip
    assert to_plain(RespSet([b"a", (b"t",), NULL_ARRAY])) == [b"a", [b"t"], None]
    assert to_plain(Push([b"message", Verbatim("v")])) == [b"message", b"v"]
    assert to_plain([RespSet([1]), Push([2]), Verbatim("z")]) == [[1], [2], b"z"]


def test_help_reply_heads_with_the_command_as_typed_uppercased() -> None:
    assert help_reply(b"xinfo", ["CONSUMERS <key> <groupname>", "    Show consumers."]) == [
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>", "    Show consumers.",
        "HELP", "    Print this help.",
    ]


def test_plain_entries_need_no_compiler_package() -> None:
    """PlainEntries carries mypyc's `native_class=False` directive (a native class cannot
    derive from list); a pure install without mypy_extensions imports it all the same."""
    code = ("import sys; sys.modules['mypy_extensions'] = None\n"
            "from streamkeep.engine.wire.reply import PlainEntries, to_plain\n"
            "p = PlainEntries([[b'1-0', [b'f', b'v']]])\n"
            "assert isinstance(p, list) and to_plain(p) is p, p\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
