"""engine.model.list_node against a real redis-server (7.0: a list is a quicklist of listpacks,
one node or more): the list Redis builds from random pushes, pops, inserts, sets, removals
and trims is read from its DUMP payload node by node, and each node's bytes equal the node both
twins build from the same elements (`node_new`), and read back as those elements."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.snapshot import rdb
from tests.support import kernels

I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
ELEMENTS = st.one_of(
    st.sampled_from([b"0", b"127", b"128", b"-1", b"-4096", b"4095", b"4096", b"32768",
                     b"-8388609", b"2147483648", b"%d" % I64_MIN, b"%d" % I64_MAX, b"01",
                     b"+1", b"-0", b" 1", b"9223372036854775808", b""]),
    st.integers(min_value=I64_MIN, max_value=I64_MAX).map(lambda v: b"%d" % v),
    st.binary(max_size=70),
    st.sampled_from([63, 64, 4095, 4096, 9000]).map(lambda n: b"s" * n))
QUICKLIST_2 = 18  # the RDB type of a list in Redis 7.0
PACKED = 2  # a quicklist node holding a listpack


def _redis_nodes(client, key: str) -> list[bytes]:
    """The listpack of each node of the list `key`, from its DUMP payload."""
    payload = client.execute("DUMP", key)
    assert payload[0] == QUICKLIST_2
    reader = rdb.Reader(payload, 1)
    nodes = []
    for _ in range(reader.length()):
        assert reader.length() == PACKED
        nodes.append(reader.string())
    return nodes


COMMANDS = st.one_of(
    st.tuples(st.sampled_from(["RPUSH", "LPUSH"]), st.lists(ELEMENTS, min_size=1, max_size=8)),
    st.tuples(st.sampled_from(["RPOP", "LPOP"])),
    st.tuples(st.just("LSET"), st.integers(-3, 3), ELEMENTS),
    st.tuples(st.just("LINSERT"), st.sampled_from(["BEFORE", "AFTER"]), st.integers(0, 5),
              ELEMENTS),
    st.tuples(st.just("LREM"), st.integers(-2, 2), st.integers(0, 5)),
    st.tuples(st.just("LTRIM"), st.integers(-5, 5), st.integers(-5, 5)))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(ELEMENTS, min_size=1, max_size=30), st.lists(COMMANDS, max_size=15))
def test_list_nodes_are_redis_bytes(redis_raw, start, commands) -> None:
    client = redis_raw
    client.execute("DEL", "l")
    client.execute("RPUSH", "l", *start)
    for command in commands:
        current = client.execute("LRANGE", "l", 0, -1) or []
        name = command[0]
        if name in ("RPUSH", "LPUSH"):
            client.execute(name, "l", *command[1])
        elif not current:  # the rest need an element (and a key: a popped list is gone)
            continue
        elif name == "LSET":
            client.execute(name, "l", command[1] % len(current), command[2])
        elif name == "LINSERT":  # around an element of the list
            _, where, pick, element = command
            client.execute(name, "l", where, current[pick % len(current)], element)
        elif name == "LREM":
            client.execute(name, "l", command[1], current[command[2] % len(current)])
        else:
            client.execute(name, "l", *command[1:])
    elements = client.execute("LRANGE", "l", 0, -1) or []
    if not elements:
        return
    theirs = _redis_nodes(client, "l")
    compiled = kernels.compiled("streamkeep.engine.model", "list_node")
    pure = kernels.pure("streamkeep.engine.model", "list_node")
    at = 0
    for lp in theirs:
        count = pure.node_count(bytearray(lp))
        held = elements[at:at + count]
        for impl in [pure] if compiled is None else [pure, compiled]:
            assert impl.node_range(bytearray(lp), 0, count) == held, impl.__name__
            assert bytes(impl.node_new(held)) == lp, impl.__name__
        at += count
    assert at == len(elements)
