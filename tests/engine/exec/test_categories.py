"""ACL categories (engine.exec.categories): each command's declared categories (its
declaration's `acl`) plus those its flags imply, in ACL CAT's order, and the commands of a
category (ACL CAT <category>).

Every declared category is one of ACL CAT's; the categories of the commands both have are
compared with redis-server in tests/differential/test_command_acl_metadata.py, and those of the
commands it lacks (Redis 7.2 to 8.x) with Redis's src/commands/*.json here (tests.support.later_commands).
"""

from __future__ import annotations

import pytest

from streamkeep.engine.commands.command import acl_categories, find_command
from streamkeep.engine.exec import categories
from streamkeep.engine.exec.categories import categories_of, commands_in
from streamkeep.engine.exec.table import COMMANDS, CommandSpec, command_names
from tests.support.later_commands import SOURCE_CHECKED


def spec(name: str) -> CommandSpec:
    found = find_command(name.encode())
    assert found is not None, name
    return found


def test_every_declared_category_is_one_of_acl_cat() -> None:
    for top in COMMANDS.values():
        for each in (top, *top.subcommands.values()):
            assert each.acl <= set(categories.CATEGORIES), each.name
    assert spec("xadd").acl == {"stream"}


def test_categories_of() -> None:
    assert categories_of(spec("xadd")) == ["@write", "@stream", "@fast"]
    assert categories_of(spec("xreadgroup")) == ["@write", "@stream", "@slow", "@blocking"]
    assert categories_of(spec("xinfo")) == ["@slow"]
    assert categories_of(spec("xinfo|stream")) == ["@read", "@stream", "@slow"]
    assert categories_of(spec("eval_ro")) == ["@slow", "@scripting"]  # readonly, but scripting
    assert categories_of(spec("keys")) == ["@keyspace", "@read", "@slow", "@dangerous"]
    assert categories_of(spec("config|set")) == ["@admin", "@slow", "@dangerous"]
    assert categories_of(spec("debug")) == ["@admin", "@slow", "@dangerous"]


def test_commands_in() -> None:
    stream = [s.name for s in commands_in("stream")]
    assert {"xadd", "xinfo|stream", "xgroup|create", "xnack"} <= set(stream)
    assert "xinfo" not in stream and "ping" not in stream
    assert stream.index("xgroup|create") > stream.index("xadd")
    assert [s.name for s in commands_in("@STREAM")] == stream
    assert {s.name for s in commands_in("transaction")} == {
        "discard", "exec", "multi", "unwatch", "watch"}
    assert "command|getkeysandflags" in {s.name for s in commands_in("connection")}
    with pytest.raises(ValueError, match="unknown ACL category 'nosuch'"):
        commands_in("nosuch")
    everything = {s.name for cat in categories.CATEGORIES for s in commands_in(cat)}
    assert everything == set(command_names())  # every command is @fast or @slow at least


def test_command_info_uses_them() -> None:
    for name in ("xadd", "wait", "debug", "command|getkeysandflags"):
        assert acl_categories(spec(name)) == categories_of(spec(name))


@pytest.mark.parametrize("name", sorted(SOURCE_CHECKED))
def test_later_commands_against_redis_source(name: str) -> None:
    assert categories_of(spec(name)) == SOURCE_CHECKED[name][0]
