"""Packed stream nodes (a stream node held as the listpack Redis keeps for it): the facade
that picks the compiled kernel (`_packed_node_c.pyx`) or its pure-Python reference
(`_packed_node_py.py`, which documents the layout). See `engine.wire.extensions` for the
switches.

Not yet used by `engine.model.stream` (whose nodes hold Python objects): the prototype the
packed representation is measured and tested on.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import extensions

try:
    extensions.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._packed_node_c import (
        append,
        build,
        counts,
        entries,
        entry_bytes,
        mark_deleted,
        names,
        range_reply,
        read_range,
    )
except ImportError as error:
    extensions.missing(__name__, error)
    from streamkeep.engine.model._packed_node_py import (
        append,
        build,
        counts,
        entries,
        entry_bytes,
        mark_deleted,
        names,
        range_reply,
        read_range,
    )
else:
    extensions.loaded(__name__, True)

__all__ = ["append", "build", "counts", "entries", "entry_bytes", "mark_deleted", "names",
           "range_reply", "read_range"]
