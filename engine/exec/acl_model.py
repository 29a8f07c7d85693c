"""Redis's ACL user and selector model: rules in, permissions and descriptions out (the rules
as Redis 7.0 introduced them, the refusal texts as Redis 7.2+ words them).

Owns what one user is (flags, password hashes, a root selector and further selectors, each with
its commands, first-args, key patterns and channel patterns), how one ACL SETUSER rule changes
it (ACLSetUser / ACLSetSelector, with their errno-like failures and texts), how Redis describes
it back (ACLDescribeUser: the `+@all -debug +debug|digest` compaction of the command bitmap) and
how a command, its keys and its channels are checked against it (ACLSelectorCheckCmd /
ACLCheckAllUserCommandPerm). The user table, the log and the ACL file are engine.exec.acl's.

The command table reaches the model only through a `Catalogue` (engine/exec may not import
engine/commands); glob matching through a `Matcher`. Passwords are kept only as SHA-256 hex.
Must not touch: engine state, sockets, files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from streamkeep.engine.wire.errors import StreamkeepError

# (pattern, subject) -> bool: Redis's stringmatchlen, case-sensitive.
Matcher = Callable[[bytes, bytes], bool]


class Catalogue(Protocol):
    """The command table as the ACL model sees it. Names are lowercase full names
    ('container|sub' for subcommands); category names have no '@' (one is ignored)."""

    def categories(self) -> list[str]:
        """Every ACL category, in ACL CAT's order."""
        ...

    def commands_in(self, category: str) -> list[str]:
        """The commands and subcommands flagged with `category`."""
        ...

    def has_command(self, name: str) -> bool:
        """Whether `name` (a command or 'container|sub') exists."""
        ...

    def subcommands_of(self, name: str) -> list[str]:
        """A container's subcommands' full names (empty for a plain command)."""
        ...

    def categories_of(self, name: str) -> list[str]:
        """The categories of one command or subcommand."""
        ...


# Key permissions (ACL_READ_PERMISSION / ACL_WRITE_PERMISSION).
READ: Final = 1
WRITE: Final = 2
ALL_PERMISSIONS: Final = READ | WRITE

# Commands Redis flags CMD_NO_AUTH: every selector may run them (the Catalogue has no flags).
NO_AUTH_COMMANDS: Final = frozenset({"auth", "hello"})

# ACLSetUserStringError's texts, by the errno ACLSetUser sets.
ERR_UNKNOWN: Final = "Unknown command or category name in ACL"  # ENOENT
ERR_SYNTAX: Final = "Syntax error"  # EINVAL
ERR_KEYS_AFTER_ALL: Final = (
    "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not "
    "have any effect. Try 'resetkeys' to start with an empty list of patterns")  # EEXIST
ERR_CHANNELS_AFTER_ALL: Final = (
    "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does "
    "not have any effect. Try 'resetchannels' to start with an empty list of channels")  # EISDIR
ERR_NO_SUCH_PASSWORD: Final = (
    "The password you are trying to remove from the user does not exist")  # ENODEV
ERR_BAD_HASH: Final = ("The password hash must be exactly 64 characters and contain only "
                       "lowercase hexadecimal characters")  # EBADMSG
ERR_SUBCOMMAND_FIRSTARG: Final = "Allowing first-arg of a subcommand is not supported"  # ECHILD

# User flags, in the order ACLDescribeUser and ACL GETUSER print them.
USER_FLAGS: Final = ("on", "off", "nopass", "skip-sanitize-payload", "sanitize-payload")

# ACLCheckAllUserCommandPerm ranks denials by Redis's ACL_DENIED_* values.
_RANK: Final = {"command": 1, "key": 2, "channel": 4}
_BLANKS: Final = frozenset(b" \t\n\r\x0b\x0c\0")  # C isspace() and NUL


