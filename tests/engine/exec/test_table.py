"""The command table (engine.exec.table): flags are `Flag` members checked at declaration, and
every command's arity, flags and key positions are Redis's, compared with a real redis-server's
COMMAND INFO. The redis-server here is Debian's 7.0; streamkeep follows Redis 8.x, so what 7.0
lacks or declares differently is listed below with its reason, and any other difference fails."""

from __future__ import annotations

from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.exec import table
from streamkeep.engine.exec.table import COMMANDS, CommandSpec, Flag, parse_flags
from tests.support.resp_client import RespClient

# --- flags are checked when a command is declared ------------------------------------------------


def test_flags_parse_into_members() -> None:
    assert parse_flags("xadd", "write denyoom  fast") == {Flag.WRITE, Flag.DENYOOM, Flag.FAST}
    assert parse_flags("ping", "") == frozenset()
    assert COMMANDS[b"xadd"].flags == {Flag.WRITE, Flag.DENYOOM, Flag.FAST}
    assert COMMANDS[b"xadd"].is_write and not COMMANDS[b"xadd"].is_blocking
    assert COMMANDS[b"xreadgroup"].is_write and COMMANDS[b"xreadgroup"].is_blocking


@pytest.mark.parametrize("declare", [
    lambda: table.command("sk.typo", 2, "write fats", keys=""),
    lambda: table.container("sk.typo", "summary", flags="loading stalе"),  # Cyrillic 'е'
    lambda: table.subcommand(COMMANDS[b"xgroup"], "typo", 2, "Write", keys=""),
    lambda: table.command("sk.typo", 2, "write movablekeys", keys=""),  # computed, never declared
], ids=["command", "container", "subcommand", "movablekeys"])
def test_an_unknown_flag_fails_the_declaration(declare: Any) -> None:
    before = (dict(COMMANDS), dict(COMMANDS[b"xgroup"].subcommands))
    with pytest.raises(ValueError, match=r"command '(sk\.typo|xgroup\|typo)' declares an "
                                         r"unknown flag '(fats|stalе|Write|movablekeys)'"):
        declare()
    assert (dict(COMMANDS), dict(COMMANDS[b"xgroup"].subcommands)) == before


@pytest.mark.parametrize(("declare", "why"), [
    (lambda: table.command("sk.typo", 2, "write", keys="", logs=("xadd",)), "bad effect name"),
    (lambda: table.command("sk.typo", 2, "write", keys="", effect="XADD key"),
     "effect shape that is not its own"),
], ids=["logs", "effect"])
def test_a_bad_effect_declaration_fails(declare: Any, why: str) -> None:
    before = dict(COMMANDS)
    with pytest.raises(ValueError, match=f"command 'sk.typo' declares an? {why}"):
        declare()
    assert dict(COMMANDS) == before


def test_every_declared_flag_is_a_member() -> None:
    for spec in all_specs():
        assert all(type(flag) is Flag for flag in spec.flags), spec.name
        assert Flag.MOVABLEKEYS not in spec.flags, spec.name


# --- COMMAND INFO against redis-server -----------------------------------------------------------

# What COMMAND INFO entries are compared: arity, flags (a set), first key, last key, key step.
Shape = tuple[int, frozenset[str], int, int, int]

# Commands redis-server 7.0 does not have: streamkeep follows Redis 8.x (the version that
# introduced each), or has a command of its own.
NOT_IN_REDIS_7_0: dict[str, str] = {
    "xdelex": "Redis 8.2 (reference policies KEEPREF/DELREF/ACKED)",
    "cluster|myshardid": "Redis 7.2 (a node's shard id)",
    "cluster|settopology": "streamkeep's own: the topology a controller gives a node",
    "cluster|relay": "streamkeep's own: a PUBLISH carried from another node (Redis's bus)",
    "cluster|lease": "streamkeep's own: a controller's lease of a node it manages",
    "cluster|export": "streamkeep's own: a controller's atomic slot move, at its source",
    "cluster|import": "streamkeep's own: a controller's atomic slot move, at its target",
    "cluster|trim": "streamkeep's own: the keys a slot moved away left, deleted",
    "xackdel": "Redis 8.2",
    "xnack": "Redis 8.8",
    "xcfgset": "Redis 8.6 (idempotent producers)",
    "xidmprecord": "Redis 8.8",
    "msetex": "Redis 8.4 (strings)",
    "increx": "Redis 8.8 (strings)",
    "digest": "Redis 8.4 (compare-and-set)",
    "delex": "Redis 8.4 (compare-and-delete)",
    # Hash field expiry: Redis 7.4 (HGETDEL, HGETEX, HSETEX: Redis 8.0); arity, flags and
    # keys as Redis 8's src/commands/*.json declare them.
    "hexpire": "Redis 7.4 (hash field expiry)",
    "hpexpire": "Redis 7.4 (hash field expiry)",
    "hexpireat": "Redis 7.4 (hash field expiry)",
    "hpexpireat": "Redis 7.4 (hash field expiry)",
    "httl": "Redis 7.4 (hash field expiry)",
    "hpttl": "Redis 7.4 (hash field expiry)",
    "hexpiretime": "Redis 7.4 (hash field expiry)",
    "hpexpiretime": "Redis 7.4 (hash field expiry)",
    "hpersist": "Redis 7.4 (hash field expiry)",
    "hgetdel": "Redis 8.0 (hash field expiry)",
    "hgetex": "Redis 8.0 (hash field expiry)",
    "hsetex": "Redis 8.0 (hash field expiry)",
    "client|setinfo": "Redis 7.2",
    "waitaof": "Redis 7.2",
    "client|no-touch": "Redis 7.2",
    # Redis's DEBUG is one command taking any subcommand word; streamkeep declares the two it
    # serves as subcommands of a DEBUG container, so these names are streamkeep's own.
    "debug|digest": "streamkeep declares DEBUG as a container",
    "debug|help": "streamkeep declares DEBUG as a container",
}

