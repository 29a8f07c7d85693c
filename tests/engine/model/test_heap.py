"""engine.model.heap: the meter counts what the interpreter's allocators hold. Objects made
raise `used()` by their blocks' bytes (pymalloc's small ones walked, malloc'd ones counted),
deleting them lowers it again at once, `bound()` is never below `used()`; the pure twin hooks
nothing and the meter then reads the resident set."""

from __future__ import annotations

import pytest

from streamkeep.engine.model import heap
from tests.support.kernels import compiled, pure


@pytest.fixture
def meter() -> heap.HeapMeter:
    found = heap.meter()
    if not found.counting:
        pytest.skip("the allocator hooks are not installed (pure build or debug allocator)")
    return found


def test_small_objects_are_walked_by_their_size_class(meter):
    before = meter.used()
    made = [b"%032d" % i for i in range(100_000)]  # 65 bytes: pymalloc's 80-byte class
    grown = meter.used() - before
    assert 100_000 * 80 <= grown <= 100_000 * 80 + 1_000_000  # (+ the list's 800 KB)
    assert meter.bound() >= meter.used()
    del made
    assert meter.used() - before < 100_000


def test_malloced_blocks_are_counted_as_they_come_and_go(meter):
    before = meter.used()
    made = [bytes(4000 + i % 7) for i in range(2_000)]
    grown = meter.used() - before
    assert 2_000 * 4000 <= grown <= 2_000 * 4100 + 100_000
    del made
    assert meter.used() - before < 50_000


def test_the_compiled_kernel_reports_its_arenas():
    kernel = compiled("streamkeep.engine.model", "heap")
    if kernel is None or not heap.meter().counting:
        pytest.skip("not hooked")
    made = [b"%040d" % i for i in range(50_000)]  # 4 MB: new arenas
    small, blocks = kernel.small_used()
    assert len(made) and kernel.arena_count() > 0 and kernel.arena_bytes() == kernel.arena_count() << 20
    assert 0 < small <= kernel.arena_bytes() and 0 < blocks * 16 <= small


def test_the_pure_twin_counts_nothing():
    twin = pure("streamkeep.engine.model", "heap")
    assert twin.install() is False and twin.installed() is False
    assert (twin.raw_live(), twin.arena_bytes(), twin.arena_count(), twin.small_used()) == (
        0, 0, 0, (0, 0))


def test_without_hooks_the_meter_reads_the_resident_set(monkeypatch):
    monkeypatch.setattr(heap, "_hooks_allowed", lambda: False)
    alone = heap.HeapMeter()
    assert not alone.counting
    assert alone.used() == alone.bound() > 0
    assert heap.resident_set() > 0