class RuleError(StreamkeepError):
    """One rule failed: ACLSetUserStringError's text, not yet a reply line (engine.exec.acl
    makes it ACL SETUSER's or ACL LOAD's line). `unknown` marks ENOENT, which ACL LOAD reports
    differently from the others."""

    def __init__(self, message: str, unknown: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unknown = unknown


def c_string(data: bytes) -> bytes:
    """What C's string functions see of an argument: up to its first NUL."""
    nul = data.find(b"\0")
    return data if nul < 0 else data[:nul]


def has_spaces(data: bytes) -> bool:
    """ACLStringHasSpaces: any isspace() byte or NUL."""
    return any(byte in _BLANKS for byte in data)


def hash_password(password: bytes) -> str:
    """ACLHashPassword: lowercase hex SHA-256."""
    import hashlib

    return hashlib.sha256(password).hexdigest()


def valid_hash(text: bytes) -> bool:
    """ACLCheckPasswordHash: 64 lowercase hex digits."""
    return len(text) == 64 and all(c in b"0123456789abcdef" for c in text)


class CommandIndex:
    """The catalogue compiled once: every name in one deterministic order (containers before
    their subcommands, as Redis's orig_commands walk visits them), membership per category."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.category_order = [c.lstrip("@").lower() for c in catalogue.categories()]
        self.members: dict[str, frozenset[str]] = {
            cat: frozenset(n.lower() for n in catalogue.commands_in(cat))
            for cat in self.category_order}
        tops = {name.split("|", 1)[0] for names in self.members.values() for name in names}
        self.subs: dict[str, list[str]] = {
            top: sorted(s.lower() for s in catalogue.subcommands_of(top)) for top in sorted(tops)}
        self.order: list[str] = []
        for top, subs in self.subs.items():
            self.order.append(top)
            self.order.extend(subs)
        self.all: frozenset[str] = frozenset(self.order)
        self.parent = {sub: top for top, subs in self.subs.items() for sub in subs}
        self._catalogue = catalogue

    def lookup(self, name: bytes) -> str | None:
        """lookupCommandBySdsLogic on the original table: 'cmd' or 'container|sub', any case;
        None for anything else (a first-arg of a plain command, deeper nesting)."""
        try:
            text = c_string(name).decode("ascii").lower()
        except UnicodeDecodeError:
            return None
        parts = text.split("|")
        if len(parts) > 2 or parts[0] not in self.subs:
            return None
        if len(parts) == 1:
            return text
        return text if text in self.parent else None

    def category(self, name: bytes) -> str | None:
        """ACLGetCommandCategoryFlagByName: a category by name, any case."""
        text = c_string(name).decode("latin-1").lower()
        return text if text in self.members else None


@dataclass
class KeyPattern:
    """One key pattern and the permissions it grants (READ, WRITE or both)."""

    pattern: bytes
    flags: int

    def describe(self) -> bytes:
        """sdsCatPatternString: `~p`, `%R~p` or `%W~p`."""
        prefix = {ALL_PERMISSIONS: b"~", READ: b"%R~", WRITE: b"%W~"}[self.flags]
        return prefix + self.pattern


@dataclass
class Selector:
    """An aclSelector. `allowed` is the command bitmap as a set of full names; `future` is
    Redis's reserved bit that only +@all / allcommands set (it decides +@all vs -@all when
    described); `allcommands` the SELECTOR_FLAG_ALLCOMMANDS shortcut any removal clears."""

    root: bool = False
    allkeys: bool = False
    allchannels: bool = False
    allcommands: bool = False
    future: bool = False
    allowed: set[str] = field(default_factory=set)
    firstargs: dict[str, list[bytes]] = field(default_factory=dict)
    patterns: list[KeyPattern] = field(default_factory=list)
    channels: list[bytes] = field(default_factory=list)

    def copy(self) -> Selector:
        return Selector(self.root, self.allkeys, self.allchannels, self.allcommands, self.future,
                        set(self.allowed), {k: list(v) for k, v in self.firstargs.items()},
                        [KeyPattern(p.pattern, p.flags) for p in self.patterns],
                        list(self.channels))


@dataclass
class User:
    """A user: its name, USER_FLAGS set, password hashes (hex, in insertion order) and
    selectors (the root first). It never holds a password in clear."""

    name: bytes
    # ACLCreateUser: off, and since Redis 7.2 sanitize-payload (7.0 set neither)
    flags: set[str] = field(default_factory=lambda: {"off", "sanitize-payload"})
    passwords: list[str] = field(default_factory=list)
    selectors: list[Selector] = field(default_factory=lambda: [Selector(root=True)])

    @property
    def root(self) -> Selector:
        return self.selectors[0]

    @property
    def enabled(self) -> bool:
        return "on" in self.flags

    def copy(self, name: bytes | None = None) -> User:
        return User(self.name if name is None else name, set(self.flags), list(self.passwords),
                    [s.copy() for s in self.selectors])

    def __repr__(self) -> str:
        return f"User({self.name!r}, flags={sorted(self.flags)}, passwords={len(self.passwords)})"


# --- changing a selector's commands -------------------------------------------------------------


def change_perm(sel: Selector, index: CommandIndex, name: str, allow: bool) -> None:
    """ACLChangeSelectorPerm: one command's bit, and its subcommands' if it is a container."""
    for target in (name, *index.subs.get(name, ())):
        set_bit(sel, target, allow)
    sel.firstargs.pop(name, None)


def set_bit(sel: Selector, name: str, allow: bool) -> None:
    """ACLSetSelectorCommandBit: clearing any bit drops the ALLCOMMANDS shortcut."""
    if allow:
        sel.allowed.add(name)
    else:
        sel.allowed.discard(name)
        sel.allcommands = False


def set_category(sel: Selector, index: CommandIndex, category: str, allow: bool) -> None:
    """ACLSetSelectorCommandBitsForCategory."""
    for name in index.order:
        if name in index.members[category]:
            change_perm(sel, index, name, allow)


def set_all_commands(sel: Selector, index: CommandIndex, allow: bool) -> None:
    """+@all / allcommands (every bit, the reserved one too) and -@all / nocommands."""
    sel.allowed = set(index.all) if allow else set()
    sel.allcommands = sel.future = allow
    sel.firstargs.clear()


# --- ACLSetSelector ---------------------------------------------------------------------------


def apply_selector_rule(sel: Selector, index: CommandIndex, op: bytes) -> None:
    """ACLSetSelector: one rule on one selector; RuleError (nothing changed) when it fails."""
    word = c_string(op).lower()
    if word in (b"allkeys", b"~*"):
        sel.allkeys, sel.patterns = True, []
    elif word == b"resetkeys":
        sel.allkeys, sel.patterns = False, []
    elif word in (b"allchannels", b"&*"):
        sel.allchannels, sel.channels = True, []
    elif word == b"resetchannels":
        sel.allchannels, sel.channels = False, []
    elif word in (b"allcommands", b"+@all"):
        set_all_commands(sel, index, True)
    elif word in (b"nocommands", b"-@all"):
        set_all_commands(sel, index, False)
    elif op[:1] in (b"~", b"%"):
        _add_key_pattern(sel, op)
    elif op[:1] == b"&":
        _add_channel(sel, op)
    elif op[:1] in (b"+", b"-") and op[1:2] == b"@":
        category = index.category(op[2:])
        if category is None:
            raise RuleError(ERR_UNKNOWN, unknown=True)
        set_category(sel, index, category, op[:1] == b"+")
    elif op[:1] == b"+":
        _allow_command(sel, index, c_string(op)[1:])
    elif op[:1] == b"-":
        name = index.lookup(op[1:])
        if name is None:
            raise RuleError(ERR_UNKNOWN, unknown=True)
        change_perm(sel, index, name, False)
    else:
        raise RuleError(ERR_SYNTAX)


def _add_key_pattern(sel: Selector, op: bytes) -> None:
    """`~pattern` (read and write) or `%R~` / `%W~` / `%RW~pattern`."""
    if sel.allkeys:
        raise RuleError(ERR_KEYS_AFTER_ALL)
    flags, offset = ALL_PERMISSIONS, 1
    if op[:1] == b"%":
        flags = 0
        while offset < len(op):
            letter = op[offset:offset + 1].upper()
            if letter == b"R" and not flags & READ:
                flags |= READ
            elif letter == b"W" and not flags & WRITE:
                flags |= WRITE
            elif letter == b"~":
                offset += 1
                break
            else:
                raise RuleError(ERR_SYNTAX)
            offset += 1
        if not flags:  # (7.0.15 refuses '%' and '%~x', which 7.0.0 accepted and crashed on)
            raise RuleError(ERR_SYNTAX)
    pattern = op[offset:]
    if has_spaces(pattern):
        raise RuleError(ERR_SYNTAX)
    for existing in sel.patterns:
        if existing.pattern == pattern:  # the same pattern again widens its permissions
            existing.flags |= flags
            break
    else:
        sel.patterns.append(KeyPattern(pattern, flags))
    sel.allkeys = False


def _add_channel(sel: Selector, op: bytes) -> None:
    if sel.allchannels:
        raise RuleError(ERR_CHANNELS_AFTER_ALL)
    pattern = op[1:]
    if has_spaces(pattern):
        raise RuleError(ERR_SYNTAX)
    if pattern not in sel.channels:
        sel.channels.append(pattern)
    sel.allchannels = False


def _allow_command(sel: Selector, index: CommandIndex, spec: bytes) -> None:
    """`+cmd`, `+container|sub`, or the deprecated `+cmd|first-arg` of a plain command."""
    if b"|" not in spec:
        name = index.lookup(spec)
        if name is None:
            raise RuleError(ERR_UNKNOWN, unknown=True)
        change_perm(sel, index, name, True)
        return
    head, _, first_arg = spec.rpartition(b"|")
    name = index.lookup(head)
    if name is None:
        raise RuleError(ERR_UNKNOWN, unknown=True)
    if name in index.parent:
        raise RuleError(ERR_SUBCOMMAND_FIRSTARG)
    if not first_arg:
        raise RuleError(ERR_SYNTAX)
    if index.subs.get(name):
        sub = index.lookup(spec)
        if sub is None:
            raise RuleError(ERR_UNKNOWN, unknown=True)
        change_perm(sel, index, sub, True)
        return
    allowed = sel.firstargs.setdefault(name, [])
    if not any(a.lower() == first_arg.lower() for a in allowed):
        allowed.append(first_arg)


# --- ACLSetUser -------------------------------------------------------------------------------


def apply_user_rule(user: User, index: CommandIndex, op: bytes,
                    pubsub_default_all: bool = False,
                    split_args: Callable[[bytes], list[bytes]] | None = None) -> None:
    """ACLSetUser: one (merged) rule on a user; RuleError when it fails. `split_args` splits a
    selector's inside as sdssplitargs does (None on unbalanced quotes)."""
    if not op:
        return  # an empty rule is a no-op
    word = c_string(op).lower()
    if word in (b"on", b"off"):
        user.flags -= {"on", "off"}
        user.flags.add(word.decode())
    elif word in (b"skip-sanitize-payload", b"sanitize-payload"):
        user.flags -= {"skip-sanitize-payload", "sanitize-payload"}
        user.flags.add(word.decode())
    elif word == b"nopass":
        user.flags.add("nopass")
        user.passwords.clear()
    elif word == b"resetpass":
        user.flags.discard("nopass")
        user.passwords.clear()
    elif op[:1] in (b">", b"#"):
        _add_password(user, op)
    elif op[:1] in (b"<", b"!"):
        _remove_password(user, op)
    elif op[:1] == b"(" and op[-1:] == b")":
        user.selectors.append(_selector_from(op, index, pubsub_default_all, split_args))
    elif word == b"clearselectors":
        del user.selectors[1:]
    elif word == b"reset":
        _reset(user, index, pubsub_default_all)
    else:
        apply_selector_rule(user.root, index, op)


