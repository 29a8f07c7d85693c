"""LCS's table and walk: the facade that picks the compiled kernel (`_lcs_c.pyx`) or its
pure-Python reference (`_lcs_py.py`). See `engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._lcs_c import lcs
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._lcs_py import lcs
else:
    kernel_switches.loaded(__name__, True)

CELL_BYTES: Final = 4  # a table cell: Redis's uint32_t


def table_bytes(a_len: int, b_len: int) -> int:
    """The memory the table of two strings of these lengths takes (Redis bounds it by
    proto-max-bulk-len)."""
    return (a_len + 1) * (b_len + 1) * CELL_BYTES


__all__ = ["CELL_BYTES", "lcs", "table_bytes"]
