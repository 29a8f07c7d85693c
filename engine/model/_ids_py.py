"""Stream ID formatting and the common `ms-seq` parse, the pure-Python reference of
`engine.model.ids`'s kernel (compiled twin: `_ids_c.pyx`; both are tested on the same inputs).

An ID is a Python int `ms << 64 | seq`.

Must not touch: anything but IDs (the full parsing rules, with Redis's errors, stay in
engine.model.ids).
"""

from __future__ import annotations

_SEQ_MASK = (1 << 64) - 1


def format_id(sid: int) -> bytes:
    """`ms-seq` in decimal, as Redis replies with IDs."""
    return b"%d-%d" % (sid >> 64, sid & _SEQ_MASK)


def format_ids(ids: list[int]) -> list[bytes]:
    """format_id of each (a node's IDs when it is loaded from a snapshot)."""
    return [format_id(sid) for sid in ids]


def plain_id(arg: bytes) -> int | None:
    """`digits-digits` with at most 19 ASCII digits on each side as an ID, else None (then the
    full parse decides). Leading zeros are allowed, as Redis's strtoull fallback reads them."""
    ms, dash, seq = arg.partition(b"-")
    if dash and ms.isdigit() and seq.isdigit() and len(ms) < 20 and len(seq) < 20:
        return (int(ms) << 64) | int(seq)
    return None
