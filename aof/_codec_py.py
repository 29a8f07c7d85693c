"""AOF record framing, the pure-Python reference of `aof.codec` (compiled twin: `_codec_c.pyx`;
both are tested on the same inputs, damaged and hostile ones included).

Owns the record format (`codec`'s docstring documents it: an 8-byte frame of payload length
and CRC-32C, then the msgpack payload `[lsn, time_ms, db, effects]`), the CRC-32C, and the
functions over records that the write path, replay, verification and replication run per
record: encoding (`encode`, `encode_small`, `encode_parts`, `has_big_arg`), scanning a segment and classifying
what stops it (`scan`, `scan_batches`, `verify_scan`, `next_valid_record`, `frames_in_tail`),
and decoding a replication stream (`decode_stream`, `frame_offsets`). The result types
(`ScanResult`, `Damage`, `VerifyResult`, `StreamChunk`) live here so that both twins build the
same objects. The hand-inlined loops below are the reference's own speed (replay, verify and a
replica run them when the compiled core is not built); the compiled twin must reach exactly
their results.

Must not touch: the segment header (aof.codec), files (aof.fs), the manifest, the engine.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import crcmod.predefined
import msgpack

from streamkeep.engine.model.effects import Record
from streamkeep.engine.wire.errors import StorageError

FRAME = struct.Struct("<II")
FRAME_SIZE = FRAME.size  # 8
MAX_PAYLOAD = 1 << 30  # a larger length field is damage, not a record
RESYNC_SCAN_LIMIT = 64 << 20  # how far past damage we look for valid records

_crc32c = crcmod.predefined.mkCrcFun("crc-32c")
# crcmod wraps its C function in a Python closure; the hot loops call the C function itself:
# crc32c(data) == crc32c_raw(data, 0xFFFFFFFF, CRC_TABLE) ^ 0xFFFFFFFF.
_CRC_INIT, CRC_TABLE, crc32c_raw = _crc32c.__defaults__  # type: ignore[attr-defined,misc]
assert _CRC_INIT == 0 and crc32c_raw(b"123456789", 0xFFFFFFFF, CRC_TABLE) ^ 0xFFFFFFFF == (
    0xE3069283
), "crcmod's C extension is not in use"
packb = msgpack.Packer(use_bin_type=True).pack
_unpackb = msgpack.unpackb


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) of `data`, continuing from `crc` (the CRC of the bytes before it):
    crcmod's "crc-32c" function, called without its closure."""
    return crc32c_raw(data, crc ^ 0xFFFFFFFF, CRC_TABLE) ^ 0xFFFFFFFF  # type: ignore[no-any-return]


class FormatError(StorageError):
    """A segment or manifest that is not what streamkeep wrote."""


def encode(lsn: int, time_ms: int, db: int, effects: list | tuple) -> bytes:
    """One framed record (the write path calls this directly, without a Record object)."""
    payload = packb([lsn, time_ms, db, effects])
    return FRAME.pack(len(payload), crc32c_raw(payload, 0xFFFFFFFF, CRC_TABLE) ^ 0xFFFFFFFF
                      ) + payload


# An argument this long makes a record "big": `encode_parts` frames it without copying it.
BIG_ARG = 1 << 20


def has_big_arg(effects: list | tuple) -> bool:
    """Does an effect carry an argument of BIG_ARG bytes or more? (the write path's test)"""
    for effect in effects:  # noqa: SIM110 (a loop, not any(<generator>): runs per record)
        if effect and max(map(len, effect)) >= BIG_ARG:
            return True
    return False


def encode_small(lsn: int, time_ms: int, db: int, effects: list | tuple) -> bytes | None:
    """The write path's one call: `encode()`'s record, or None when an argument is BIG_ARG
    bytes or more (`has_big_arg`: the record is written as `encode_parts` frames it)."""
    return None if has_big_arg(effects) else encode(lsn, time_ms, db, effects)


