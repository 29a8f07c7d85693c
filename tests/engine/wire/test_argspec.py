"""Command syntax specs (engine.argspec) and what they feed: COMMAND DOCS and redis-cli's HELP.

Pure tests of the notation (parse, render, errors); two checks over the whole command table
(every declared syntax agrees with the command's arity, and every command that takes
arguments declares one); the COMMAND DOCS shape of XADD; redis-cli's HELP line against an
in-process server, for the Redis 8.4 syntax; and the same HELP line against the real
redis-server (7.0) for the commands whose syntax Redis has not changed since.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import Any

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.table import COMMANDS, CommandSpec
from streamkeep.engine.wire.argspec import Arg, parse_syntax, render
from tests.support.server_util import ServerHandle

TIMEOUT = 10.0

XADD_SYNTAX = (
    "key [NOMKSTREAM] [condition: KEEPREF | DELREF | ACKED] [idmp: IDMPAUTO producer-id | IDMP "
    "producer-id idempotent-id] [trim: <strategy: MAXLEN | MINID> "
    "[operator: = | ~] threshold [LIMIT count:integer]] <id-selector: * | id> "
    "<data: field value>..."
)
# Redis 8.6's XADD (https://redis.io/docs/latest/commands/xadd/): IDMPAUTO | IDMP.
XADD_LINE = (
    "key [NOMKSTREAM] [KEEPREF|DELREF|ACKED] [IDMPAUTO producer-id|IDMP producer-id "
    "idempotent-id] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value "
    "[field value ...]"
)


# --- the notation ----------------------------------------------------------------------------


def test_xadd_parses_into_named_groups_and_renders_as_redis_cli() -> None:
    args = parse_syntax(XADD_SYNTAX)
    assert [(a.name, a.type) for a in args] == [
        ("key", "key"), ("nomkstream", "pure-token"), ("condition", "oneof"),
        ("idmp", "oneof"), ("trim", "block"), ("id-selector", "oneof"), ("data", "block")]
    key, nomkstream, condition, idmp, trim, selector, data = args
    assert idmp.optional and [a.token for a in idmp.arguments] == ["IDMPAUTO", "IDMP"]
    assert not key.optional and not key.multiple and key.token == ""
    assert nomkstream == Arg("nomkstream", "pure-token", token="NOMKSTREAM", optional=True)
    assert condition.optional and [c.token for c in condition.arguments] == [
        "KEEPREF", "DELREF", "ACKED"]
    assert trim.optional and trim.token == ""
    strategy, operator, threshold, count = trim.arguments
    assert (strategy.name, strategy.type, strategy.optional) == ("strategy", "oneof", False)
    assert [a.token for a in strategy.arguments] == ["MAXLEN", "MINID"]
    assert (operator.name, operator.optional) == ("operator", True)
    assert [a.token for a in operator.arguments] == ["=", "~"]
    assert threshold == Arg("threshold", "string")
    assert count == Arg("count", "integer", token="LIMIT", optional=True)
    assert [(a.name, a.type) for a in selector.arguments] == [("*", "pure-token"),
                                                              ("id", "string")]
    assert data.multiple and not data.optional
    assert data.arguments == (Arg("field", "string"), Arg("value", "string"))
    assert render(args) == XADD_LINE


def test_xreadgroup_blocks_introduced_by_a_token() -> None:
    args = parse_syntax(
        "<group-block: GROUP group consumer> [COUNT count:integer] [BLOCK milliseconds:integer] "
        "[NOACK] <STREAMS key... id...>")
    group, count, block, noack, streams = args
    assert group == Arg("group-block", "block", token="GROUP",
                        arguments=(Arg("group", "string"), Arg("consumer", "string")))
    assert count == Arg("count", "integer", token="COUNT", optional=True)
    assert block == Arg("milliseconds", "integer", token="BLOCK", optional=True)
    assert noack == Arg("noack", "pure-token", token="NOACK", optional=True)
    assert streams == Arg("streams", "block", token="STREAMS", arguments=(
        Arg("key", "key", multiple=True), Arg("id", "string", multiple=True)))
    assert render(args) == ("GROUP group consumer [COUNT count] [BLOCK milliseconds] [NOACK] "
                            "STREAMS key [key ...] id [id ...]")
    # Unnamed, a token-led block takes the token's name.
    assert parse_syntax("<GROUP group consumer>")[0].name == "group"


def test_xgroup_create_oneof_of_a_value_and_a_token() -> None:
    args = parse_syntax("key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read:integer]")
    assert [a.name for a in args] == ["key", "group", "id-$", "mkstream", "entries-read"]
    selector = args[2]
    assert selector.type == "oneof" and not selector.optional
    assert selector.arguments == (Arg("id", "string"), Arg("$", "pure-token", token="$"))
    assert args[4] == Arg("entries-read", "integer", token="ENTRIESREAD", optional=True)
    assert render(args) == "key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]"


def test_quoted_greater_than_is_a_token_not_a_bracket() -> None:
    args = parse_syntax("<STREAMS key... <id | '>'>...>")
    (streams,) = args
    key, ids = streams.arguments
    assert key == Arg("key", "key", multiple=True)
    assert ids.type == "oneof" and ids.multiple
    assert ids.arguments == (Arg("id", "string"), Arg(">", "pure-token", token=">"))
    assert render(args) == "STREAMS key [key ...] id|> [id|> ...]"
    assert parse_syntax("'>'") == (Arg(">", "pure-token", token=">"),)


def test_multiple_blocks_values_and_types() -> None:
    (pairs,) = parse_syntax("<parameter value>...")
    assert pairs == Arg("parameter", "block", multiple=True, arguments=(
        Arg("parameter", "string"), Arg("value", "string")))
    assert render((pairs,)) == "parameter value [parameter value ...]"
    assert parse_syntax("[ID client-id:integer...]") == (
        Arg("client-id", "integer", token="ID", optional=True, multiple=True),)
    assert render(parse_syntax("[ID client-id:integer...]")) == "[ID client-id [client-id ...]]"
    typed = parse_syntax("key newkey:key pattern:pattern t:unix-time d:double s:string keys")
    assert [(a.name, a.type) for a in typed] == [
        ("key", "key"), ("newkey", "key"), ("pattern", "pattern"), ("t", "unix-time"),
        ("d", "double"), ("s", "string"), ("keys", "key")]
    assert parse_syntax("") == ()


def test_group_names() -> None:
    (full,) = parse_syntax("[full-block: FULL [COUNT count:integer]]")
    assert full == Arg("full-block", "block", token="FULL", optional=True, arguments=(
        Arg("count", "integer", token="COUNT", optional=True),))
    assert render((full,)) == "[FULL [COUNT count]]"
    (attr,) = parse_syntax("<attr: LIB-NAME libname | LIB-VER libver>")
    assert attr == Arg("attr", "oneof", arguments=(
        Arg("libname", "string", token="LIB-NAME"), Arg("libver", "string", token="LIB-VER")))
    (flush,) = parse_syntax("[ASYNC | SYNC]")  # unnamed: its alternatives' names
    assert flush.name == "async-sync" and flush.optional
    (filterby,) = parse_syntax("[filterby: FILTERBY <MODULE m | PATTERN p:pattern>]")
    assert (filterby.name, filterby.type, filterby.token) == ("filterby", "oneof", "FILTERBY")
    assert render((filterby,)) == "[FILTERBY MODULE m|PATTERN p]"


@pytest.mark.parametrize("syntax", [
    "[key",                          # unbalanced: [ never closed
    "key]",                          # unbalanced: ] never opened
    "<key | id",                     # unbalanced: < never closed
    "[trim: MAXLEN threshold",       # unbalanced after a group name
    "key []",                        # empty group
    "key <>",                        # empty group
    "[name: ]",                      # a name, then nothing
    "<id | >",                       # empty alternative
    "key @x",                        # unknown character
    "key,id",                        # unknown character
    "key id!",                       # unknown character
    "count:number",                  # unknown type
    "Key",                           # neither a token nor a value
    "key | id",                      # alternatives outside a group
    "key 'x'",                       # a quote other than '>'
    "key.id",                        # a lone dot
])
def test_malformed_syntax_raises(syntax: str) -> None:
    with pytest.raises(ValueError):
        parse_syntax(syntax)


# --- the command table -----------------------------------------------------------------------


def min_words(args: tuple[Arg, ...]) -> int:
    """The fewest words a call needs: a value or token 1, a block its parts, a oneof its
    smallest alternative, an optional part 0; a multiple part counts once."""
    return sum(0 if a.optional else _min_word(a) for a in args)


def _min_word(arg: Arg) -> int:
    if arg.type == "oneof":
        return min(0 if a.optional else _min_word(a) for a in arg.arguments)
    token = 1 if arg.token and arg.type != "pure-token" else 0
    if arg.type == "block":
        return token + min_words(arg.arguments)
    return token + 1


def has_variable_part(args: tuple[Arg, ...]) -> bool:
    """Whether the words vary: an optional or repeated part, or a oneof whose alternatives
    take different numbers of words (CLUSTER SETSLOT's STABLE beside NODE node-id)."""
    return any(a.optional or a.multiple or has_variable_part(a.arguments)
               or (a.type == "oneof" and len({min_words((alt,)) for alt in a.arguments}) > 1)
               for a in args)


def visible_specs() -> list[tuple[CommandSpec, int]]:
    """Every client-visible command and subcommand, with how many words name it (1 or 2);
    containers themselves left out."""
    specs: list[tuple[CommandSpec, int]] = []
    for spec in COMMANDS.values():
        if spec.internal:
            continue
        if not spec.subcommands:
            specs.append((spec, 1))
        specs.extend((sub, 2) for sub in spec.subcommands.values())
    return specs


# Where Redis's own declaration disagrees with the arity here (checked to still disagree).
ARITY_EXCEPTIONS = {
    # Redis 8.4 writes the new filter format as a oneof of optional filters, so its syntax
    # allows zero words where the arity (-3, as Redis's) requires one.
    "client|kill": 0,
    # Redis 7.2+ declares arity -3 (`command [arg...]`); this engine keeps 7.0's -4.
    "command|getkeys": 1,
}
# Commands whose arity admits arguments but which declare no syntax, and why.
UNDECLARED = {
    "quit": "Redis declares QUIT without arguments (arity -1 only tolerates extras)",
}


def test_every_declared_syntax_agrees_with_the_arity() -> None:
    checked, wrong = 0, []
    for spec, depth in visible_specs():
        if not spec.args:
            continue
        checked += 1
        need = abs(spec.arity) - depth
        found = min_words(spec.args)
        if spec.name in ARITY_EXCEPTIONS:
            assert found == ARITY_EXCEPTIONS[spec.name] != need, spec.name  # still needed
            continue
        if found != need:
            wrong.append(f"{spec.name}: syntax needs {found} words, arity {spec.arity}")
        if spec.arity > 0 and has_variable_part(spec.args):
            wrong.append(f"{spec.name}: exact arity {spec.arity} but optional/multiple parts")
        if spec.arity < 0 and not has_variable_part(spec.args):
            wrong.append(f"{spec.name}: arity {spec.arity} but no optional/multiple part")
    assert not wrong, wrong
    assert checked >= 50


def test_every_command_taking_arguments_declares_its_syntax() -> None:
    missing = []
    for spec, depth in visible_specs():
        takes_arguments = spec.arity < 0 or spec.arity > depth
        if not takes_arguments or spec.name.endswith("|help") or spec.args:
            continue
        if spec.name in UNDECLARED:
            continue
        missing.append(spec.name)
    assert not missing, missing
    for name in UNDECLARED:  # stale entries fail here once the command declares its syntax
        assert not COMMANDS[name.encode()].args, f"{name} declares syntax now: drop it here"
    for spec, _depth in visible_specs():
        if spec.name.endswith("|help"):
            assert not spec.args, spec.name


def test_min_words_counts_as_documented() -> None:
    assert min_words(parse_syntax(XADD_SYNTAX)) == 4
    assert min_words(parse_syntax("<GROUP group consumer> <STREAMS key... id...>")) == 6
    assert min_words(parse_syntax("[a] <b | c d> <X e f>... [g...]")) == 4
    assert min_words(parse_syntax("<[a] | [b]>")) == 0
    assert has_variable_part(parse_syntax("a <b | [c]>"))
    assert not has_variable_part(parse_syntax("a <b | c>"))


# --- COMMAND DOCS ------------------------------------------------------------------------------


def pairs(flat: list[Any]) -> dict[bytes, Any]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def test_command_docs_arguments_of_xadd() -> None:
    docs = pairs(Engine().execute("COMMAND", "DOCS", "XADD"))
    arguments = [pairs(a) for a in pairs(docs[b"xadd"])[b"arguments"]]
    summary = [(a[b"name"], a[b"type"], a.get(b"token"), a.get(b"flags", []))
               for a in arguments]
    assert summary == [
        (b"key", b"key", None, []),
        (b"nomkstream", b"pure-token", b"NOMKSTREAM", ["optional"]),
        (b"condition", b"oneof", None, ["optional"]),
        (b"idmp", b"oneof", None, ["optional"]),
        (b"trim", b"block", None, ["optional"]),
        (b"id-selector", b"oneof", None, []),
        (b"data", b"block", None, ["multiple"]),
    ]
    key, _nomk, condition, idmp, trim, selector, data = arguments
    auto, explicit = (pairs(a) for a in idmp[b"arguments"])
    assert (auto[b"name"], auto[b"type"], auto[b"token"]) == (b"producer-id", b"string",
                                                                b"IDMPAUTO")
    assert (explicit[b"type"], explicit[b"token"]) == (b"block", b"IDMP")
    assert [pairs(a)[b"name"] for a in explicit[b"arguments"]] == [b"producer-id",
                                                                   b"idempotent-id"]
    assert key[b"key_spec_index"] == 0 and key[b"display_text"] == b"key"
    assert b"display_text" not in condition and b"key_spec_index" not in condition
    assert [pairs(a)[b"token"] for a in condition[b"arguments"]] == [
        b"KEEPREF", b"DELREF", b"ACKED"]
    strategy, operator, threshold, count = (pairs(a) for a in trim[b"arguments"])
    assert strategy[b"name"] == b"strategy" and b"flags" not in strategy
    assert [pairs(a)[b"token"] for a in strategy[b"arguments"]] == [b"MAXLEN", b"MINID"]
    assert operator[b"name"] == b"operator" and operator[b"flags"] == ["optional"]
    assert [pairs(a)[b"token"] for a in operator[b"arguments"]] == [b"=", b"~"]
    assert (threshold[b"name"], threshold[b"type"]) == (b"threshold", b"string")
    assert (count[b"name"], count[b"type"], count[b"token"], count[b"flags"]) == (
        b"count", b"integer", b"LIMIT", ["optional"])
    assert [(pairs(a)[b"name"], pairs(a)[b"type"]) for a in selector[b"arguments"]] == [
        (b"*", b"pure-token"), (b"id", b"string")]
    assert [pairs(a)[b"name"] for a in data[b"arguments"]] == [b"field", b"value"]


def test_command_docs_key_spec_index_inside_blocks() -> None:
    docs = pairs(Engine().execute("COMMAND", "DOCS", "XREAD", "RENAME"))
    streams = next(pairs(a) for a in pairs(docs[b"xread"])[b"arguments"]
                   if pairs(a)[b"name"] == b"streams")
    key = pairs(streams[b"arguments"][0])
    assert (key[b"name"], key[b"type"], key[b"key_spec_index"], key[b"flags"]) == (
        b"key", b"key", 0, ["multiple"])
    rename = [pairs(a) for a in pairs(docs[b"rename"])[b"arguments"]]
    assert [(a[b"name"], a[b"key_spec_index"]) for a in rename] == [(b"key", 0), (b"newkey", 1)]


# --- redis-cli ---------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def help_line(target: Any, *words: str) -> str:
    """The first non-empty line `redis-cli help <words>` prints (its syntax line), without
    colours or indentation."""
    if shutil.which("redis-cli") is None:
        pytest.fail("redis-cli not found on PATH (apt-get install redis-tools)", pytrace=False)
    proc = subprocess.run(["redis-cli", "-h", target.host, "-p", str(target.port), "help",
                           *words], capture_output=True, text=True, timeout=TIMEOUT, check=True)
    lines = [ANSI.sub("", line).strip() for line in proc.stdout.splitlines()]
    return next((line for line in lines if line), "")


REDIS_CLI_HELP = {
    "XADD": "XADD " + XADD_LINE,
    "XREADGROUP": "XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT maxcount] "
                  "[MAXSIZE maxsize] [BLOCK milliseconds] [CLAIM min-idle-time] [NOACK] "
                  "STREAMS key [key ...] id [id ...]",
    # Redis 8.10 (https://redis.io/docs/latest/commands/xread/) added MAXCOUNT and MAXSIZE.
    "XREAD": "XREAD [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK milliseconds] "
             "STREAMS key [key ...] id [id ...]",
    # Redis 8.8 (https://redis.io/docs/latest/commands/xnack/).
    "XNACK": "XNACK key group SILENT|FAIL|FATAL IDS numids id [id ...] [RETRYCOUNT count] "
             "[FORCE]",
    # Redis 8.6 (https://redis.io/docs/latest/commands/xcfgset/) and 8.8
    # (https://redis.io/docs/latest/commands/xidmprecord/).
    "XCFGSET": "XCFGSET key [IDMP-DURATION duration] [IDMP-MAXSIZE maxsize]",
    "XIDMPRECORD": "XIDMPRECORD key pid iid stream-id",
    "XPENDING": "XPENDING key group [[IDLE min-idle-time] start end count [consumer]]",
    "XGROUP CREATE": "XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read]",
    "XINFO STREAM": "XINFO STREAM key [FULL [COUNT count]]",
    "XAUTOCLAIM": "XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]",
    "XCLAIM": "XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] "
              "[TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] "
              "[LASTID lastid]",
    "XTRIM": "XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count] [KEEPREF|DELREF|ACKED]",
    "XACKDEL": "XACKDEL key group [KEEPREF|DELREF|ACKED] IDS numids id [id ...]",
    "XSETID": "XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]",
    "CLIENT SETINFO": "CLIENT SETINFO LIB-NAME libname|LIB-VER libver",
    "MULTI": "MULTI",
}


def test_redis_cli_help_prints_the_redis_syntax(served: ServerHandle) -> None:
    got = {command: help_line(served, *command.split()) for command in REDIS_CLI_HELP}
    assert got == REDIS_CLI_HELP


# Commands whose syntax line Redis 7.0 and 8.4 print alike. Left out because 7.2 renamed
# arguments: XSETID (entries_added, max_deleted_entry_id), XGROUP CREATE/SETID/DESTROY/
# CREATECONSUMER/DELCONSUMER and XINFO CONSUMERS (groupname, consumername, entries_read),
# XCLAIM (LASTID id); because 8.x added options: XADD, XTRIM, XREAD, XREADGROUP, CLIENT KILL; and
# COMMAND GETKEYS (no arguments documented in 7.0).
UNCHANGED_SINCE_7_0 = [
    "XLEN", "XRANGE", "XREVRANGE", "XDEL", "XACK", "XPENDING", "XAUTOCLAIM",
    "XINFO STREAM", "XINFO GROUPS", "PING", "ECHO", "SELECT", "DEL", "EXISTS", "UNLINK", "TYPE",
    "KEYS", "RENAME", "RENAMENX", "SCAN", "WAIT", "AUTH", "HELLO", "BGSAVE", "SHUTDOWN",
    "FLUSHALL", "FLUSHDB", "INFO", "COMMAND INFO", "COMMAND DOCS", "COMMAND LIST",
    "CLIENT LIST", "CLIENT SETNAME", "CLIENT NO-EVICT", "CONFIG GET", "CONFIG SET",
]


def test_redis_cli_help_matches_redis_server(served: ServerHandle, redis_server: Any) -> None:
    ours = {command: help_line(served, *command.split()) for command in UNCHANGED_SINCE_7_0}
    theirs = {command: help_line(redis_server, *command.split())
              for command in UNCHANGED_SINCE_7_0}
    for command, line in theirs.items():  # a real syntax line, not an empty answer
        assert line.startswith(command + " "), (command, line)
    assert ours == theirs
