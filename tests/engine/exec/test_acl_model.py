"""engine.exec.acl_model: each ACL rule on a user and its selectors, Redis's errors for each,
the description Redis writes back (its rule compaction), and the permission check (commands,
first-args, keys by key-spec flags, channels, selectors). On a small catalogue of its own, so
the results do not move with the command table; tests/differential/test_acl_model_redis.py
compares with redis-server."""

from __future__ import annotations

import hashlib

import pytest

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec import acl_model as m
from tests.support.acl_catalogue import StaticCatalogue

CATALOGUE = StaticCatalogue(
    ["keyspace", "read", "write", "stream", "hash", "admin", "fast", "slow", "dangerous",
     "pubsub", "connection"],
    [("get", ["read", "fast"]), ("set", ["write", "slow"]), ("del", ["keyspace", "write", "slow"]),
     ("xadd", ["write", "stream", "fast"]), ("xrange", ["read", "stream", "slow"]),
     ("xlen", ["read", "stream", "fast"]), ("hset", ["write", "hash", "fast"]),
     ("hget", ["read", "hash", "fast"]), ("select", ["fast", "connection"]),
     ("auth", ["fast", "connection"]), ("publish", ["pubsub", "fast"]),
     ("psubscribe", ["pubsub", "slow"]),
     ("debug", ["admin", "slow", "dangerous"]), ("config", ["slow"]),
     ("config|get", ["admin", "slow", "dangerous"]), ("config|set", ["admin", "slow", "dangerous"]),
     ("xgroup", ["slow"]), ("xgroup|create", ["write", "stream", "slow"])])
INDEX = m.CommandIndex(CATALOGUE)
PW_HASH = hashlib.sha256(b"secret").hexdigest()


def user_with(*rules: bytes) -> m.User:
    user = m.User(b"u")
    for rule in rules:
        m.apply_user_rule(user, INDEX, rule)
    return user


def describe(*rules: bytes) -> bytes:
    return m.describe_user(user_with(*rules), INDEX)


def error_of(*rules: bytes) -> str:
    with pytest.raises(m.RuleError) as caught:
        user_with(*rules)
    return caught.value.message


# --- the rules --------------------------------------------------------------------------------

def test_a_new_user_is_off_with_nothing() -> None:
    assert describe() == b"off sanitize-payload resetchannels -@all"


@pytest.mark.parametrize(("rules", "text"), [
    ((b"on",), b"on sanitize-payload resetchannels -@all"),
    ((b"on", b"OFF"), b"off sanitize-payload resetchannels -@all"),
    ((b"nopass",), b"off nopass sanitize-payload resetchannels -@all"),
    ((b"sanitize-payload", b"skip-sanitize-payload"),
     b"off skip-sanitize-payload resetchannels -@all"),
    ((b">secret",), b"off sanitize-payload #" + PW_HASH.encode() + b" resetchannels -@all"),
    ((b">secret", b">secret"), b"off sanitize-payload #" + PW_HASH.encode() + b" resetchannels -@all"),
    ((b"#" + PW_HASH.encode(), b"<secret"), b"off sanitize-payload resetchannels -@all"),
    ((b">secret", b"!" + PW_HASH.encode()), b"off sanitize-payload resetchannels -@all"),
    ((b">secret", b"nopass"), b"off nopass sanitize-payload resetchannels -@all"),
    ((b"nopass", b">secret", b"resetpass"), b"off sanitize-payload resetchannels -@all"),
    ((b"~k*", b"%R~r*", b"%W~w*", b"%RW~b"), b"off sanitize-payload ~k* %R~r* %W~w* ~b resetchannels -@all"),
    ((b"%R~a", b"%W~a"), b"off sanitize-payload ~a resetchannels -@all"),
    ((b"%r",), b"off sanitize-payload %R~ resetchannels -@all"),
    ((b"~a", b"allkeys"), b"off sanitize-payload ~* resetchannels -@all"),
    ((b"allkeys", b"resetkeys", b"~b"), b"off sanitize-payload ~b resetchannels -@all"),
    ((b"&c*", b"&c*", b"&d"), b"off sanitize-payload resetchannels &c* &d -@all"),
    ((b"&c", b"allchannels"), b"off sanitize-payload &* -@all"),
    ((b"allchannels", b"resetchannels"), b"off sanitize-payload resetchannels -@all"),
    ((b"+get", b"+set"), b"off sanitize-payload resetchannels -@all +get +set"),
    ((b"allcommands", b"-get"), b"off sanitize-payload resetchannels +@all -get"),
    ((b"+@all", b"nocommands"), b"off sanitize-payload resetchannels -@all"),
    ((b"+@stream",), b"off sanitize-payload resetchannels -@all +@stream"),
    ((b"+@all", b"-@stream"), b"off sanitize-payload resetchannels +@all -@stream"),
    ((b"+@stream", b"-xadd"), b"off sanitize-payload resetchannels -@all +@stream -xadd"),
    ((b"+xrange", b"+xlen"), b"off sanitize-payload resetchannels -@all +xlen +xrange"),
    ((b"+config|get",), b"off sanitize-payload resetchannels -@all +config|get"),
    ((b"+config", b"-config|set"), b"off sanitize-payload resetchannels -@all +config -config|set"),
    ((b"+@all", b"-debug", b"+debug|digest"), b"off sanitize-payload resetchannels +@all -debug +debug|digest"),
    ((b"+select|0", b"+select|1", b"+SELECT|0"), b"off sanitize-payload resetchannels -@all +select|0 +select|1"),
    ((b"+select|0", b"+select"), b"off sanitize-payload resetchannels -@all +select"),
    ((b"(~a +get)",), b"off sanitize-payload resetchannels -@all (~a resetchannels -@all +get)"),
    ((b"()", b"(&x)", b"clearselectors"), b"off sanitize-payload resetchannels -@all"),
    ((b"on", b">secret", b"~a", b"&b", b"+@all", b"(+get)", b"reset"),
     b"off sanitize-payload resetchannels -@all"),
    ((b"",), b"off sanitize-payload resetchannels -@all"),
])
def test_rules_and_their_description(rules: tuple[bytes, ...], text: bytes) -> None:
    assert describe(*rules) == text