def encode_parts(lsn: int, time_ms: int, db: int, effects: list | tuple) -> list[bytes]:
    """`encode()`'s record as parts whose concatenation is byte-identical to it: the frame
    header, then the payload with every argument of BIG_ARG bytes or more as its own part (the
    caller's bytes object itself, not a copy). msgpack is a concatenation of its items, so the
    arrays' headers and the small items are packed here and the big ones only get their bin 32
    header (what msgpack writes for 64 KiB or more). The CRC runs over the parts in order."""
    parts: list[bytes] = []
    small = bytearray(_array_header(4))
    small += packb(lsn)
    small += packb(time_ms)
    small += packb(db)
    small += _array_header(len(effects))
    for effect in effects:
        small += _array_header(len(effect))
        for arg in effect:
            if type(arg) is bytes and len(arg) >= BIG_ARG:
                small += b"\xc6" + len(arg).to_bytes(4, "big")
                parts.append(bytes(small))
                small.clear()
                parts.append(arg)
            else:
                small += packb(arg)
    if small:
        parts.append(bytes(small))
    crc = 0xFFFFFFFF
    for part in parts:
        crc = crc32c_raw(part, crc, CRC_TABLE)
    return [FRAME.pack(sum(map(len, parts)), crc ^ 0xFFFFFFFF), *parts]


def _array_header(n: int) -> bytes:
    """msgpack's array header: fixarray, array 16 or array 32."""
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def decode_payload(payload: bytes) -> Record:
    lsn, time_ms, db, effects = _unpackb(payload, raw=True, use_list=False)
    if not (isinstance(lsn, int) and isinstance(time_ms, int) and isinstance(db, int)):
        raise ValueError("record fields have wrong types")
    return Record(lsn, time_ms, db, effects)


@dataclass(slots=True)
class Damage:
    offset: int  # where the first bad record starts
    reason: str
    valid_after: bool  # valid data at or after offset: damage to refuse, not a torn tail


@dataclass(slots=True)
class ScanResult:
    records: list[tuple] = field(default_factory=list)  # (lsn, time_ms, db, effects); scan()
    end: int = 0  # offset just past the last good record
    damage: Damage | None = None
    count: int = 0  # good records decoded


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


# msgpack type bytes a record's payload can start with: [lsn, time_ms, db, effects].
_FIXARRAY_4 = 0x94
_UINT_WIDTHS = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}


def _read_uint(data: bytes, pos: int) -> tuple[int, int] | None:
    """(value, next position) of a non-negative msgpack integer at pos, or None."""
    if pos >= len(data):
        return None
    tag = data[pos]
    if tag < 0x80:
        return tag, pos + 1
    width = _UINT_WIDTHS.get(tag)
    if width is None or pos + 1 + width > len(data):
        return None
    return int.from_bytes(data[pos + 1: pos + 1 + width], "big"), pos + 1 + width


def _plausible_record(data: bytes, pos: int, min_lsn: int) -> bool:
    """Could a record of ours start at pos? Checks the frame length and the payload's msgpack
    prefix (array of 4, LSN >= min_lsn, time, db < 16, effects array) before any CRC is
    computed. Random bytes pass with a probability of about 1e-6, which is what keeps the
    resync search linear: without it, every position whose length field happens to fit in the
    file costs a CRC over up to the whole tail, and a garbage tail takes quadratic time."""
    length, _crc = FRAME.unpack_from(data, pos)
    body = pos + FRAME_SIZE
    if not 5 <= length <= len(data) - body or data[body] != _FIXARRAY_4:
        return False
    lsn = _read_uint(data, body + 1)
    if lsn is None or lsn[0] < min_lsn:
        return False
    time_ms = _read_uint(data, lsn[1])
    if time_ms is None or time_ms[1] >= len(data):
        return False
    db_pos = time_ms[1]
    if data[db_pos] >= 16 or db_pos + 1 >= len(data):
        return False
    effects_tag = data[db_pos + 1]
    return 0x90 <= effects_tag <= 0x9F or effects_tag in (0xDC, 0xDD)


def _valid_record_after(data: bytes, start: int, min_lsn: int) -> bool:
    """Is there a CRC-valid, decodable record with LSN >= min_lsn after `start`?

    Every record later than a damaged one carries a larger LSN, so min_lsn is the LSN the damaged
    record should have had. Candidates are found by searching (in C) for the payload's first
    byte, then filtered structurally; only survivors pay for a CRC (`next_valid_record`)."""
    return next_valid_record(data, start, min_lsn) is not None


