"""The effect vocabulary (engine.exec.table's `effect_vocabulary`, from the declarations of the
commands that are effects) is the whole language of the AOF, snapshots' tails and replicas:
every entry is a write command of the command table (SELECT aside), every effect any command
emits is spelled with an entry, resolves through the table and is one its command declares it
may log, and every builder of engine.model.effects produces one."""

from __future__ import annotations

import inspect
import random
import re
from collections.abc import Iterator, Sequence

import pytest

from streamkeep import Engine, Record, ReplyError, Session
from streamkeep.engine.exec.table import (
    COMMANDS,
    EffectCommand,
    effect_command,
    effect_vocabulary,
    lookup,
)
from streamkeep.engine.model import effects as effects_module
from streamkeep.engine.model.effects import (
    claim_xclaim_pieces,
    new_deliveries_xclaim_effect,
    trim_maxlen_clause,
    trim_minid_clause,
    xadd_effect,
    xclaim_effect,
)
from streamkeep.engine.model.ids import format_id
from streamkeep.snapshot.rdb_functions import dump_functions_payload

EFFECT_VOCABULARY = effect_vocabulary()
LIBRARY = "#!lua name=lib\nredis.register_function('f', function() return 1 end)"

# --- (a) the vocabulary against the command table ------------------------------------------------


def required_argv(syntax: str) -> list[bytes]:
    """The shortest argv a vocabulary syntax allows: optional `[...]` parts dropped, the first
    alternative of each `<a | b>` kept."""
    while True:
        shorter = re.sub(r"\[[^\[\]]*\]", "", syntax)
        if shorter == syntax:
            break
        syntax = shorter
    syntax = re.sub(r"<([^<>|]*)(\|[^<>]*)?>", r"\1", syntax)
    return [word.encode() for word in syntax.split()]


@pytest.mark.parametrize("entry", EFFECT_VOCABULARY.values(), ids=lambda e: e.name)
def test_vocabulary_entry_is_a_write_command(entry: EffectCommand) -> None:
    argv = required_argv(entry.syntax)
    assert b" ".join(argv[:len(entry.name.split())]).decode() == entry.name
    spec = lookup(argv, allow_internal=True)  # also: the syntax's shape satisfies the arity
    assert spec.name == entry.name.lower().replace(" ", "|")
    assert spec.internal == entry.streamkeep_only == entry.name.startswith("SK.")
    if entry.switches_db:
        assert entry.name == "SELECT" and not spec.is_write
    else:
        assert spec.is_write, f"{entry.name} is in the effect vocabulary but not a write command"


def test_every_effect_only_command_is_in_the_vocabulary() -> None:
    internal = {spec.name.upper() for spec in COMMANDS.values() if spec.internal}
    assert internal == {e.name for e in EFFECT_VOCABULARY.values() if e.streamkeep_only}


def test_effect_command_names_subcommands() -> None:
    assert effect_command([b"XGROUP", b"SETID", b"k", b"g", b"0-0"]) == "XGROUP SETID"
    assert effect_command((b"xgroup", b"create")) == "XGROUP CREATE"
    assert effect_command([b"XADD", b"k", b"1-1", b"f", b"v"]) == "XADD"
    assert effect_command([b"SK.XTRIMIDS", b"k", b"1-1"]) == "SK.XTRIMIDS"


# --- (b) what commands emit ----------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        return self.now


