"""A few keys of a dict from a chosen place in it (the eviction's samples): the facade that
picks the compiled kernel (`_dict_sample_c.pyx`) or its pure-Python reference
(`_dict_sample_py.py`). See `engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._dict_sample_c import sample_keys
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._dict_sample_py import sample_keys
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["sample_keys"]
