"""The packed columns the small hashes and sets keep (one bytes object: a width byte, the
count, the columns of lengths, then the strings): the facade that picks the compiled kernel
(`_packed_columns_c.pyx`) or its pure-Python reference (`_packed_columns_py.py`, which
describes the pack). See `engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._packed_columns_c import (
        pack_add,
        pack_count,
        pack_delete,
        pack_get,
        pack_index,
        pack_item,
        pack_offset,
        pack_put,
        pack_split,
        pack_strings,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._packed_columns_py import (
        pack_add,
        pack_count,
        pack_delete,
        pack_get,
        pack_index,
        pack_item,
        pack_offset,
        pack_put,
        pack_split,
        pack_strings,
    )
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["pack_add", "pack_count", "pack_delete", "pack_get", "pack_index", "pack_item",
           "pack_offset", "pack_put", "pack_split", "pack_strings"]
