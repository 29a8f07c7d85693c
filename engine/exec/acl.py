"""Redis's ACL as a pure model: the user table, ACL SETUSER / GETUSER / LIST / USERS /
DELUSER / DRYRUN / CAT / GENPASS replies, password checks, the ACL LOG store, the users a config
file declares and the ACL file's text (ACL SAVE / ACL LOAD), byte for byte as Redis 7.2+ / 8.x
replies (the rules are 7.0's; the refusal texts and ACL LOG's ten fields are 7.2's).

Owns `Users`, the table an engine and a server hold; one user's rules, descriptions and
permission checks are engine.exec.acl_model's. A user is changed in place (ACL SETUSER, the
default user's password, ACL LOAD's default user), so a session holding its `User` sees the
change at once. Errors are ReplyErrors carrying Redis's exact line. The command table comes in
as a `Catalogue`, glob matching as a `Matcher` (engine/exec may not import engine/commands).
Must not touch: engine state, sockets, files (the caller reads and writes the ACL file), clocks
(the caller passes the time), connections (the caller disconnects the users these calls name).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from streamkeep.engine.exec.acl_model import (
    USER_FLAGS,
    Catalogue,
    CommandIndex,
    Denial,
    Matcher,
    RuleError,
    Selector,
    User,
    apply_user_rule,
    c_string,
    check_user,
    describe_channels,
    describe_commands,
    describe_keys,
    describe_user,
    has_spaces,
    hash_password,
    merge_selector_args,
)
from streamkeep.engine.model.scores import format_score
from streamkeep.engine.wire.errors import ReplyError, StreamkeepError, printable
from streamkeep.engine.wire.reply import HumanDouble, RespMap, RespSet

__all__ = ["Catalogue", "ConfiguredUserError", "Denial", "LogEntry", "Matcher", "Users"]

DEFAULT_USER: Final = b"default"
ACLLOG_MAX_LEN: Final = 128
LOG_GROUPING_MS: Final = 60000  # ACL_LOG_GROUPING_MAX_TIME_DELTA
LOG_SCAN: Final = 10  # how many recent entries a new one may be grouped with
GENPASS_MAX_BITS: Final = 4096
LOG_CONTEXTS: Final = ("toplevel", "multi", "lua", "module")

ERR_USERNAME: Final = "ERR Usernames can't contain spaces or null characters"
ERR_DELETE_DEFAULT: Final = "ERR The 'default' user cannot be removed"
ERR_GENPASS: Final = ("ERR ACL GENPASS argument must be the number of bits for the output "
                      "password, a positive number up to 4096")
LOAD_FAILED: Final = ("WARNING: ACL errors detected, no change to the previously active ACL "
                      "rules was performed")
ERR_DUPLICATE_CONFIGURED: Final = ("Duplicate user found. A user can only be defined once in "
                                   "config files")  # EALREADY


class ConfiguredUserError(StreamkeepError, ValueError):
    """A `user` line of the config file refused: `str()` is Redis's reason (the config file's
    "Error in user declaration ..." or ACLLoadConfiguredUsers' log line)."""


def _copy_into(target: User, source: User) -> None:
    """ACLCopyUser: `source`'s flags, passwords and selectors into `target` (same name)."""
    target.flags = set(source.flags)
    target.passwords = list(source.passwords)
    target.selectors = [s.copy() for s in source.selectors]


def _split_args(text: bytes) -> list[bytes]:
    """sdssplitargs for a selector's inside; unbalanced quotes give no rules (as Redis does)."""
    from streamkeep.engine.wire.errors import ProtocolError
    from streamkeep.engine.wire.inline import split_inline_args

    try:
        return split_inline_args(text)
    except ProtocolError:
        return []