def _digest_of(op: bytes, clear: bytes) -> str:
    """The SHA-256 hex a password rule names: hashed from `>pw`/`<pw` (`clear` its first
    byte), or given as `#hex`/`!hex`."""
    if op[:1] == clear:
        return hash_password(op[1:])
    if valid_hash(op[1:]):
        return op[1:].decode("ascii")
    raise RuleError(ERR_BAD_HASH)


def _add_password(user: User, op: bytes) -> None:
    digest = _digest_of(op, b">")
    if digest not in user.passwords:
        user.passwords.append(digest)
    user.flags.discard("nopass")


def _remove_password(user: User, op: bytes) -> None:
    digest = _digest_of(op, b"<")
    if digest not in user.passwords:
        raise RuleError(ERR_NO_SUCH_PASSWORD)
    user.passwords.remove(digest)


def _selector_from(op: bytes, index: CommandIndex, pubsub_default_all: bool,
                   split_args: Callable[[bytes], list[bytes]] | None) -> Selector:
    """aclCreateSelectorFromOpSet: `(rule rule ...)`; quotes that do not close make it empty."""
    sel = Selector(allchannels=pubsub_default_all)
    inner = op[1:-1]
    rules = split_args(inner) if split_args is not None else inner.split()
    for rule in rules or ():
        apply_selector_rule(sel, index, rule)
    return sel


