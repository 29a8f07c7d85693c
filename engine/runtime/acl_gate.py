"""The ACL permission gate: every command a user's session runs, checked against its user.

Owns `refusal(engine, session, spec, argv, context)`: None when the session's user may run
this command with these keys and channels (engine.commands.acl.check_command: the command
table's key specs and the Pub/Sub commands' channels), else the ReplyError to answer with,
the denial logged in ACL LOG with Redis's context: `toplevel`, `multi` (queued in MULTI, or
run by EXEC: then Redis's "ACLs rules changed..." line) or `lua` (a script's redis.call: the
script's "ACL failure in script" error). `unrestricted(user)`: its root selector allows every
command, key and channel (the default user as shipped), so nothing of its commands needs a
look. Must not touch: the users' rules (engine.exec.acl_model), what a command does; sessions
without a user (an embedded engine's, replication's) never reach it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from streamkeep.engine.commands.acl import check_command
from streamkeep.engine.exec.acl_model import key_permissions
from streamkeep.engine.runtime.acl_fast import FULL_CHECK, CommandPlan
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.table import CommandSpec

__all__ = ["plan_for", "refusal", "unrestricted"]

_GLOB: Final = frozenset(b"*?[]\\")  # the bytes that make a pattern more than a literal
_CHANNEL_COMMANDS: Final = frozenset({"publish", "spublish", "subscribe", "ssubscribe",
                                      "psubscribe"})


def unrestricted(user: Any) -> bool:
    """Its root selector allows everything: no command of it needs a look at its keys."""
    root = user.selectors[0]
    return bool(root.allcommands and root.allkeys and root.allchannels)


def plan_for(user: Any, spec: CommandSpec) -> CommandPlan:
    """The quick answer for `spec` that `user`'s root selector gives (acl_fast.CommandPlan),
    or FULL_CHECK: only a command the root allows, with no key or one key at a fixed place
    whose flags never vary, no channels, no first-arg rule, and key patterns that are
    literals or literal prefixes (`name:*`) get one."""
    root = user.selectors[0]
    name = spec.name
    if name in _CHANNEL_COMMANDS or name in root.firstargs or spec.key_finder is not None:
        return FULL_CHECK
    if not (root.allcommands or name in root.allowed):
        return FULL_CHECK
    specs = spec.key_specs
    if not specs or all(ks.has("not_key") for ks in specs):
        return CommandPlan(0, [], [])
    if len(specs) != 1:
        return FULL_CHECK
    ks = specs[0]
    if ks.keyword is not None or ks.index < 1 or ks.find != "range" or ks.a != 0 \
            or ks.has("variable_flags") or ks.has("incomplete") or ks.has("not_key"):
        return FULL_CHECK
    if root.allkeys:
        return CommandPlan(0, [], [])
    wanted = key_permissions(ks.flags)
    prefixes: list[bytes] = []
    names: list[bytes] = []
    for pattern in root.patterns:
        if pattern.flags & wanted != wanted:
            continue
        text = pattern.pattern
        if text.endswith(b"*") and not _GLOB.intersection(text[:-1]):
            prefixes.append(text[:-1])
        elif not _GLOB.intersection(text):
            names.append(text)
        else:
            return FULL_CHECK  # (a glob the prefix test cannot answer: the matcher will)
    return CommandPlan(ks.index, prefixes, names)


def refusal(engine: Any, session: Any, spec: CommandSpec, argv: Any,
            context: str) -> ReplyError | None:
    """None when allowed; else the error to reply with, the denial logged. `context`:
    "toplevel", "multi" (queued in MULTI), "exec" (run by EXEC) or "lua"."""
    users = engine.acl
    denial = check_command(users, session.user, spec, argv)
    if denial is None:
        return None
    client = session.client
    info = client.info_line().encode() if client is not None else b""
    users.log_denial(denial, info, engine.now(), "multi" if context == "exec" else context)
    if context == "exec":
        return ReplyError(denial.exec_line())
    if context == "lua":
        return ReplyError(denial.script_line())
    return ReplyError(denial.error_line())