@dataclass
class LogEntry:
    """One ACL LOG entry; identical denials within a minute share one (count, last time)."""

    reason: str
    context: str
    object: bytes
    username: bytes
    client_info: bytes
    created_ms: int
    updated_ms: int
    entry_id: int
    count: int = 1

    def matches(self, other: LogEntry) -> bool:
        """ACLLogMatchEntry."""
        return (self.reason == other.reason and self.context == other.context
                and abs(self.updated_ms - other.updated_ms) <= LOG_GROUPING_MS
                and self.object == other.object and self.username == other.username)

    def reply(self, now_ms: int, with_ids: bool = True) -> RespMap:
        """The entry as ACL LOG shows it: Redis 7.2's ten fields (`with_ids` False: 7.0's
        seven). age-seconds is a double, printed as 7.2+'s addReplyDouble does (d2string)."""
        age = HumanDouble(format_score((now_ms - self.updated_ms) / 1000))
        items: list[tuple[bytes, Any]] = [
            (b"count", self.count), (b"reason", self.reason.encode()),
            (b"context", self.context.encode()), (b"object", self.object),
            (b"username", self.username), (b"age-seconds", age),
            (b"client-info", self.client_info)]
        if with_ids:
            items += [(b"entry-id", self.entry_id), (b"timestamp-created", self.created_ms),
                      (b"timestamp-last-updated", self.updated_ms)]
        return RespMap(items)


