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
        bucket_of,
        key_hash,
        pack_add,
        pack_count,
        pack_delete,
        pack_get,
        pack_index,
        pack_item,
        pack_offset,
        pack_placed,
        pack_put,
        pack_split,
        pack_strings,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._packed_columns_py import (
        bucket_of,
        key_hash,
        pack_add,
        pack_count,
        pack_delete,
        pack_get,
        pack_index,
        pack_item,
        pack_offset,
        pack_placed,
        pack_put,
        pack_split,
        pack_strings,
    )
else:
    kernel_switches.loaded(__name__, True)

SEED_BYTES = 16  # a bucket table's placement seed (SipHash's key)

__all__ = ["SEED_BYTES", "bucket_of", "key_hash", "pack_add", "pack_count", "pack_delete",
           "pack_get", "pack_index", "pack_item", "pack_offset", "pack_placed", "pack_put",
           "pack_split", "pack_strings"]
