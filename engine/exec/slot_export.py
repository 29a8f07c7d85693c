"""Slots moved atomically (a controller's move): what their source keeps while the slots' keys
stream to the target and the source goes on serving every command on them.

Owns `SlotExport`, the source's side of one move of some slots to one target: the keys already sent
(`copied`), the queue of what the target still needs in order (records whose keys were all
sent, and keys to send again whole), the passes over the slots' keys that find the ones not
sent yet, and whether the slots are frozen for the switch. It sees every record the node logs
(`note`, from engine.runtime.records): a record that changes only keys already sent is
queued as it is (the target applies the same effects); one that changes only keys not sent
yet is not (their copy, made later, holds it); one that changes some of each has its keys
sent again whole. So the target, applying the queue in order, ends with what the source has.
The queue is bounded (QUEUE_LIMIT): past it the move fails and starts again. Must not touch:
the serialization of keys and the commands (engine.commands.slot_moves), routing
(engine.exec.cluster), the AOF.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from streamkeep.engine.exec.keys import effect_keys, single_key
from streamkeep.engine.model.keyslot import key_slot

QUEUE_LIMIT: Final = 256 << 20  # bytes the target may owe before the move fails
EFFECT_OVERHEAD: Final = 16  # bytes an effect costs past its arguments' (the estimate's)
COPY: Final = 0  # a queued key to send whole (its state when it is sent)
RECORD: Final = 1  # a queued record: (RECORD, time_ms, effects)
# (a static of this module: a call to it skips the module attribute's lookup)
_slot_of: Final = key_slot


class SlotExport:
    """The source's side of moving `slots` to `target` (a node's id) in `session` (the
    controller's name for this attempt: another attempt starts a new export); `keys`: the
    slots' keys when it starts."""

    def __init__(self, slots: frozenset[int], target: str, session: bytes,
                 keys: list[bytes]) -> None:
        self.slots, self.target, self.session = slots, target, session
        self.copied: set[bytes] = set()
        self.queue: deque[tuple[Any, ...]] = deque()
        self.queued_bytes = 0
        self.pass_keys = keys  # this pass's keys (the slots' when it began), from `cursor`
        self.cursor = 0
        self.frozen = False  # the switch: the slots' commands answer TRYAGAIN
        self.failed = ""  # why the move failed (its error line); "" while it goes on

    # --- the records the node logs -------------------------------------------------------

    def note(self, db: int, time_ms: int, effects: list[Any]) -> None:
        """A record the node logged (see the module's docstring)."""
        if self.failed:
            return
        if len(effects) == 1 and db == 0:  # most records: one effect, on one key
            key = single_key(effects[0])
            if key is not None:
                if key in self.copied and _slot_of(key) in self.slots:
                    self._queue(time_ms, effects)
                return
        self._note_many(db, time_ms, effects)

    def _note_many(self, db: int, time_ms: int, effects: list[Any]) -> None:
        """A record of several effects or keys: each effect's keys read once, the slots'
        among them (`mine`), the record's touched keys their union."""
        slots = self.slots
        touched: set[bytes] = set()
        named: list[tuple[Any, list[bytes], list[bytes]]] = []
        for effect in effects:
            keys: list[bytes] = []
            mine: list[bytes] = []
            for key_db, key in effect_keys(db, (effect,)):
                if key is None:  # a flush: the target cannot be told what it held
                    self.fail("ERR the slots were flushed during their move")
                    return
                keys.append(key)
                if key_db == 0 and _slot_of(key) in slots:
                    mine.append(key)
            if mine:
                touched.update(mine)
                named.append((effect, keys, mine))
        if not touched:
            return
        copied = self.copied
        sent = [key in copied for key in touched]
        if all(sent):
            ours = self._ours(named)
            if ours is not None:
                self._queue(time_ms, ours)
        elif any(sent):  # some of each: every one of them sent again whole
            for key in touched:
                copied.discard(key)
                self.queue.append((COPY, key))
                self.queued_bytes += len(key) + EFFECT_OVERHEAD

    def _ours(self, named: list[tuple[Any, list[bytes], list[bytes]]]) -> list[Any] | None:
        """The record's effects on the slots' keys (each with its keys and the slots' among
        them): an active expiry's DEL names keys of any slot (those of others dropped from
        it); any other effect naming keys of other slots as well fails the move (None), as a
        node never logs one."""
        ours = []
        for effect, keys, mine in named:
            if len(mine) == len(keys):
                ours.append(effect)
            elif effect[0].upper() in (b"DEL", b"UNLINK"):
                ours.append([b"DEL", *mine])
            else:
                self.fail("ERR a record of the move names keys of other slots as well")
                return None
        return ours

    def _queue(self, time_ms: int, effects: list[Any]) -> None:
        self.queue.append((RECORD, time_ms, effects))
        size = self.queued_bytes
        for effect in effects:
            size += EFFECT_OVERHEAD
            for arg in effect:
                size += len(arg)
        self.queued_bytes = size
        if size > QUEUE_LIMIT:
            self.fail(f"ERR the target fell {QUEUE_LIMIT >> 20} MB behind the slots' writes")

    def fail(self, line: str) -> None:
        """The move failed (the controller starts it again): nothing more is kept for it."""
        self.failed = line
        self.queue.clear()
        self.copied.clear()
        self.pass_keys, self.cursor = [], 0
        self.queued_bytes = 0
        self.frozen = False

    # --- what the target gets next -------------------------------------------------------

    def next_queued(self) -> tuple[Any, ...] | None:
        """The queue's next item (COPY, key) or (RECORD, time_ms, effects); None: empty."""
        if not self.queue:
            return None
        item = self.queue.popleft()
        if item[0] == RECORD:
            for effect in item[2]:
                self.queued_bytes -= EFFECT_OVERHEAD + sum(len(arg) for arg in effect)
        else:
            self.queued_bytes -= len(item[1]) + EFFECT_OVERHEAD
        if not self.queue:
            self.queued_bytes = 0
        return item

    def next_key(self, slot_keys: list[bytes] | None) -> bytes | None:
        """The next key of the slots not sent yet, or None when a pass over their keys finds
        none. `slot_keys`: the slots' keys now, for a new pass (None: ask again with
        them when this pass is over: returns None and leaves `pass_keys` empty)."""
        copied = self.copied
        while True:
            keys = self.pass_keys
            while self.cursor < len(keys):
                key = keys[self.cursor]
                self.cursor += 1
                if key not in copied:
                    return key
            if slot_keys is None:
                self.pass_keys, self.cursor = [], 0
                return None
            fresh = [key for key in slot_keys if key not in copied]
            slot_keys = None
            if not fresh:
                self.pass_keys, self.cursor = [], 0
                return None
            self.pass_keys, self.cursor = fresh, 0

    def sent(self, key: bytes) -> None:
        """`key` went to the target whole (as it is now): its later records go after it."""
        self.copied.add(key)

    @property
    def keys_left(self) -> int:
        """Keys of this pass not looked at yet (0 does not mean none is left: a new pass may
        find keys made meanwhile)."""
        return len(self.pass_keys) - self.cursor


__all__ = ["COPY", "QUEUE_LIMIT", "RECORD", "SlotExport"]
