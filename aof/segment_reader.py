"""The one record reader: a segment file's records, batch by batch, and where they stop.

Owns reading a segment through the file layer, checking its header against what the caller
expects (the manifest's segment number and first LSN), and scanning its records with the
codec: recovery at open, the snapshot build, and later the inspection CLI and a replica's
catch-up all read segments here. Damage is reported with the file and byte offset, never
raised from the middle of a scan: the caller decides whether a torn tail may be truncated. Zeros
from the last record to the end of the file are not damage but space allocated ahead
(`zero_tail`): the records end there.
Must not touch: the engine (records are yielded, not applied), segment writing (aof.journal).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from streamkeep.aof.codec import (
    HEADER_SIZE,
    FormatError,
    ScanResult,
    SegmentHeader,
    decode_header,
    scan_batches,
    zero_tail_at,
)
from streamkeep.aof.fs import FileSystem


class SegmentError(FormatError):
    """A segment that cannot be read as the caller expects it (bad header, wrong number or
    first LSN); `str(err)` names the file."""


@dataclass(frozen=True, slots=True)
class SegmentDamage:
    """Where and why a segment's records stop before its end."""

    file: str
    offset: int  # byte offset of the first bad record
    reason: str
    valid_after: bool  # valid records follow the damage: not a torn tail

    def __str__(self) -> str:
        return f"{self.file}: {self.reason} at byte offset {self.offset}"


class SegmentReader:
    """The records of one segment file, read and checked once.

    Iterating `batches()` (or `records()`) yields `(lsn, time_ms, db, effects)` tuples, CRC
    checked and decoded as they are reached, so a replay applies them while decoding. Once
    exhausted, `end` is the offset where the good records end, `count` how many there were,
    and `damage` what stopped the scan (None: the end of the file)."""

    def __init__(self, fs: FileSystem, file: str, segment: int | None = None,
                 first_lsn: int | None = None) -> None:
        self.file = file
        self.data = fs.read_file(file)
        try:
            self.header: SegmentHeader = decode_header(self.data)
        except FormatError as err:
            raise SegmentError(f"{file}: {err}") from None
        if (segment is not None and self.header.segment != segment) or (
                first_lsn is not None and self.header.first_lsn != first_lsn):
            raise SegmentError(
                f"{file}: header says segment {self.header.segment} first LSN "
                f"{self.header.first_lsn}, the manifest says segment {segment} first LSN "
                f"{first_lsn}")
        self._scan = ScanResult(end=HEADER_SIZE)
        self._zero_tail: int | None = None  # (zero_tail, once the scan stopped at damage)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def first_lsn(self) -> int:
        return self.header.first_lsn

    def batches(self) -> Iterator[list[tuple]]:
        return scan_batches(self.data, HEADER_SIZE, self.header.first_lsn, self._scan)

    def records(self) -> Iterator[tuple]:
        return chain.from_iterable(self.batches())

    @property
    def end(self) -> int:
        return self._scan.end

    @property
    def count(self) -> int:
        return self._scan.count

    @property
    def damage(self) -> SegmentDamage | None:
        damage = self._scan.damage
        if damage is None or self.zero_tail:
            return None
        return SegmentDamage(self.file, damage.offset, damage.reason, damage.valid_after)

    @property
    def zero_tail(self) -> int:
        """Bytes of zeros after the last record, to the end of the file (0: none): space a
        writer allocated ahead and had not written yet (a mapped tail, aof.fs.MappedTail), or
        an extension a power loss left unwritten. Not damage: nothing was ever written there.
        Once the scan is exhausted (found once: the tail may be megabytes)."""
        damage = self._scan.damage
        if damage is None:
            return 0
        if self._zero_tail is None:
            self._zero_tail = zero_tail_at(self.data, damage.offset)
        return self._zero_tail
