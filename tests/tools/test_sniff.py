"""tools.sniff: a Redis RDB or AOF told from everything else by its first bytes, and the rest
named by what it is; arbitrary bytes get one of the two answers or the documented refusal."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.tools.sniff import HEAD, NotRedisFile, shown, sniff


@pytest.mark.parametrize("head,kind", [
    (b"REDIS0011\xfa\x09redis-ver", "rdb"),
    (b"REDIS0013", "rdb"),
    (b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", "aof"),
    (b"#TS:1700000000\r\n*1\r\n$5\r\nMULTI\r\n", "aof"),  # an annotation first
    (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n" * 40, "aof"),  # longer than HEAD
    (b"*1\r\n$4\r\nPI", "aof"),  # a first command cut short: the import reports the cut
    (b"*", "aof"),
])
def test_redis_files(head: bytes, kind: str) -> None:
    assert sniff(head[:HEAD]) == kind


@pytest.mark.parametrize("head,said", [
    (b"", "an empty file"),
    (gzip.compress(b"REDIS0011", mtime=0), "gzip data: decompress it first"),
    (bz2.compress(b"REDIS0011"), "bzip2 data: decompress it first"),
    (lzma.compress(b"REDIS0011"), "xz data: decompress it first"),
    (b"\x28\xb5\x2f\xfd\x20\x09", "zstd data: decompress it first"),
    (b"\x04\x22\x4d\x18\x64\x40", "lz4 data: decompress it first"),
    (b"PK\x03\x04\x14\x00", "a zip archive"),
    (b"dump.rdb".ljust(257, b"\x00") + b"ustar\x0000", "a tar archive"),
    (b"SKAOF\r\n\x1a\x01\x00", "a streamkeep AOF segment"),
    (b"root:x:0:0:root:/root:/bin/bash\n",
     'not an RDB or AOF: first bytes 72 6f 6f 74 3a 78 3a 30 ("root:x:0")'),
    (b"\x00\xff\x10abc", 'first bytes 00 ff 10 61 62 63 ("...abc")'),
    (b"REDIS0016", "RDB version 16 is not one streamkeep reads"),
    (b"REDIS0000", "RDB version 0 is not one streamkeep reads"),
    (b"REDISabcd", "REDIS magic without a version number"),
    (b"REDIS00", "truncated at byte 7, inside the RDB header"),
    (b"*0\r\n", "not an RDB or AOF"),  # not a command Redis writes
    (b"*1\r\n+OK\r\n", "not an RDB or AOF"),  # a reply, not a command
    (b"*12345678901\r\n", "not an RDB or AOF"),
    (b"*1\n$4\nPING\n", "not an RDB or AOF"),  # LF only
    (b"SET k v\r\n", "not an RDB or AOF"),  # the inline form: never in an AOF
])
def test_everything_else_is_named(head: bytes, said: str) -> None:
    with pytest.raises(NotRedisFile) as refused:
        sniff(head[:HEAD])
    assert said in str(refused.value)


def test_shown_bytes() -> None:
    assert shown(b'a"\x00\r\nbcdefgh') == '61 22 00 0d 0a 62 63 64 ("a"...bcd")'


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=HEAD))
def test_arbitrary_bytes_are_sniffed_or_refused(head: bytes) -> None:
    try:
        assert sniff(head) in ("rdb", "aof")
    except NotRedisFile as err:
        assert str(err) and "\n" not in str(err)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([b"REDIS", b"*", b"#", b"*1\r\n$", b"REDIS00"]), st.binary(max_size=64))
def test_arbitrary_bytes_after_a_plausible_start(start: bytes, rest: bytes) -> None:
    try:
        assert sniff(start + rest) in ("rdb", "aof")
    except NotRedisFile as err:
        assert str(err) and "\n" not in str(err)