SCAN_BATCH = 64  # records per list scan_batches yields


def scan(data: bytes, start: int, first_lsn: int) -> ScanResult:
    """Decode consecutive records from `start`; stop at the first bad one and classify it."""
    result = ScanResult(end=start)
    for batch in scan_batches(data, start, first_lsn, result):
        result.records += batch
    return result


def scan_batches(data: bytes, start: int, first_lsn: int, result: ScanResult,
                 batch_size: int = SCAN_BATCH) -> Iterator[list[tuple]]:
    """`scan` as a stream: yields the good records from `start` in lists of up to batch_size
    `(lsn, time_ms, db, effects)` tuples, each CRC-checked and decoded as it is reached, so a
    replay applies them while decoding (the decoded records of a 64 MiB segment are never all
    in memory at once). When it is exhausted, `result` says where the good records end
    (`end`), how many there were (`count`) and what stopped the scan (`damage`, None at the
    end of the data): the records yielded before damage are exactly those `scan` returns."""
    pos, expected = start, first_lsn
    size = len(data)
    unpack_frame = FRAME.unpack_from
    crc_raw, table = crc32c_raw, CRC_TABLE
    unpackb = _unpackb
    batch: list[tuple] = []
    append = batch.append
    room = batch_size
    damage = None
    while pos < size:
        # Fast path: a whole frame whose CRC matches. This loop is the replay's hot path, so the
        # CRC and decoding are called directly and records are built without a helper call.
        body = pos + FRAME_SIZE
        if body <= size:
            length, crc = unpack_frame(data, pos)
            body_end = body + length
            if 0 < length <= MAX_PAYLOAD and body_end <= size:
                payload = data[body:body_end]
                if crc_raw(payload, 0xFFFFFFFF, table) == crc ^ 0xFFFFFFFF:
                    try:
                        record = unpackb(payload, raw=True, use_list=False)
                        lsn, time_ms, db, _effects = record
                    except (ValueError, TypeError, msgpack.UnpackException):
                        reason = "undecodable record payload"
                    else:
                        if lsn == expected and type(time_ms) is int and type(db) is int \
                                and 0 <= db < 16:
                            # (lsn, time_ms, db, effects): Record's field order, kept as is
                            append(record)
                            expected += 1
                            pos = body_end
                            room -= 1
                            if not room:
                                result.end, result.count = pos, expected - first_lsn
                                yield batch
                                batch = []
                                append = batch.append
                                room = batch_size
                            continue
                        reason = f"record LSN {lsn} where {expected} was expected"
                    # The CRC matched, so these bytes were written whole: whatever they are,
                    # they are not a torn tail, and truncating them could drop synced data.
                    damage = Damage(pos, reason, True)
                    break
        _length, frame_reason = _frame_at(data, pos)
        damage = Damage(pos, frame_reason or "bad record",
                        _valid_record_after(data, pos, expected))
        break
    result.end, result.count, result.damage = pos, expected - first_lsn, damage
    if batch:
        yield batch


# --- verification: frames and LSNs only ----------------------------------------------------------

# msgpack's unsigned integer encodings of an LSN after the payload's fixarray byte (tag -> struct)
_LSN_FIELD = {0xCC: struct.Struct(">B"), 0xCD: struct.Struct(">H"), 0xCE: struct.Struct(">I"),
              0xCF: struct.Struct(">Q")}
# A payload's first 6 bytes, when its LSN is a uint 32 (2**16 up to 2**32, the common case):
# fixarray 4 and the uint 32 tag (one 16-bit marker), then the LSN.
_PAYLOAD_HEAD = struct.Struct(">HI")
_FIXARRAY_4_U32 = 0x94CE
assert FRAME_SIZE == 8 and _FIXARRAY_4_U32 == _FIXARRAY_4 << 8 | 0xCE
# The shortest payload: fixarray, a fixint LSN, a uint64 time, a fixint db, an empty array.
_MIN_PAYLOAD = 1 + 1 + 9 + 1 + 1
assert _MIN_PAYLOAD == 13