# Every kind of write: stream entries, trims of every policy, groups, deliveries (new, history,
# CLAIM, NOACK), claims, the keyspace, and transactions across databases.
SCRIPT: list[list[str]] = [
    ["XADD", "s", "1-1", "f", "v"],
    ["XADD", "s", "5-*", "f", "v"],
    ["XADD", "s", "*", "f", "v"],
    ["XADD", "s", "MAXLEN", "~", "1", "*", "f", "v"],
    ["XADD", "s", "MINID", "~", "2", "*", "f", "v"],
    ["XADD", "s", "MAXLEN", "=", "10", "*", "f", "v"],
    ["XADD", "s", "NOMKSTREAM", "*", "f", "v"],
    ["XADD", "nomk", "NOMKSTREAM", "*", "f", "v"],
    ["XADD", "s", "IDMP", "p", "i1", "*", "f", "v"],  # Redis 8.6: XADD, XCFGSET, XIDMPRECORD
    ["XADD", "s", "IDMP", "p", "i1", "*", "f", "v"],  # a duplicate: SK.XIDMPDUP
    ["XADD", "s", "IDMPAUTO", "p", "MAXLEN", "=", "2", "*", "f", "v"],
    ["XCFGSET", "s", "IDMP-MAXSIZE", "5"],
    ["XADD", "r", "7-7", "f", "v"],
    ["XIDMPRECORD", "r", "q", "i9", "7-7"],  # Redis 8.8
    *[["XADD", "t", f"{i}-1", "f", "v"] for i in range(1, 13)],
    ["XGROUP", "CREATE", "t", "g", "0"],
    ["XGROUP", "CREATE", "t", "g2", "$"],
    ["XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"],
    ["XGROUP", "CREATE", "t", "g3", "0", "ENTRIESREAD", "2"],
    ["XGROUP", "CREATECONSUMER", "t", "g", "carol"],
    ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "t", ">"],
    ["XREADGROUP", "GROUP", "g", "bob", "COUNT", "2", "NOACK", "STREAMS", "t", ">"],
    ["XREADGROUP", "GROUP", "g", "alice", "STREAMS", "t", "0"],
    ["XREADGROUP", "GROUP", "g", "carol", "COUNT", "2", "CLAIM", "0", "STREAMS", "t", ">"],
    ["XADD", "new", "*", "f", "v"],
    ["XREADGROUP", "GROUP", "g", "dave", "COUNT", "4", "STREAMS", "t", "new", ">", ">"],
    ["XACK", "t", "g", "1-1"],
    ["XCLAIM", "t", "g", "bob", "0", "2-1", "3-1"],
    ["XCLAIM", "t", "g", "bob", "0", "11-1", "FORCE", "JUSTID", "LASTID", "11-1"],
    ["XAUTOCLAIM", "t", "g", "carol", "0", "0", "COUNT", "2"],
    ["XNACK", "t", "g", "SILENT", "IDS", "2", "2-1", "9-1"],  # Redis 8.8
    ["XNACK", "t", "g", "FATAL", "IDS", "1", "10-1", "FORCE"],
    ["XREADGROUP", "GROUP", "g", "erin", "MAXCOUNT", "1", "CLAIM", "0", "STREAMS", "t", ">"],
    ["XDEL", "t", "11-1"],
    ["XCLAIM", "t", "g", "bob", "0", "11-1"],  # deleted entry: XACK
    ["XDEL", "t", "4-1"],
    ["XAUTOCLAIM", "t", "g", "alice", "0", "0", "COUNT", "10", "JUSTID"],  # deleted: XACK
    ["XDELEX", "t", "DELREF", "IDS", "1", "5-1"],
    ["XDELEX", "t", "ACKED", "IDS", "2", "6-1", "7-1"],
    ["XACKDEL", "t", "g", "DELREF", "IDS", "1", "2-1"],
    ["XACKDEL", "t", "g", "ACKED", "IDS", "1", "3-1"],
    ["XGROUP", "SETID", "t", "g2", "0"],
    ["XGROUP", "SETID", "t", "g2", "$", "ENTRIESREAD", "3"],
    ["XTRIM", "t", "MAXLEN", "~", "0"],
    ["XTRIM", "t", "MINID", "=", "8"],
    ["XTRIM", "t", "MAXLEN", "1", "DELREF"],
    *[["XADD", "u", f"{i}-1", "f", "v"] for i in range(1, 6)],
    ["XGROUP", "CREATE", "u", "g", "0"],
    ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "u", ">"],
    ["XTRIM", "u", "MAXLEN", "0", "ACKED"],
    ["XADD", "u", "MAXLEN", "0", "DELREF", "*", "f", "v"],
    ["XSETID", "u", "99-0", "ENTRIESADDED", "50", "MAXDELETEDID", "98-0"],
    ["XSETID", "u", "100-0"],
    ["XGROUP", "DELCONSUMER", "t", "g", "carol"],
    ["XGROUP", "DESTROY", "t", "g2"],
    ["RENAME", "u", "u2"],
    ["COPY", "u2", "u-copied"],
    ["COPY", "u2", "u-copied", "DB", "2", "REPLACE"],
    ["RENAMENX", "u2", "u3"],
    ["DEL", "u3", "missing"],
    ["UNLINK", "new"],
    ["MULTI"],
    ["XADD", "s", "*", "f", "v"],
    ["SELECT", "3"],
    ["XADD", "s", "*", "f", "v"],
    ["PING"],
    ["SELECT", "0"],
    ["XDEL", "s", "1-1"],
    ["EXEC"],
    ["SELECT", "3"],
    ["FLUSHDB"],
    ["SELECT", "0"],
    ["FLUSHALL"],
    # strings and TTLs
    ["SET", "str", "v", "EX", "100"],
    ["SET", "str", "w", "KEEPTTL"],
    ["PERSIST", "str"],
    ["PEXPIRE", "str", "1000"],
    ["SETRANGE", "str", "3", "xyz"],
    ["APPEND", "str", "-tail"],
    # sorted sets
    ["ZADD", "zs", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"],
    ["ZINCRBY", "zs", "0.5", "a"],
    ["ZREM", "zs", "e"],
    ["ZPOPMIN", "zs"],
    ["ZRANGESTORE", "zd", "zs", "0", "-1"],
    ["ZUNIONSTORE", "zu", "2", "zs", "zd", "WEIGHTS", "1", "2"],
    ["ZINTERSTORE", "zi", "2", "zs", "zd"],
    ["ZDIFFSTORE", "zf", "1", "zs"],
    ["ZREMRANGEBYSCORE", "zu", "-inf", "(7"],
    ["ZREMRANGEBYLEX", "zi", "-", "+"],
    ["ZREMRANGEBYRANK", "zf", "0", "0"],
    # sets
    ["SADD", "s1", "a", "b", "c", "d"],
    ["SADD", "s2", "c", "d", "e"],
    ["SREM", "s1", "a"],
    ["SPOP", "s1"],
    ["SMOVE", "s2", "s3", "e"],
    ["SINTERSTORE", "si", "s1", "s2"],
    ["SUNIONSTORE", "su", "s1", "s2", "s3"],
    ["SDIFFSTORE", "sd", "s1", "s3"],
    # hashes
    ["HSET", "h", "a", "1", "b", "2", "c", "3"],
    ["HINCRBY", "h", "a", "5"],
    ["HDEL", "h", "c"],
    ["HEXPIRE", "h", "100", "FIELDS", "1", "a"],
    ["HPERSIST", "h", "FIELDS", "1", "a"],
    ["HSETEX", "h", "PX", "5000", "FIELDS", "1", "d", "4"],
    # lists
    ["RPUSH", "l1", "a", "b", "c", "d", "e"],
    ["LPUSHX", "l1", "z"],
    ["LPOP", "l1"],
    ["RPOP", "l1", "2"],
    ["LMOVE", "l1", "l2", "LEFT", "RIGHT"],
    ["RPOPLPUSH", "l1", "l2"],
    ["LSET", "l2", "0", "q"],
    ["LINSERT", "l2", "AFTER", "q", "r"],
    ["LREM", "l2", "0", "r"],
    ["LTRIM", "l2", "0", "0"],
    # function libraries (server state)
    ["FUNCTION", "LOAD", LIBRARY],
    ["FUNCTION", "DELETE", "lib"],
    ["FUNCTION", "RESTORE", dump_functions_payload([LIBRARY.encode()], 12), "REPLACE"],
    ["FUNCTION", "FLUSH"],
]


