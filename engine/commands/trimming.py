"""Trimming arguments and reference policies shared by XADD, XTRIM, XDELEX and XACKDEL.

Owns the parse of MAXLEN|MINID [=|~] threshold [LIMIT n] [KEEPREF|DELREF|ACKED] (and, for XADD,
NOMKSTREAM and IDMP pid iid | IDMPAUTO pid, which sit among them), the LIMIT
defaults, the trim itself (through `Stream.trim`), the reference policies (what deleting an entry
does to consumer groups' PELs) and the exact `=` effect clause a trim is replayed with. Must not
touch: replies of the commands that use it.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.table import Argv
from streamkeep.engine.model.effects import (
    sk_xtrimids_effect,
    trim_maxlen_clause,
    trim_minid_clause,
    xack_effect,
)
from streamkeep.engine.model.ids import ParsedID, parse_id
from streamkeep.engine.model.stream import Stream
from streamkeep.engine.wire.args import is_word, parse_int
from streamkeep.engine.wire.errors import SYNTAX, ReplyError

KEEPREF, DELREF, ACKED = b"KEEPREF", b"DELREF", b"ACKED"
_POLICIES = {b"keepref": KEEPREF, b"delref": DELREF, b"acked": ACKED}


class TrimArgs:
    """XADD's and XTRIM's options as parsed (streamParseAddOrTrimArgsOrReply's args). A class
    with its own `__init__`: compiled, it is made in a few dozen instructions, where a
    dataclass's generated `__init__` runs interpreted (some 4,000: more than an IDMP XADD's
    whole add)."""

    def __init__(self) -> None:
        self.strategy: bytes | None = None  # b"MAXLEN" | b"MINID"
        self.maxlen = -1
        self.minid = 0
        self.approx = False
        self.limit = 0
        self.limit_given = False
        self.policy: bytes = KEEPREF
        self.policy_given = False
        self.nomkstream = False
        self.id: ParsedID | None = None  # XADD's explicit ID; None means '*'
        self.field_pos = 0  # XADD: index of the first field
        self.idmp_pid: bytes | None = None  # XADD IDMP / IDMPAUTO: the producer ID
        self.idmp_iid: bytes | None = None  # XADD IDMP: the idempotent ID (None with IDMPAUTO)


def _parse_idmp(argv: Argv, i: int, auto: bool, a: TrimArgs) -> int:
    """XADD's `IDMP pid iid` or `IDMPAUTO pid` at argv[i] (Redis 8.6); the next index."""
    if a.idmp_pid is not None:
        raise ReplyError("ERR IDMP/IDMPAUTO specified multiple times")
    pid = argv[i + 1]
    name = "IDMPAUTO" if auto else "IDMP"
    if not pid:
        raise ReplyError(f"ERR {name} requires a non-empty producer ID")
    a.idmp_pid = pid
    if auto:
        return i + 2
    iid = argv[i + 2]
    if not iid:
        raise ReplyError("ERR IDMP requires a non-empty idempotent ID")
    a.idmp_iid = iid
    return i + 3


# An idempotent producer's every send, `XADD key IDMP pid iid * field value ...` or `XADD key
# IDMPAUTO pid * field value ...` (what redis-py sends): the option's word and its width.
_IDMP_WIDTH: Final = {b"IDMP": 3, b"idmp": 3, b"IDMPAUTO": 2, b"idmpauto": 2}


def _idmp_only(argv: Argv, a: TrimArgs) -> bool:
    """XADD's IDMP pid iid or IDMPAUTO pid as its only option, then `*`: read into `a` as the
    loop of parse_add_trim would, without it. False, `a` untouched, for any other shape (an
    empty ID too: the loop words its error)."""
    width = _IDMP_WIDTH.get(argv[2], 0)
    star = 2 + width
    if not width or star >= len(argv) or argv[star] != b"*":
        return False
    pid = argv[3]
    iid = argv[4] if width == 3 else None
    if not pid or iid == b"":
        return False
    a.idmp_pid, a.idmp_iid, a.field_pos = pid, iid, star + 1
    return True


def parse_policy(arg: bytes) -> bytes | None:
    return _POLICIES.get(arg.lower())


def obeys_exactly(ctx: Ctx) -> bool:
    """Whether a trim's threshold is exact whatever LIMIT says: replayed effects, and a
    redis-server primary's commands (Redis rewrites `~` trims to exact ones, keeping the
    LIMIT, for its replicas and AOF, and obeys them unlimited: mustObeyClient)."""
    return ctx.replaying or ctx.session.from_primary