def _reset(user: User, index: CommandIndex, pubsub_default_all: bool) -> None:
    """`reset`: resetpass, resetkeys, resetchannels (then allchannels if that is the
    acl-pubsub-default), off, sanitize-payload, clearselectors, -@all."""
    for rule in (b"resetpass", b"resetkeys", b"resetchannels",
                 *((b"allchannels",) if pubsub_default_all else ()),
                 b"off", b"sanitize-payload", b"clearselectors", b"-@all"):
        apply_user_rule(user, index, rule, pubsub_default_all)


def merge_selector_args(rules: Sequence[bytes]) -> tuple[list[bytes] | None, int]:
    """ACLMergeSelectorArguments: a selector spread over several arguments joined with
    spaces. Returns (merged, 0), or (None, index of the unclosed '(' argument)."""
    merged: list[bytes] = []
    opened, current = -1, b""
    for i, op in enumerate(rules):
        if op[:1] == b"(" and op[-1:] != b")":
            opened, current = i, op
            continue
        if opened != -1:
            current += b" " + c_string(op)
            if op[-1:] == b")":
                merged.append(current)
                opened = -1
            continue
        merged.append(op)
    if opened != -1:
        return None, opened
    return merged, 0


# --- describing -------------------------------------------------------------------------------


def describe_commands(sel: Selector, index: CommandIndex) -> bytes:
    """ACLDescribeSelectorCommandRules: +@all or -@all, the categories that fit best (applied
    to a fake selector as they are chosen), then the single commands that still differ. Redis
    walks its command dict in hash order, which a random seed changes per process, so the
    single-command part is only the same set of words; here it is in name order."""
    additive = not sel.future
    fake = Selector()
    set_all_commands(fake, index, not additive)
    words = [b"-@all" if additive else b"+@all"]
    temp = Selector(allowed=set(sel.allowed))
    applied: set[str] = set()
    while True:
        best = _best_category(temp, index, additive, applied)
        if best is None:
            break
        set_category(fake, index, best, additive)
        set_category(temp, index, best, not additive)
        words.append((b"+@" if additive else b"-@") + best.encode())
        applied.add(best)
    words.extend(_single_commands(sel, fake, index))
    return b" ".join(words)