def scripted_records() -> Iterator[Record]:
    clock = Clock()
    engine = Engine(clock=clock)
    records: list[Record] = []
    engine.add_sink(records.append)
    other = Session()
    for argv in SCRIPT:
        clock.now += 7
        engine.execute(*argv)
        if argv == ["XGROUP", "CREATE", "u", "g", "0"]:  # a blocked read served by an XADD
            engine.execute("XGROUP", "CREATE", "v", "g", "$", "MKSTREAM")
            waiter, _ = engine.submit(other, (b"XREADGROUP", b"GROUP", b"g", b"zed", b"BLOCK",
                                              b"0", b"STREAMS", b"v", b">"))
            assert not waiter.done
            engine.execute("XADD", "v", "*", "f", "v")
            assert waiter.done
        if argv == ["RENAME", "u", "u2"]:  # a stream's DUMP payload RESTOREd beside it
            engine.execute("RESTORE", "u-copy", "0", engine.execute("DUMP", "u2"))
    reply, effects = engine.execute_with_effects("XADD", "w", "*", "f", "v")
    assert effects and effects == records[-1].effects
    yield from records


def random_commands(rng: random.Random) -> list[bytes]:
    key, group, consumer = (rng.choice(x) for x in ([b"a", b"b"], [b"g", b"h"], [b"c", b"d"]))
    some_id = b"%d-%d" % (rng.randint(0, 30), rng.randint(0, 2))
    policy = rng.choice([[], [b"DELREF"], [b"ACKED"]])
    trim = rng.choice([[b"MAXLEN", rng.choice([b"=", b"~"]), b"%d" % rng.randint(0, 5)],
                       [b"MINID", rng.choice([b"=", b"~"]), some_id]])
    return rng.choice([
        [b"XADD", key, b"*", b"f", b"v"],
        [b"XADD", key, *trim, *policy, rng.choice([b"*", some_id]), b"f", b"v"],
        [b"XTRIM", key, *trim, *policy],
        [b"XDEL", key, some_id],
        [b"XDELEX", key, *policy, b"IDS", b"1", some_id],
        [b"XGROUP", b"CREATE", key, group, rng.choice([b"0", b"$"]), b"MKSTREAM"],
        [b"XGROUP", b"SETID", key, group, rng.choice([b"0", b"$", some_id])],
        [b"XREADGROUP", b"GROUP", group, consumer, b"COUNT", b"3",
         *rng.choice([[], [b"NOACK"], [b"CLAIM", b"0"]]), b"STREAMS", key,
         rng.choice([b">", b"0"])],
        [b"XACK", key, group, some_id],
        [b"XACKDEL", key, group, *policy, b"IDS", b"1", some_id],
        [b"XCLAIM", key, group, consumer, b"0", some_id, *rng.choice([[], [b"FORCE"]])],
        [b"XAUTOCLAIM", key, group, consumer, b"0", b"0", b"COUNT", b"2"],
        [b"XADD", key, *rng.choice([[b"IDMP", b"p", b"i%d" % rng.randint(0, 3)],
                                    [b"IDMPAUTO", b"q"]]),
         *rng.choice([[], trim]), b"*", b"f", b"v%d" % rng.randint(0, 2)],
        [b"XCFGSET", key, b"IDMP-MAXSIZE", b"%d" % rng.randint(1, 3)],
        [b"XNACK", key, group, rng.choice([b"SILENT", b"FAIL", b"FATAL"]), b"IDS", b"1",
         some_id, *rng.choice([[], [b"RETRYCOUNT", b"3"], [b"FORCE"]])],
        [b"XREADGROUP", b"GROUP", group, consumer, b"MAXCOUNT", b"2", b"MAXSIZE", b"60",
         *rng.choice([[], [b"CLAIM", b"0"]]), b"STREAMS", key, b"b", rng.choice([b">", b"0"]),
         rng.choice([b">", b"0"])],
        [b"XGROUP", b"DELCONSUMER", key, group, consumer],
        rng.choice([[b"DEL", key], [b"RENAME", key, b"c"], [b"FLUSHDB"], [b"SELECT", b"1"],
                    [b"SELECT", b"0"]]),
        [b"SET", rng.choice([key, b"str"]), b"v",
         *rng.choice([[], [b"PX", b"5"], [b"KEEPTTL"], [b"NX"], [b"PXAT", b"1"]])],
        [rng.choice([b"INCR", b"GETDEL", b"PERSIST"]), rng.choice([key, b"str"])],
        [b"SETRANGE", rng.choice([key, b"str"]), b"%d" % rng.randint(0, 4), b"xy"],
        [b"MSETEX", b"1", rng.choice([key, b"str"]), b"v",
         *rng.choice([[], [b"NX"], [b"XX"]]), *rng.choice([[], [b"PX", b"5"], [b"KEEPTTL"]])],
        [b"PEXPIRE", rng.choice([key, b"str"]), rng.choice([b"3", b"-1"])],
    ])


