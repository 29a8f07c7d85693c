"""An embedded caller's command arguments as the argv a connection would send: the facade
that picks the compiled kernel (`_argv_c.pyx`) or its pure-Python reference (`_argv_py.py`).
See `engine.wire.kernel_switches` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.wire._argv_c import encode_args
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.wire._argv_py import encode_args
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["encode_args"]