def _lsn_field(data: bytes, body: int) -> int | None:
    """The LSN of the payload at `body` (any uint encoding); None: not a record's payload."""
    if data[body] != _FIXARRAY_4:
        return None
    tag = data[body + 1]
    if tag < 0x80:
        return tag
    field_struct = _LSN_FIELD.get(tag)
    if field_struct is None:
        return None
    return int(field_struct.unpack_from(data, body + 2)[0])


@dataclass(slots=True)
class VerifyResult:
    """What `verify_scan` found: the good records' count and where they end, the time_ms of the
    first and last good record (None: no record), and the damage that stopped it (as `scan`
    would classify it; None: the end of the data)."""

    end: int
    count: int = 0
    first_time_ms: int | None = None
    last_time_ms: int | None = None
    damage: Damage | None = None


def record_time(data: bytes, pos: int) -> int:
    """time_ms of the (already checked) record framed at pos."""
    length, _crc = FRAME.unpack_from(data, pos)
    return int(decode_payload(data[pos + FRAME_SIZE: pos + FRAME_SIZE + length]).time_ms)


# The fast path reads a frame and its payload's first 6 bytes in one little-endian unpack: the
# fixarray-4 + uint 32 marker reads as 0xCE94, and the big-endian LSN as its byte swap, which
# `_swapped_lsns` precomputes for a batch of expected LSNs (one C call instead of one per record).
_FRAME_AND_HEAD = struct.Struct("<IIHI")
_FAST_BATCH = 4096


def _swapped_lsns(first: int, count: int) -> tuple[int, ...]:
    """LSNs first, first + 1, ... as _FRAME_AND_HEAD reads them from a payload."""
    return struct.unpack(f"<{count}I", struct.pack(f">{count}I", *range(first, first + count)))


def _fast_run(data: bytes, pos: int, limit: int, expected: int, last: int
              ) -> tuple[int, int, int]:
    """Checks the records at pos whose LSN is a uint 32 (2**16 up to 2**32: all but a log's
    first 65535) while a frame header and payload head fit below `limit`; returns (pos,
    expected, last) before the first frame it cannot vouch for, which `_any_run` then judges."""
    size = len(data)
    unpack = _FRAME_AND_HEAD.unpack_from
    crc_raw, table = crc32c_raw, CRC_TABLE
    while True:
        count = min(_FAST_BATCH, 0x1_0000_0000 - expected)
        if count <= 0:
            return pos, expected, last
        batch = _swapped_lsns(expected, count)
        # Literals, not the module's names, in this loop: a global lookup per record costs ~10%.
        # 14: FRAME_SIZE + the payload head; 13: _MIN_PAYLOAD; 0xCE94: the marker (above).
        for want in batch:
            if pos + 14 > limit:
                return pos, expected + batch.index(want), last
            length, crc, marker, lsn = unpack(data, pos)
            body_end = pos + 8 + length
            if (lsn != want or marker != 0xCE94 or length < 13 or body_end > size
                    or crc_raw(data[pos + 8:body_end], 0xFFFFFFFF, table) != crc ^ 0xFFFFFFFF):
                return pos, expected + batch.index(want), last
            last = pos
            pos = body_end
        expected += count


def _any_run(data: bytes, pos: int, limit: int, expected: int, last: int
             ) -> tuple[int, int, int]:
    """Checks records of any LSN width from pos while a frame header fits below `limit`, until
    one is refused or (after the first) one has a uint 32 LSN, for `_fast_run`."""
    size = len(data)
    unpack_frame = FRAME.unpack_from
    unpack_head = _PAYLOAD_HEAD.unpack_from
    first = pos
    while pos + 8 <= limit:
        length, crc = unpack_frame(data, pos)
        body = pos + 8
        body_end = body + length
        if length < _MIN_PAYLOAD or body_end > size:
            break
        marker, lsn = unpack_head(data, body)
        if marker == _FIXARRAY_4_U32:
            if pos != first:
                break
        elif marker == 0x94CD:  # uint 16: the u32 read holds it and a byte of the time
            lsn >>= 16
        elif 0x9400 <= marker < 0x9480:  # positive fixint
            lsn = marker & 0x7F
        else:
            lsn = _lsn_field(data, body)
        if lsn != expected or crc32c_raw(data[body:body_end], 0xFFFFFFFF,
                                         CRC_TABLE) != crc ^ 0xFFFFFFFF:
            break
        last = pos
        expected += 1
        pos = body_end
    return pos, expected, last


