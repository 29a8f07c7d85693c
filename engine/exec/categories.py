"""ACL categories: a command's categories as Redis derives them from its declaration.

Owns `CATEGORIES` (the category names in ACL CAT's order, which is also the order COMMAND INFO
lists a command's categories in), `category_set` and `categories_of` (a command's full
categories: those its declaration names, `command(..., acl=...)` in engine.exec.table, plus those
its flags imply) and `commands_in` (ACL CAT <category>). Redis derives the implied ones from the
flags, as here: write -> @write, readonly -> @read (not for a @scripting command), admin ->
@admin @dangerous, pubsub -> @pubsub, fast -> @fast (else @slow), blocking -> @blocking.

Must not touch: the declarations themselves (each command's, beside its handler), engine state.
"""

from __future__ import annotations

from typing import Final

from streamkeep.engine.exec.table import COMMANDS, CommandSpec, Flag

# ACL CAT's categories, in its order.
CATEGORIES: Final = ("keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
                     "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
                     "blocking", "dangerous", "connection", "transaction", "scripting")

_FLAG_CATEGORIES: Final = ((Flag.WRITE, ("write",)), (Flag.ADMIN, ("admin", "dangerous")),
                           (Flag.PUBSUB, ("pubsub",)), (Flag.FAST, ("fast",)),
                           (Flag.BLOCKING, ("blocking",)))


def category_set(spec: CommandSpec) -> frozenset[str]:
    """Every category of `spec` (without '@'): its declared ones and its flags' (Redis's
    setImplicitACLCategories)."""
    cats = set(spec.acl)
    for flag, implied in _FLAG_CATEGORIES:
        if flag in spec.flags:
            cats.update(implied)
    if Flag.READONLY in spec.flags and "scripting" not in cats:
        cats.add("read")
    if "fast" not in cats:
        cats.add("slow")
    return frozenset(cats)


def categories_of(spec: CommandSpec) -> list[str]:
    """`spec`'s categories as COMMAND INFO lists them: '@'-prefixed, in ACL CAT's order."""
    cats = category_set(spec)
    return ["@" + cat for cat in CATEGORIES if cat in cats]


def commands_in(category: str) -> list[CommandSpec]:
    """The commands and subcommands in `category` ("stream" or "@stream", any case), for ACL CAT:
    each container before its subcommands, in the table's order. ValueError for a category that
    is not one of CATEGORIES."""
    name = category.lower().removeprefix("@")
    if name not in CATEGORIES:
        raise ValueError(f"unknown ACL category {category!r}")
    found = []
    for spec in COMMANDS.values():
        if spec.internal:
            continue
        for each in (spec, *spec.subcommands.values()):
            if name in category_set(each):
                found.append(each)
    return found


__all__ = ["CATEGORIES", "categories_of", "category_set", "commands_in"]
