"""The crash bench's model of what a target should hold: its canonical state and a reference.

Owns `read_state` (a target's streams, consumer groups, PELs and consumers as read through
commands, timestamps left out: XRANGE, XINFO GROUPS, XPENDING, XINFO CONSUMERS), `state_hash`,
`EngineTarget` (an in-memory Engine as a Target) and `Reference`: an in-memory Engine that
applies each acknowledged operation of the history, with every `XADD *` replaced by the ID the
target acknowledged, so after operation j it holds the state a log prefix of j operations
must recover to (commands with `min-idle 0` and no BLOCK are deterministic). Streamkeep's
command semantics are Redis's, checked differentially elsewhere; the model is what the
durability checks compare against, for streamkeep and redis-server alike.
Must not touch: a target's files, the checks themselves (invariants).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from streamkeep.engine.wire.reply_parser import ErrorReply
from streamkeep.tools.crashbench.target import CommandFailed, Target
from streamkeep.tools.crashbench.workload import GROUPS, KEYS

# key -> (entries, groups): entries [(id, fields)], groups [(name, last-delivered-id,
# entries-read, pending [(id, consumer, deliveries)], consumers [(name, pending)])]
State = tuple


def _pairs(flat: Sequence[Any]) -> dict[bytes, Any]:
    return {_b(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _all_bytes(values: Sequence[Any]) -> tuple[bytes, ...]:
    """`values` as bytes (an entry's fields: bytes from either target, checked in one pass)."""
    values = tuple(values)
    return values if set(map(type, values)) <= {bytes} else tuple(map(_b, values))


def read_state(target: Target) -> State:
    """The canonical state of the workload's keys on `target` (see the module docstring),
    read in one MULTI/EXEC: a replica applying its stream, or a server with other clients,
    never shows a mix of two moments."""
    commands: list[list[bytes]] = []
    for key in KEYS:
        commands += [[b"XRANGE", key, b"-", b"+"], [b"XINFO", b"GROUPS", key]]
    for key, group in GROUPS:
        commands += [[b"XPENDING", key, group, b"-", b"+", b"1000000"],
                     [b"XINFO", b"CONSUMERS", key, group]]
    target.execute([b"MULTI"])
    for argv in commands:
        target.execute(argv)
    replies = target.execute([b"EXEC"])
    per_group = {(key, group): replies[2 * len(KEYS) + 2 * i: 2 * len(KEYS) + 2 * i + 2]
                 for i, (key, group) in enumerate(GROUPS)}
    out: list[tuple] = []
    for k, key in enumerate(KEYS):
        entries_reply, infos = replies[2 * k], replies[2 * k + 1]
        entries = tuple((_b(i), _all_bytes(fields)) for i, fields in entries_reply or [])
        if _failed(infos):  # no such key
            out.append((key, entries, ()))
            continue
        groups = []
        for info in infos:
            fields = _pairs(info)
            name = _b(fields[b"name"])
            pending, consumers = per_group.get((key, name), ([], []))
            if _failed(pending) or _failed(consumers):
                pending, consumers = [], []
            groups.append((
                name, _b(fields[b"last-delivered-id"]), fields.get(b"entries-read"),
                tuple((_b(i), _b(c), int(n)) for i, c, _idle, n in pending),
                tuple(sorted((_b(_pairs(c)[b"name"]), int(_pairs(c)[b"pending"]))
                             for c in consumers))))
        out.append((key, entries, tuple(sorted(groups))))
    return tuple(out)


def _failed(reply: Any) -> bool:
    """An error inside EXEC's reply: the engine's ReplyError, or RESP's ErrorReply."""
    return isinstance(reply, Exception | ErrorReply)


def state_hash(state: State) -> str:
    return hashlib.blake2b(repr(state).encode(), digest_size=16).hexdigest()


def entries_hash(state: State) -> str:
    """state_hash of the streams' entries only (consumer groups left out)."""
    return state_hash(tuple((key, entries) for key, entries, _groups in state))


class EngineTarget:
    """An in-process Engine as a Target (error replies become CommandFailed)."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def execute(self, argv: Sequence[bytes]) -> Any:
        from streamkeep import ReplyError

        try:
            return self.engine.execute(*argv)
        except ReplyError as err:
            raise CommandFailed(str(err)) from None


def explicit(argv: Sequence[bytes], reply: Any) -> list[bytes]:
    """`argv` with an `XADD ... *` ID replaced by the ID its reply gave."""
    out = list(argv)
    if out[0].upper() == b"XADD" and isinstance(reply, bytes) and b"*" in out:
        out[out.index(b"*")] = reply
    return out


class Reference:
    """An in-memory Engine applying acknowledged operations (see the module docstring)."""

    def __init__(self) -> None:
        from streamkeep import Engine

        self.target = EngineTarget(Engine())

    def apply(self, argv: Sequence[bytes], reply: Any) -> Any:
        """Apply one acknowledged operation; the model's own reply (CommandFailed's line for
        an error)."""
        try:
            return self.target.execute(explicit(argv, reply))
        except CommandFailed as err:
            return err

    def state(self) -> State:
        return read_state(self.target)

    @classmethod
    def replayed(cls, ops: Sequence[tuple[Sequence[bytes], Any]]) -> Reference:
        ref = cls()
        for argv, reply in ops:
            ref.apply(argv, reply)
        return ref


assert all(key in KEYS for key, _group in GROUPS)