def parse_add_trim(argv: Argv, xadd: bool, replaying: bool, max_entries: int) -> TrimArgs:
    """streamParseAddOrTrimArgsOrReply: options from argv[2] on; for XADD up to the ID."""
    a = TrimArgs()
    if xadd and _idmp_only(argv, a):
        return a
    i, argc = 2, len(argv)
    while i < argc:
        more = argc - 1 - i
        opt = argv[i]
        if xadd and opt == b"*":
            break
        low = opt.lower()
        if low in (b"maxlen", b"minid") and more:
            if a.strategy is not None:
                raise ReplyError(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not "
                    "compatible"
                )
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt in (b"~", b"="):
                a.approx = nxt == b"~"
                i += 1
            if low == b"maxlen":
                a.maxlen = parse_int(argv[i + 1])
                if a.maxlen < 0:
                    raise ReplyError("ERR The MAXLEN argument must be >= 0.")
                a.strategy = b"MAXLEN"
            else:
                a.minid = parse_id(argv[i + 1], 0, strict=True).value
                a.strategy = b"MINID"
            i += 2
            continue
        if low == b"limit" and more:
            a.limit = parse_int(argv[i + 1])
            if a.limit < 0:
                raise ReplyError("ERR The LIMIT argument must be >= 0.")
            a.limit_given = True
            i += 2
            continue
        policy = _POLICIES.get(low)
        if policy is not None and not a.policy_given:  # a second one is not an option
            a.policy, a.policy_given = policy, True
            i += 1
            continue
        if xadd and low == b"nomkstream":
            a.nomkstream = True
            i += 1
            continue
        if xadd and (low == b"idmp" and more >= 2 or low == b"idmpauto" and more):
            i = _parse_idmp(argv, i, low == b"idmpauto", a)
            continue
        if xadd:
            a.id = parse_id(opt, 0, strict=True, allow_seq_star=True)
            break
        raise ReplyError(SYNTAX)
    a.field_pos = i + 1 if xadd else i
    if a.idmp_pid is not None and a.id is not None:
        raise ReplyError("ERR IDMP/IDMPAUTO can be used only with auto-generated IDs")
    if a.limit and a.strategy is None:
        raise ReplyError(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
        )
    if not xadd and a.strategy is None:
        raise ReplyError("ERR syntax error, XTRIM must be called with a trimming strategy")
    if replaying:
        a.limit = 0  # exact thresholds (effects, a primary's rewrites): LIMIT is not enforced
    elif a.limit_given:
        if not a.approx:
            raise ReplyError("ERR syntax error, LIMIT cannot be used without the special ~ option")
    elif a.approx:
        a.limit = 100 * max_entries
        if a.limit <= 0:
            a.limit = 10000
        elif a.limit > 1000000:
            a.limit = 1000000
    else:
        a.limit = 0
    return a


# --- reference policies ----------------------------------------------------------------------


def referenced(s: Stream, sid: int) -> bool:
    """Redis 8.2's streamEntryIsReferenced: some group has not been delivered `sid` yet, or
    still has it pending. With no groups nothing is referenced."""
    return any(sid > group.last_id or sid in group.pel for group in s.groups.values())


def drop_references(s: Stream, sids: list[int]) -> dict[bytes, list[int]]:
    """DELREF: these IDs leave every group's PEL. Returns, per group, the IDs it dropped."""
    dropped: dict[bytes, list[int]] = {}
    for name, group in s.groups.items():
        if group.pel:
            gone = [sid for sid in sids if group.ack(sid)]
            if gone:
                dropped[name] = gone
    return dropped


def run_trim(s: Stream, a: TrimArgs) -> tuple[list[int], dict[bytes, list[int]]]:
    """Trim `s` as the parsed arguments say; returns the removed IDs and, for DELREF, the
    references dropped per group."""
    walked: list[int] | None = None if a.policy == KEEPREF else []
    removed = s.trim(
        a.maxlen if a.strategy == b"MAXLEN" else None,
        a.minid if a.strategy == b"MINID" else None,
        a.approx,
        a.limit,
        (lambda sid: referenced(s, sid)) if a.policy == ACKED and s.groups else None,
        walked,
    )
    dropped = drop_references(s, walked) if a.policy == DELREF and walked else {}
    return removed, dropped


def trim_effects(
    key: bytes, s: Stream, a: TrimArgs, removed: list[int], dropped: dict[bytes, list[int]]
) -> tuple[list[bytes], list[list[bytes]]]:
    """How a trim replays. KEEPREF removes a prefix, so Redis's own `= threshold` clause (the
    length it left, or its first ID with tombstones) reproduces it. DELREF/ACKED may skip
    entries, so they replay as the exact IDs removed plus the XACKs of dropped references.
    Returns (clause for XADD/XTRIM, or [] ; separate effects)."""
    if a.policy == KEEPREF:
        if not a.approx:  # exact trims are their own replay
            if a.strategy == b"MAXLEN":
                return trim_maxlen_clause(a.maxlen), []
            return trim_minid_clause(a.minid), []
        if a.strategy == b"MAXLEN" or not s.nodes:
            return trim_maxlen_clause(s.length), []
        return trim_minid_clause(s.first_entry_id(skip_tombstones=False)), []
    effects: list[list[bytes]] = []
    if removed:
        effects.append(sk_xtrimids_effect(key, removed))
    for group, sids in dropped.items():
        effects.append(xack_effect(key, group, sids))
    return [], effects


__all__ = ["TrimArgs", "parse_add_trim", "run_trim", "trim_effects", "is_word"]
