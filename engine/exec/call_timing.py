"""Counting a command call and its latency histogram: the facade that picks the compiled
kernel (`_call_timing_c.pyx`) or its pure-Python reference (`_call_timing_py.py`). See
`engine.wire.extensions` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import extensions

try:
    extensions.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.exec._call_timing_c import (
        HIST_LEN,
        HIST_MAX,
        count_call,
        hist_index,
        new_histogram,
    )
except ImportError as error:
    extensions.missing(__name__, error)
    from streamkeep.engine.exec._call_timing_py import (
        HIST_LEN,
        HIST_MAX,
        count_call,
        hist_index,
        new_histogram,
    )
else:
    extensions.loaded(__name__, True)

__all__ = ["HIST_LEN", "HIST_MAX", "count_call", "hist_index", "new_histogram"]
