"""Every type's codec in one place (snapshot.rdb_types): the registry holds them once this
module is imported, a DUMP payload of each type round-trips with the limits given, which RDB
types load into one of the engine's value types, and the text naming what streamkeep stores."""

from __future__ import annotations

import pytest

from streamkeep.engine.model import lists
from streamkeep.engine.model.hashes import Hash, HashLimits
from streamkeep.engine.model.lists import ListLimits, QuickList
from streamkeep.engine.model.sets import RSet
from streamkeep.engine.model.value_types import BY_CLASS, TYPES, type_of
from streamkeep.engine.model.zset import ZSet, ZSetLimits
from streamkeep.snapshot import rdb
from streamkeep.snapshot.rdb_types import (
    dump_value_payload,
    load_value_payload,
    restorable_types,
    stored_text,
    value_type_of,
)


def test_each_stored_type_has_its_codecs() -> None:
    assert {0, 3, 5, 12, 17, 15, 19, 21, 26, 27} <= restorable_types()
    assert value_type_of(17) is not None and value_type_of(17).name == "zset"  # type: ignore[union-attr]
    assert value_type_of(28) is None  # arrays: skipped
    for list_type in (1, 10, 14, 18):
        assert value_type_of(list_type) is not None and \
            value_type_of(list_type).name == "list"  # type: ignore[union-attr]
    assert 22 not in rdb.stored_types()  # (two layouts under that number: skipped)
    assert rdb.writer_for(ZSet()).name == "zset" and rdb.writer_for(b"v").name == "string"
    # (a small list is kept bare, as its listpack: a bytearray)
    assert rdb.writer_for(lists.new_list()).name == "list"
    assert rdb.writer_for(QuickList([], 0)).name == "list"


@pytest.mark.parametrize("value", [
    ZSet.from_items([(b"a", 1.0), (b"b", -2.5)]),
    Hash.from_pairs([(b"f", b"v")]),
    RSet.from_members([b"1", b"x"]),
    lists.from_elements([b"a", b"1"]),
    lists.from_elements([b"e%d" % i for i in range(2000)]),
])
def test_payloads_round_trip(value: object) -> None:
    if type(value) not in BY_CLASS and type(value) is not bytearray:
        pytest.skip("the keyspace does not hold this type")
    for version in (9, 10, 11, 15):
        payload = dump_value_payload(value, version)
        rdb.check_payload(payload, rdb.MAX_VERSION)
        back = load_value_payload(payload)
        assert type(back) is type(value)
        assert value_type_of(payload[0]) is type_of(value)


def test_limits_reach_the_reader() -> None:
    z = ZSet.from_items([(b"m%d" % i, float(i)) for i in range(10)])
    payload = dump_value_payload(z, 15)
    assert load_value_payload(payload).encoding == "listpack"
    assert load_value_payload(payload, ZSetLimits(5, 64)).encoding == "skiplist"
    h = dump_value_payload(Hash.from_pairs([(b"a", b"1"), (b"b", b"2")]), 15)
    assert load_value_payload(h, HashLimits(1, 64)).encoding == "hashtable"
    small = dump_value_payload(lists.from_elements([b"a", b"b", b"c"]), 15)
    assert lists.encoding(load_value_payload(small)) == "listpack"
    assert lists.encoding(load_value_payload(small, ListLimits(2))) == "quicklist"


def test_refusals_are_rdb_errors() -> None:
    with pytest.raises(rdb.RdbError, match="no codec"):
        load_value_payload(rdb.payload_from(28, b"\x00", 15))
    with pytest.raises(rdb.RdbError):
        load_value_payload(rdb.payload_from(17, b"\x03abc", 15))


def test_stored_text_names_every_type() -> None:
    text = stored_text()
    assert text.startswith("streams, strings") and "sorted sets" in text
    assert text.count(",") == len(TYPES) - 2 and " and " in text
