"""The search of a string in a packed column (engine.model.packed_columns), against a plain
list's index, including strings found inside others and empty strings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.packed_columns import column_index


def _packed(strings: list[bytes]) -> tuple[bytes, bytes, int]:
    head = b"HEAD"
    return head + b"".join(strings), bytes(len(s) for s in strings), len(head)


def test_a_string_inside_another_is_not_found_there() -> None:
    strings = [b"abcabc", b"bca", b"", b"c", b"ab"]
    blob, lens, start = _packed(strings)
    for i, s in enumerate(strings):
        assert column_index(blob, lens, start, len(blob), s) == i
    assert column_index(blob, lens, start, len(blob), b"cab") == -1
    assert column_index(blob, lens, start, len(blob), b"HEAD") == -1  # before the column


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=6), max_size=40), st.binary(max_size=6))
def test_as_a_list_finds_it(strings: list[bytes], needle: bytes) -> None:
    blob, lens, start = _packed(strings)
    want = strings.index(needle) if needle in strings else -1
    assert column_index(blob, lens, start, len(blob), needle) == want
