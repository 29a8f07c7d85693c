"""replication.bundle: a segmented snapshot's files as one full-sync bulk, split back into files
however the bytes arrive; hostile headers refused (the bytes come from the network)."""

from __future__ import annotations

import contextlib
import struct

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.replication.bundle import (
    MAGIC,
    MAX_HEADER,
    BundleError,
    Splitter,
    bundle_size,
    encode_header,
)

FILES = [("snapshot-000000000042.mdb", b"main" * 300), ("part-000000000030.mdb", b"A" * 5000),
         ("part-000000000042.mdb", b"")]


def _bundle(files: list[tuple[str, bytes]]) -> bytes:
    return encode_header([(n, len(b)) for n, b in files]) + b"".join(b for _n, b in files)


def _split(data: bytes, cuts: list[int]) -> tuple[Splitter, dict[int, bytes]]:
    splitter = Splitter(len(data))
    got: dict[int, bytes] = {}
    start = 0
    for cut in sorted({*cuts, len(data)}):
        for index, piece in splitter.feed(data[start:cut]):
            got[index] = got.get(index, b"") + piece
        start = cut
    return splitter, got


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=7000), max_size=12))
def test_a_bundle_splits_back_into_its_files_however_it_arrives(cuts: list[int]) -> None:
    data = _bundle(FILES)
    assert len(data) == bundle_size([(n, len(b)) for n, b in FILES])
    splitter, got = _split(data, [c for c in cuts if c < len(data)])
    assert splitter.files == [(n, len(b)) for n, b in FILES]
    assert [got.get(i, b"") for i in range(len(FILES))] == [b for _n, b in FILES]


@given(st.binary(min_size=1, max_size=3000), st.lists(st.integers(0, 3000), max_size=5))
def test_a_single_file_passes_through_as_it_is(body: bytes, cuts: list[int]) -> None:
    body = b"\0" * 8 + body  # an LMDB file starts with its first page's number
    splitter, got = _split(body, [c for c in cuts if c < len(body)])
    assert splitter.files == [(None, len(body))] and got == {0: body}


def _header(body: bytes) -> bytes:
    return MAGIC + struct.pack("<I", len(body)) + body


@pytest.mark.parametrize(("header", "total", "message"), [
    (_header(b"") [:len(MAGIC)] + struct.pack("<I", MAX_HEADER + 1), 10 ** 9, "header of"),
    (_header(msgpack.packb([["../etc/passwd", 1]])), 100, "bad file entry"),
    (_header(msgpack.packb([["snapshot-000000000001.mdb", -1]])), 100, "bad file entry"),
    (_header(msgpack.packb([["part-000000000001.mdb", 1]])), 100, "must start"),
    (_header(msgpack.packb([["snapshot-000000000001.mdb", 1]] * 2)), 100, "each file once"),
    (_header(msgpack.packb([["snapshot-000000000001.mdb", 10]])), 100, "add up"),
    (_header(msgpack.packb([["snapshot-000000000001.mdb.tmp", 1]])), 100, "bad file entry"),
    (_header(msgpack.packb([])), 100, "names no file"),
    (_header(b"\xc1"), 100, "undecodable"),
])
def test_a_hostile_header_is_refused(header: bytes, total: int, message: str) -> None:
    with pytest.raises(BundleError, match=message):
        Splitter(total).feed(header + b"\0" * 16)


def test_more_bytes_than_announced_are_refused() -> None:
    data = _bundle(FILES[:1])
    splitter = Splitter(len(data))
    splitter.feed(data)
    with pytest.raises(BundleError, match="more bytes"):
        splitter.feed(b"x")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(0, 1 << 20))
def test_arbitrary_bytes_after_the_magic_never_crash(tail: bytes, total: int) -> None:
    with contextlib.suppress(BundleError):
        Splitter(total).feed(MAGIC + tail)


def test_held_files_are_named_not_sent() -> None:
    held = frozenset({"part-000000000030.mdb"})
    files = [(n, len(b)) for n, b in FILES]
    data = encode_header(files, held) + FILES[0][1] + FILES[2][1]
    assert len(data) == bundle_size(files, held)
    splitter, got = _split(data, [3, 900, 1500])
    assert splitter.held == held and got == {0: FILES[0][1]}


def test_the_snapshots_own_file_is_never_held() -> None:
    header = _header(msgpack.packb([["snapshot-000000000001.mdb", 1, True]]))
    with pytest.raises(BundleError, match="must start"):
        Splitter(len(header)).feed(header)
