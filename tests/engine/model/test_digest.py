"""engine.model.digest: one hash over the whole logical state. Stable (the same state hashes the
same, whatever the node layout or the order it was built in) and sensitive (any change to
what replay must reproduce changes it: entries, stream metadata, groups, PEL entries,
consumers, idempotent producers, the key and its database)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.model.digest import state_digest, stream_state

BASE = [
    ["XADD", "s", "1-1", "f", "a"],
    ["XADD", "s", "2-1", "f", "b", "g", "c"],
    ["XADD", "s", "3-1", "f", "d"],
    ["XADD", "s", "4-1", "f", "e"],
    ["XGROUP", "CREATE", "s", "g", "0"],
    ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"],
]


def engine_after(*commands: list[str], now: int = 1000, **config: Any) -> Engine:
    engine = Engine(clock=lambda: now, **config)
    for argv in commands:
        engine.execute(*argv)
    return engine


def digest_after(*commands: list[str], **config: Any) -> str:
    return state_digest(engine_after(*commands, **config).dbs)


def test_no_streams_hash_as_nothing() -> None:
    assert digest_after() == hashlib.sha256().hexdigest()
    # a stream that was deleted leaves nothing behind
    assert digest_after(["XADD", "s", "1-1", "f", "v"], ["DEL", "s"]) == \
        hashlib.sha256().hexdigest()


def test_same_state_same_digest() -> None:
    first, second = digest_after(*BASE), digest_after(*BASE)
    assert first == second
    assert re.fullmatch(r"[0-9a-f]{64}", first)
    assert digest_after(*BASE) == engine_after(*BASE).digest()  # what Engine.digest reports


def test_node_boundaries_are_layout_not_state() -> None:
    assert digest_after(*BASE, stream_node_max_entries=1) == \
        digest_after(*BASE, stream_node_max_entries=100)


def test_key_order_of_creation_does_not_matter() -> None:
    a = [["XADD", "a", "1-1", "f", "v"]]
    b = [["XADD", "b", "1-1", "f", "v"]]
    assert digest_after(*a, *b) == digest_after(*b, *a)


# Each changes one thing the digest covers, relative to BASE.
CHANGES = {
    "an entry added": [["XADD", "s", "5-1", "f", "x"]],
    "an entry deleted": [["XDEL", "s", "4-1"]],
    "the first entry deleted": [["XDEL", "s", "1-1"]],
    "a value changed": None,  # BASE with another value (below)
    "the last ID moved": [["XSETID", "s", "9-9"]],
    "entries added": [["XSETID", "s", "4-1", "ENTRIESADDED", "10"]],
    "max deleted ID": [["XSETID", "s", "4-1", "MAXDELETEDID", "3-0"]],
    "a group added": [["XGROUP", "CREATE", "s", "h", "0"]],
    "a group's last ID": [["XGROUP", "SETID", "s", "g", "3-1"]],
    "a group's entries read": [["XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "1"]],
    "a delivery": [["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"]],
    "an ack": [["XACK", "s", "g", "1-1"]],
    "an owner": [["XCLAIM", "s", "g", "bob", "0", "1-1", "JUSTID"]],
    "a delivery count": [["XCLAIM", "s", "g", "alice", "0", "1-1", "RETRYCOUNT", "9"]],
    "a delivery time": [["XCLAIM", "s", "g", "alice", "0", "1-1", "TIME", "5", "JUSTID"]],
    "a released entry": [["XNACK", "s", "g", "FAIL", "IDS", "1", "1-1"]],
    "a consumer added": [["XGROUP", "CREATECONSUMER", "s", "g", "idle"]],
    "IDMP settings": [["XCFGSET", "s", "IDMP-DURATION", "60"]],
    "an IDMP record": [["XADD", "s", "IDMP", "p", "i", "*", "f", "x"]],
    "another stream": [["XADD", "t", "1-1", "f", "v"]],
    "another database": [["SELECT", "1"], ["XADD", "s", "1-1", "f", "v"]],
}


def changed_digests() -> dict[str, str]:
    digests = {name: digest_after(*BASE, *commands)
               for name, commands in CHANGES.items() if commands is not None}
    digests["a value changed"] = digest_after(
        *[[*argv[:-1], "other"] if argv[:3] == ["XADD", "s", "3-1"] else argv for argv in BASE])
    digests["a consumer's times"] = state_digest(engine_after(*BASE, now=2000).dbs)
    # the same entry added, recorded for another producer
    digests["another IDMP producer"] = digest_after(
        *BASE, ["XADD", "s", "IDMP", "q", "i", "*", "f", "x"])
    return digests


def test_any_change_changes_the_digest() -> None:
    base = digest_after(*BASE)
    digests = changed_digests()
    unchanged = [name for name, digest in digests.items() if digest == base]
    assert not unchanged, f"the digest missed: {unchanged}"
    assert len(set(digests.values())) == len(digests), "two different changes hashed the same"


def test_the_key_name_and_database_count() -> None:
    stream = [["XADD", "s", "1-1", "f", "v"]]
    renamed = [["XADD", "t", "1-1", "f", "v"]]
    elsewhere = [["SELECT", "3"], *stream]
    assert len({digest_after(*stream), digest_after(*renamed), digest_after(*elsewhere)}) == 3


def test_ids_beyond_64_bits_hash_and_differ() -> None:
    top = (1 << 64) - 1
    high = digest_after(["XADD", "s", f"{top}-{top}", "f", "v"])
    lower = digest_after(["XADD", "s", f"{top}-{top - 1}", "f", "v"])
    assert high != lower


def test_stream_state_without_and_with_idmp() -> None:
    engine = engine_after(*BASE)
    state = stream_state(engine.dbs[0][b"s"])
    assert len(state) == 3  # a stream that never used IDMP hashes as before IDMP existed
    meta, entries, groups = state
    assert meta[0] == 4  # length
    assert [sid for sid, _fields in entries] == [1 << 64 | 1, 2 << 64 | 1, 3 << 64 | 1,
                                                 4 << 64 | 1]
    assert entries[1][1] == (b"f", b"b", b"g", b"c")
    name, _last_id, _entries_read, pel, consumers = groups[0]
    assert name == b"g"
    assert [row[:2] for row in pel] == [[1 << 64 | 1, b"alice"], [2 << 64 | 1, b"alice"]]
    assert consumers[0][0] == b"alice"
    engine.execute("XADD", "s", "IDMP", "p", "i", "*", "f", "x")
    assert len(stream_state(engine.dbs[0][b"s"])) == 4


def test_a_released_entry_has_no_owner() -> None:
    engine = engine_after(*BASE, ["XNACK", "s", "g", "FAIL", "IDS", "1", "1-1"])
    pel = stream_state(engine.dbs[0][b"s"])[2][0][3]
    assert pel[0][:2] == [1 << 64 | 1, None]
    assert pel[1][:2] == [2 << 64 | 1, b"alice"]


@pytest.mark.parametrize("node_entries", [1, 3])
def test_deleted_entries_inside_nodes_are_not_state(node_entries: int) -> None:
    """A tombstone left in a node hashes like the entry never having been there, given the
    same metadata."""
    deleted = engine_after(*BASE[:4], ["XDEL", "s", "2-1"], stream_node_max_entries=node_entries)
    direct = engine_after(["XADD", "s", "1-1", "f", "a"], ["XADD", "s", "3-1", "f", "d"],
                          ["XADD", "s", "4-1", "f", "e"],
                          ["XSETID", "s", "4-1", "ENTRIESADDED", "4", "MAXDELETEDID", "2-1"])
    assert state_digest(deleted.dbs) == state_digest(direct.dbs)
