"""A small plain hash kept bare, as its pack (engine.model.packed_hash), and the functions of
engine.model.hashes that read and change one (`as_hash`, `bound_hash`, `stored`,
`copy_value`): its size, the write-back of a change, the conversions that put the `Hash` itself
in the keyspace, and the value type's functions seeing it as the hash it is."""

from __future__ import annotations

import sys
from typing import Any

from streamkeep.engine.model.hashes import (
    Hash,
    HashLimits,
    as_hash,
    bound_hash,
    copy_value,
    stored,
)
from streamkeep.engine.model.packed_hash import PackedHash
from streamkeep.engine.model.value_types import BY_CLASS, HASH, type_of

PAIRS = [(b"f%d" % i, b"value%d" % i) for i in range(10)]


def _bare(pairs: list[tuple[bytes, bytes]] = PAIRS) -> PackedHash:
    value = stored(Hash.from_pairs(pairs))
    assert isinstance(value, PackedHash)
    return value


def test_a_bare_hash_is_its_pack_and_no_more() -> None:
    value = _bare()
    pack = bytes(value)
    assert not hasattr(value, "__dict__")
    # (a heap type's instance carries the collector's header: nothing else beside the bytes)
    assert sys.getsizeof(value) <= sys.getsizeof(pack) + 16
    assert as_hash(value).items() == PAIRS
    assert "PackedHash" in repr(value)


def test_stored_keeps_only_a_plain_listpack_bare() -> None:
    assert isinstance(stored(Hash.from_pairs(PAIRS)), PackedHash)
    big = Hash.from_pairs([(b"f", b"x" * 65)])
    assert stored(big) is big and big.encoding == "hashtable"
    ex = Hash.from_pairs(PAIRS)
    ex.prepare_field_expiry()
    assert stored(ex) is ex


def test_a_bound_hash_stores_each_change_back() -> None:
    home: dict[bytes, Any] = {b"k": _bare()}
    h = bound_hash(home[b"k"], home, b"k", HashLimits())
    assert h.set(b"new", b"1") is True
    assert isinstance(home[b"k"], PackedHash) and as_hash(home[b"k"]).get(b"new") == b"1"
    assert h.set_many([(b"a", b"1"), (b"b", b"2")]) == 2
    assert h.delete(b"f0") is True and h.delete(b"nope") is False
    assert h.incr_by(b"n", 5) == 5
    assert as_hash(home[b"k"]).items() == h.items()
    assert len(as_hash(home[b"k"])) == 13


def test_a_conversion_puts_the_hash_itself_in_the_keyspace() -> None:
    home: dict[bytes, Any] = {b"k": _bare()}
    h = bound_hash(home[b"k"], home, b"k", HashLimits())
    h.set(b"long", b"x" * 65)
    assert home[b"k"] is h and h.encoding == "hashtable"
    h.set(b"more", b"1")  # (the hash is the keyspace's value from now on)
    assert home[b"k"] is h
    home[b"e"] = _bare()
    ex = bound_hash(home[b"e"], home, b"e", HashLimits())
    assert ex.set_field_expiry(b"f1", 10**13) is True
    assert home[b"e"] is ex and ex.encoding == "listpackex"
    home[b"c"] = _bare()
    few = bound_hash(home[b"c"], home, b"c", HashLimits(max_listpack_entries=10))
    few.set(b"eleventh", b"1")
    assert home[b"c"] is few and few.encoding == "hashtable"


def test_a_key_gone_is_not_stored_again() -> None:
    home: dict[bytes, Any] = {b"k": _bare([(b"a", b"1")])}
    h = bound_hash(home[b"k"], home, b"k", HashLimits())
    h.delete(b"a")
    del home[b"k"]  # (what the command does with an emptied hash)
    h.set(b"b", b"2")
    assert b"k" not in home


def test_a_listpack_hash_object_turns_bare_at_its_next_change() -> None:
    loaded = Hash.from_pairs(PAIRS)  # (as a snapshot load or RESTORE makes it)
    home: dict[bytes, Any] = {b"k": loaded}
    h = bound_hash(loaded, home, b"k", HashLimits())
    assert h is loaded
    h.set(b"x", b"1")
    assert isinstance(home[b"k"], PackedHash)
    table = Hash.from_pairs([(b"f", b"x" * 65)])
    home[b"t"] = table
    assert bound_hash(table, home, b"t", HashLimits()) is table
    table.set(b"g", b"1")
    assert home[b"t"] is table


def test_as_hash_changes_nothing_stored() -> None:
    value = _bare()
    h = as_hash(value)
    h.set(b"extra", b"1")
    assert b"extra" not in as_hash(value)
    whole = Hash.from_pairs(PAIRS)
    assert as_hash(whole) is whole


def test_copy_of_a_bare_hash_is_itself_and_of_a_hash_is_independent() -> None:
    value = _bare()
    assert copy_value(value) is value
    table = Hash.from_pairs([(b"f", b"x" * 65)])
    copied = copy_value(table)
    assert isinstance(copied, Hash) and copied is not table and copied.items() == table.items()
    small = Hash.from_pairs(PAIRS)
    assert isinstance(copy_value(small), PackedHash)


def test_the_value_type_sees_a_bare_hash_as_a_hash() -> None:
    value = _bare()
    whole = Hash.from_pairs(PAIRS)
    assert type_of(value) is HASH and type_of(whole) is HASH and BY_CLASS[Hash] is HASH
    assert HASH.encoding(value) == "listpack"
    assert HASH.memory_usage(value) == whole.memory_usage()
    assert HASH.to_bytes is not None and HASH.to_bytes(value) == whole.to_bytes()
    assert HASH.digest is not None and HASH.digest(value) == HASH.digest(whole)
    assert HASH.open(value).items() == PAIRS and HASH.open(whole) is whole


def test_a_snapshot_row_loads_as_the_keyspace_keeps_it() -> None:
    assert HASH.from_bytes is not None and HASH.to_bytes is not None
    small = Hash.from_pairs(PAIRS)
    loaded = HASH.from_bytes(HASH.to_bytes(small))
    assert isinstance(loaded, PackedHash) and as_hash(loaded).items() == PAIRS
    table = Hash.from_pairs([(b"f", b"x" * 65)])
    again = HASH.from_bytes(HASH.to_bytes(table))
    assert isinstance(again, Hash) and again.encoding == "hashtable"
