"""Command catalogues for the ACL model (engine.exec.acl's `Catalogue`), and helpers to compare
its replies with a redis-server's.

* `table_catalogue()`: streamkeep's own command table (engine/commands' categories).
* `redis_catalogue(client)`: a redis-server's, read from its COMMAND reply, so a differential
  test compares the ACL algorithms on the very same table.
* `canonical_rules(line)`: an ACL LIST line / GETUSER `commands` with each run of single-command
  rules sorted: Redis emits those in its command dict's hash order, which a random seed changes
  in every process, so only the set of words is Redis's to compare.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import Any


class StaticCatalogue:
    """A catalogue from (name, categories) pairs; 'container|sub' names make subcommands."""

    def __init__(self, category_order: Iterable[str],
                 commands: Iterable[tuple[str, Iterable[str]]]) -> None:
        self._order = [c.lstrip("@") for c in category_order]
        self._cats: dict[str, list[str]] = {}
        self._subs: dict[str, list[str]] = {}
        for name, cats in commands:
            name = name.lower()
            self._cats[name] = [c.lstrip("@") for c in cats]
            top, _, sub = name.partition("|")
            self._subs.setdefault(top, [])
            if sub:
                self._subs[top].append(name)

    def categories(self) -> list[str]:
        return list(self._order)

    def commands_in(self, category: str) -> list[str]:
        return sorted(n for n, cats in self._cats.items() if category.lstrip("@") in cats)

    def has_command(self, name: str) -> bool:
        return name.lower() in self._cats

    def subcommands_of(self, name: str) -> list[str]:
        return sorted(self._subs.get(name.lower(), []))

    def categories_of(self, name: str) -> list[str]:
        return list(self._cats.get(name.lower(), []))


@cache
def table_catalogue() -> StaticCatalogue:
    """streamkeep's command table (every command module imported), its ACL categories."""
    import streamkeep.engine.commands  # noqa: F401 - registers every command
    from streamkeep.engine.commands.command import acl_categories, visible_commands
    from streamkeep.engine.exec.categories import CATEGORIES

    pairs: list[tuple[str, list[str]]] = []
    for spec in visible_commands():
        pairs.append((spec.name, acl_categories(spec)))
        pairs.extend((sub.name, acl_categories(sub)) for sub in spec.subcommands.values())
    return StaticCatalogue(CATEGORIES, pairs)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def redis_catalogue(client: Any) -> StaticCatalogue:
    """A redis-server's table: COMMAND's names, categories and subcommands, ACL CAT's order."""
    pairs: list[tuple[str, list[str]]] = []

    def add(entry: list[Any]) -> None:
        pairs.append((_text(entry[0]), [_text(c) for c in entry[6]]))
        for sub in entry[9] if len(entry) > 9 else ():
            add(sub)

    for entry in client.execute("COMMAND"):
        add(entry)
    return StaticCatalogue([_text(c) for c in client.execute("ACL", "CAT")], pairs)


def _is_single(word: bytes) -> bool:
    return word[:1] in (b"+", b"-") and word[1:2] != b"@"


def canonical_rules(line: bytes) -> list[bytes]:
    """The words of a rule line, '(' and ')' apart, runs of single-command words sorted."""
    words = line.replace(b"(", b"( ").replace(b")", b" )").split(b" ")
    out: list[bytes] = []
    run: list[bytes] = []
    for word in words:
        if _is_single(word):
            run.append(word)
            continue
        out.extend(sorted(run))
        run = []
        out.append(word)
    out.extend(sorted(run))
    return out


def flat(value: Any) -> Any:
    """A model reply as a RESP2 client reads it: maps flattened, sets as lists."""
    from streamkeep.engine.wire.reply import RespMap, RespSet

    if isinstance(value, RespMap):
        return [flat(x) for pair in value.items for x in pair]
    if isinstance(value, RespSet | list):
        items = value.items if isinstance(value, RespSet) else value
        return [flat(x) for x in items]
    return value


def canonical_getuser(reply: Any) -> Any:
    """A flat GETUSER reply with its `commands` values canonical (see canonical_rules)."""
    if not isinstance(reply, list):
        return reply
    out: list[Any] = []
    for i, value in enumerate(reply):
        if i % 2 == 1 and reply[i - 1] == b"commands":
            out.append(canonical_rules(value))
        elif i % 2 == 1 and reply[i - 1] == b"selectors":
            out.append([canonical_getuser(s) for s in value])
        else:
            out.append(value)
    return out
