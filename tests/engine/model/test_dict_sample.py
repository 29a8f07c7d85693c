"""engine.model.dict_sample: the eviction's samples. Both twins give the first live keys at or
after a position, wrapping once, on a dict that lost no key since its last resize; the compiled
kernel counts table positions, so on a dict with holes it still gives live keys only, distinct,
as many as asked (or all)."""

from __future__ import annotations

import random

import pytest

from tests.support.kernels import kernel_fixture, pure_and_compiled

sample_impl = kernel_fixture("streamkeep.engine.model", "dict_sample")


@pytest.mark.parametrize(("start", "count", "expected"), [
    (0, 3, [b"k0", b"k1", b"k2"]), (8, 3, [b"k8", b"k9", b"k0"]), (9, 1, [b"k9"]),
    (5, 0, []), (0, 20, [b"k%d" % i for i in range(10)]), (-4, 2, [b"k0", b"k1"])])
def test_from_a_position_wrapping_once(sample_impl, start, count, expected):
    d = {b"k%d" % i: i for i in range(10)}
    assert sample_impl.sample_keys(d, start, count) == expected


def test_an_empty_dict(sample_impl):
    assert sample_impl.sample_keys({}, 0, 5) == []
    assert sample_impl.sample_keys({}, 3, 5) == []


def test_the_twins_agree_on_dicts_without_holes():
    pure, compiled = pure_and_compiled("streamkeep.engine.model", "dict_sample")
    rng = random.Random(7)
    for _ in range(200):
        d = {b"%d" % rng.randrange(10**6): 0 for _ in range(rng.randrange(1, 300))}
        start, count = rng.randrange(len(d)), rng.randrange(1, 20)
        assert pure.sample_keys(d, start, count) == compiled.sample_keys(d, start, count)


def test_holes_give_live_distinct_keys(sample_impl):
    rng = random.Random(11)
    d = {b"%d" % i: i for i in range(1000)}
    for i in range(0, 1000, 3):
        del d[b"%d" % i]
    for _ in range(200):
        count = rng.randrange(1, 40)
        found = sample_impl.sample_keys(d, rng.randrange(len(d)), count)
        assert len(found) == count and len(set(found)) == count
        assert all(key in d for key in found)
    del_all = {b"a": 1, b"b": 2}
    del del_all[b"a"]
    assert sample_impl.sample_keys(del_all, 0, 5) == [b"b"]
