"""AOF framing: segment headers and records, as pure functions over bytes (sans-IO).

Owns the on-disk format other tools read (documented in docs/src/reference/formats.md):

    segment header (32 bytes, little-endian)
        magic      8 bytes  b"SKAOF\\r\\n\\x1a"
        version    u16      1
        flags      u16      0
        segment    u64      segment number (as the manifest names it)
        first_lsn  u64      LSN of the segment's first record
        crc        u32      CRC-32C of the 28 bytes above
    record
        length     u32      payload length (> 0)
        crc        u32      CRC-32C (Castagnoli) of the payload
        payload    msgpack  [lsn, time_ms, db, [[arg, ...], ...]]   (args are bin)

One record is one command execution's effects: the atomic unit of replay. LSNs are global and
consecutive across segments. `scan` walks a segment's bytes and says where the good records end
and whether what follows is a torn tail (nothing valid after it) or damage followed by valid
records; `scan_batches` yields the same records batch by batch, for replay to apply them while
decoding; `encode_parts` frames a record carrying big values as parts (the same bytes, the values
not copied). Must not touch: files (aof.fs), the manifest, the engine.

The segment header is coded here. The record functions, run per record by the write path,
replay, verification and a replica, are a compiled kernel: `_codec_py.py` is their readable
reference (and owns the record's result types), `_codec_c.pyx` their compiled twin, and this
module takes them from the one that runs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from streamkeep.aof._codec_py import (
    BIG_ARG,
    FRAME,
    FRAME_SIZE,
    GETACK_FRAME,
    MAX_PAYLOAD,
    RESYNC_SCAN_LIMIT,
    SCAN_BATCH,
    Damage,
    FormatError,
    ScanResult,
    StreamChunk,
    VerifyResult,
    decode_payload,
    record_time,
)
from streamkeep.engine.model.effects import Record
from streamkeep.engine.wire import kernel_switches

# The functions run per record (the write path, replay, verification, a replica's stream) come
# from the compiled kernel when it is built, else from the pure-Python reference, which
# documents them and the record format's rules (see `engine.wire.kernel_switches` for the switches).
try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.aof._codec_c import (
        crc32c,
        decode_stream,
        encode,
        encode_parts,
        encode_small,
        frame_offsets,
        frames_in_tail,
        has_big_arg,
        next_valid_record,
        scan,
        scan_batches,
        verify_scan,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.aof._codec_py import (
        crc32c,
        decode_stream,
        encode,
        encode_parts,
        encode_small,
        frame_offsets,
        frames_in_tail,
        has_big_arg,
        next_valid_record,
        scan,
        scan_batches,
        verify_scan,
    )
else:
    kernel_switches.loaded(__name__, True)

MAGIC = b"SKAOF\r\n\x1a"
VERSION = 1
HEADER = struct.Struct("<8sHHQQI")
HEADER_SIZE = HEADER.size  # 32


@dataclass(frozen=True, slots=True)
class SegmentHeader:
    segment: int
    first_lsn: int


def encode_header(segment: int, first_lsn: int) -> bytes:
    body = HEADER.pack(MAGIC, VERSION, 0, segment, first_lsn, 0)[:-4]
    return body + struct.pack("<I", crc32c(body))


def decode_header(data: bytes) -> SegmentHeader:
    if len(data) < HEADER_SIZE:
        raise FormatError(f"segment header is {len(data)} bytes, expected {HEADER_SIZE}")
    magic, version, _flags, segment, first_lsn, crc = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise FormatError("not a streamkeep AOF segment (bad magic)")
    if crc != crc32c(data[: HEADER_SIZE - 4]):
        raise FormatError("segment header CRC mismatch")
    if version != VERSION:
        raise FormatError(f"unsupported AOF format version {version}")
    return SegmentHeader(segment, first_lsn)


def encode_record(record: Record) -> bytes:
    return encode(record.lsn, record.time_ms, record.db, record.effects)


def zero_tail_at(data: bytes | bytearray | memoryview, offset: int) -> int:
    """Bytes of zeros from `offset` (where a scan stopped) to the end of `data` (any buffer: a
    file's bytes or its mapping), or 0 if anything else is there: a segment's tail allocated
    ahead and never written (a record's frame never starts with a zero length word; fewer
    zeros than a frame hold nothing either)."""
    with memoryview(data) as view:
        tail = len(view) - offset
        if tail <= 0:
            return 0
        zeros = bytes(min(tail, 1 << 20))
        for at in range(offset, len(view), len(zeros)):  # (a megabyte compared at a time)
            part = view[at:at + len(zeros)]
            if part != zeros[:len(part)]:
                return 0
    return tail


__all__ = [
    "BIG_ARG", "FRAME", "FRAME_SIZE", "GETACK_FRAME", "HEADER", "HEADER_SIZE",
    "MAGIC", "MAX_PAYLOAD", "RESYNC_SCAN_LIMIT", "SCAN_BATCH", "VERSION", "Damage",
    "FormatError", "ScanResult", "SegmentHeader", "StreamChunk", "VerifyResult", "crc32c",
    "decode_header", "decode_payload", "decode_stream", "encode", "encode_header",
    "encode_parts", "encode_record", "encode_small", "frame_offsets", "frames_in_tail",
    "has_big_arg", "next_valid_record", "record_time", "scan", "scan_batches", "verify_scan",
    "zero_tail_at",
]