def _best_category(temp: Selector, index: CommandIndex, additive: bool,
                   applied: set[str]) -> str | None:
    """The category with more commands in common than different, fewest differences first,
    then most in common (ties: the first in ACL CAT order)."""
    best, mindiff, maxsame = None, 1 << 31, 0
    for cat in index.category_order:
        if cat in applied:
            continue
        on = len(index.members[cat] & temp.allowed)
        off = len(index.members[cat]) - on
        diff, same = (off, on) if additive else (on, off)
        if same > diff and (diff < mindiff or (diff == mindiff and same > maxsame)):
            best, mindiff, maxsame = cat, diff, same
    return best


def _single_commands(sel: Selector, fake: Selector, index: CommandIndex) -> Iterable[bytes]:
    """ACLDescribeSelectorCommandRulesSingleCommands: each command (a container before its
    subcommands) whose bit still differs, then the first-args of a denied command."""
    for name in index.order:
        allowed = name in sel.allowed
        if allowed != (name in fake.allowed):
            yield (b"+" if allowed else b"-") + name.encode()
            change_perm(fake, index, name, allowed)
        if not allowed:
            for first_arg in sel.firstargs.get(name, ()):
                yield b"+" + name.encode() + b"|" + first_arg


def describe_keys(sel: Selector) -> bytes:
    """The key patterns as ACL GETUSER shows them."""
    if sel.allkeys:
        return b"~*"
    return b" ".join(p.describe() for p in sel.patterns)


