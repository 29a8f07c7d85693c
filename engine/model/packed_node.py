"""Packed stream nodes (a stream node held as the listpack Redis keeps for it): the facade
that picks the compiled kernel (`_packed_node_c.pyx`) or its pure-Python reference
(`_packed_node_py.py`, which documents the layout). See `engine.wire.kernel_switches` for the
switches. `engine.model.stream` keeps every node's entries this way; snapshots, DUMP and RDB
files hold the same bytes.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.model._packed_node_py import Invalid
from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._packed_node_c import (
        append,
        build,
        counts,
        delete_many,
        entries,
        entry_bytes,
        find,
        ids,
        last_id,
        mark_deleted,
        names,
        new_node,
        range_reply,
        read_plain,
        read_range,
        validate,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._packed_node_py import (
        append,
        build,
        counts,
        delete_many,
        entries,
        entry_bytes,
        find,
        ids,
        last_id,
        mark_deleted,
        names,
        new_node,
        range_reply,
        read_plain,
        read_range,
        validate,
    )
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["Invalid", "append", "build", "counts", "delete_many", "entries", "entry_bytes",
           "find", "ids", "last_id", "mark_deleted", "names", "new_node", "range_reply", "read_plain",
           "read_plain", "read_range", "validate"]