def random_records(seed: int, count: int = 400, digest: list[str] | None = None
                   ) -> list[Record]:
    """The records of `count` random commands; `digest` gets the engine's state digest."""
    rng = random.Random(seed)
    clock = Clock()
    engine = Engine(clock=clock)
    records: list[Record] = []
    engine.add_sink(records.append)
    for _ in range(count):
        clock.now += rng.randint(0, 3)
        try:
            if rng.random() < 0.05:
                engine.execute("MULTI")
                for _ in range(rng.randint(1, 4)):
                    engine.execute(*random_commands(rng))
                engine.execute("EXEC")
            else:
                engine.execute(*random_commands(rng))
        except ReplyError:
            pass
    if digest is not None:
        digest.append(engine.digest())
    return records


def unexplained_effects(records: Sequence[Record],
                        vocabulary: dict[str, EffectCommand]) -> list[str]:
    """Every way an emitted effect strays from the vocabulary: a name outside it, or an argv
    the command table does not accept as that command (wrong arity)."""
    problems = []
    for record in records:
        for effect in record.effects:
            assert all(type(arg) is bytes for arg in effect), effect
            name = effect_command(effect)
            if name not in vocabulary:
                problems.append(f"{name} (in {effect!r})")
                continue
            try:
                spec = lookup(tuple(effect), allow_internal=True)
            except ReplyError as err:
                problems.append(f"{effect!r}: {err}")
                continue
            if spec.name != name.lower().replace(" ", "|"):
                problems.append(f"{effect!r} runs as {spec.name}")
    return problems


