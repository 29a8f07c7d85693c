"""Key specs (engine.exec.key_specs), as each command's declaration has them.

Every command and subcommand of the table declares its key specs (`keys=` is required: "" for
none); the notation parses, and a bad one fails its declaration by name; the legacy key range
and movablekeys Redis derives from the specs are the table's; keys_and_flags follows Redis's
getKeysFromCommandWithSpecs. The commands
redis-server 7.0 lacks (Redis 7.2 to 8.x) are checked here against Redis's src/commands/*.json
(tests.support.later_commands); the rest against redis-server in
tests/differential/test_command_acl_metadata.py.
"""

from __future__ import annotations

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.commands.command import find_command
from streamkeep.engine.exec import key_specs
from streamkeep.engine.exec.key_specs import keys_and_flags, parse_key_specs
from streamkeep.engine.exec.table import COMMANDS, CommandSpec, command
from tests.support.later_commands import SOURCE_CHECKED


def spec(name: str) -> CommandSpec:
    found = find_command(name.encode())
    assert found is not None, name
    return found


def kf(*argv: str) -> list[tuple[str, set[str]]]:
    words = [a.encode() for a in argv]
    target = spec(argv[0].lower())
    if target.subcommands and len(argv) > 1:
        target = spec(f"{argv[0].lower()}|{argv[1].lower()}")
    return [(k.decode(), set(f)) for k, f in keys_and_flags(target, words)]


# --- every command has both --------------------------------------------------------------------


def test_a_declaration_must_say_where_its_keys_are() -> None:
    with pytest.raises(TypeError, match="keys"):
        command("nokeys", 2, "readonly")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="command 'badkeys' declares a bad key spec"):
        command("badkeys", 2, "readonly", keys="RO @1")


def test_notes_belong_to_commands_with_specs() -> None:
    for top in COMMANDS.values():
        for each in (top, *top.subcommands.values()):
            for ks in each.key_specs[1:]:
                assert ks.notes is None, each.name  # (COMMAND INFO shows the first spec's)


def test_legacy_range_and_movablekeys_come_from_the_specs() -> None:
    movable = {each.name for top in COMMANDS.values() for each in (top, *top.subcommands.values())
               if each.movable_keys}
    assert {"xread", "xreadgroup", "eval", "fcall_ro", "zunionstore", "msetex", "blmpop"} \
        <= movable
    assert not {"set", "xadd", "del", "mset", "blpop", "smove"} & movable
    assert (spec("get").first_key, spec("get").last_key, spec("get").key_step) == (1, 1, 1)
    assert (spec("mset").first_key, spec("mset").last_key, spec("mset").key_step) == (1, -1, 2)
    assert (spec("ping").first_key, spec("ping").last_key, spec("ping").key_step) == (0, 0, 0)


def test_notation() -> None:
    (xrg,) = spec("xreadgroup").key_specs
    assert (xrg.flags, xrg.keyword, xrg.index, xrg.find, xrg.a, xrg.b, xrg.c) == (
        ("RO", "access"), "STREAMS", 4, "range", -1, 1, 2)
    (get,) = spec("get").key_specs
    assert (get.flags, get.keyword, get.index, get.find, get.a, get.b, get.c) == (
        ("RO", "access"), None, 1, "range", 0, 1, 0)
    dest, sources = spec("zunionstore").key_specs
    assert dest.flags == ("OW", "update") and (sources.find, sources.index) == ("keynum", 2)
    assert spec("set").key_specs[0].notes and spec("ping").key_specs == ()
    assert parse_key_specs("x", "") == ()
    assert parse_key_specs("x", "RW ; RO @2 r-1,1,0")[1].a == -1


# --- keys_and_flags ----------------------------------------------------------------------------

RW_ACCESS_UPDATE = {"RW", "access", "update"}

def test_keys_and_flags_variable_flags() -> None:
    assert kf("SET", "k", "v") == [("k", {"OW", "update"})]
    assert kf("SET", "k", "v", "EX", "10", "get") == [("k", RW_ACCESS_UPDATE)]
    assert kf("SET", "k", "get") == [("k", {"OW", "update"})]  # the value, not the option


def test_keys_and_flags_streams() -> None:
    assert kf("XADD", "s", "*", "f", "v") == [("s", {"RW", "update"})]
    assert kf("XREAD", "COUNT", "2", "STREAMS", "a", "b", "0", "0") == [
        ("a", {"RO", "access"}), ("b", {"RO", "access"})]
    assert kf("XREADGROUP", "GROUP", "g", "STREAMS", "STREAMS", "s", ">") == [
        ("s", {"RO", "access"})]  # the search for STREAMS begins after the group and consumer
    assert kf("XREAD", "STREAMS", "a", "b", "0") == [("a", {"RO", "access"})]
    assert kf("XREAD", "COUNT", "1") == []
    assert kf("XINFO", "STREAM", "s") == [("s", {"RO", "access"})]
    assert kf("XGROUP", "CREATE", "s", "g", "$") == [("s", {"RW", "insert"})]


def test_keys_and_flags_numkeys() -> None:
    assert kf("ZUNIONSTORE", "d", "2", "a", "b") == [
        ("d", {"OW", "update"}), ("a", {"RO", "access"}), ("b", {"RO", "access"})]
    assert kf("ZUNIONSTORE", "d", "5", "a", "b") == []  # the count is out of range
    assert kf("EVAL", "s", "1", "k", "a") == [("k", RW_ACCESS_UPDATE)]
    assert kf("EVAL", "s", "0") == []
    # An unparsable count: the specs fail, and Redis's own finder reads it with atoi.
    assert kf("EVAL", "s", "1x", "k") == [("k", set())]
    assert kf("LMPOP", "2", "a", "b", "LEFT") == [("a", {"RW", "access", "delete"}),
                                                   ("b", {"RW", "access", "delete"})]


def test_keys_and_flags_not_keys() -> None:
    assert kf("SPUBLISH", "c", "m") == [] and not key_specs.has_keys(spec("spublish"))
    assert kf("PING") == [] and not key_specs.has_keys(spec("ping"))


# --- the commands redis-server 7.0 lacks, against Redis's src/commands/*.json ------------------


@pytest.mark.parametrize("name", sorted(SOURCE_CHECKED))
def test_later_commands_against_redis_source(name: str) -> None:
    _cats, argv, keys = SOURCE_CHECKED[name]
    assert kf(*argv) == keys


def test_later_commands_through_command_info() -> None:
    engine = Engine()
    msetex, hgetex = engine.execute("COMMAND", "INFO", "msetex", "hgetex")
    assert msetex[8] == [[b"flags", ["OW", "update"],
                          b"begin_search", [b"type", b"index", b"spec", [b"index", 1]],
                          b"find_keys", [b"type", b"keynum", b"spec",
                                         [b"keynumidx", 0, b"firstkey", 1, b"keystep", 2]]]]
    assert hgetex[8][0][:2] == [b"notes", b"RW and UPDATE because it changes the TTL"]
    assert engine.execute("COMMAND", "GETKEYSANDFLAGS", "MSETEX", "2", "a", "1", "b", "2") == [
        [b"a", ["OW", "update"]], [b"b", ["OW", "update"]]]
    with pytest.raises(ReplyError, match="ERR Invalid arguments specified for command"):
        engine.execute("COMMAND", "GETKEYSANDFLAGS", "MSETEX", "3", "a", "1")