@pytest.mark.parametrize(("rules", "message"), [
    ((b"bogus",), m.ERR_SYNTAX), ((b"a b",), m.ERR_SYNTAX), ((b"%",), m.ERR_SYNTAX),
    ((b"%~x",), m.ERR_SYNTAX), ((b"%RR~x",), m.ERR_SYNTAX), ((b"%X~x",), m.ERR_SYNTAX),
    ((b"~a b",), m.ERR_SYNTAX), ((b"&a\tb",), m.ERR_SYNTAX), ((b"~a\0",), m.ERR_SYNTAX),
    ((b"+get|",), m.ERR_SYNTAX), ((b"(~a (b)",), m.ERR_SYNTAX),
    ((b"+nosuch",), m.ERR_UNKNOWN), ((b"-nosuch",), m.ERR_UNKNOWN), ((b"+",), m.ERR_UNKNOWN),
    ((b"+@nosuch",), m.ERR_UNKNOWN), ((b"-@",), m.ERR_UNKNOWN), ((b"-get|x",), m.ERR_UNKNOWN),
    ((b"+config|nosuch",), m.ERR_UNKNOWN), ((b"-config|get|x",), m.ERR_UNKNOWN),
    ((b"+config|get|x",), m.ERR_SUBCOMMAND_FIRSTARG),
    ((b"allkeys", b"~x"), m.ERR_KEYS_AFTER_ALL), ((b"~*", b"%R~x"), m.ERR_KEYS_AFTER_ALL),
    ((b"&*", b"&x"), m.ERR_CHANNELS_AFTER_ALL),
    ((b"<secret",), m.ERR_NO_SUCH_PASSWORD), ((b"!" + PW_HASH.encode(),), m.ERR_NO_SUCH_PASSWORD),
    ((b"#abc",), m.ERR_BAD_HASH), ((b"#" + PW_HASH.upper().encode(),), m.ERR_BAD_HASH),
    ((b"!xyz",), m.ERR_BAD_HASH),
])
def test_rule_errors(rules: tuple[bytes, ...], message: str) -> None:
    assert error_of(*rules) == message


def test_unknown_names_are_marked_for_acl_load() -> None:
    with pytest.raises(m.RuleError) as caught:
        user_with(b"+nosuch")
    assert caught.value.unknown
    with pytest.raises(m.RuleError) as caught:
        user_with(b"bogus")
    assert not caught.value.unknown


def test_a_c_string_ends_at_nul_for_keywords() -> None:
    assert describe(b"on\0trailing") == b"on sanitize-payload resetchannels -@all"


def test_merge_selector_args() -> None:
    assert m.merge_selector_args([b"on", b"(~a", b"+get", b"&c)", b"(x)"]) == \
        ([b"on", b"(~a +get &c)", b"(x)"], 0)
    assert m.merge_selector_args([b"on", b"(~a", b"+get"]) == (None, 1)
    assert m.merge_selector_args([b"(a", b"(b)"]) == ([b"(a (b)"], 0)


def test_containers_in_a_category_take_their_subcommands() -> None:
    """CONFIG is @slow in Redis 7.0: -@slow denies every CONFIG subcommand."""
    user = user_with(b"+@all", b"-@slow")
    assert "config|get" not in user.root.allowed and "get" in user.root.allowed


def test_future_bit_decides_the_start() -> None:
    """+@all sets the reserved bit; taking commands away keeps it, adding them all does not."""
    assert describe(b"+@all", b"-get", b"+get") == b"off sanitize-payload resetchannels +@all"
    everything = [b"+" + name.encode() for name in INDEX.order if name not in INDEX.parent]
    assert describe(*everything).startswith(b"off sanitize-payload resetchannels -@all +@")


