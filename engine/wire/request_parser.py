"""The server's request parser: client requests from bytes, with Redis's rules and errors.

Owns the incremental parser of client requests (`RequestParser`: multibulk and inline, Redis's
exact protocol-error lines and limits, modelled on processInlineBuffer/processMultibulkBuffer
in Redis's src/networking.c; a big bulk is read apart from the shared buffer, as Redis's
PROTO_MBULK_BIG_ARG), the error it raises (`ProtocolError`, engine.wire.errors', and
`QueryBufferLimit`), the protocol limits and error lines, and the buffer compaction rule both
parsers of this package use (`drop_parsed`). Quoted inline commands are split by
engine.wire.inline.

This is the facade: `RequestParser` comes from the compiled kernel (`_request_parser_c.pyx`)
when it is built, else from its pure-Python reference (`_request_parser_py.py`, which defines
the shared names); see engine.wire.kernel_switches for the switches.

Must not touch: engine state or any I/O (no sockets, no asyncio, no clocks).
"""

from __future__ import annotations

from streamkeep.engine.wire import kernel_switches

# What both twins share is defined once, in the pure module; the names stay importable from here.
from streamkeep.engine.wire._request_parser_py import (  # noqa: F401  (re-exported limits)
    COMPACT_AT,
    ERR_BULK_BIG,
    ERR_BULK_LEN,
    ERR_INLINE_BIG,
    ERR_MBULK_BIG,
    ERR_MBULK_LEN,
    ERR_QUERY_BUFFER,
    ERR_UNAUTH_BULK,
    ERR_UNAUTH_MBULK,
    PROTO_INLINE_MAX_SIZE,
    PROTO_MAX_MULTIBULK,
    PROTO_MBULK_BIG_ARG,
    UNAUTH_MAX_BULK,
    UNAUTH_MAX_MULTIBULK,
    UNAUTH_QUERY_BUFFER_LIMIT,
    QueryBufferLimit,
    drop_parsed,
)
from streamkeep.engine.wire.errors import ProtocolError
from streamkeep.engine.wire.inline import ERR_QUOTES  # noqa: F401  (the parser's error line too)

try:
    kernel_switches.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.wire._request_parser_c import RequestParser
except ImportError as error:
    kernel_switches.missing(__name__, error)
    from streamkeep.engine.wire._request_parser_py import RequestParser
else:
    kernel_switches.loaded(__name__, True)

__all__ = ["COMPACT_AT", "PROTO_INLINE_MAX_SIZE", "ProtocolError", "QueryBufferLimit",
           "RequestParser", "drop_parsed"]
