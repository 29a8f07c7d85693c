"""Reply encoding: reply values to RESP2 or RESP3 bytes, into a connection's output buffer.

Owns encoding reply values (`engine.wire.reply`'s vocabulary) for RESP2 or RESP3
(`encode_reply`, `write_reply`; long XRANGE-shaped arrays through a fast path of the same
bytes), `format_double` (Redis's `%.17g`), and the connection output buffer that keeps big bulks
by reference and stops a reply at its size limit while encoding it (`ReplyBuffer`,
`OutputLimitReached`, `BIG_BULK`); `human_integer`, an integral score's reply value made
without a constructor call.

This is the facade: `encode_reply`, `write_reply` and `human_integer` come from the compiled kernel
(`_reply_encoder_c.pyx`) when it is built, else from its pure-Python reference
(`_reply_encoder_py.py`, which defines the shared names); see engine.wire.kernel_switches for the
switches.

Must not touch: engine state or any I/O (no sockets, no asyncio, no clocks).
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

# What both twins share is defined once, in the pure module; the names stay importable from here.
from streamkeep.engine.wire._reply_encoder_py import (
    BIG_BULK,
    OutputLimitReached,
    ReplyBuffer,
    format_double,
)

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.wire._reply_encoder_c import encode_reply, human_integer, write_reply
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.wire._reply_encoder_py import encode_reply, human_integer, write_reply
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["BIG_BULK", "OutputLimitReached", "ReplyBuffer", "encode_reply", "format_double",
           "human_integer", "write_reply"]
