"""The PEL claim step: the facade that picks the compiled kernel (`_pel_claim_c.pyx`) or its
pure-Python reference (`_pel_claim_py.py`). See `engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._pel_claim_c import (
        claim,
        extend_above,
        pop_one,
        pop_sorted,
        remove_sorted,
        scan,
    )
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.model._pel_claim_py import (
        claim,
        extend_above,
        pop_one,
        pop_sorted,
        remove_sorted,
        scan,
    )
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["claim", "extend_above", "pop_one", "pop_sorted", "remove_sorted", "scan"]