def describe_channels(sel: Selector) -> bytes:
    """The channel patterns as ACL GETUSER shows them."""
    if sel.allchannels:
        return b"&*"
    return b" ".join(b"&" + c for c in sel.channels)


def describe_selector(sel: Selector, index: CommandIndex) -> bytes:
    """ACLDescribeSelector: keys, channels (with `resetchannels` first), commands."""
    words = [describe_keys(sel)] if sel.allkeys or sel.patterns else []
    if sel.allchannels:
        words.append(b"&*")
    else:
        words.append(b"resetchannels")
        words.extend(b"&" + c for c in sel.channels)
    words.append(describe_commands(sel, index))
    return b" ".join(words)


def describe_user(user: User, index: CommandIndex) -> bytes:
    """ACLDescribeUser: flags, #hashes, the root selector, then ` (selector)` for the rest."""
    words = [flag.encode() for flag in USER_FLAGS if flag in user.flags]
    words.extend(b"#" + p.encode() for p in user.passwords)
    words.append(describe_selector(user.root, index))
    text = b" ".join(words)
    for sel in user.selectors[1:]:
        text += b" (" + describe_selector(sel, index) + b")"
    return text


# --- checking ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Denial:
    """Why a command was refused: `reason` "command", "key" or "channel"; `object` the command's
    full name, the key or the channel; `username` whose permissions refused it."""

    reason: str
    object: bytes
    username: bytes
    command: str

    def error_line(self) -> str:
        """The NOPERM line a refused command gets (Redis 7.2+: getAclErrorMessage's short
        form after "NOPERM "; no '-')."""
        return "NOPERM " + self.short_text()

    def short_text(self) -> str:
        """getAclErrorMessage, not verbose: what NOPERM and a script's "ACL failure in script: "
        error say."""
        if self.reason == "command":
            return (f"User {_text(self.username)} has no permissions to run the "
                    f"'{self.command}' command")
        return f"No permissions to access a {self.reason}"

    def script_line(self) -> str:
        """The error a script's redis.call gets (script.c's scriptVerifyACL)."""
        return "ERR ACL failure in script: " + self.short_text()

    def exec_line(self) -> str:
        """The NOPERM line EXEC replies for a queued command the ACL rules refuse since it was
        queued (multi.c)."""
        reason = {"command": "no permission to execute the command or subcommand",
                  "key": "no permission to touch the specified keys",
                  "channel": "no permission to access one of the channels used as arguments",
                  }[self.reason]
        return ("NOPERM ACLs rules changed between the moment the transaction was accumulated "
                "and the EXEC call. This command is no longer allowed for the following "
                f"reason: {reason}")

    def dryrun_text(self) -> bytes:
        """ACL DRYRUN's bulk reply for a refusal: getAclErrorMessage, verbose (the user's
        name, the key or channel whole: Redis prints them as sds, NULs and all)."""
        if self.reason == "command":
            return (b"User " + self.username + b" has no permissions to run the '"
                    + self.command.encode() + b"' command")
        return (b"User " + self.username + b" has no permissions to access the '"
                + self.object + b"' " + self.reason.encode())