# Commands both have, declared differently: (streamkeep's entry, redis-server 7.0's entry).
DIFFERENCES: dict[str, tuple[Shape, Shape]] = {
    # Redis 7.2 serves CLUSTER SLOTS and SHARDS while loading (their JSON's LOADING flag).
    "cluster|slots": ((2, frozenset({"loading", "stale"}), 0, 0, 0),
                      (2, frozenset({"stale"}), 0, 0, 0)),
    "cluster|shards": ((2, frozenset({"loading", "stale"}), 0, 0, 0),
                       (2, frozenset({"stale"}), 0, 0, 0)),
    # DEBUG as a container (above): like every container (XGROUP, CLIENT, ...) it carries no
    # flags itself, its subcommands do (admin noscript loading stale, as Redis's DEBUG).
    "debug": ((-2, frozenset(), 0, 0, 0),
              (-2, frozenset({"admin", "noscript", "loading", "stale"}), 0, 0, 0)),
    # Redis 7.2's ZRANK/ZREVRANK WITHSCORE: an optional fourth argument.
    "zrank": ((-3, frozenset({"readonly", "fast"}), 1, 1, 1),
              (3, frozenset({"readonly", "fast"}), 1, 1, 1)),
    "zrevrank": ((-3, frozenset({"readonly", "fast"}), 1, 1, 1),
                 (3, frozenset({"readonly", "fast"}), 1, 1, 1)),
    # Redis 7.2 let WAIT run in scripts (it never blocks there) and flagged it blocking.
    "wait": ((3, frozenset({"blocking"}), 0, 0, 0), (3, frozenset({"noscript"}), 0, 0, 0)),
    # Redis 7.2 let the blocking list pops run in scripts (they never block there).
    "blpop": ((-3, frozenset({"write", "blocking"}), 1, -2, 1),
              (-3, frozenset({"write", "blocking", "noscript"}), 1, -2, 1)),
    "brpop": ((-3, frozenset({"write", "blocking"}), 1, -2, 1),
              (-3, frozenset({"write", "blocking", "noscript"}), 1, -2, 1)),
    "blmove": ((6, frozenset({"write", "denyoom", "blocking"}), 1, 2, 1),
               (6, frozenset({"write", "denyoom", "blocking", "noscript"}), 1, 2, 1)),
    "brpoplpush": ((4, frozenset({"write", "denyoom", "blocking"}), 1, 2, 1),
                   (4, frozenset({"write", "denyoom", "blocking", "noscript"}), 1, 2, 1)),
}


def all_specs() -> list[CommandSpec]:
    """Every client-visible command and subcommand of the table."""
    specs = []
    for spec in COMMANDS.values():
        if not spec.internal:
            specs.append(spec)
            specs.extend(spec.subcommands.values())
    return specs


def shape(entry: list[Any]) -> Shape:
    _name, arity, flags, first, last, step = entry[:6]
    names = frozenset(f.decode() if isinstance(f, bytes) else f for f in flags)
    return arity, names, first, last, step


def table_shape(spec: CommandSpec) -> Shape:
    """What COMMAND INFO should report from the table itself: its flags as declared (sentinel and
    may_replicate are never reported), movablekeys for the commands whose keys no range describes."""
    flags = {flag.value for flag in spec.flags if flag not in (Flag.SENTINEL, Flag.MAY_REPLICATE)}
    if spec.movable_keys:
        flags.add(Flag.MOVABLEKEYS.value)
    return spec.arity, frozenset(flags), spec.first_key, spec.last_key, spec.key_step


def test_command_info_matches_redis_server(redis_raw: RespClient) -> None:
    specs = all_specs()
    names = [spec.name for spec in specs]
    ours = Engine().execute("COMMAND", "INFO", *names)
    theirs = redis_raw.execute("COMMAND", "INFO", *names)
    problems = []
    missing = set()
    for spec, our_entry, their_entry in zip(specs, ours, theirs, strict=True):
        name = spec.name
        assert our_entry is not None, name
        assert shape(our_entry) == table_shape(spec), f"{name}: COMMAND INFO misrenders the table"
        if their_entry is None:
            missing.add(name)
            if name not in NOT_IN_REDIS_7_0:
                problems.append(f"{name}: redis-server has no such command")
            continue
        if name in NOT_IN_REDIS_7_0:
            problems.append(f"{name}: listed as missing from redis-server, which has it")
        expected = DIFFERENCES.get(name)
        got = (shape(our_entry), shape(their_entry))
        if expected is None and got[0] != got[1]:
            problems.append(f"{name}: streamkeep {got[0]} != redis-server {got[1]}")
        elif expected is not None and got != expected:
            problems.append(f"{name}: the listed difference changed: now {got}")
    assert problems == []
    # Every allow-list entry is still needed (and names a command streamkeep has).
    assert missing == set(NOT_IN_REDIS_7_0)
    assert set(DIFFERENCES) <= set(names)