def test_user_copy_is_deep() -> None:
    user = user_with(b"~a", b"+get", b"(~b)")
    copy = user.copy()
    m.apply_user_rule(copy, INDEX, b"%W~a")
    m.apply_user_rule(copy, INDEX, b"-get")
    assert m.describe_user(user, INDEX) == b"off sanitize-payload ~a resetchannels -@all +get (~b resetchannels -@all)"


# --- checking ---------------------------------------------------------------------------------

READ_KEY = frozenset({"RO", "access"})
WRITE_KEY = frozenset({"RW", "update"})
INSERT_KEY = frozenset({"OW", "insert"})


def check(user: m.User, command: str, keys=(), channels=(), pattern=False, first_arg=None):
    return m.check_user(user, command, first_arg, list(keys), list(channels), pattern,
                        stringmatchlen)


def test_commands_and_first_args() -> None:
    user = user_with(b"allkeys", b"allchannels", b"+get", b"+select|0", b"+config|get")
    assert check(user, "get") is None
    assert check(user, "set") == m.Denial("command", b"set", b"u", "set")
    assert check(user, "select", first_arg=b"0") is None
    assert check(user, "select", first_arg=b"1") is not None
    assert check(user, "select") is not None
    assert check(user, "config|get") is None and check(user, "config|set") is not None
    assert check(user, "auth") is None  # no-auth commands pass every selector


def test_keys_by_key_spec_flags() -> None:
    user = user_with(b"+@all", b"%R~r*", b"%W~w*", b"~b*")
    assert check(user, "get", [(b"r1", READ_KEY)]) is None
    assert check(user, "set", [(b"r1", WRITE_KEY)]).reason == "key"
    assert check(user, "set", [(b"w1", INSERT_KEY)]) is None
    assert check(user, "get", [(b"w1", READ_KEY)]).object == b"w1"
    assert check(user, "get", [(b"b1", frozenset({"RW", "access", "delete"}))]) is None
    assert check(user, "get", [(b"r1", frozenset({"RO"}))]) is None  # no access flag: any match
    assert check(user, "get", [(b"zz", frozenset({"RO"}))]) is not None


def test_channels_and_literal_patterns() -> None:
    user = user_with(b"+@all", b"&news.*")
    assert check(user, "publish", channels=[b"news.a"]) is None
    assert check(user, "publish", channels=[b"other"]).reason == "channel"
    assert check(user, "psubscribe", channels=[b"news.*"], pattern=True) is None
    assert check(user, "psubscribe", channels=[b"news.a"], pattern=True) is not None


def test_selectors_and_which_denial_is_reported() -> None:
    user = user_with(b"-@all", b"+get", b"~a", b"(~k* +set)", b"(&c +publish)")
    assert check(user, "get", [(b"a", READ_KEY)]) is None
    assert check(user, "set", [(b"k1", WRITE_KEY)]) is None
    assert check(user, "set", [(b"a", WRITE_KEY)]) == m.Denial("key", b"a", b"u", "set")
    assert check(user, "publish", channels=[b"d"]) == m.Denial("channel", b"d", b"u", "publish")
    assert check(user, "hset").reason == "command"
    # the last refused key among equals
    assert check(user, "get", [(b"x", READ_KEY), (b"y", READ_KEY)]).object == b"x"
    keyed = user_with(b"+@all", b"(+@all ~k*)")
    assert check(keyed, "get", [(b"k1", READ_KEY), (b"z", READ_KEY)]).object == b"z"


def test_denial_lines() -> None:
    """Redis 7.2+'s texts (getAclErrorMessage; 7.0 said "this user" and "one of the keys")."""
    command = m.Denial("command", b"config|get", b"u", "config|get")
    assert command.error_line() == "NOPERM User u has no permissions to run the 'config|get' command"
    assert command.dryrun_text() == b"User u has no permissions to run the 'config|get' command"
    key = m.Denial("key", b"k\0x", b"u", "get")
    assert key.error_line() == "NOPERM No permissions to access a key"
    assert key.dryrun_text() == b"User u has no permissions to access the 'k\0x' key"
    assert key.script_line() == "ERR ACL failure in script: No permissions to access a key"
    channel = m.Denial("channel", b"c", b"u", "publish")
    assert channel.error_line() == "NOPERM No permissions to access a channel"
    assert channel.dryrun_text() == b"User u has no permissions to access the 'c' channel"
    assert channel.exec_line().endswith(
        "following reason: no permission to access one of the channels used as arguments")
    assert key.exec_line() == (
        "NOPERM ACLs rules changed between the moment the transaction was accumulated and the "
        "EXEC call. This command is no longer allowed for the following reason: no permission "
        "to touch the specified keys")
