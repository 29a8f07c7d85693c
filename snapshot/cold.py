"""Cold stream nodes' entries, read back from the snapshot that holds them.

Owns `SnapshotNodes`, the node store (engine.model.residency.NodeStore) of one snapshot file:
a resident engine reads a cold node's entries from it, and a compaction copies an unchanged
node's stored value from it into the next snapshot without decoding it. The file stays open
(and readable after a newer compaction unlinks it) until no stream refers to the store any
more (it is closed when the next store opens). Must not touch: the engine's structures (it returns plain lists), the manifest.
"""

from __future__ import annotations

import weakref
from typing import Any

from streamkeep.engine.model.ids import format_id
from streamkeep.engine.wire.errors import StorageError
from streamkeep.snapshot import layout
from streamkeep.snapshot.reader import Snapshot

# Snapshots whose last store went away. A store is often freed by the cyclic garbage collector
# (streams and their homes refer to each other), which may run anywhere, even inside the
# reader's own locked section: so the finalizer only queues the file, and the next store to be
# opened closes the queued ones.
_unused: list[Snapshot] = []


def _close_unused() -> None:
    while _unused:
        _unused.pop().close()


class SnapshotNodes:
    """The nodes of one snapshot file. `clean_before`: nodes changed at or after this value of
    the change clock (residency.EPOCH) differ from what the file holds."""

    def __init__(self, path: str, clean_before: int) -> None:
        self.path = path
        self.clean_before = clean_before
        _close_unused()
        self.snapshot = Snapshot(path)
        weakref.finalize(self, _unused.append, self.snapshot)

    def raw(self, number: int, master: int) -> bytes:
        value = self.snapshot.node_raw(number, master)
        if value is None:
            raise StorageError(f"{self.path}: stream {number} has no node "
                               f"{format_id(master).decode()} (the snapshot does not match "
                               f"the engine's nodes)")
        return value

    def load(self, number: int, master: int) -> tuple[list[int], list[bytes], list[Any]]:
        node = layout.decode_node(master, self.raw(number, master))
        return node.ids, [format_id(sid) for sid in node.ids], list(node.fields)




__all__ = ["SnapshotNodes"]
