"""Command argument specs: a command's syntax, written once as redis.io writes it, as a tree.

Owns `Arg` (what COMMAND DOCS reports for each argument: name, type, token, flags, nested
arguments) and `parse_syntax`, which reads a syntax line such as
``key [NOMKSTREAM] [<MAXLEN | MINID> [= | ~] threshold [LIMIT count:integer]] <* | id> <field
value>...`` into that tree. The command table stores the tree (`CommandSpec.args`); COMMAND DOCS
renders it, and redis-cli builds its hints and HELP lines from that. Must not touch: argument
validation (handlers parse their own argv; these specs only document it) or engine state.

The notation: `[...]` optional, `<...>` a required group, `|` alternatives (one of), `...` after
an item or group: it repeats. An UPPERCASE word or one of ``* = ~ $ > + -`` is a literal token;
a lowercase word is a value, `name:type` giving its type (integer, double, unix-time, pattern;
default string, and `key` for a word starting with "key"). A group whose first item is a token
followed by one value is that value introduced by the token (`[COUNT count:integer]`); a token
followed by several items is a block introduced by the token (`<STREAMS key... id...>`).
A group may start with its name, as COMMAND DOCS reports it: `[trim: <strategy: MAXLEN | MINID>
...]` (unnamed, a group takes its first item's name, or its alternatives' names joined by `-`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

_TOKEN = re.compile(r"^(?:[A-Z][A-Z0-9_-]*|[*=~$>+-])$")
_GROUP_NAME = re.compile(r"^[a-z][a-z0-9-]*:$")
_VALUE = re.compile(r"^([a-z][a-z0-9_-]*)(?::(integer|double|unix-time|pattern|string|key))?$")


@dataclass(frozen=True, slots=True)
class Arg:
    name: str
    type: str  # key, string, integer, double, unix-time, pattern, pure-token, oneof, block
    token: str = ""
    optional: bool = False
    multiple: bool = False
    arguments: tuple[Arg, ...] = ()


def parse_syntax(syntax: str) -> tuple[Arg, ...]:
    """The argument tree of a syntax line (the command name not included). ValueError for a
    malformed line: the table is declared at import, so a typo fails the first import."""
    words = re.findall(r"'>'|\.\.\.|[\[\]<>|]|[^\s\[\]<>|.']+", syntax)
    if "".join(words) != "".join(syntax.split()):  # a stray quote or dot is not skipped
        raise ValueError(f"cannot read {syntax!r}")
    # "<" and ">" are brackets, except ">" alone as a token (XREADGROUP's ID): written `'>'`.
    parser = _Parser([w if w != "'>'" else ">!" for w in words], syntax)
    args = parser.sequence(end=None)
    if parser.pos != len(parser.words):
        raise ValueError(f"unexpected {parser.words[parser.pos]!r} in {syntax!r}")
    return tuple(args)


class _Parser:
    def __init__(self, words: list[str], syntax: str) -> None:
        self.words = words
        self.pos = 0
        self.syntax = syntax

    def sequence(self, end: str | None) -> list[Arg]:
        items: list[Arg] = []
        while self.pos < len(self.words) and self.words[self.pos] not in ("|", end):
            items.append(self.item())
        return items

    def item(self) -> Arg:
        word = self.words[self.pos]
        self.pos += 1
        if word in ("[", "<"):
            arg = self.group(close="]" if word == "[" else ">", optional=word == "[")
        elif word == ">!":
            arg = Arg(">", "pure-token", token=">")
        elif _TOKEN.match(word):
            arg = Arg(word.lower() if word[0].isalpha() else word, "pure-token", token=word)
        elif (m := _VALUE.match(word)) is not None:
            name, kind = m.group(1), m.group(2)
            arg = Arg(name, kind or ("key" if name.startswith("key") else "string"))
        else:
            raise ValueError(f"cannot read {word!r} in {self.syntax!r}")
        if self.pos < len(self.words) and self.words[self.pos] == "...":
            self.pos += 1
            arg = _with(arg, multiple=True)
        return arg

    def group(self, close: str, optional: bool) -> Arg:
        name = ""
        if self.pos < len(self.words) and _GROUP_NAME.match(self.words[self.pos]):
            name = self.words[self.pos][:-1]
            self.pos += 1
        alternatives = [self.sequence(end=close)]
        while self.pos < len(self.words) and self.words[self.pos] == "|":
            self.pos += 1
            alternatives.append(self.sequence(end=close))
        if self.pos >= len(self.words) or self.words[self.pos] != close:
            raise ValueError(f"missing {close!r} in {self.syntax!r}")
        self.pos += 1
        if len(alternatives) > 1:
            choices = tuple(_one(seq, self.syntax) for seq in alternatives)
            arg = Arg("-".join(c.name for c in choices), "oneof", arguments=choices)
        else:
            arg = _one(alternatives[0], self.syntax)
        if name:
            arg = _with(arg, name=name)
        return _with(arg, optional=optional) if optional else arg


def _one(seq: list[Arg], syntax: str) -> Arg:
    """One argument for a group's sequence: the item itself, a value with its token, or a
    block (introduced by a token when the sequence starts with one)."""
    if not seq:
        raise ValueError(f"empty group in {syntax!r}")
    if len(seq) == 1:
        return seq[0]
    head, rest = seq[0], seq[1:]
    if head.type == "pure-token" and not head.multiple:
        if len(rest) == 1 and rest[0].type not in ("pure-token", "block") and not rest[0].token:
            return _with(rest[0], token=head.token)
        return Arg(head.name, "block", token=head.token, arguments=tuple(rest))
    return Arg(seq[0].name, "block", arguments=tuple(seq))


def _with(arg: Arg, **changes: object) -> Arg:
    return dataclasses.replace(arg, **changes)  # type: ignore[arg-type]


def render(args: tuple[Arg, ...]) -> str:
    """The syntax line as redis-cli prints it in HELP (its hint), from the tree."""
    return " ".join(_render(a) for a in args)


def _render(arg: Arg) -> str:
    if arg.type == "oneof":
        body = "|".join(_render(a) for a in arg.arguments)
    elif arg.type == "block":
        body = " ".join(_render(a) for a in arg.arguments)
    elif arg.type == "pure-token":
        body = ""
    else:
        body = arg.name
    token = arg.token
    if token and arg.type != "pure-token":
        token += " "
    text = token + body
    if arg.multiple:
        text += f" [{body} ...]"
    return f"[{text}]" if arg.optional else text


__all__ = ["Arg", "parse_syntax", "render"]
