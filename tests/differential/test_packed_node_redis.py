"""engine.model.packed_node against a real redis-server (7.0; its stream listpack is 8.x's):
the same entries XADDed there and packed here give the same node bytes, deletions included
(by mark_deleted and by delete_many), and Redis's own nodes pass `validate` and read back.

Redis's nodes are read from its DUMP payload (each node's master ID and listpack); each is
compared with the node packed from the entries whose IDs fall in it, with the same entries
deleted in place. Both twins write the bytes."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.snapshot import rdb
from tests.support import kernels
from tests.support.kernels import kernel_fixture

packed_impl = kernel_fixture("streamkeep.engine.model", "packed_node")

U64 = (1 << 64) - 1
FIELDS = st.sampled_from([b"temp", b"unit", b"12", b"007", b"n" * 70])
VALUES = st.one_of(
    st.sampled_from([b"", b"0", b"-0", b"127", b"128", b"-4096", b"70000", b"2147483648",
                     b"9223372036854775807", b"9223372036854775808", b"01", b"C"]),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1).map(lambda v: b"%d" % v),
    st.binary(max_size=70), st.integers(4094, 4098).map(lambda n: b"v" * n))


def _redis_nodes(client, key: str) -> list[tuple[int, bytes]]:
    """(master ID, listpack) of each node of the stream `key`, from its DUMP payload."""
    payload = client.execute("DUMP", key)
    reader = rdb.Reader(payload, 1)  # past the type byte
    return [(int.from_bytes(reader.string(), "big"), reader.string())
            for _ in range(reader.length())]


def _same_as_redis(client, ids: list[int], fields: list[tuple[bytes, ...]],
                   deleted: list[int]) -> None:
    """Redis's nodes for these entries, then with `deleted` XDELed (a node whose entries all
    go is freed there, so it is checked gone), equal the packed ones."""
    client.execute("DEL", "s")
    for sid, f in zip(ids, fields, strict=True):
        client.execute("XADD", "s", b"%d-%d" % (sid >> 64, sid & U64), *f)
    before = _redis_nodes(client, "s")
    for sid in deleted:
        client.execute("XDEL", "s", b"%d-%d" % (sid >> 64, sid & U64))
    after = dict(_redis_nodes(client, "s")) if len(deleted) < len(ids) else {}
    compiled = kernels.compiled("streamkeep.engine.model", "packed_node")
    pure = kernels.pure("streamkeep.engine.model", "packed_node")
    bounds = [master for master, _lp in before] + [1 << 128]
    for (master, theirs), upper in zip(before, bounds[1:], strict=True):
        picked = [k for k, sid in enumerate(ids) if master <= sid < upper]
        assert ids[picked[0]] == master
        gone = [sid for sid in deleted if master <= sid < upper]
        in_node = [ids[k] for k in picked]
        for impl in [pure] if compiled is None else [pure, compiled]:
            assert impl.validate(theirs, master) == (len(picked), len(picked), in_node[-1])
            assert impl.ids(bytearray(theirs), master) == in_node
            assert impl.last_id(bytearray(theirs), master) == in_node[-1]
            lp = impl.build(in_node, [fields[k] for k in picked])
            assert bytes(lp) == theirs, impl.__name__
            for sid in gone:
                assert impl.mark_deleted(lp, master, sid)
            if len(gone) == len(picked):
                assert master not in after
            else:
                assert bytes(lp) == after[master], impl.__name__
                assert impl.validate(after[master], master) == (
                    len(picked), len(picked) - len(gone), in_node[-1])
                other = impl.build(in_node, [fields[k] for k in picked])
                assert impl.delete_many(other, master, gone) == len(gone)
                assert bytes(other) == after[master], impl.__name__


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.data())
def test_packed_nodes_are_redis_bytes(redis_raw, data) -> None:
    n = data.draw(st.integers(min_value=1, max_value=60))
    ms, seq = data.draw(st.sampled_from([(1, 0), (1_700_000_000_000, 0), (5, 1 << 40)]))
    names = data.draw(st.lists(FIELDS, min_size=1, max_size=3))
    ids, fields = [], []
    for _ in range(n):
        ids.append(ms << 64 | seq)
        these = names if data.draw(st.integers(0, 3)) else data.draw(
            st.lists(FIELDS, min_size=1, max_size=3))
        values = data.draw(st.lists(VALUES, min_size=len(these), max_size=len(these)))
        fields.append(tuple(x for pair in zip(these, values, strict=True) for x in pair))
        if data.draw(st.booleans()):
            seq += data.draw(st.integers(1, 200))
        else:
            ms += data.draw(st.integers(1, 90_000))
            seq = data.draw(st.integers(0, 2))
    deleted = data.draw(st.lists(st.sampled_from(ids), max_size=n // 2, unique=True))
    _same_as_redis(redis_raw, ids, fields, deleted)


@pytest.mark.parametrize("n", [1, 100, 130])
def test_many_small_entries_and_counters_past_127(redis_raw, n: int) -> None:
    """XADD's commonest entry, and a node whose live count crosses 127 (Redis's
    stream-node-max-entries set high so that one node holds them all)."""
    redis_raw.execute("CONFIG", "SET", "stream-node-max-entries", "1000")
    try:
        ids = [(1_700_000_000_000 + k // 3) << 64 | k % 3 for k in range(n)]
        fields = [(b"temp", b"%d" % (k * 7 % 101)) for k in range(n)]
        _same_as_redis(redis_raw, ids, fields, ids[1:n:2])
    finally:
        redis_raw.execute("CONFIG", "SET", "stream-node-max-entries", "100")