def _text(data: bytes) -> str:
    """Bytes for an error line, every byte kept (surrogateescape, as engine.wire.errors)."""
    return data.decode("utf-8", "surrogateescape").replace("\r", " ").replace("\n", " ")


def key_permissions(spec_flags: Iterable[str]) -> int:
    """The permissions a key spec's flags ask for: ACCESS reads, INSERT/DELETE/UPDATE write."""
    wanted = 0
    for flag in spec_flags:
        flag = flag.lower()
        if flag == "access":
            wanted |= READ
        elif flag in ("insert", "delete", "update"):
            wanted |= WRITE
    return wanted


def check_key(sel: Selector, key: bytes, spec_flags: Iterable[str], match: Matcher) -> bool:
    """ACLSelectorCheckKey: a pattern granting every wanted permission must match."""
    if sel.allkeys:
        return True
    wanted = key_permissions(spec_flags)
    return any(p.flags & wanted == wanted and match(p.pattern, key) for p in sel.patterns)


def check_channel(patterns: Iterable[bytes], channel: bytes, is_pattern: bool,
                  match: Matcher) -> bool:
    """ACLCheckChannelAgainstList: a PSUBSCRIBE pattern must equal an ACL pattern literally
    (strcmp), a channel is glob-matched."""
    if is_pattern:
        return any(c_string(p) == c_string(channel) for p in patterns)
    return any(match(p, channel) for p in patterns)


def check_selector(sel: Selector, command: str, first_arg: bytes | None,
                   keys: Sequence[tuple[bytes, frozenset[str]]], channels: Sequence[bytes],
                   pattern_channels: bool, match: Matcher) -> tuple[str, int] | None:
    """ACLSelectorCheckCmd: None when allowed, else (reason, position of the refused key or
    channel, counted from 1 in the order given)."""
    if not sel.allcommands and command not in NO_AUTH_COMMANDS and command not in sel.allowed:
        first_args = sel.firstargs.get(command)
        wanted = None if first_arg is None else c_string(first_arg).lower()
        if not first_args or wanted is None \
                or not any(c_string(a).lower() == wanted for a in first_args):
            return "command", 0
    if not sel.allkeys:
        for pos, (key, flags) in enumerate(keys, 1):
            if not check_key(sel, key, flags, match):
                return "key", pos
    if not sel.allchannels:
        for pos, channel in enumerate(channels, 1):
            if not check_channel(sel.channels, channel, pattern_channels, match):
                return "channel", len(keys) + pos
    return None


def check_user(user: User, command: str, first_arg: bytes | None,
               keys: Sequence[tuple[bytes, frozenset[str]]], channels: Sequence[bytes],
               pattern_channels: bool, match: Matcher) -> Denial | None:
    """ACLCheckAllUserCommandPerm: allowed if any selector allows it all; otherwise the
    denial to report is the highest-ranked one, the latest argument among equals."""
    reason, pos = "command", 0
    for sel in user.selectors:
        found = check_selector(sel, command, first_arg, keys, channels, pattern_channels, match)
        if found is None:
            return None
        if _RANK[found[0]] > _RANK[reason] or (found[0] == reason and found[1] > pos):
            reason, pos = found
    if reason == "command":
        obj = command.encode()
    elif reason == "key":
        obj = keys[pos - 1][0]
    else:
        obj = channels[pos - len(keys) - 1]
    return Denial(reason, obj, user.name, command)