def test_scripted_commands_emit_only_vocabulary_and_all_of_it() -> None:
    records = list(scripted_records())
    assert unexplained_effects(records, EFFECT_VOCABULARY) == []
    emitted = {effect_command(e) for r in records for e in r.effects}
    # The script is broad enough to emit every entry: an entry nothing emits any more is stale.
    assert emitted == set(EFFECT_VOCABULARY)


@pytest.mark.parametrize("seed", range(4))
def test_random_commands_emit_only_vocabulary(seed: int) -> None:
    assert unexplained_effects(random_records(seed), EFFECT_VOCABULARY) == []


@pytest.mark.parametrize("seed", range(4))
def test_random_records_replay_to_the_same_state(seed: int) -> None:
    """Streams, strings and expiring keys mixed: the records replayed on an engine whose clock
    is far later give the same digest (no expiry happens on replay but the logged DELs)."""
    digest: list[str] = []
    records = random_records(seed, digest=digest)
    replica = Engine(clock=lambda: 10**13)
    for record in records:
        replica.replay.apply(record)
    assert replica.digest() == digest[0]


def test_a_name_missing_from_the_vocabulary_is_caught() -> None:
    records = list(scripted_records())
    for name in EFFECT_VOCABULARY:
        smaller = {k: v for k, v in EFFECT_VOCABULARY.items() if k != name}
        problems = unexplained_effects(records, smaller)
        assert problems and all(p.startswith(name + " ") for p in problems), name
    bogus = Record(0, 0, 0, [[b"XFOO", b"k"], [b"XGROUP", b"NOPE", b"k", b"g"],
                             [b"XACK", b"k"]])
    assert len(unexplained_effects([bogus], EFFECT_VOCABULARY)) == 3


# --- (c) the builders ----------------------------------------------------------------------------

SAMPLE_CALLS: dict[str, tuple] = {
    "xadd_effect": (b"k", b"1-1", (b"f", b"v"), trim_maxlen_clause(3)),
    "xtrim_effect": (b"k", trim_minid_clause(5 << 64)),
    "sk_xtrimids_effect": (b"k", [1 << 64, 2 << 64]),
    "xdel_effect": (b"k", [1 << 64]),
    "xsetid_effect": (b"k", 5 << 64, 9, 4 << 64),
    "xack_effect": (b"k", b"g", [1 << 64, (2 << 64) | 1]),
    "xack_ids_effect": (b"k", b"g", [b"1-0", b"2-1"]),
    "xclaim_effect": (b"k", b"g", b"c", 1 << 64, 1000, 2, 3 << 64),
    "new_deliveries_xclaim_effect": (b"k", b"g", b"c", 1000, [b"1-0", b"1-1", b"2-0"]),
    "xnack_effect": (b"k", b"g", 1 << 64, 3),
    "xcfgset_effect": (b"k", 100, 100),
    "xidmprecord_effect": (b"k", b"p", b"i", b"1-1"),
    "sk_xidmpdup_effect": (b"k", 3),
    "xgroup_create_effect": (b"k", b"g", 0, 0),
    "xgroup_setid_effect": (b"k", b"g", 3 << 64, 3),
    "xgroup_destroy_effect": (b"k", b"g"),
    "xgroup_createconsumer_effect": (b"k", b"g", b"c"),
    "xgroup_delconsumer_effect": (b"k", b"g", b"c"),
    "sk_xconsumer_effect": (b"k", b"g", b"c", 1000, 999),
    "del_effect": ([b"a", b"b"],),
    "rename_effect": (b"a", b"b"),
    "restore_effect": (b"k", b"payload"),
    "flushdb_effect": (),
    "flushall_effect": (),
    "function_load_effect": (LIBRARY.encode(),),
    "function_delete_effect": (b"lib",),
    "function_flush_effect": (),
    "function_restore_effect": (b"payload", b"append"),
    "select_effect": (3,),
    "hset_effect": (b"k", [(b"f", b"v")]),
    "hdel_effect": (b"k", [b"f"]),
    "hincrby_effect": (b"k", b"f", -3),
    "hpexpireat_effect": (b"k", 1000, [b"f", b"g"]),
    "hpersist_effect": (b"k", [b"f"]),
    "hsetex_effect": (b"k", 1000, [(b"f", b"v")]),
    "zadd_effect": (b"k", [(b"m", b"0.1"), (b"n", b"-inf")]),
    "zrem_effect": (b"k", [b"m"]),
    "zremrangebyrank_effect": (b"k", 0, 2),
    "as_sent_effect": ([b"zunionstore", b"d", b"1", b"k"],),
    "set_effect": (b"k", b"v", False, 1000),
    "setrange_effect": (b"k", 5, b"v"),
    "append_effect": (b"k", b"tail"),
    "sadd_effect": (b"k", (b"m", b"n")),
    "srem_effect": (b"k", [b"m"]),
    "push_effect": (b"k", (b"a", b"b"), True),
    "pop_effect": (b"k", False, 2),
    "linsert_effect": (b"k", True, b"p", b"e"),
    "pexpireat_effect": (b"k", 1000),
    "persist_effect": (b"k",),
}


