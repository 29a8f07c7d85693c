"""Stream ID formatting and the common `ms-seq` parse, the pure-Python reference of
`engine.model.ids`'s kernel (compiled twin: `_ids_c.pyx`; both are tested on the same inputs).

An ID is a Python int `ms << 64 | seq`.

Must not touch: anything but IDs (the full parsing rules, with Redis's errors, stay in
engine.model.ids).
"""

from __future__ import annotations

from collections.abc import Sequence

_SEQ_MASK = (1 << 64) - 1


def format_id(sid: int) -> bytes:
    """`ms-seq` in decimal, as Redis replies with IDs."""
    return b"%d-%d" % (sid >> 64, sid & _SEQ_MASK)


def format_ids(ids: list[int]) -> list[bytes]:
    """format_id of each (a node's IDs when it is loaded from a snapshot)."""
    return [format_id(sid) for sid in ids]


def next_auto_id(last: int, now: int) -> int:
    """The ID `*` gives after the stream's last ID `last` at `now` (ms): `now-0` once the
    clock is past the last ID's time, else the last ID's successor, `ms+1-0` when its
    sequence is full. The caller has refused a stream at the greatest ID (MAX_ID)."""
    last_ms = last >> 64
    if now > last_ms:
        return now << 64
    if last & _SEQ_MASK == _SEQ_MASK:
        return (last_ms + 1) << 64
    return last + 1


def split_ids(sids: list[int]) -> tuple[list[int], list[int]]:
    """The IDs' ms and seq parts as two lists (the columns packed PEL tables keep)."""
    return [sid >> 64 for sid in sids], [sid & _SEQ_MASK for sid in sids]


def plain_id(arg: bytes) -> int | None:
    """`digits-digits` with at most 19 ASCII digits on each side as an ID, else None (then the
    full parse decides). Leading zeros are allowed, as Redis's strtoull fallback reads them."""
    ms, dash, seq = arg.partition(b"-")
    if dash and ms.isdigit() and seq.isdigit() and len(ms) < 20 and len(seq) < 20:
        return (int(ms) << 64) | int(seq)
    return None


def plain_ids(args: Sequence[bytes], start: int) -> tuple[list[int], list[int], bool] | None:
    """plain_id of each of args[start:] as ms and seq lists, and whether they are tidy: strictly
    ascending and each written as format_id writes it (no leading zero), so the arguments
    themselves can stand for the IDs in an effect. None when one is not plain (the full parse
    then decides, errors included)."""
    ms: list[int] = []
    seq: list[int] = []
    tidy = True
    for arg in args[start:]:
        if type(arg) is not bytes:
            return None
        sid = plain_id(arg)
        if sid is None:
            return None
        m, q = sid >> 64, sid & _SEQ_MASK
        if tidy and (arg != b"%d-%d" % (m, q) or (ms and (ms[-1], seq[-1]) >= (m, q))):
            tidy = False
        ms.append(m)
        seq.append(q)
    return ms, seq, tidy
