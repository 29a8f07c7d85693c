"""An embedded caller's command arguments as bytes, pure Python: the reference of
`_argv_c.pyx` (both are tested on the same inputs).

Owns the common conversion only: every argument a `str` (UTF-8, as `str.encode` writes it),
`bytes` (kept as it is) or `int` (its decimal digits: a score, a count, an ID's time). Anything
else is the caller's slower, general conversion (floats, bytearrays, the errors for what is not
an argument; a bool is refused there). Must not touch: anything else.
"""

from __future__ import annotations

from collections.abc import Sequence


def encode_args(args: Sequence[object]) -> tuple[bytes, ...] | None:
    """`args` as a tuple of bytes when each is a str, bytes or int (exactly those types),
    else None. A str that UTF-8 cannot encode (a lone surrogate) raises UnicodeEncodeError."""
    out: list[bytes] = []
    for arg in args:
        kind = type(arg)
        if kind is str:
            out.append(arg.encode())  # type: ignore[attr-defined]
        elif kind is bytes:
            out.append(arg)  # type: ignore[arg-type]
        elif kind is int:
            out.append(b"%d" % arg)  # type: ignore[str-format]
        else:
            return None
    return tuple(out)
