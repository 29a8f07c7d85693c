"""A small plain hash as the keyspace keeps it: its pack alone, without a `Hash` around it.

Owns `PackedHash`, a `bytes` subclass whose bytes are a hash's packed pairs (the "listpack"
encoding of engine.model.hashes: no field TTLs, within the listpack limits). The keyspace of
hashes holds one in place of a `Hash` whose data is that pack, so a key costs the pack and no
object around it (the value types' registry counts it as a hash). Everything that reads or
changes one goes through engine.model.hashes (`as_hash`, `bound_hash`, `stored`), the one place
that knows a hash may be kept so.

This module stays pure Python, outside the compiled command path: mypyc compiles no class that
derives from `bytes`.

Must not touch: the pack's layout (engine.model.hashes owns it), the keyspace, commands.
"""

from __future__ import annotations


class PackedHash(bytes):
    """A hash's pack, kept bare in the keyspace (see the module docstring). Immutable, as its
    bytes are: a change stores a new one."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<PackedHash {len(self)} bytes>"


__all__ = ["PackedHash"]
