"""ACL categories and key specs against redis-server: COMMAND INFO's fields 7 and 9, ACL CAT and
COMMAND GETKEYS/GETKEYSANDFLAGS, for every command and subcommand streamkeep and the 7.0 oracle
both have (engine.exec.categories, engine.exec.key_specs: each command's own declaration).

streamkeep follows Redis 8.x: where 8.x's command JSON differs from 7.0 the difference is listed
below with its reason, and checked to be exactly that. The commands 7.0 lacks (Redis 7.2 to 8.x)
are checked against Redis's src/commands/*.json in tests/engine/exec/test_key_specs.py and
test_categories.py (tests.support.later_commands); here they must be the ones redis-server does
not know.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.commands.command import find_command
from streamkeep.engine.exec import key_specs
from streamkeep.engine.exec.categories import CATEGORIES, commands_in
from streamkeep.engine.exec.table import command_names
from tests.support.diffutil import outcome
from tests.support.later_commands import SOURCE_CHECKED
from tests.support.resp_client import RespClient

# Commands whose Redis 8.x metadata differs from 7.0's: (what differs, why).
DIFFERENCES: dict[str, tuple[str, str]] = {
    "wait": ("categories", "Redis 7.2 flagged WAIT blocking (wait.json), so it is @blocking"),
    "sinterstore": ("key specs", "Redis 7.2's sinterstore.json: the destination is OW, not RW"),
}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine()


def _info(target: Any, names: list[str]) -> list[Any]:
    return [entry for entry in target.execute("COMMAND", "INFO", *names)]


def test_command_info_categories_and_key_specs_match_redis(
        redis_raw: RespClient, engine: Engine) -> None:
    names = command_names()
    ours, theirs = _info(engine, names), _info(redis_raw, names)
    problems, missing, same = [], set(), 0
    for name, our, their in zip(names, ours, theirs, strict=True):
        assert our is not None, name
        if their is None:
            missing.add(name)
            continue
        cats_ok = our[6] == their[6]  # the same categories, in the same order
        specs_ok = our[8] == their[8]  # the same key specs, notes and all
        if name in DIFFERENCES:
            what = DIFFERENCES[name][0]
            if (cats_ok, specs_ok) != (what != "categories", what != "key specs"):
                problems.append(f"{name}: the listed difference ({what}) changed")
        elif not (cats_ok and specs_ok):
            problems.append(f"{name}: categories {our[6]} vs {their[6]}, key specs {our[8]} "
                            f"vs {their[8]}")
        else:
            same += 1
    assert problems == []
    assert missing == set(SOURCE_CHECKED), "the commands redis-server 7.0 lacks changed"
    assert same == len(names) - len(missing) - len(DIFFERENCES)
    wait, sinterstore = engine.execute("COMMAND", "INFO", "wait", "sinterstore")
    assert wait[6] == ["@slow", "@blocking", "@connection"]
    assert sinterstore[8][0][1] == ["OW", "update"]


def _docs(target: Any) -> dict[bytes, dict[bytes, Any]]:
    """COMMAND DOCS of every command, each entry's fields by name (RESP2's flat pairs)."""
    reply = target.execute("COMMAND", "DOCS")
    pairs = zip(reply[::2], reply[1::2], strict=True) if isinstance(reply, list) else reply.items()
    return {bytes(name): dict(zip(doc[::2], doc[1::2], strict=True)) if isinstance(doc, list)
            else dict(doc) for name, doc in pairs}


def test_command_docs_group_and_since_match_redis(redis_raw: RespClient, engine: Engine) -> None:
    """Each declaration's COMMAND DOCS group (Redis's spelling: "sorted-set") and version, for
    every command both have. (Summaries are Redis 8's texts, which 7.2 rewrote.)"""
    ours, theirs = _docs(engine), _docs(redis_raw)
    shared = sorted(set(ours) & set(theirs))
    assert len(shared) > 150
    problems = [f"{name.decode()}.{field.decode()}: {ours[name].get(field)!r} vs "
                f"{theirs[name].get(field)!r}"
                for name in shared for field in (b"group", b"since")
                if ours[name].get(field) != theirs[name].get(field)]
    assert problems == []


def test_acl_cat_matches_redis(redis_raw: RespClient) -> None:
    assert tuple(c.decode() for c in redis_raw.execute("ACL", "CAT")) == CATEGORIES
    theirs_all = {n.decode() for n in redis_raw.execute("COMMAND", "LIST")}
    shared = set(command_names()) & theirs_all
    for category in CATEGORIES:
        theirs = {n.decode() for n in redis_raw.execute("ACL", "CAT", category)} & shared
        ours = {spec.name for spec in commands_in(category)} & shared
        if category == "blocking":
            ours.discard("wait")  # DIFFERENCES
        assert ours == theirs, category


# --- COMMAND GETKEYS / GETKEYSANDFLAGS ----------------------------------------------------------

# Redis 7.2 gave ZRANK/ZREVRANK an optional WITHSCORE (arity -3, 7.0's is 3): their command lines
# here have 7.0's arity (COMMAND GETKEYS checks the arity).
ARITY_7_0 = {"zrank": 3, "zrevrank": 3}

# Argument fillers: plain words, counts (for the numkeys commands) and a mix.
FILLERS = (["a", "b", "c", "d", "e", "f", "g"], ["2", "2", "2", "2", "2", "2", "2"],
           ["1", "x", "y", "2", "z", "w", "v"])


def generated_argvs() -> list[tuple[str, ...]]:
    """For each command with keys (and each container) that redis-server has, command lines of
    its arity and a few longer (or one wrong) ones, with each filler."""
    argvs = []
    for name in command_names():
        if name in SOURCE_CHECKED:
            continue
        spec = find_command(name.encode())
        assert spec is not None
        words = tuple(w.upper() for w in name.split("|"))
        if spec.subcommands:
            argvs.append(words)
            continue
        if not key_specs.has_keys(spec):
            continue
        least = abs(spec.arity)
        lengths = [least, least + 1] if spec.arity > 0 else range(least, least + 4)
        if name in ARITY_7_0:
            lengths = [ARITY_7_0[name]]
        for length, filler in itertools.product(lengths, FILLERS):
            argvs.append(words + tuple(filler[:length - len(words)]))
    return argvs


HANDWRITTEN: list[tuple[str, ...]] = [
    ("SET", "k", "v", "GET"), ("SET", "k", "v", "EX", "1", "get"), ("SET", "k", "GET"),
    ("SET", "k", "v", "NX", "GETX"),
    ("XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0"), ("XREAD", "STREAMS", "a", "b", "0"),
    ("XREAD", "BLOCK", "0", "STREAMS", "streams", "0"), ("XREAD", "COUNT", "1"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", ">"),
    ("XREADGROUP", "GROUP", "g", "STREAMS", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "a", "b", ">", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">"),
    ("EVAL", "s", "0"), ("EVAL", "s", "1", "k"), ("EVAL", "s", "2", "k"), ("EVAL", "s", "-1"),
    ("EVAL", "s", "01", "k"), ("EVAL", "s", "1x", "k"), ("EVAL", "s", " 1", "k"),
    ("EVAL", "s", "+1", "k"), ("EVALSHA", "x", "2", "a", "b", "c"), ("FCALL", "f", "1", "k", "a"),
    ("FCALL_RO", "f", "3", "k", "a"), ("EVAL_RO", "s", "1", "k"),
    ("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"), ("ZUNIONSTORE", "d", "5", "a", "b"),
    ("ZINTERSTORE", "d", "0", "a"), ("ZDIFFSTORE", "d", "1x", "a", "b"), ("ZUNION", "2", "a", "b"),
    ("ZINTERCARD", "3", "a", "b"), ("SINTERCARD", "2", "a", "b", "LIMIT", "1"),
    ("LMPOP", "2", "a", "b", "LEFT"), ("BLMPOP", "0", "2", "a", "b", "LEFT"),
    ("ZMPOP", "1", "a", "MIN"), ("BZMPOP", "0", "3", "a", "b", "MIN"),
    ("MSET", "a", "1", "b"), ("MSET", "a", "1", "b", "2"), ("MSETNX", "a", "1"),
    ("BLPOP", "a", "b", "0"), ("BRPOPLPUSH", "a", "b", "0"), ("SMOVE", "a", "b", "m"),
    ("SUNIONSTORE", "d", "a", "b"), ("COPY", "a", "b", "REPLACE"), ("RENAME", "a", "b"),
    ("LMOVE", "a", "b", "LEFT", "RIGHT"), ("OBJECT", "ENCODING", "k"), ("MEMORY", "USAGE", "k"),
    ("XINFO", "STREAM", "s", "FULL"), ("XGROUP", "CREATE", "s", "g", "$"), ("XGROUP", "NOPE"),
    ("XGROUP", "DESTROY", "s", "g"), ("DEL", "a", "b", "c"), ("SPUBLISH", "c", "m"),
    ("SSUBSCRIBE", "c"), ("PUBLISH", "c", "m"), ("NOPE",), ("NOPE", "x"), ("XLEN", "a", "b"),
    ("GETEX", "k", "PERSIST"), ("XADD", "s", "MAXLEN", "1", "*", "f", "v"),
]


def _compare(engine: Engine, redis_raw: RespClient, argvs: list[tuple[str, ...]]) -> int:
    problems = []
    for argv, sub in itertools.product(argvs, ("GETKEYSANDFLAGS", "GETKEYS")):
        if argv and argv[0].lower() in DIFFERENCES and sub == "GETKEYSANDFLAGS":
            continue
        ours = outcome(engine, "COMMAND", sub, *argv)
        theirs = outcome(redis_raw, "COMMAND", sub, *argv)
        if ours != theirs:
            problems.append(f"COMMAND {sub} {' '.join(argv)}: {ours} != {theirs}")
    assert problems == []
    return len(argvs)


def test_getkeys_and_flags_generated(redis_raw: RespClient, engine: Engine) -> None:
    assert _compare(engine, redis_raw, generated_argvs()) > 600


def test_getkeys_and_flags_handwritten(redis_raw: RespClient, engine: Engine) -> None:
    _compare(engine, redis_raw, HANDWRITTEN)
    assert engine.execute("COMMAND", "GETKEYSANDFLAGS", "SINTERSTORE", "d", "a") == [
        [b"d", ["OW", "update"]], [b"a", ["RO", "access"]]]
