"""A few keys of a dict from a chosen place in it, pure Python: the reference for
`_dict_sample_c.pyx` (Redis's dictGetSomeKeys for the eviction's samples).

Python cannot reach a dict's table of entries, so `start` counts live entries here, where the
compiled kernel counts table positions (holes included): the two agree on a dict that has
lost no key since it was last resized, and both return the first `count` live keys at or after
`start` in insertion order, wrapping to the front once. O(start + count). Must not touch: the
dict.
"""

from __future__ import annotations

from itertools import chain, islice
from typing import Any


def sample_keys(d: dict[bytes, Any], start: int, count: int) -> list[bytes]:
    """Up to `count` keys of `d`, from live entry `start` on, wrapping once."""
    start = max(start, 0)
    if start >= len(d):
        start = 0
    return list(islice(chain(islice(d, start, None), islice(d, start)), min(count, len(d))))

