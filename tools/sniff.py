"""What a file handed to `streamkeep import` is, from its first bytes: a pure function.

Owns telling a Redis RDB (the `REDIS` magic and a version snapshot.rdb reads) and a Redis AOF
(RESP framing from the first byte, `*<n>\\r\\n$<len>\\r\\n`, or an annotation line `#...\\r\\n`
before it; an AOF with an RDB preamble starts as an RDB) from everything else, and naming what
anything else looks like (compressed data, an archive, a streamkeep file, text or binary with
its first bytes) so that a refusal says what was found. Must not touch: files (the caller reads
the bytes), the formats themselves (snapshot.rdb reads the RDB, engine.wire.request_parser the
RESP).
"""

from __future__ import annotations

from typing import Literal

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.snapshot.rdb import RdbError, rdb_version

HEAD = 512  # bytes a caller reads to sniff (a tar header's magic is at byte 257)
SHOWN = 8  # bytes a refusal shows

Kind = Literal["rdb", "aof"]

# (magic, offset, what it is): compressed files and archives are refused by name, with the fix.
_MAGICS: tuple[tuple[bytes, int, str], ...] = (
    (b"\x1f\x8b", 0, "gzip data: decompress it first (gunzip)"),
    (b"\x28\xb5\x2f\xfd", 0, "zstd data: decompress it first (unzstd)"),
    (b"BZh", 0, "bzip2 data: decompress it first (bunzip2)"),
    (b"\xfd7zXZ\x00", 0, "xz data: decompress it first (unxz)"),
    (b"\x04\x22\x4d\x18", 0, "lz4 data: decompress it first (unlz4)"),
    (b"\x89LZO", 0, "lzop data: decompress it first (lzop -d)"),
    (b"PK\x03\x04", 0, "a zip archive: extract the file from it first"),
    (b"7z\xbc\xaf\x27\x1c", 0, "a 7-Zip archive: extract the file from it first"),
    (b"ustar", 257, "a tar archive: extract the file from it first"),
    (b"SKAOF\r\n\x1a", 0, "a streamkeep AOF segment, not a Redis file (it is streamkeep's own: "
                          "open its data directory)"),
)


class NotRedisFile(StreamkeepError):
    """The bytes are neither a Redis RDB nor a Redis AOF (the message says what they are)."""


def sniff(head: bytes) -> Kind:
    """The kind of file ("rdb" or "aof") `head` starts (HEAD bytes, or the whole file if it is
    shorter); NotRedisFile saying what was found otherwise. An AOF whose first command is cut
    by the end of the file is still an AOF (the import reports the cut)."""
    if not head:
        raise NotRedisFile("an empty file")
    if head[:5] == b"REDIS" or head[:6] == b"VALKEY":  # (Valkey 9: VALKEY080)
        try:
            rdb_version(head)
        except RdbError as err:
            raise NotRedisFile(str(err)) from None
        return "rdb"
    if _resp_start(head):
        return "aof"
    for magic, offset, what in _MAGICS:
        if head[offset:offset + len(magic)] == magic:
            raise NotRedisFile(what)
    raise NotRedisFile(f"not an RDB or AOF: first bytes {shown(head)}")


def shown(data: bytes) -> str:
    """The first SHOWN bytes of `data` as a refusal shows them: hex, then as text (a dot for
    each byte that is not printable ASCII)."""
    part = data[:SHOWN]
    text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in part)
    return f'{part.hex(" ")} ("{text}")'


def _resp_start(head: bytes) -> bool:
    """Whether `head` starts as Redis writes an AOF: annotation lines (`#...\\r\\n`), then a
    command's multibulk header `*<n>\\r\\n` (n > 0) and its first bulk's `$<len>\\r\\n`. A
    head that ends (the whole file is shorter) before a difference shows counts."""
    pos = 0
    while head.startswith(b"#", pos):
        end = head.find(b"\r\n", pos)
        if end < 0:
            return len(head) < HEAD  # the file ends inside its annotation line
        pos = end + 2
    for marker in (b"*", b"$"):
        after = _header(head, pos, marker)
        if after is None:
            return False
        if after == _CUT:
            return True
        pos = after
    return True


_CUT = -1


def _header(head: bytes, pos: int, marker: bytes) -> int | None:
    """`<marker><digits>\\r\\n` at `pos`: the position after it; _CUT if `head` ends inside
    it; None if something else is there."""
    if pos == len(head):
        return _CUT
    if head[pos:pos + 1] != marker:
        return None
    start = pos = pos + 1
    while head[pos:pos + 1].isdigit():
        pos += 1
    digits = head[start:pos]
    if len(digits) > 10 or (marker == b"*" and digits.startswith(b"0")):
        return None  # not a count Redis writes (`*0` is no command)
    if pos + 2 > len(head):
        return _CUT if b"\r\n".startswith(head[pos:]) else None
    if not digits or head[pos:pos + 2] != b"\r\n":
        return None
    return pos + 2
