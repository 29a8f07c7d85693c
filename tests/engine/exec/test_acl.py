"""engine.exec.acl: the user table (SETUSER's atomicity and errors, GETUSER, LIST, USERS,
DELUSER), password checks (hashes only, compared with hmac), the ACL LOG store, GENPASS and the
ACL file. tests/differential/test_acl_model_redis.py compares the same with redis-server."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.acl import ConfiguredUserError, Users, check_config_user_line
from streamkeep.engine.exec.acl_model import Denial
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import HumanDouble, RespMap, RespSet
from tests.support.acl_catalogue import StaticCatalogue, flat, table_catalogue

SMALL = StaticCatalogue(["read", "write", "stream", "fast", "slow"],
                        [("get", ["read", "fast"]), ("set", ["write", "slow"]),
                         ("xadd", ["write", "stream", "fast"]), ("xlen", ["read", "stream", "fast"])])
SECRET = b"hunter2-plaintext"


@pytest.fixture
def users() -> Users:
    return Users(SMALL, stringmatchlen)


def test_starts_with_the_default_user(users: Users) -> None:
    assert users.list_lines() == [b"user default on nopass sanitize-payload ~* &* +@all"]
    assert users.users() == [b"default"]
    assert flat(users.getuser(b"default")) == [
        b"flags", [b"on", b"nopass", b"sanitize-payload"], b"passwords", [], b"commands", b"+@all", b"keys", b"~*",
        b"channels", b"&*", b"selectors", []]


def test_getuser_shape(users: Users) -> None:
    users.setuser(b"u", [b"on", b"#" + b"a" * 64, b"~k", b"&c", b"-@all", b"+get", b"(%R~x +xadd)"])
    reply = users.getuser(b"u")
    assert isinstance(reply, RespMap)
    assert reply.items[0] == (b"flags", RespSet([b"on", b"sanitize-payload"]))
    assert flat(reply)[2:] == [
        b"passwords", [b"a" * 64], b"commands", b"-@all +get", b"keys", b"~k", b"channels", b"&c",
        b"selectors", [[b"commands", b"-@all +xadd", b"keys", b"%R~x", b"channels", b""]]]
    assert users.getuser(b"nosuch") is None


def test_setuser_is_all_or_nothing(users: Users) -> None:
    users.setuser(b"u", [b"on", b"~a"])
    before = users.list_lines()
    with pytest.raises(ReplyError) as caught:
        users.setuser(b"u", [b"off", b"~b", b"+nosuch"])
    assert str(caught.value) == ("ERR Error in ACL SETUSER modifier '+nosuch': Unknown command "
                                 "or category name in ACL")
    assert users.list_lines() == before
    with pytest.raises(ReplyError):
        users.setuser(b"new", [b"on", b"bogus"])
    assert users.get(b"new") is None


def test_setuser_changes_an_existing_user_in_place(users: Users) -> None:
    """ACLCopyUser: a session holding the user sees the new rules at once; a refused SETUSER
    leaves it as it was."""
    held = users.setuser(b"u", [b"on", b"nopass", b"~k*", b"-@all", b"+get"])
    assert users.get(b"u") is held
    assert users.check(held, "set", [(b"k1", frozenset({"RW", "update"}))]) is not None
    assert users.setuser(b"u", [b"+set"]) is held
    assert users.check(held, "set", [(b"k1", frozenset({"RW", "update"}))]) is None
    with pytest.raises(ReplyError):
        users.setuser(b"u", [b"-set", b"bogus"])
    assert users.check(held, "set", [(b"k1", frozenset({"RW", "update"}))]) is None
    users.setuser(b"u", [b"(~x +xadd)"])
    assert len(held.selectors) == 2 and users.get(b"u") is held


def test_default_password_from_requirepass(users: Users) -> None:
    default = users.get(b"default")
    users.set_default_password("s3cret")
    assert users.get(b"default") is default
    assert users.check_password(b"default", b"s3cret")
    assert not users.check_password(b"default", b"other")
    assert users.list_lines()[0] == (b"user default on sanitize-payload #"
                                     + hashlib.sha256(b"s3cret").hexdigest().encode()
                                     + b" ~* &* +@all")
    users.set_default_password("")
    assert users.list_lines()[0] == b"user default on nopass sanitize-payload ~* &* +@all"


def test_configured_users(users: Users) -> None:
    """ACLLoadConfiguredUsers: the config file's lines in order, `default` reset first."""
    users.load_configured([[b"alice", b"on", b">p", b"~a*", b"+get"],
                           [b"default", b"on", b"nopass", b"+@all", b"~*"]])
    assert users.list_lines() == [
        b"user alice on sanitize-payload #" + hashlib.sha256(b"p").hexdigest().encode()
        + b" ~a* resetchannels -@all +get",
        b"user default on nopass sanitize-payload ~* resetchannels +@all"]
    with pytest.raises(ConfiguredUserError) as caught:
        users.load_configured([[b"bob", b"on", b"+nosuch"]])
    assert str(caught.value) == ("Error loading ACL rule '+nosuch' for the user named 'bob': "
                                 "Unknown command or category name in ACL")