def verify_scan(data: bytes, start: int, first_lsn: int, stop: int | None = None
                ) -> VerifyResult:
    """`scan` for verification: checks every frame's CRC-32C and that each payload starts with
    the expected LSN, without decoding the rest of the payload (what makes it several times
    faster than a replay's scan). At the first frame this fast path refuses, the rest is handed
    to `scan_batches`, so the verdict (where the good records end, torn tail or damage followed
    by valid records) is exactly the one recovery reaches.

    With `stop`, only the records starting before `stop` are checked (a part of a segment that
    parallel workers share): the scan ends at the first frame boundary at or after it, and a
    refused frame before it is reported as damage without the slow path's verdict."""
    size = len(data)
    # Each run goes on while pos + 8 (or + 14) <= its limit: while a frame header (and payload
    # head) fits, and, with `stop`, while pos < stop.
    limit = size if stop is None else min(size, stop + 7)
    fast_limit = size if stop is None else min(size, stop + 13)
    pos, expected, last = start, first_lsn, -1
    while True:
        pos, expected, last = _fast_run(data, pos, fast_limit, expected, last)
        before = expected
        pos, expected, last = _any_run(data, pos, limit, expected, last)
        if expected == before:
            break
    result = VerifyResult(end=pos, count=expected - first_lsn)
    if stop is not None:  # a part: the caller joins the parts (or rescans on damage)
        if pos < stop:
            result.damage = Damage(pos, "refused by the fast path", True)
        if result.count:
            result.first_time_ms = record_time(data, start)
            result.last_time_ms = record_time(data, last)
        return result
    if pos < size:  # the slow path decides what stopped the fast one
        tail = ScanResult(end=pos)
        for batch in scan_batches(data, pos, expected, tail, 4096):
            expected += len(batch)
            result.last_time_ms = batch[-1][1]
        result.end, result.damage = tail.end, tail.damage
        result.count = expected - first_lsn
    if result.count:
        result.first_time_ms = record_time(data, start)
        if result.last_time_ms is None:
            result.last_time_ms = record_time(data, last)
    return result


def next_valid_record(data: bytes, start: int, min_lsn: int) -> tuple[int, int] | None:
    """(offset, LSN) of the first CRC-valid, decodable record with LSN >= min_lsn after `start`
    (within RESYNC_SCAN_LIMIT bytes), or None: where the valid records resume after damage."""
    stop = min(len(data) - FRAME_SIZE - 1, start + RESYNC_SCAN_LIMIT)
    find = data.find
    marker = bytes([_FIXARRAY_4])
    hit = find(marker, start + 1 + FRAME_SIZE)
    while hit >= 0 and hit - FRAME_SIZE <= stop:
        pos = hit - FRAME_SIZE
        hit = find(marker, hit + 1)
        if not _plausible_record(data, pos, min_lsn):
            continue
        length, _reason = _frame_at(data, pos)
        if length:
            try:
                record = decode_payload(data[pos + FRAME_SIZE: pos + FRAME_SIZE + length])
            except (ValueError, TypeError, msgpack.UnpackException):
                continue
            return pos, record.lsn
    return None


def frames_in_tail(data: bytes, start: int) -> int:
    """How many records a torn tail from `start` held, as far as their length fields tell: each
    frame header that starts before the end counts (the last one may be cut short); a zero or
    impossible length ends the count (zeros are not a record)."""
    pos, count, size = start, 0, len(data)
    while pos + FRAME_SIZE <= size:
        length = FRAME.unpack_from(data, pos)[0]
        if not 0 < length <= MAX_PAYLOAD:
            break
        count += 1
        pos += FRAME_SIZE + length
    return count + (0 < size - pos < FRAME_SIZE and any(data[pos:]))


