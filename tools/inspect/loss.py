"""What a damaged span of a segment held: the records, by LSN, that cutting it removes.

Owns the accounting `aof verify` reports for each damaged span and `aof fix` reports for what
it drops, so that neither says "nothing lost" when records were there. Three sources, best
first: the LSN of the next valid record after the span (damage followed by valid records: the
count is exact); the next segment's first LSN (a segment that is not the last: exact); for the
end of the last segment, the bytes themselves (frames walked by their length fields, each one's
LSN read from what is left of its payload, a record cut short counted as one) together with the
synced watermark (aof.watermark: every record up to its LSN was fsynced, so was there, whatever
the bytes left say). When the bytes cannot be read as frames, or the file ends before what was
fsynced, or no watermark says what was, the count is a lower bound and `unknown` says why.
Pure functions over bytes. Must not touch: files, the record format (aof.codec decides what a
valid record is; only a frame's length field and its payload's first items are read here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkeep.aof.watermark import Synced


@dataclass(frozen=True, slots=True)
class Loss:
    """Records a cut removes: LSN `first_lsn` to `last_lsn` (`count` of them; `last_lsn` None
    when none is known), exactly these when `exact`, else at least these (`unknown`: why more
    cannot be ruled out). `how` says how the count is known; `torn`: the bytes end inside a
    record (written only in part, or cut)."""

    first_lsn: int
    last_lsn: int | None
    count: int
    exact: bool
    how: str
    unknown: str = ""
    torn: bool = False

    def lsns(self) -> str:
        if self.last_lsn is None:
            return ""
        if self.last_lsn == self.first_lsn:
            return str(self.first_lsn)
        return f"{self.first_lsn}..{self.last_lsn}"

    def describe(self, verb: str = "lost") -> str:
        """`3 record(s) lost (LSN 306..308)`, `at least 1 record(s) lost (LSN 306; why)`,
        `no record lost`, `an unknown number of records lost (from LSN 306; why)`."""
        if self.exact:
            if not self.count:
                return f"no record {verb}"
            return f"{self.count} record(s) {verb} (LSN {self.lsns()})"
        if not self.count:
            return f"an unknown number of records {verb} (from LSN {self.first_lsn}; " \
                   f"{self.unknown})"
        return f"at least {self.count} record(s) {verb} (LSN {self.lsns()}; {self.unknown})"

    def to_json(self) -> dict[str, Any]:
        return {"first_lsn": self.first_lsn, "last_lsn": self.last_lsn, "count": self.count,
                "exact": self.exact, "how": self.how, "unknown": self.unknown or None,
                "torn": self.torn}


def loss(first_lsn: int, count: int, how: str, unknown: str = "", torn: bool = False) -> Loss:
    """`count` records from `first_lsn`: exact unless `unknown` says why not."""
    count = max(count, 0)
    return Loss(first_lsn, first_lsn + count - 1 if count else None, count, not unknown, how,
                unknown, torn)


def before_resume(first_lsn: int, resume_offset: int, resume_lsn: int) -> Loss:
    """Damage followed by a valid record (at `resume_offset`, LSN `resume_lsn`): every LSN in
    between was in the span."""
    return loss(first_lsn, resume_lsn - first_lsn,
                f"the next valid record (LSN {resume_lsn}, at byte {resume_offset})")


def total(losses: list[Loss]) -> tuple[int, bool]:
    """How many records the losses add up to, and whether exactly (else at least)."""
    return sum(lost.count for lost in losses), all(lost.exact for lost in losses)


def describe_total(count: int, exact: bool, verb: str = "lost") -> str:
    return f"{'' if exact else 'at least '}{count} record(s) {verb}"


def tail(dropped: bytes, start: int, first_lsn: int, synced: Synced | None,
         next_first_lsn: int | None = None) -> Loss:
    """What the bytes `dropped` (a segment's bytes from offset `start` to its end, where the
    record of LSN `first_lsn` should start, and after which nothing valid follows) held.
    `next_first_lsn`: the next segment's first LSN (this is not the last segment). `synced`
    (the last segment): what the synced watermark says of it (None: nothing)."""
    end = start + len(dropped)
    if next_first_lsn is not None:
        return loss(first_lsn, next_first_lsn - first_lsn,
                    f"the next segment's first LSN ({next_first_lsn})")
    frames, stopped, torn = walk(dropped, 0, first_lsn)
    last = first_lsn + frames - 1  # the last LSN the bytes vouch for
    how = "the record frames in the bytes"
    unknown = ""
    synced_offset = synced.offset if synced is not None else None
    if synced is not None and synced_offset is not None and synced_offset > start \
            and synced.lsn >= first_lsn:
        how = f"the synced watermark (fsynced up to byte {synced_offset}, LSN {synced.lsn})"
        if synced_offset > end:
            last = max(last, synced.lsn)
            unknown = (f"the file ends at byte {end}, before the {synced_offset} bytes that "
                       f"were fsynced: records after LSN {synced.lsn}, if any were written, "
                       f"are gone and cannot be counted")
        elif stopped is not None and stopped < synced_offset - start:
            # The bytes cannot be read as frames up to the watermark's offset, a record
            # boundary: from it, the records after the fsynced ones.
            after, stopped, torn = walk(dropped, synced_offset - start, synced.lsn + 1)
            last = synced.lsn + after
        else:
            last = max(last, synced.lsn)
            how += " and the record frames in the bytes"
    elif synced is None or synced_offset is None:
        unknown = (f"{synced.why if synced is not None else 'no synced watermark'}: "
                   f"records past the end of the file cannot be ruled out")
    if stopped is not None and not unknown:
        unknown = (f"the bytes from offset {start + stopped} on are not record frames: how "
                   f"many records they held cannot be told")
    return loss(first_lsn, last - first_lsn + 1, how, unknown, torn)


def walk(data: bytes, pos: int, first_lsn: int) -> tuple[int, int | None, bool]:
    """Frames from `pos` to the end of `data`, by their length fields: (how many, the offset
    where the bytes stop being frames or None if they are frames to the end, whether the last
    one is cut short). A frame counts when its payload's LSN is the next one (or too little of
    the payload is left to say); a zero length with only zeros after it ends the frames (zeros
    are not a record); anything else stops the walk there. (aof.codec's `frames_in_tail`,
    which recovery's warning uses, trusts every length field; a count called exact here
    vouches for each frame by its LSN.)"""
    from streamkeep.aof.codec import FRAME, FRAME_SIZE, MAX_PAYLOAD

    count, size = 0, len(data)
    while pos < size:
        if size - pos < FRAME_SIZE:  # a frame header cut short, unless zeros
            return (count + 1, None, True) if any(data[pos:]) else (count, None, False)
        length = FRAME.unpack_from(data, pos)[0]
        if length == 0 and not any(data[pos:]):
            return count, None, False
        if not 0 < length <= MAX_PAYLOAD:
            return count, pos, False
        body, end = pos + FRAME_SIZE, pos + FRAME_SIZE + length
        lsn = _payload_lsn(data[body:min(end, body + _HEAD)])
        if lsn is _NOT_A_RECORD or (lsn is not _TOO_SHORT and lsn != first_lsn + count):
            return count, pos, False
        count += 1
        if end >= size:
            return count, None, end > size
        pos = end
    return count, None, False


_HEAD = 16  # a payload's first bytes: the array header and the LSN fit in 10
_NOT_A_RECORD = object()
_TOO_SHORT = object()


def _payload_lsn(head: bytes) -> object:
    """The LSN a record payload's first bytes hold (`[lsn, time_ms, db, effects]` in msgpack),
    _TOO_SHORT if they end first, _NOT_A_RECORD if they are not a record's."""
    import msgpack

    unpacker = msgpack.Unpacker(raw=True)
    unpacker.feed(head)
    try:
        if unpacker.read_array_header() != 4:
            return _NOT_A_RECORD
        lsn = unpacker.unpack()
    except msgpack.OutOfData:
        return _TOO_SHORT
    except (ValueError, msgpack.UnpackException):
        return _NOT_A_RECORD
    return lsn if type(lsn) is int and lsn >= 0 else _NOT_A_RECORD