@pytest.mark.parametrize(("argv", "seen", "reason"), [
    ([b"user", b"alice", b"on", b"bogus"], [], "Error in user declaration 'alice': Syntax error"),
    ([b"user", b"a", b"on", b"~*", b"~x"], [],
     "Error in user declaration 'on': Adding a pattern after the * pattern (or the 'allkeys' "
     "flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty "
     "list of patterns"),
    ([b"user", b"a", b"#zz"], [], "Error in user declaration 'user': The password hash must be "
     "exactly 64 characters and contain only lowercase hexadecimal characters"),
    ([b"user", b"a", b"on"], [b"a"], "Error in user declaration 'a': Duplicate user found. A "
     "user can only be defined once in config files"),
    ([b"user", b"a", b"+nosuch", b"+@nosuch"], [], None),  # unknown commands: checked later
])
def test_config_file_user_lines(argv: list[bytes], seen: list[bytes], reason: str | None) -> None:
    """ACLAppendUserForLoading's check, as Redis words it: the wrong rule is looked up by its
    place among the rules in the whole line (Redis's argv[argc_err])."""
    if reason is None:
        check_config_user_line(argv, seen)
        return
    with pytest.raises(ConfiguredUserError) as caught:
        check_config_user_line(argv, seen)
    assert str(caught.value) == reason


@pytest.mark.parametrize(("name", "rules", "line"), [
    (b"a b", [], "ERR Usernames can't contain spaces or null characters"),
    (b"u", [b"on", b"(~a", b"+get"], "ERR Unmatched parenthesis in acl selector starting at '(~a'."),
    (b"u", [b"x\r\ny"], "ERR Error in ACL SETUSER modifier 'x  y': Syntax error"),
    (b"u", [b"#zz"], "ERR Error in ACL SETUSER modifier '#zz': The password hash must be exactly "
                     "64 characters and contain only lowercase hexadecimal characters"),
])
def test_setuser_error_lines(users: Users, name: bytes, rules: list[bytes], line: str) -> None:
    with pytest.raises(ReplyError) as caught:
        users.setuser(name, rules)
    assert str(caught.value) == line


def test_deluser(users: Users) -> None:
    users.setuser(b"a", [])
    users.setuser(b"b", [])
    with pytest.raises(ReplyError, match="^ERR The 'default' user cannot be removed$"):
        users.deluser([b"a", b"default"])
    assert users.users() == [b"a", b"b", b"default"]
    assert users.deluser([b"a", b"a", b"zz"]) == 1
    assert users.users() == [b"b", b"default"]


def test_passwords(users: Users, monkeypatch: pytest.MonkeyPatch) -> None:
    users.setuser(b"u", [b">" + SECRET, b">other"])
    assert not users.check_password(b"u", SECRET)  # off: never authenticates
    users.setuser(b"u", [b"on"])
    calls = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert users.check_password(b"u", SECRET)
    assert len(calls) == 2  # every stored hash compared, the match first or not
    assert not users.check_password(b"u", b"wrong")
    assert not users.check_password(b"nosuch", SECRET)
    users.setuser(b"u", [b"nopass"])
    assert users.check_password(b"u", b"anything")


def test_no_plaintext_password_anywhere(users: Users) -> None:
    users.setuser(b"u", [b"on", b">" + SECRET, b"(~a)"])
    user = users.get(b"u")
    assert user is not None
    seen = repr(vars(user)) + repr(user) + repr(users) + repr(users.getuser(b"u"))
    seen += repr([vars(s) for s in user.selectors])
    seen += users.dump_aclfile().decode() + users.describe(user).decode()
    assert SECRET.decode() not in seen
    assert hashlib.sha256(SECRET).hexdigest() in seen


def test_check_and_dryrun(users: Users) -> None:
    users.setuser(b"u", [b"on", b"~k*", b"+get"])
    user = users.get(b"u")
    assert user is not None
    read = frozenset({"RO", "access"})
    assert users.check(user, "get", [(b"k1", read)]) is None
    assert users.dryrun(b"u", "get", [(b"k1", read)]) == "OK"
    assert users.dryrun(b"u", "get", [(b"x", read)]) == \
        b"User u has no permissions to access the 'x' key"
    assert users.dryrun(b"u", "set") == b"User u has no permissions to run the 'set' command"
    with pytest.raises(ReplyError, match="^ERR User 'nosuch' not found$"):
        users.dryrun(b"nosuch", "get")


def test_cat(users: Users) -> None:
    assert users.categories() == [b"read", b"write", b"stream", b"fast", b"slow"]
    assert users.commands_in_category(b"STREAM") == [b"xadd", b"xlen"]
    with pytest.raises(ReplyError, match="^ERR Unknown category 'nope'$"):
        users.commands_in_category(b"nope")


def test_genpass() -> None:
    assert len(Users.genpass()) == 64
    assert len(Users.genpass(b"5")) == 2 and len(Users.genpass(1)) == 1
    assert Users.genpass() != Users.genpass()
    for bad in (b"0", b"4097", -3):
        with pytest.raises(ReplyError, match="a positive number up to 4096$"):
            Users.genpass(bad)
    with pytest.raises(ReplyError, match="^ERR value is not an integer or out of range$"):
        Users.genpass(b"ten")


