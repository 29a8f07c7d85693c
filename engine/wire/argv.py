"""An embedded caller's command arguments as the argv a connection would send: the facade
that picks the compiled kernel (`_argv_c.pyx`) or its pure-Python reference (`_argv_py.py`).
See `engine.wire.extensions` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import extensions

try:
    extensions.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.wire._argv_c import encode_args
except ImportError as error:
    extensions.missing(__name__, error)
    from streamkeep.engine.wire._argv_py import encode_args
else:
    extensions.loaded(__name__, True)

__all__ = ["encode_args"]