class Users:
    """The ACL user table (starting with `default`: on nopass ~* &* +@all) and the ACL log."""

    def __init__(self, catalogue: Catalogue, matcher: Matcher,
                 pubsub_default_all: bool = False, log_max_len: int = ACLLOG_MAX_LEN) -> None:
        self.catalogue = catalogue
        self.index = CommandIndex(catalogue)
        self.match = matcher
        self.pubsub_default_all = pubsub_default_all  # acl-pubsub-default allchannels
        self.on_change: Callable[[], None] | None = None  # told after a user may change
        self.log_max_len = log_max_len
        self._users: dict[bytes, User] = {DEFAULT_USER: self._default_user()}
        self._log: list[LogEntry] = []  # newest first
        self._next_entry_id = 0

    def __repr__(self) -> str:
        return f"Users({sorted(self._users)!r})"

    # --- the table ------------------------------------------------------------------------------

    def _default_user(self) -> User:
        """ACLCreateDefaultUser."""
        user = User(DEFAULT_USER)
        for rule in (b"+@all", b"~*", b"&*", b"on", b"nopass"):
            self._apply(user, rule)
        return user

    def new_user(self, name: bytes) -> User:
        """ACLCreateUser: off, sanitize-payload, and all channels when acl-pubsub-default is
        allchannels (the root selector takes the setting's flag)."""
        user = User(name)
        user.root.allchannels = self.pubsub_default_all
        return user

    def _apply(self, user: User, rule: bytes) -> None:
        apply_user_rule(user, self.index, rule, self.pubsub_default_all, _split_args)
        self._changed()

    def _changed(self) -> None:
        """A user may have changed: `on_change` is told (the engine's sessions then look at
        their user's permissions again: engine.runtime.acl_gate)."""
        if self.on_change is not None:
            self.on_change()

    def get(self, name: bytes) -> User | None:
        """The user called `name`, or None."""
        return self._users.get(name)

    def users(self) -> list[bytes]:
        """ACL USERS: the names in byte order (Redis's radix tree order)."""
        return sorted(self._users)

    def setuser(self, name: bytes, rules: Sequence[bytes]) -> User:
        """ACL SETUSER: every rule applied in order to a copy; a failing rule changes
        nothing and raises Redis's error line. An existing user is then changed in place
        (ACLCopyUser: a session authenticated as it sees the new rules at once). Returns
        the user."""
        if has_spaces(name):
            raise ReplyError(ERR_USERNAME)
        merged, opened = merge_selector_args(rules)
        if merged is None:
            raise ReplyError("ERR Unmatched parenthesis in acl selector starting at "
                             f"'{printable(rules[opened])}'.")
        current = self._users.get(name)
        staged = current.copy() if current is not None else self.new_user(name)
        for rule in merged:
            try:
                self._apply(staged, rule)
            except RuleError as err:
                raise ReplyError(f"ERR Error in ACL SETUSER modifier '{printable(rule)}': "
                                 f"{err.message}") from None
        if current is None:
            self._users[name] = staged
            return staged
        _copy_into(current, staged)
        self._changed()
        return current

    def set_default_password(self, password: str | bytes) -> None:
        """requirepass (ACLUpdateDefaultUserPassword): `resetpass`, then `>password`, or
        `nopass` for an empty one; the default user changed in place."""
        secret = password.encode("utf-8", "surrogateescape") if isinstance(password, str) \
            else password
        user = self._users[DEFAULT_USER]
        self._apply(user, b"resetpass")
        self._apply(user, b">" + secret if secret else b"nopass")

    def load_configured(self, lines: Sequence[Sequence[bytes]]) -> None:
        """The config file's `user <name> <rules...>` lines (each given without `user`), in
        order, as ACLLoadConfiguredUsers applies them at start: a user made, or `default`
        reset first; ConfiguredUserError with Redis's log line for a rule that fails (an
        unknown command passes the config file's own check and fails here)."""
        for line in lines:
            name, rules = line[0], line[1:]
            if has_spaces(name):
                raise ConfiguredUserError("Spaces not allowed in ACL usernames")
            user = self._users.get(name)
            if user is None:
                user = self._users[name] = self.new_user(name)
            else:
                self._apply(user, b"reset")
            merged, _ = merge_selector_args(rules)
            for rule in merged or ():
                try:
                    self._apply(user, rule)
                except RuleError as err:
                    raise ConfiguredUserError(
                        f"Error loading ACL rule '{printable(rule)}' for the user named "
                        f"'{printable(name)}': {err.message}") from None

    def check_configured_line(self, argv: Sequence[bytes], seen: Sequence[bytes]) -> None:
        """ACLAppendUserForLoading: a config file's `user` line (argv[0] is `user`) checked on
        a scratch user; ConfiguredUserError with the config file's "Error in user
        declaration" reason. `seen`: the names of the lines before it. Redis names the wrong
        rule by its place among the rules but looks it up in the whole line (argv[j]), which
        this keeps."""
        if argv[1] in seen:
            raise ConfiguredUserError(
                f"Error in user declaration '{printable(argv[1])}': {ERR_DUPLICATE_CONFIGURED}")
        merged, opened = merge_selector_args(argv[2:])
        if merged is None:
            raise ConfiguredUserError(
                f"Error in user declaration '{printable(argv[opened])}': Syntax error")
        scratch = self.new_user(b"scratch")
        for j, rule in enumerate(merged):
            try:
                self._apply(scratch, rule)
            except RuleError as err:
                if not err.unknown:
                    raise ConfiguredUserError(
                        f"Error in user declaration '{printable(argv[j])}': "
                        f"{err.message}") from None

    def deluser(self, names: Sequence[bytes]) -> int:
        """ACL DELUSER: how many existed; `default` may not be named (nothing is deleted)."""
        if any(c_string(n) == DEFAULT_USER for n in names):
            raise ReplyError(ERR_DELETE_DEFAULT)
        return sum(self._users.pop(n, None) is not None for n in names)

    # --- what ACL shows -------------------------------------------------------------------------

    def describe(self, user: User) -> bytes:
        """The rules ACL LIST and ACL SAVE write after `user <name> `."""
        return describe_user(user, self.index)

    def list_lines(self) -> list[bytes]:
        """ACL LIST: `user <name> <rules>` per user, in name order."""
        return [b"user " + name + b" " + self.describe(self._users[name])
                for name in self.users()]

    def getuser(self, name: bytes) -> RespMap | None:
        """ACL GETUSER: a map (flat in RESP2) of flags, passwords, the root selector's
        commands / keys / channels and the other selectors; None for no such user."""
        user = self._users.get(name)
        if user is None:
            return None
        items: list[tuple[bytes, Any]] = [
            (b"flags", RespSet([f.encode() for f in USER_FLAGS if f in user.flags])),
            (b"passwords", [p.encode() for p in user.passwords]),
            *self._selector_fields(user.root),
            (b"selectors", [RespMap(self._selector_fields(s)) for s in user.selectors[1:]])]
        return RespMap(items)

    def _selector_fields(self, sel: Selector) -> list[tuple[bytes, Any]]:
        return [(b"commands", describe_commands(sel, self.index)), (b"keys", describe_keys(sel)),
                (b"channels", describe_channels(sel))]

    def categories(self) -> list[bytes]:
        """ACL CAT."""
        return [c.encode() for c in self.index.category_order]

    def commands_in_category(self, category: bytes) -> list[bytes]:
        """ACL CAT <category>: its commands and subcommands."""
        name = self.index.category(category)
        if name is None:
            raise ReplyError(f"ERR Unknown category '{printable(category, 128)}'")
        return [n.encode() for n in self.index.order if n in self.index.members[name]]

    # --- authentication and permissions ---------------------------------------------------------

    def check_password(self, name: bytes, password: bytes) -> bool:
        """ACLCheckUserCredentials: an enabled user, nopass or a matching hash (compared in
        constant time against every hash)."""
        import hmac

        user = self._users.get(name)
        if user is None or not user.enabled:
            return False
        if "nopass" in user.flags:
            return True
        digest = hash_password(password).encode()
        found = False
        for stored in user.passwords:
            found |= hmac.compare_digest(digest, stored.encode())
        return found

    def check(self, user: User, command: str, keys: Sequence[tuple[bytes, frozenset[str]]] = (),
              channels: Sequence[bytes] = (), pattern_channels: bool = False,
              first_arg: bytes | None = None) -> Denial | None:
        """Whether `user` may run `command` (a full name, 'container|sub') with these keys (each
        with its key spec's flags: access, insert, delete, update) and channels (those of
        PUBLISH / SUBSCRIBE / PSUBSCRIBE and their shard forms, not of the unsubscribes;
        `pattern_channels` for PSUBSCRIBE's). `first_arg` is argv[1] for first-arg rules.
        None when allowed, else the Denial to reply and log."""
        return check_user(user, command, first_arg, keys, channels, pattern_channels,
                          self.match)

    def dryrun(self, name: bytes, command: str,
               keys: Sequence[tuple[bytes, frozenset[str]]] = (), channels: Sequence[bytes] = (),
               pattern_channels: bool = False, first_arg: bytes | None = None) -> str | bytes:
        """ACL DRYRUN once the caller has found the command and checked its arity: "OK"
        (a simple string) or the refusal's text (a bulk string)."""
        user = self._users.get(name)
        if user is None:
            raise ReplyError(f"ERR User '{printable(name)}' not found")
        denial = self.check(user, command, keys, channels, pattern_channels, first_arg)
        return "OK" if denial is None else denial.dryrun_text()

    # --- ACL LOG --------------------------------------------------------------------------------

    def log_denial(self, denial: Denial, client_info: bytes, now_ms: int,
                   context: str = "toplevel", username: bytes | None = None) -> None:
        """addACLLogEntry for a refused command, key or channel."""
        self._log_entry(denial.reason, context, denial.object,
                        denial.username if username is None else username, client_info, now_ms)

    def log_auth_failure(self, username: bytes, client_info: bytes, now_ms: int,
                         context: str = "toplevel", object: bytes = b"AUTH") -> None:
        """addACLLogEntry for a failed AUTH / HELLO: the object is argv[0] as the client sent
        it."""
        self._log_entry("auth", context, object, username, client_info, now_ms)

    def _log_entry(self, reason: str, context: str, obj: bytes, username: bytes,
                   client_info: bytes, now_ms: int) -> None:
        if context not in LOG_CONTEXTS:
            raise ValueError(f"unknown ACL log context {context!r}")
        entry = LogEntry(reason, context, obj, username, client_info, now_ms, now_ms,
                         self._next_entry_id)
        for i, current in enumerate(self._log[:LOG_SCAN]):
            if current.matches(entry):
                del self._log[i]
                current.client_info, current.updated_ms = client_info, now_ms
                current.count += 1
                self._log.insert(0, current)
                return
        self._next_entry_id += 1
        self._log.insert(0, entry)
        del self._log[max(self.log_max_len, 0):]

    def set_log_max_len(self, length: int) -> None:
        """CONFIG SET acllog-max-len: Redis trims only when the next entry comes."""
        self.log_max_len = length

    def log_entries(self, count: int, now_ms: int, with_ids: bool = True) -> list[RespMap]:
        """ACL LOG [count]: the newest `count` entries (a negative count shows none), with
        7.2's ten fields (`with_ids` False: 7.0's seven)."""
        return [e.reply(now_ms, with_ids) for e in self._log[:max(count, 0)]]

    def reset_log(self) -> None:
        """ACL LOG RESET."""
        self._log.clear()

    # --- ACL GENPASS ----------------------------------------------------------------------------

    @staticmethod
    def genpass(bits: bytes | int | None = None) -> bytes:
        """ACL GENPASS [bits]: (bits+3)//4 random hex digits (256 bits by default)."""
        import os

        from streamkeep.engine.wire.args import parse_int

        count = 256 if bits is None else bits if isinstance(bits, int) else parse_int(bits)
        if count <= 0 or count > GENPASS_MAX_BITS:
            raise ReplyError(ERR_GENPASS)
        chars = (count + 3) // 4
        return os.urandom((chars + 1) // 2).hex()[:chars].encode()

    # --- the ACL file ---------------------------------------------------------------------------

    def dump_aclfile(self) -> bytes:
        """ACL SAVE's file: one `user <name> <rules>` line per user, in name order."""
        return b"".join(line + b"\n" for line in self.list_lines())

    def load_aclfile(self, text: bytes, filename: str) -> list[bytes]:
        """ACL LOAD: every line read into a fresh table, which replaces this one only if the
        whole file is valid; otherwise ReplyError with all of Redis's messages (`filename`
        names the file in them, as Redis's aclfile setting does). The log stays. The default
        user is changed in place; every other user is replaced: returns their names, whose
        connections Redis closes (ACLFreeUsersSet of the old table)."""
        users, errors = self._parse_aclfile(text, filename)
        if errors:
            raise ReplyError("ERR " + "".join(errors) + LOAD_FAILED)
        default = self._users[DEFAULT_USER]
        _copy_into(default, users.get(DEFAULT_USER) or self._default_user())
        users[DEFAULT_USER] = default
        replaced = [name for name in self.users() if name != DEFAULT_USER]
        self._users = users
        self._changed()
        return replaced

    def _parse_aclfile(self, text: bytes, filename: str) -> tuple[dict[bytes, User], list[str]]:
        users: dict[bytes, User] = {}
        errors: list[str] = []
        for linenum, raw in enumerate(c_string(text).split(b"\n"), 1):
            line = raw.strip(b" \t\r\n")
            if line:
                self._load_line(line, linenum, filename, users, errors)
        return users, errors

    def _load_line(self, line: bytes, linenum: int, filename: str, users: dict[bytes, User],
                   errors: list[str]) -> None:
        """One `user <name> rules...` line of ACLLoadFromFile, split on single spaces."""
        argv = line.split(b" ")
        if argv[0] != b"user" or len(argv) < 2:
            errors.append(f"{filename}:{linenum} should start with user keyword followed by "
                          "the username. ")
            return
        name = argv[1]
        if has_spaces(name):
            errors.append(f"'{filename}:{linenum}: username '{printable(name)}' contains "
                          "invalid characters. ")
            return
        if name in users:
            errors.append(f"WARNING: Duplicate user '{printable(name)}' found on line "
                          f"{linenum}. ")
            return
        user = users[name] = self.new_user(name)
        merged, _ = merge_selector_args(argv[2:])
        if merged is None:
            # (redis-server 7.0.15 reports this, then crashes if any rule came before it)
            errors.append(f"{filename}:{linenum}: Unmatched parenthesis in selector "
                          "definition.")
            return
        reported = False
        for rule in merged:
            rule = rule.strip(b"\t\r\n")
            try:
                self._apply(user, rule)
            except RuleError as err:
                if err.unknown:
                    errors.append(f"{filename}:{linenum}: Error in applying operation "
                                  f"'{printable(rule)}': {err.message}. ")
                elif not reported:  # only the first: later ones may follow from it
                    errors.append(f"{filename}:{linenum}: {err.message}. ")
                    reported = True


class _NoCommands:
    """A catalogue without commands: what a config file's `user` line is checked against
    while the file is read (an unknown command is not an error then, as in Redis)."""

    def categories(self) -> list[str]:
        return []

    def commands_in(self, category: str) -> list[str]:
        return []

    def has_command(self, name: str) -> bool:
        return False

    def subcommands_of(self, name: str) -> list[str]:
        return []

    def categories_of(self, name: str) -> list[str]:
        return []


def check_config_user_line(argv: Sequence[bytes], seen: Sequence[bytes]) -> None:
    """A config file's `user <name> <rules...>` line (argv[0] `user`) checked as Redis checks
    it while reading the file; ConfiguredUserError with the FATAL CONFIG FILE ERROR's reason.
    `seen`: the names of the file's earlier `user` lines."""
    Users(_NoCommands(), lambda pattern, subject: False).check_configured_line(argv, seen)
