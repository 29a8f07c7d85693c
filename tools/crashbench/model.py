"""The crash bench's model of what a target should hold: its canonical state and a reference.

Owns `read_state` (a target's streams, consumer groups, PELs and consumers as read through
commands, timestamps left out: XRANGE, XINFO GROUPS, XPENDING, XINFO CONSUMERS; or, for the
`types` workload, its sorted sets with scores, hashes with each field's TTL, sets and function
libraries with their code; for the `lists` workload, its lists in order), `state_hash`,
`EngineTarget` (an in-memory Engine as a Target) and `Reference`: an in-memory Engine that
applies each acknowledged operation of the history, with every `XADD *` replaced by the ID the
target acknowledged, every SPOP by an SREM of what it popped and every BLMOVE by its LMOVE
(`explicit`), so after operation j it holds the state a log prefix of j operations must recover
to (commands with `min-idle 0` and no BLOCK are deterministic). Streamkeep's command semantics
are Redis's, checked differentially elsewhere; the model is what the durability checks compare
against, for streamkeep and redis-server alike.
Must not touch: a target's files, the checks themselves (invariants).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from streamkeep.engine.wire.reply_parser import ErrorReply
from streamkeep.tools.crashbench.lists_workload import LIST_KEYS
from streamkeep.tools.crashbench.target import CommandFailed, Target
from streamkeep.tools.crashbench.types_workload import ABS_AT, HASH_FIELDS, HASHES, SETS, ZSETS
from streamkeep.tools.crashbench.workload import GROUPS, KEYS, payload_ok

# The streams workload's: per key (key, entries, groups): entries [(id, fields)], groups [(name,
# last-delivered-id, entries-read, pending [(id, consumer, deliveries)], consumers [(name,
# pending)])]. The types workload's: one part, (TYPES, zsets, hashes, sets, functions): zsets
# [(key, [(member, score)] in rank order)], hashes [(key, [(field, value, ttl)] sorted)], sets
# [(key, [member] sorted)], functions [(library, code)]. A field's ttl: None (none), its
# expiry time when absolute (ABS_AT and up), else "rel": a relative TTL lands on each clock's
# own "now plus", so only its presence is the model's. The lists workload's: one part, (LISTS,
# [(key, elements in order)]).
State = tuple
TYPES = "types"  # the tag of a state's types part (a stream part starts with its key, bytes)
LISTS = "lists"  # the tag of a state's lists part
TAGS = (TYPES, LISTS)


def _pairs(flat: Sequence[Any]) -> dict[bytes, Any]:
    return {_b(flat[i]): flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _b(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()


def _all_bytes(values: Sequence[Any]) -> tuple[bytes, ...]:
    """`values` as bytes (an entry's fields: bytes from either target, checked in one pass)."""
    values = tuple(values)
    return values if set(map(type, values)) <= {bytes} else tuple(map(_b, values))


def read_state(target: Target, workload: str = "streams") -> State:
    """The canonical state of the workload's keys on `target` (see the module docstring),
    read in one MULTI/EXEC: a replica applying its stream, or a server with other clients,
    never shows a mix of two moments."""
    commands = (_types_commands() if workload == "types" else _lists_commands()
                if workload == "lists" else _stream_commands())
    target.execute([b"MULTI"])
    for argv in commands:
        target.execute(argv)
    replies = target.execute([b"EXEC"])
    if workload == "types":
        return (_types_state(replies),)
    if workload == "lists":
        return ((LISTS, tuple((key, tuple(map(_b, elements)))
                              for key, elements in zip(LIST_KEYS, replies, strict=True))),)
    return _stream_state(replies)


def _lists_commands() -> list[list[bytes]]:
    return [[b"LRANGE", key, b"0", b"-1"] for key in LIST_KEYS]


def _stream_commands() -> list[list[bytes]]:
    commands: list[list[bytes]] = []
    for key in KEYS:
        commands += [[b"XRANGE", key, b"-", b"+"], [b"XINFO", b"GROUPS", key]]
    for key, group in GROUPS:
        commands += [[b"XPENDING", key, group, b"-", b"+", b"1000000"],
                     [b"XINFO", b"CONSUMERS", key, group]]
    return commands


def _stream_state(replies: Sequence[Any]) -> State:
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


def _types_commands() -> list[list[bytes]]:
    commands = [[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"] for key in ZSETS]
    for key in HASHES:
        commands += [[b"HGETALL", key],
                     [b"HPEXPIRETIME", key, b"FIELDS", b"%d" % len(HASH_FIELDS), *HASH_FIELDS]]
    commands += [[b"SMEMBERS", key] for key in SETS]
    return [*commands, [b"FUNCTION", b"LIST", b"WITHCODE"]]


def _types_state(replies: Sequence[Any]) -> tuple:
    z, h = len(ZSETS), len(HASHES)
    zsets = tuple((key, tuple(zip(map(_b, flat[::2]), map(_b, flat[1::2]), strict=True)))
                  for key, flat in zip(ZSETS, replies[:z], strict=True))
    hashes = []
    for i, key in enumerate(HASHES):
        values, times = replies[z + 2 * i], replies[z + 2 * i + 1]
        ttl = dict(zip(HASH_FIELDS, times if isinstance(times, list) else [], strict=False))
        hashes.append((key, tuple(sorted((_b(f), _b(v), _ttl(ttl.get(_b(f), -1)))
                                         for f, v in _pairs(values).items()))))
    sets = tuple((key, tuple(sorted(map(_b, members))))
                 for key, members in zip(SETS, replies[z + 2 * h:z + 2 * h + len(SETS)],
                                         strict=True))
    libraries = tuple(sorted((_b(_pairs(lib)[b"library_name"]), _b(_pairs(lib)[b"library_code"]))
                             for lib in replies[-1]))
    return (TYPES, zsets, tuple(hashes), sets, libraries)


def _ttl(expires_at: Any) -> int | str | None:
    at = int(expires_at)
    return None if at < 0 else at if at >= ABS_AT else "rel"


def streams(state: State) -> State:
    """The stream part of `state` (empty for the types and lists workloads')."""
    return tuple(part for part in state if part[0] not in TAGS)


def types_part(state: State) -> tuple | None:
    """The types part of `state`, or None (the streams workload's)."""
    return next((part for part in state if part[0] == TYPES), None)


def lists_part(state: State) -> tuple | None:
    """The lists part of `state`, or None (the other workloads')."""
    return next((part for part in state if part[0] == LISTS), None)


def _failed(reply: Any) -> bool:
    """An error inside EXEC's reply: the engine's ReplyError, or RESP's ErrorReply."""
    return isinstance(reply, Exception | ErrorReply)


def stream_lengths(state: State) -> tuple[int, ...]:
    """How many entries each stream of `state` holds, in KEYS order (for the lists workload,
    each list's length in LIST_KEYS order; empty for the types workload's): a state another
    one can equal only if these are equal."""
    lists = lists_part(state)
    if lists is not None:
        return tuple(len(elements) for _key, elements in lists[1])
    return tuple(len(entries) for _key, entries, _groups in streams(state))


def state_hash(state: State) -> str:
    return hashlib.blake2b(repr(state).encode(), digest_size=16).hexdigest()


def entries_hash(state: State) -> str:
    """state_hash of everything but the consumer groups: the streams' entries, and the
    types or lists part whole."""
    return state_hash(tuple((key, entries) for key, entries, _groups in streams(state))
                      + tuple(part for part in state if part[0] in TAGS))


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
    """`argv` made deterministic by its reply: an `XADD ... *` ID replaced by the ID its reply
    gave, an SPOP that popped replaced by the SREM of what it popped, a BLMOVE by the LMOVE it
    is when it does not block (the model never waits: an empty source moves nothing)."""
    out = list(argv)
    name = out[0].upper()
    if name == b"XADD" and isinstance(reply, bytes) and b"*" in out:
        out[out.index(b"*")] = reply
    elif name == b"SPOP" and reply:
        out = [b"SREM", out[1], *([reply] if isinstance(reply, bytes) else reply)]
    elif name == b"BLMOVE":
        out = [b"LMOVE", *out[1:5]]
    return out


def resolved(argv: Sequence[bytes], before: State, after: State) -> list[bytes] | None:
    """The in-flight command `argv` (no reply came) as the model applies it, given the
    lineage's state `before` it and the recovered state `after`: an `XADD *` takes the ID of
    the recovered entry carrying its op number, an SPOP is the SREM of the members `after`
    lacks; None when `after` shows no trace of it (it cannot be the applied one)."""
    name = argv[0].upper()
    if name == b"XADD":
        op = int(argv[list(argv).index(b"op") + 1])
        found = [i for key, entries, _g in streams(after) if key == argv[1]
                 for i, fields in entries if payload_ok(fields) == op]
        return explicit(argv, found[0]) if found else None
    if name == b"SPOP":
        had, has = (dict((types_part(state) or (TYPES, (), (), (), ()))[3]).get(argv[1], ())
                    for state in (before, after))
        popped = sorted(set(had) - set(has))
        # Whole: as many members as it pops (one without COUNT), or none at all.
        count = min(int(argv[2]) if len(argv) > 2 else 1, len(had))
        return explicit(argv, popped) if popped and len(popped) == count else None
    return explicit(argv, None)


class Reference:
    """An in-memory Engine applying acknowledged operations (see the module docstring)."""

    def __init__(self, workload: str = "streams") -> None:
        from streamkeep import Engine

        self.workload = workload
        self.target = EngineTarget(Engine())

    def apply(self, argv: Sequence[bytes], reply: Any) -> Any:
        """Apply one acknowledged operation; the model's own reply (CommandFailed's line for
        an error)."""
        try:
            return self.target.execute(explicit(argv, reply))
        except CommandFailed as err:
            return err

    def state(self) -> State:
        return read_state(self.target, self.workload)

    def stream_lengths(self) -> tuple[int, ...]:
        """`stream_lengths` of `state()`, by XLEN: a few O(1) reads, not the whole state."""
        if self.workload == "types":
            return ()
        if self.workload == "lists":
            return tuple(int(self.target.execute([b"LLEN", key])) for key in LIST_KEYS)
        return tuple(int(self.target.execute([b"XLEN", key])) for key in KEYS)

    @classmethod
    def replayed(cls, ops: Sequence[tuple[Sequence[bytes], Any]], workload: str = "streams"
                 ) -> Reference:
        ref = cls(workload)
        for argv, reply in ops:
            ref.apply(argv, reply)
        return ref


assert all(key in KEYS for key, _group in GROUPS)
