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

from typing import TYPE_CHECKING, Any

from streamkeep.engine.commands.acl import check_command
from streamkeep.engine.wire.errors import ReplyError

if TYPE_CHECKING:
    from streamkeep.engine.exec.table import CommandSpec

__all__ = ["refusal", "unrestricted"]


def unrestricted(user: Any) -> bool:
    """Its root selector allows everything: no command of it needs a look at its keys."""
    root = user.selectors[0]
    return bool(root.allcommands and root.allkeys and root.allchannels)


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
