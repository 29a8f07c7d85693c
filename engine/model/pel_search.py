"""PEL chunk search: the facade that picks the compiled kernel (`_pel_search_c.pyx`) or its
pure-Python reference (`_pel_search_py.py`). See `engine.wire.extensions` for the switches.

Must not touch: anything but choosing the implementation.
"""

from __future__ import annotations

from streamkeep.engine.wire import extensions

try:
    extensions.want_compiled()  # ImportError when STREAMKEEP_NO_EXTENSIONS is set
    from streamkeep.engine.model._pel_search_c import (
        bucket_live,
        find,
        narrow_bucket,
        owned_rows,
        range_rows,
        wide_bucket,
    )
except ImportError as error:
    extensions.missing(__name__, error)
    from streamkeep.engine.model._pel_search_py import (
        bucket_live,
        find,
        narrow_bucket,
        owned_rows,
        range_rows,
        wide_bucket,
    )
else:
    extensions.loaded(__name__, True)

__all__ = ["bucket_live", "find", "narrow_bucket", "owned_rows", "range_rows", "wide_bucket"]
