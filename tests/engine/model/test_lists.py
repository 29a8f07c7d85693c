"""The list model (engine.model.lists): Redis's node limits, conversions both ways, nodes that
stay within their limits whatever the changes, positions across nodes, the serialisation, and
a Hypothesis property of every change against a Python list."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model import lists
from streamkeep.engine.model.list_node import node_count
from streamkeep.engine.model.lists import ListLimits, QuickList


def test_node_limits_follow_quicklist() -> None:
    assert ListLimits(-2).node_limits()[0] == 8192
    assert ListLimits(-1).node_limits()[0] == 4096
    assert ListLimits(-9).node_limits()[0] == 65536  # past the last level: the last
    assert ListLimits(5).node_limits()[1] == 5
    assert ListLimits(0).node_limits()[1] == 1
    assert ListLimits(5).exceeds(9000, 2)  # the safety limit of a count-limited node
    assert not ListLimits(5).exceeds(100, 5)
    assert ListLimits(-2).is_large(8193) and not ListLimits(-2).is_large(8192)
    assert ListLimits(3).is_large(8193)


def test_a_quicklist_fills_nodes_to_the_limit() -> None:
    value = lists.from_elements([b"x" * 100] * 1000)
    assert isinstance(value, QuickList)
    assert all(len(node) <= 8192 for node in value.nodes)
    assert sum(node_count(n) for n in value.nodes) == value.count == 1000
    assert len(value.nodes) == 13  # 78 elements of 103 bytes a node, as Redis fills them


def test_a_big_element_gets_a_node_of_its_own() -> None:
    limits = ListLimits()
    value = lists.from_elements([b"a", b"b" * 9000, b"c"], limits)
    assert isinstance(value, QuickList)
    assert [node_count(n) for n in value.nodes] == [1, 1, 1]
    assert limits.is_plain(value.nodes[1]) and not limits.is_plain(value.nodes[0])
    assert lists.shrink(lists.from_nodes([value.nodes[1]], limits), limits) is not None
    assert isinstance(lists.from_nodes([bytearray(value.nodes[1])], limits), QuickList)


def test_set_and_insert_keep_nodes_within_limits() -> None:
    limits = ListLimits()
    value = lists.from_elements([b"%05d" % i + b"y" * 60 for i in range(1000)], limits)
    assert isinstance(value, QuickList)
    lists.set_at(value, 500, b"z" * 9000, limits)
    assert lists.get(value, 500) == b"z" * 9000
    for _ in range(200):
        assert lists.insert(value, b"00400" + b"y" * 60, b"w" * 50, True, limits) >= 0
    assert all(len(n) <= 8192 or node_count(n) == 1 for n in value.nodes)
    assert lists.length(value) == 1200
    assert lists.get(value, 401) == b"w" * 50


def test_positions_across_nodes() -> None:
    items = [b"a" if i % 100 == 0 else b"element-%d" % i for i in range(5000)]
    value = lists.from_elements(items)
    assert isinstance(value, QuickList) and len(value.nodes) > 3
    every = [i for i, v in enumerate(items) if v == b"a"]
    assert lists.positions(value, b"a", 1, 0, 0) == every
    assert lists.positions(value, b"a", -1, 0, 0) == every[::-1]
    assert lists.positions(value, b"a", 3, 2, 0) == every[2:4]
    assert lists.positions(value, b"a", 1, 0, 1001) == every[:11]
    assert lists.positions(value, b"a", -2, 0, 1000) == every[::-1][1:10]
    assert lists.positions(value, b"element-4999", -1, 1, 1) == [4999]
    assert lists.positions(value, b"element-4998", -1, 1, 1) == []


def test_serialisation_keeps_the_encoding() -> None:
    for value in (lists.from_elements([b"a", b"1"]), lists.from_elements([b"q" * 50] * 500)):
        back = lists.from_bytes(lists.to_bytes(value))
        assert type(back) is type(value)
        assert list(lists.elements(back)) == list(lists.elements(value))
        copied = lists.copy_value(value)
        lists.push(copied, [b"new"], True, ListLimits())
        assert lists.length(value) == lists.length(copied) - 1


def test_memory_usage_counts_the_nodes() -> None:
    small = lists.from_elements([b"a"] * 10)
    assert lists.memory_usage(small) == 16 + 48  # the object, a 37-byte listpack's class
    big = lists.from_elements([b"x" * 100] * 1000)
    assert 16 + 40 + 13 * (32 + 7168) <= lists.memory_usage(big) <= 16 + 40 + 13 * (32 + 8192)


def test_a_budget_stops_a_range() -> None:
    value = lists.from_elements([b"x" * 100] * 1000)
    assert lists.range_of(value, 0, 1000, 50_000) is None
    assert lists.range_of(value, 0, 10, 50_000) == [b"x" * 100] * 10


OPS = st.lists(st.tuples(st.integers(0, 8), st.integers(-50, 50),
                         st.sampled_from([b"1", b"-3", b"abc", b"", b"x" * 300, b"y" * 9000,
                                          b"12345678901234567890", b"07"])),
               max_size=120)


@settings(max_examples=60, deadline=None)
@given(OPS, st.sampled_from([-2, -1, 3, 1]))
def test_changes_match_a_python_list(ops: list[tuple[int, int, bytes]], fill: int) -> None:
    limits = ListLimits(fill)
    value: lists.ListValue = lists.new_list()
    model: list[bytes] = []
    for op, n, item in ops:
        if op <= 1:
            value = lists.push(value, [item, item + b"!"], op == 1, limits)
            model = model + [item, item + b"!"] if op == 1 else [item + b"!", item] + model
        elif op == 2 and model:
            assert lists.pop(value, n > 0) == model.pop(-1 if n > 0 else 0)
        elif op == 3 and model:
            count = abs(n) % 5 + 1
            popped = lists.pop_many(value, count, n > 0)
            want = model[::-1][:count] if n > 0 else model[:count]
            assert popped == want
            model = model[:len(model) - len(want)] if n > 0 else model[len(want):]
        elif op == 4 and model:
            i = n % len(model)
            value = lists.grow(value, [item], limits)
            lists.set_at(value, i, item, limits)
            model[i] = item
        elif op == 5 and model:
            pivot = model[n % len(model)]
            value = lists.grow(value, [item], limits)
            lists.insert(value, pivot, item, n > 0, limits)
            at = model.index(pivot) + (1 if n > 0 else 0)
            model.insert(at, item)
        elif op == 6 and model:
            target = model[n % len(model)]
            count = n % 3 - 1
            found = [i for i, v in enumerate(model) if v == target]
            drop = found if count == 0 else found[:1] if count > 0 else found[-1:]
            assert lists.remove(value, target, count) == len(drop)
            model = [v for i, v in enumerate(model) if i not in drop]
        elif op == 7 and model:
            left, right = abs(n) % 4, (abs(n) // 4) % 4
            lists.trim(value, left, right)
            model = model[left:len(model) - right] if left + right < len(model) else []
        elif op == 8 and model:
            i = n % len(model)
            assert lists.get(value, i) == model[i]
        value = lists.new_list() if not lists.length(value) else lists.shrink(value, limits)
        assert lists.length(value) == len(model)
        if isinstance(value, QuickList):
            assert all(node_count(node) for node in value.nodes)
    assert list(lists.elements(value)) == model
