"""AOF framing: segment headers and records, as pure functions over bytes (sans-IO).

Owns the on-disk format other tools read (documented in the README):

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
records. Must not touch: files (aof.fs), the manifest, the engine.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crcmod.predefined
import msgpack

from engine.effects import Record

MAGIC = b"SKAOF\r\n\x1a"
VERSION = 1
HEADER = struct.Struct("<8sHHQQI")
HEADER_SIZE = HEADER.size  # 32
FRAME = struct.Struct("<II")
FRAME_SIZE = FRAME.size  # 8
MAX_PAYLOAD = 1 << 30  # a larger length field is damage, not a record
RESYNC_SCAN_LIMIT = 64 << 20  # how far past damage we look for valid records

crc32c = crcmod.predefined.mkCrcFun("crc-32c")
# crcmod wraps its C function in a Python closure; the hot loops call the C function itself:
# crc32c(data) == _crc32c_raw(data, 0xFFFFFFFF, _CRC_TABLE) ^ 0xFFFFFFFF.
_CRC_INIT, _CRC_TABLE, _crc32c_raw = crc32c.__defaults__  # type: ignore[attr-defined,misc]
assert _CRC_INIT == 0 and _crc32c_raw(b"123456789", 0xFFFFFFFF, _CRC_TABLE) ^ 0xFFFFFFFF == (
    0xE3069283
), "crcmod's C extension is not in use"
_packb = msgpack.Packer(use_bin_type=True).pack
_unpackb = msgpack.unpackb


class FormatError(Exception):
    """A segment or manifest that is not what streamkeep wrote."""


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


def encode(lsn: int, time_ms: int, db: int, effects: list) -> bytes:
    """One framed record (the write path calls this directly, without a Record object)."""
    payload = _packb([lsn, time_ms, db, effects])
    return FRAME.pack(len(payload), _crc32c_raw(payload, 0xFFFFFFFF, _CRC_TABLE) ^ 0xFFFFFFFF
                      ) + payload


def encode_record(record: Record) -> bytes:
    return encode(record.lsn, record.time_ms, record.db, record.effects)


def decode_payload(payload: bytes) -> Record:
    lsn, time_ms, db, effects = _unpackb(payload, raw=True, use_list=False)
    if not (isinstance(lsn, int) and isinstance(time_ms, int) and isinstance(db, int)):
        raise ValueError("record fields have wrong types")
    return Record(time_ms, db, effects, lsn)


@dataclass(slots=True)
class Damage:
    offset: int  # where the first bad record starts
    reason: str
    valid_after: bool  # a valid record exists further on: damage, not a torn tail


@dataclass(slots=True)
class ScanResult:
    records: list[Record] = field(default_factory=list)
    end: int = 0  # offset just past the last good record
    damage: Damage | None = None


def _frame_at(data: bytes, pos: int) -> tuple[int, str | None]:
    """(payload length, None) if a well-formed frame with a matching CRC starts at pos, else
    (0, reason)."""
    if len(data) - pos < FRAME_SIZE:
        return 0, "truncated record header"
    length, crc = FRAME.unpack_from(data, pos)
    if length == 0:
        return 0, "zero-length record"
    if length > MAX_PAYLOAD or pos + FRAME_SIZE + length > len(data):
        return 0, "record runs past the end of the file"
    if crc32c(data[pos + FRAME_SIZE: pos + FRAME_SIZE + length]) != crc:
        return 0, "record CRC mismatch"
    return length, None


def _valid_record_after(data: bytes, start: int) -> bool:
    """Is there any position after `start` where a CRC-valid, decodable record begins?"""
    stop = min(len(data) - FRAME_SIZE, start + RESYNC_SCAN_LIMIT)
    for pos in range(start + 1, stop + 1):
        length, _reason = _frame_at(data, pos)
        if length:
            try:
                decode_payload(data[pos + FRAME_SIZE: pos + FRAME_SIZE + length])
            except (ValueError, TypeError, msgpack.UnpackException):
                continue
            return True
    return False


def scan(data: bytes, start: int, first_lsn: int) -> ScanResult:
    """Decode consecutive records from `start`; stop at the first bad one and classify it."""
    result = ScanResult(end=start)
    records = result.records
    pos, expected = start, first_lsn
    size = len(data)
    unpack_frame = FRAME.unpack_from
    crc_raw, table = _crc32c_raw, _CRC_TABLE
    while pos < size:
        # Fast path: a whole frame whose CRC matches. This loop is the replay's hot path, so the
        # CRC and decoding are called directly and records are built without a helper call.
        if size - pos >= FRAME_SIZE:
            length, crc = unpack_frame(data, pos)
            body_end = pos + FRAME_SIZE + length
            if 0 < length <= MAX_PAYLOAD and body_end <= size:
                payload = data[pos + FRAME_SIZE: body_end]
                if crc_raw(payload, 0xFFFFFFFF, table) ^ 0xFFFFFFFF == crc:
                    try:
                        lsn, time_ms, db, effects = _unpackb(payload, raw=True, use_list=False)
                    except (ValueError, TypeError, msgpack.UnpackException):
                        reason = "undecodable record payload"
                    else:
                        if lsn == expected and type(time_ms) is int and type(db) is int:
                            records.append(Record(time_ms, db, effects, lsn))
                            expected += 1
                            pos = body_end
                            continue
                        reason = f"record LSN {lsn} where {expected} was expected"
                    result.end = pos
                    result.damage = Damage(pos, reason, _valid_record_after(data, pos))
                    return result
        result.end = pos
        _length, reason = _frame_at(data, pos)
        result.damage = Damage(pos, reason or "bad record", _valid_record_after(data, pos))
        return result
    result.end = pos
    return result
