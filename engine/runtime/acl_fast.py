"""The ACL gate's fast path (compiled: every command of a restricted user runs it).

Owns `CommandPlan`: what a user's root selector allows of one command, worked out once per
user change (engine.runtime.acl_gate.plan_for) so that the common case costs a key's prefix
comparison: the command allowed, its one key at a fixed place, the user's key patterns that
grant what the key spec asks (read, write) as literal prefixes (`orders:*`) or names. `allows`
says True only when that settles it; False sends the command to the full check
(engine.runtime.acl_gate.refusal: selectors, other patterns, channels, first-arg rules),
which allows or refuses it as Redis would. Must not touch: the users' rules, denials, ACL LOG.
"""

from __future__ import annotations

__all__ = ["CommandPlan", "FULL_CHECK"]


class CommandPlan:
    """`key_index` 0: a command without keys, allowed; -1: no quick answer (full check);
    else the argv index of its one key, allowed when it starts with one of `prefixes` or
    equals one of `names`."""

    def __init__(self, key_index: int, prefixes: list[bytes], names: list[bytes]) -> None:
        self.key_index = key_index
        self.prefixes = prefixes
        self.names = names

    def allows(self, argv: tuple[bytes, ...]) -> bool:
        at = self.key_index
        if at <= 0:
            return at == 0
        if at >= len(argv):
            return False
        key = argv[at]
        if not key:  # (Redis's `*` matches no empty key: the full check decides)
            return False
        for prefix in self.prefixes:
            if key.startswith(prefix):
                return True
        return key in self.names


FULL_CHECK = CommandPlan(-1, [], [])
