"""A full sync's snapshot as one byte stream: one file as it is, or a bundle of several.

Owns the encoding of a segmented snapshot (its own file and its part files) as the single bulk
a full sync sends (link.snapshot_header's size, then these bytes, then the CRC trailer), and
splitting those bytes back into files on the replica. A self-contained snapshot is sent as the
file itself, as before bundles existed; a bundle starts with MAGIC (an LMDB file starts with
its first page's number, zeros), a u32 header length and a msgpack header `[[name, size,
held], ...]`, the snapshot's own file first, then the bytes of the files not `held` in that
order: a held file is one the replica said it has (REPLCONF sk-have: a part file it received
before a full sync was cut short, or one of its own snapshot's), sent as its name alone.

Pure functions over bytes: what arrives is checked (the header's length bounded, names that are
snapshot or part file names and nothing else, sizes that add up to the bulk's size), never
trusted. Must not touch: sockets, files, the snapshot format.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import msgpack

from streamkeep.aof.manifest import is_snapshot_file
from streamkeep.engine.wire.errors import StorageError

MAGIC = b"SKBUNDLE1\n"
_LENGTH = struct.Struct("<I")
MAX_HEADER = 1 << 16  # a snapshot names a handful of part files


class BundleError(StorageError):
    """The bytes are not a bundle a primary would send."""


def encode_header(files: list[tuple[str, int]], held: frozenset[str] = frozenset()) -> bytes:
    """The bundle's header for `files` ([(name, size)], the snapshot's own file first), those
    named in `held` sent as names alone."""
    body = msgpack.packb([[name, size, name in held] for name, size in files])
    return MAGIC + _LENGTH.pack(len(body)) + body


def bundle_size(files: list[tuple[str, int]], held: frozenset[str] = frozenset()) -> int:
    """Bytes of the whole bundle: its header and the files not held."""
    return len(encode_header(files, held)) + sum(size for name, size in files
                                                  if name not in held)


@dataclass(slots=True)
class Splitter:
    """Splits `total` bytes, fed in pieces, into files: `feed` returns (file index, bytes)
    pieces in order. `files` is [(name, size)] once known: one unnamed file (name None) for a
    self-contained snapshot; `held` the names of those sent as names alone."""

    total: int
    files: list[tuple[str | None, int]] | None = None
    held: frozenset[str] = frozenset()
    _head: bytearray = field(default_factory=bytearray)
    _index: int = 0
    _left: int = 0  # bytes of files[_index] still to come

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        if self.files is None:
            self._head += data
            if not self._read_header():
                return []
            data, self._head = bytes(self._head), bytearray()
        pieces: list[tuple[int, bytes]] = []
        view = memoryview(data)
        while view:
            while self._left == 0:
                self._index += 1
                if self._index >= len(self.files):  # type: ignore[arg-type]
                    raise BundleError("more bytes than the bundle's files hold")
                name, size = self.files[self._index]  # type: ignore[index]
                self._left = 0 if name in self.held else size
            take = min(self._left, len(view))
            pieces.append((self._index, bytes(view[:take])))
            view = view[take:]
            self._left -= take
        return pieces

    def _read_header(self) -> bool:
        """Read the header from `_head` once enough has come; leaves `_head` holding what
        follows it. False: more bytes needed."""
        head = self._head
        if len(head) < len(MAGIC) and len(head) < self.total \
                and MAGIC.startswith(bytes(head)):
            return False
        if not head.startswith(MAGIC):  # one file, as it is
            self._start([(None, self.total)])
            return True
        start = len(MAGIC) + _LENGTH.size
        if len(head) < start:
            return False
        (length,) = _LENGTH.unpack_from(head, len(MAGIC))
        if length > MAX_HEADER:
            raise BundleError(f"a bundle header of {length} bytes (at most {MAX_HEADER})")
        if len(head) < start + length:
            return False
        files, held = _decode_files(bytes(head[start:start + length]))
        if start + length + sum(size for name, size in files if name not in held) \
                != self.total:
            raise BundleError("the bundle's files do not add up to its size")
        del head[:start + length]
        named: list[tuple[str | None, int]] = [*files]
        self.held = held
        self._start(named)
        return True

    def _start(self, files: list[tuple[str | None, int]]) -> None:
        self.files = files
        self._index, self._left = 0, files[0][1]


def _decode_files(body: bytes) -> tuple[list[tuple[str, int]], frozenset[str]]:
    try:
        items = msgpack.unpackb(body)
    except (ValueError, msgpack.UnpackException) as err:
        raise BundleError(f"an undecodable bundle header ({err})") from None
    if not isinstance(items, list) or not items:
        raise BundleError("a bundle header that names no file")
    files: list[tuple[str, int]] = []
    held = set()
    for item in items:
        if not (isinstance(item, list) and len(item) in (2, 3) and isinstance(item[0], str)
                and isinstance(item[1], int) and item[1] >= 0 and is_snapshot_file(item[0])
                and not item[0].endswith(".tmp")
                and (len(item) == 2 or isinstance(item[2], bool))):
            raise BundleError(f"a bundle header with a bad file entry {item!r}"[:200])
        files.append((item[0], item[1]))
        if len(item) == 3 and item[2]:
            held.add(item[0])
    if not files[0][0].startswith("snapshot-") or len({n for n, _s in files}) != len(files) \
            or files[0][0] in held:
        raise BundleError("a bundle must start with the snapshot's own file, each file once")
    return files, frozenset(held)


__all__ = ["MAGIC", "MAX_HEADER", "BundleError", "Splitter", "bundle_size", "encode_header"]
