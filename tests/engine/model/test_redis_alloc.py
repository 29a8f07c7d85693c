"""jemalloc's size classes and sds allocations (engine.model.redis_alloc), as MEMORY USAGE
counts them."""

from __future__ import annotations

from streamkeep.engine.model.redis_alloc import jemalloc_size, sds_alloc


def test_size_classes() -> None:
    assert [jemalloc_size(n) for n in (1, 8, 9, 16, 17, 33, 128, 129, 160, 161, 257)] == \
        [8, 8, 16, 16, 32, 48, 128, 160, 160, 192, 320]
    for n in range(1, 5000):
        assert jemalloc_size(n) >= n and jemalloc_size(jemalloc_size(n)) == jemalloc_size(n)


def test_sds_headers_grow_with_the_length() -> None:
    assert sds_alloc(5) == 8  # sds5: 1-byte header, the bytes, the NUL
    assert sds_alloc(31) == 48 and sds_alloc(32) == 48  # sds8 from 32 bytes: 3-byte header
    assert sds_alloc(300) == jemalloc_size(5 + 300 + 1)