# --- the log ----------------------------------------------------------------------------------

def _denial(obj: bytes = b"set", reason: str = "command") -> Denial:
    return Denial(reason, obj, b"u", "set")


def test_log_groups_identical_denials_within_a_minute(users: Users) -> None:
    users.log_denial(_denial(), b"id=1", 1000)
    users.log_denial(_denial(b"k", "key"), b"id=2", 2000)
    users.log_denial(_denial(), b"id=3", 3000)  # grouped with the first, moved to the top
    entries = [flat(e) for e in users.log_entries(10, 5500)]
    assert entries == [  # 7.2's ten fields; age-seconds printed as 7.2+'s d2string
        [b"count", 2, b"reason", b"command", b"context", b"toplevel", b"object", b"set",
         b"username", b"u", b"age-seconds", HumanDouble(b"2.5"), b"client-info", b"id=3",
         b"entry-id", 0, b"timestamp-created", 1000, b"timestamp-last-updated", 3000],
        [b"count", 1, b"reason", b"key", b"context", b"toplevel", b"object", b"k",
         b"username", b"u", b"age-seconds", HumanDouble(b"3.5"), b"client-info", b"id=2",
         b"entry-id", 1, b"timestamp-created", 2000, b"timestamp-last-updated", 2000]]
    assert len(flat(users.log_entries(1, 5500, with_ids=False))[0]) == 14  # 7.0's seven
    users.log_denial(_denial(), b"id=4", 3000 + 60001)  # too late: a new entry
    users.log_denial(_denial(), b"id=5", 70000, context="multi")
    assert [flat(e)[1] for e in users.log_entries(10, 70000)] == [1, 1, 2, 1]
    assert users.log_entries(-1, 0) == [] and len(users.log_entries(2, 0)) == 2


def test_log_ids_cap_and_reset(users: Users) -> None:
    users.set_log_max_len(3)
    for i in range(5):
        users.log_denial(_denial(str(i).encode()), b"c", i)
    users.log_auth_failure(b"who", b"c", 10, object=b"auth")
    entries = [flat(e) for e in users.log_entries(10, 10, with_ids=True)]
    assert [e[7] for e in entries] == [b"auth", b"4", b"3"]
    assert entries[0][2:6] == [b"reason", b"auth", b"context", b"toplevel"]
    assert entries[0][14:] == [b"entry-id", 5, b"timestamp-created", 10,
                               b"timestamp-last-updated", 10]
    users.reset_log()
    assert users.log_entries(10, 0) == []
    with pytest.raises(ValueError):
        users.log_auth_failure(b"who", b"c", 0, context="elsewhere")


# --- the ACL file -----------------------------------------------------------------------------

def test_dump_and_load_round_trip(users: Users) -> None:
    users.setuser(b"zed", [b"on", b">" + SECRET, b"~a", b"(~b +set)"])
    users.setuser(b"amy", [b"%R~r", b"&c", b"+@stream"])
    text = users.dump_aclfile()
    assert text.splitlines()[0].startswith(b"user amy off sanitize-payload %R~r resetchannels &c -@all +@stream")
    fresh = Users(SMALL, stringmatchlen)
    fresh.load_aclfile(text, "/etc/users.acl")
    assert fresh.dump_aclfile() == text
    fresh.load_aclfile(b"user x on\n", "/etc/users.acl")  # the default user comes back
    assert fresh.users() == [b"default", b"x"]


def test_load_keeps_the_default_user_and_names_the_replaced_ones(users: Users) -> None:
    default = users.get(b"default")
    users.setuser(b"old", [b"on"])
    users.setuser(b"keep", [b"on"])
    replaced = users.load_aclfile(b"user keep on\nuser default on nopass -@all\n", "/f.acl")
    assert replaced == [b"keep", b"old"]  # every user but default is a new one
    assert users.get(b"default") is default
    assert users.list_lines()[0] == b"user default on nopass sanitize-payload resetchannels -@all"


def test_load_is_all_or_nothing_with_every_error(users: Users) -> None:
    before = users.dump_aclfile()
    with pytest.raises(ReplyError) as caught:
        users.load_aclfile(b"user a on\nuser b +nosuch bogus ~* ~x\n# c\nuser a\n", "/f.acl")
    assert str(caught.value) == (
        "ERR /f.acl:2: Error in applying operation '+nosuch': Unknown command or category name "
        "in ACL. /f.acl:2: Syntax error. /f.acl:3 should start with user keyword followed by "
        "the username. WARNING: Duplicate user 'a' found on line 4. WARNING: ACL errors "
        "detected, no change to the previously active ACL rules was performed")
    assert users.dump_aclfile() == before


def test_on_streamkeeps_table() -> None:
    users = Users(table_catalogue(), stringmatchlen)
    users.setuser(b"s", [b"-@all", b"+@stream", b"~s*"])
    assert users.list_lines()[1] == b"user s off sanitize-payload ~s* resetchannels -@all +@stream"
    assert b"xadd" in users.commands_in_category(b"stream")