def test_every_builder_output_starts_with_a_vocabulary_name() -> None:
    builders = {name: fn for name, fn in inspect.getmembers(effects_module, inspect.isroutine)
                if name.endswith("_effect") and fn.__module__ == effects_module.__name__}
    assert set(builders) == set(SAMPLE_CALLS), "a builder without a sample call here"
    for name, args in SAMPLE_CALLS.items():
        effect = builders[name](*args)
        assert effect_command(effect) in EFFECT_VOCABULARY, (name, effect)
        assert all(type(arg) is bytes for arg in effect), (name, effect)
        lookup(tuple(effect), allow_internal=True)
    assert not unexplained_effects(
        [Record(0, 0, 0, [builders[n](*a) for n, a in SAMPLE_CALLS.items()])], EFFECT_VOCABULARY)


def test_builder_shortcuts_build_the_general_shape() -> None:
    sid = (7 << 64) | 1
    idb = format_id(sid)
    assert new_deliveries_xclaim_effect(b"k", b"g", b"c", 1234, [idb]) == xclaim_effect(
        b"k", b"g", b"c", sid, 1234, 1, sid)
    several = new_deliveries_xclaim_effect(b"k", b"g", b"c", 1234, [b"5-0", idb])
    assert several == [b"XCLAIM", b"k", b"g", b"c", b"0", b"5-0", idb, b"TIME", b"1234",
                       b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", idb]
    head, middle, tail = claim_xclaim_pieces(b"k", b"g", b"c", 1234, (9 << 64) | 2)
    for count in (0, 5, (1 << 63) - 1):
        assert [*head, idb, *middle, b"%d" % count, *tail] == xclaim_effect(
            b"k", b"g", b"c", sid, 1234, count, (9 << 64) | 2)


def test_with_dbs_follows_select_effects() -> None:
    from streamkeep.engine.model.effects import with_dbs

    record = [[b"XADD", b"k"], [b"SELECT", b"5"], [b"DEL", b"k"], [b"select", b"x"], [b"DEL"]]
    assert list(with_dbs(2, record)) == [(2, [b"XADD", b"k"]), (2, [b"SELECT", b"5"]),
                                         (5, [b"DEL", b"k"]), (5, [b"select", b"x"]),
                                         (5, [b"DEL"])]


def test_xadd_effect_entry_inverts_xadd_effect() -> None:
    from streamkeep.engine.model.effects import (
        trim_maxlen_clause,
        trim_minid_clause,
        xadd_effect_entry,
    )

    for clause in ([], trim_maxlen_clause(3), trim_minid_clause(5 << 64)):
        effect = xadd_effect(b"k", b"7-1", [b"MAXLEN", b"v", b"f", b"w"], clause)
        assert xadd_effect_entry(effect) == (b"k", b"7-1", [b"MAXLEN", b"v", b"f", b"w"])
