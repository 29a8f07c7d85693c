"""engine.runtime.acl_fast, with the plans engine.runtime.acl_gate.plan_for makes: a quick
answer is only ever "allowed" where the full check (engine.commands.acl.check_command, the
model Redis's rules are tested on) allows too, over generated users and command lines; and the
common cases (a producer's XADD, a keyless command) get one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import streamkeep.engine.commands  # noqa: F401 (the command table, filled)
from streamkeep.engine.commands.acl import TableCatalogue, check_command
from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.acl import Users
from streamkeep.engine.exec.table import lookup
from streamkeep.engine.runtime.acl_fast import FULL_CHECK, CommandPlan
from streamkeep.engine.runtime.acl_gate import plan_for
from streamkeep.engine.wire.errors import ReplyError


def _users() -> Users:
    return Users(TableCatalogue(), lambda pattern, key: stringmatchlen(pattern, key, False))


def test_a_plan_answers_by_prefix_and_name() -> None:
    plan = CommandPlan(1, [b"orders:"], [b"audit"])
    assert plan.allows((b"XADD", b"orders:eu", b"*", b"f", b"v"))
    assert plan.allows((b"XADD", b"audit", b"*", b"f", b"v"))
    assert not plan.allows((b"XADD", b"payments", b"*", b"f", b"v"))
    assert not plan.allows((b"XADD",))
    # Redis's glob `*` matches no empty key (stringmatchlen): no quick yes for one.
    assert not CommandPlan(1, [b""], [b""]).allows((b"XLEN", b""))
    assert CommandPlan(0, [], []).allows((b"PING",))
    assert not FULL_CHECK.allows((b"PING",))


def test_the_producers_xadd_gets_a_quick_plan() -> None:
    users = _users()
    user = users.setuser(b"producer", [b"on", b"+xadd", b"+ping", b"~orders:*", b"%R~audit"])
    xadd = plan_for(user, lookup((b"XADD", b"k", b"*", b"f", b"v")))
    assert (xadd.key_index, xadd.prefixes, xadd.names) == (1, [b"orders:"], [])  # audit: read
    assert plan_for(user, lookup((b"PING",))).key_index == 0
    assert plan_for(user, lookup((b"XLEN", b"k"))) is FULL_CHECK  # not allowed: full check
    assert plan_for(user, lookup((b"SET", b"k", b"v"))) is FULL_CHECK  # flags vary with GET


COMMANDS = [(b"XADD", b"*", b"f", b"v"), (b"XLEN",), (b"GET",), (b"XINFO", b"STREAM"),
            (b"DEL",), (b"HSET", b"f", b"v"), (b"PING",), (b"PUBLISH", b"m"), (b"XACK", b"g", b"1-1")]
PATTERNS = st.sampled_from([b"orders:*", b"audit", b"o*", b"*", b"or?ers:*", b"a[ub]dit",
                            b"orders:\\*", b""])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([b"~", b"%R~", b"%W~"]), PATTERNS), max_size=4),
       st.lists(st.sampled_from([b"+@all", b"+xadd", b"+get", b"+@read", b"-xlen", b"+ping",
                                 b"allkeys", b"+xinfo|stream"]), max_size=4),
       st.sampled_from(range(len(COMMANDS))),
       st.sampled_from([b"orders:eu", b"audit", b"orders:*", b"o", b"payments", b""]))
def test_a_quick_yes_is_always_the_full_checks_yes(patterns, commands, which, key) -> None:
    users = _users()
    rules = [b"on", *commands, *(kind + p for kind, p in patterns if p or kind == b"~")]
    try:
        user = users.setuser(b"u", rules)
    except ReplyError:  # (a pattern after allkeys or ~*: refused, as by Redis)
        return
    command = COMMANDS[which]
    if command[0] == b"XINFO":
        argv = (command[0], command[1], key)
    elif command[0] == b"PING":
        argv = command
    else:
        argv = (command[0], key, *command[1:])
    spec = lookup(argv)
    if plan_for(user, spec).allows(argv):
        assert check_command(users, user, spec, argv) is None, (rules, argv)