# --- the record stream outside a file (replication) ----------------------------------------------

GETACK_FRAME = FRAME.pack(0, 0)  # a zero-length frame: never in a file; on a link, "ACK now"


@dataclass(slots=True)
class StreamChunk:
    """What `decode_stream` found: the whole records from `start` (decoded, in order), where
    they end, and whether a GETACK frame (zero length) stops them there."""

    records: list[tuple]
    end: int
    getack: bool = False


def decode_stream(data: bytes, start: int, first_lsn: int, limit: int = 1 << 62
                  ) -> StreamChunk:
    """Decode consecutive records of a record stream (a replication link) from `start`,
    expecting LSNs from `first_lsn`, at most `limit` records. Unlike `scan`, an incomplete last
    frame is not damage (the rest has not arrived yet): decoding stops before it. A zero-length
    frame stops decoding with `getack` set (its 8 bytes are after `end`). A complete frame whose
    CRC, payload or LSN is wrong ends the records returned before it; if it is the first, it
    raises FormatError: a stream never skips a record."""
    pos, expected = start, first_lsn
    size = len(data)
    records: list[tuple] = []
    append = records.append
    unpack_frame = FRAME.unpack_from
    crc_raw, table, unpackb = crc32c_raw, CRC_TABLE, _unpackb
    while pos + FRAME_SIZE <= size and len(records) < limit:
        length, crc = unpack_frame(data, pos)
        if length == 0:
            return StreamChunk(records, pos, True)
        body = pos + FRAME_SIZE
        end = body + length
        if length <= MAX_PAYLOAD and end > size:
            break
        # The fast path, inlined (a replica's hot loop): a CRC-valid record with the next LSN.
        if length <= MAX_PAYLOAD:
            payload = data[body:end]
            if crc_raw(payload, 0xFFFFFFFF, table) == crc ^ 0xFFFFFFFF:
                try:
                    record = unpackb(payload, raw=True, use_list=False)
                    lsn, time_ms, db, _effects = record
                except (ValueError, TypeError, msgpack.UnpackException):
                    lsn = None
                if lsn == expected and type(time_ms) is int and type(db) is int \
                        and 0 <= db < 16:
                    append(record)
                    expected += 1
                    pos = end
                    continue
        if records:  # the good records first; the next call starts at the bad one
            break
        raise FormatError(f"record LSN {expected}: "
                          f"{_stream_problem(data, body, length, crc, expected)}")
    return StreamChunk(records, pos)


def _stream_problem(data: bytes, body: int, length: int, crc: int, expected: int) -> str:
    """What is wrong with a complete frame the fast path refused."""
    if length > MAX_PAYLOAD:
        return f"length {length} is not a record's"
    payload = data[body:body + length]
    if crc32c_raw(payload, 0xFFFFFFFF, CRC_TABLE) != crc ^ 0xFFFFFFFF:
        return "CRC mismatch"
    try:
        record = _unpackb(payload, raw=True, use_list=False)
        lsn, time_ms, db, _effects = record
    except (ValueError, TypeError, msgpack.UnpackException):
        return "undecodable payload"
    return f"LSN {lsn} where {expected} was expected"


def frame_offsets(data: bytes | bytearray | memoryview, start: int, count: int
                  ) -> tuple[int, int | None]:
    """Walk `count` frames from `start` by their length fields alone (the records were checked
    when written): (offset after them, CRC field of the last one walked, None if count is 0).
    ValueError if the data ends first."""
    pos, crc, size = start, None, len(data)
    unpack_frame = FRAME.unpack_from
    for _ in range(count):
        if pos + FRAME_SIZE > size:
            raise ValueError(f"the data ends at {size}, inside the frames walked")
        length, crc = unpack_frame(data, pos)
        pos += FRAME_SIZE + length
        if length == 0 or pos > size:
            raise ValueError(f"no whole frame at offset {pos - FRAME_SIZE - length}")
    return pos, crc
