"""Searches over a sorted set's score arrays: the facade that picks the compiled kernel
(`_score_search_c.pyx`) or its pure-Python reference (`_score_search_py.py`). See
`engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._score_search_c import bisect_scores
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._score_search_py import bisect_scores
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["bisect_scores"]
