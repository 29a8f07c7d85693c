"""The glob matcher (keyspace.stringmatchlen) against the backtracking reading of Redis's
stringmatchlen it replaced (tests/support/glob_reference.py), result for result, and its cost."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.commands.keyspace import stringmatchlen
from tests.support.glob_reference import stringmatchlen as reference

# Few bytes, most of them special to the matcher, so that random draws hit its odd cases.
PATTERN_BYTES = st.sampled_from(b"*?[]^-\\aAbz\x80\xff")
KEY_BYTES = st.sampled_from(b"aAbz-]^\\*?[\x80\xff")


@settings(max_examples=3000, deadline=None)
@given(
    pattern=st.lists(PATTERN_BYTES, max_size=12).map(bytes),
    key=st.lists(KEY_BYTES, max_size=10).map(bytes),
    nocase=st.booleans(),
)
def test_same_verdict_as_the_reference(pattern: bytes, key: bytes, nocase: bool) -> None:
    assert stringmatchlen(pattern, key, nocase) is reference(pattern, key, nocase)


@pytest.mark.parametrize(
    ("pattern", "key"),
    [
        (b"*" * 2 + b"a*" * 1001 + b"b", b"a" * 1100 + b"b"),  # the nesting limit
        (b"a*" * 999 + b"b", b"a" * 1100 + b"b"),
        (b"*a*a*a*b*", b"a" * 50 + b"b"),
        (b"*", b""),
        (b"", b""),
        (b"\\", b"\\"),
        (b"[a-", b"-"),
        (b"[z-a]*", b"q"),
        (b"[\\]]", b"]"),
        (b"[^", b"x"),
        (b"[\x80-\xff]", b"\x90"),
        (b"[\xff-\x01]", b"\x00"),
        (b"*[aA]a*", b"xaAx"),  # a letter's two cases next to one case: no lowered-copy shortcut
        (b"[aA]A", b"aa"),
        (b"*[aA][bB]-*", b"xAb-"),
    ],
)
def test_odd_cases_match_the_reference(pattern: bytes, key: bytes) -> None:
    for nocase in (False, True):
        assert stringmatchlen(pattern, key, nocase) is reference(pattern, key, nocase)


def test_pathological_pattern_is_fast() -> None:
    """Redis itself needs O(pattern x key) here; the reference took seconds on 10 KB."""
    key = b"a" * 100_000
    began = time.perf_counter()
    for pattern in (b"*" + b"a" * 1000 + b"b", b"*" + b"a" * 1000 + b"b*x", b"*a" * 500 + b"b",
                    b"*" + b"[^a]" * 1000 + b"*x", b"*" + b"[aA]" * 999 + b"b*x"):
        assert stringmatchlen(pattern, key) is False
        assert stringmatchlen(pattern, key, nocase=True) is False
    assert time.perf_counter() - began < 2.0
