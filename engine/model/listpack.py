"""Listpack sizes: the facade that picks the compiled kernel (`_listpack_c.pyx`) or its
pure-Python reference (`_listpack_py.py`, which documents the rules). See
`engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._listpack_c import as_int, entry_size, int_size, str_size
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._listpack_py import as_int, entry_size, int_size, str_size
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["as_int", "entry_size", "int_size", "str_size"]
