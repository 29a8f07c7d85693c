"""What a slot move's source queues for its target (engine.exec.slot_export): a record on keys
already sent, as it is; on keys not sent yet, nothing; on some of each, the keys sent again
whole; a flush or a target too far behind fails the move; passes over the slot's keys find
those made meanwhile."""

from __future__ import annotations

import pytest

from streamkeep.engine.exec import slot_export
from streamkeep.engine.exec.slot_export import COPY, RECORD, SlotExport
from streamkeep.engine.model.keyslot import key_slot

SLOT = key_slot(b"{a}")


def export(keys: list[bytes]) -> SlotExport:
    return SlotExport(frozenset({SLOT}), "target", b"s", keys)


def drained(move: SlotExport) -> list[tuple]:
    out = []
    while (item := move.next_queued()) is not None:
        out.append(item)
    assert move.queued_bytes == 0
    return out


def test_records_on_keys_sent_are_queued_and_others_wait_for_their_copy():
    move = export([b"{a}1", b"{a}2"])
    assert move.next_key(None) == b"{a}1"
    move.sent(b"{a}1")
    move.note(0, 10, [[b"SET", b"{a}1", b"x"]])
    move.note(0, 11, [[b"SET", b"{a}2", b"y"]])  # not sent yet: its copy will hold it
    move.note(0, 12, [[b"SET", b"{b}other", b"z"]])  # another slot
    move.note(0, 13, [[b"DEL", b"{a}1", b"{b}other"]])  # (an expiry's record: ours only)
    assert drained(move) == [(RECORD, 10, [[b"SET", b"{a}1", b"x"]]),
                             (RECORD, 13, [[b"DEL", b"{a}1"]])]


def test_a_record_on_keys_sent_and_not_sends_them_all_again():
    move = export([b"{a}1", b"{a}2"])
    move.sent(b"{a}1")
    move.note(0, 10, [[b"RENAME", b"{a}1", b"{a}2"]])
    assert sorted(drained(move)) == [(COPY, b"{a}1"), (COPY, b"{a}2")]
    assert not move.copied  # (sent again when their COPY is answered)
    move.note(0, 11, [[b"SET", b"{a}1", b"x"]])
    assert drained(move) == []


def test_a_record_on_other_slots_too_fails_the_move():
    move = export([b"{a}1"])
    move.sent(b"{a}1")
    move.note(0, 10, [[b"SET", b"{a}1", b"x"], [b"MSET", b"{a}1", b"x", b"{b}2", b"y"]])
    assert move.failed.endswith("names keys of other slots as well")


def test_a_flush_fails_the_move():
    move = export([b"{a}1"])
    move.sent(b"{a}1")
    move.note(0, 10, [[b"SET", b"{a}1", b"x"], [b"FLUSHALL"]])
    assert move.failed.startswith("ERR the slots were flushed")
    assert not move.queue and not move.copied


def test_a_target_too_far_behind_fails_the_move(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(slot_export, "QUEUE_LIMIT", 1000)
    move = export([b"{a}1"])
    move.sent(b"{a}1")
    for n in range(20):
        move.note(0, n, [[b"SET", b"{a}1", b"x" * 100]])
    assert "behind" in move.failed
    assert not move.queue and move.queued_bytes == 0


def test_passes_find_the_keys_made_meanwhile():
    move = export([b"{a}1"])
    assert move.next_key(None) == b"{a}1"
    move.sent(b"{a}1")
    assert move.next_key(None) is None  # (this pass is over)
    assert move.next_key([b"{a}1", b"{a}new"]) == b"{a}new"
    move.sent(b"{a}new")
    assert move.next_key([b"{a}1", b"{a}new"]) is None and move.keys_left == 0
