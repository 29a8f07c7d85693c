"""List nodes (a list's listpacks): the facade that picks the compiled kernel
(`_list_node_c.pyx`) or its pure-Python reference (`_list_node_py.py`, which describes the
node). See `engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._list_node_c import (
        encode,
        node_count,
        node_get,
        node_matches,
        node_new,
        node_pop,
        node_push,
        node_range,
        node_splice,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._list_node_py import (
        encode,
        node_count,
        node_get,
        node_matches,
        node_new,
        node_pop,
        node_push,
        node_range,
        node_splice,
    )
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["encode", "node_count", "node_get", "node_matches", "node_new", "node_pop",
           "node_push", "node_range", "node_splice"]
