"""engine.commands.acl: the ACL command's subcommands on the engine's users (`users_of`), their
replies and error lines, the settings that shape the users (requirepass, acllog-max-len,
acl-pubsub-default, aclfile, the config file's `user` lines, CONFIG REWRITE), ACL SAVE / ACL
LOAD with an ACL file, the start refusals, and the replies through the server against
redis-server, byte for byte in RESP2 and RESP3.

The rules, descriptions and checks themselves are engine.exec.acl's (tests/engine/exec/
test_acl.py, tests/differential/test_acl_model_redis.py). These tests check what the commands
reply, not whether the permission gate enforces anything. The oracle is redis-server 7.0.15;
streamkeep replies as Redis 7.2+ / 8.x: where 7.2 changed a text, the oracle's reply is
translated (`as_7_2`, the only version differences: sanitize-payload on new users, DRYRUN's
"User <name> has ..." for 7.0's "This user has ...", HELP's "Print this help.").
"""

from __future__ import annotations

import hashlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.engine.commands import acl as acl_commands
from streamkeep.engine.commands.acl import AclStartupError, TableCatalogue, users_of
from streamkeep.engine.exec.settings import ConfigFileError, parse_config_text
from streamkeep.engine.exec.table import COMMANDS
from tests.support.resp_client import RespClient, encode_command, read_raw_reply
from tests.support.server_util import ServerHandle

NAME = b"aclc1"
HASH = hashlib.sha256(b"pw").hexdigest().encode()


def err(engine: Engine, *argv: Any) -> str:
    with pytest.raises(ReplyError) as caught:
        engine.execute(*argv)
    return str(caught.value)


# --- the subcommands on an embedded engine ----------------------------------------------------


def test_users_are_made_on_first_use() -> None:
    engine = Engine()
    assert engine.acl is None
    assert engine.execute("ACL", "WHOAMI") == b"default"
    assert engine.execute("ACL", "USERS") == [b"default"]
    assert engine.acl is users_of(engine) is users_of(engine)
    assert engine.execute("ACL", "LIST") == [b"user default on nopass sanitize-payload ~* &* +@all"]


def test_setuser_getuser_list_deluser() -> None:
    engine = Engine()
    assert engine.execute("ACL", "SETUSER", NAME, "on", ">pw", "~k*", "&c", "-@all", "+get",
                          "(%R~x +xadd)") == "OK"
    assert engine.execute("ACL", "GETUSER", NAME) == [
        b"flags", [b"on", b"sanitize-payload"], b"passwords", [HASH], b"commands", b"-@all +get",
        b"keys", b"~k*", b"channels", b"&c", b"selectors",
        [[b"commands", b"-@all +xadd", b"keys", b"%R~x", b"channels", b""]]]
    assert engine.execute("ACL", "GETUSER", "nosuch") is None
    assert engine.execute("ACL", "LIST")[0] == (
        b"user aclc1 on sanitize-payload #" + HASH + b" ~k* resetchannels &c -@all +get "
        b"(%R~x resetchannels -@all +xadd)")
    assert err(engine, "ACL", "SETUSER", NAME, "+nosuch") == \
        "ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL"
    assert err(engine, "ACL", "SETUSER", "a b") == \
        "ERR Usernames can't contain spaces or null characters"
    assert err(engine, "ACL", "SETUSER", NAME, "(~a", "+get") == \
        "ERR Unmatched parenthesis in acl selector starting at '(~a'."
    assert err(engine, "ACL", "DELUSER", NAME, "default") == \
        "ERR The 'default' user cannot be removed"
    assert engine.execute("ACL", "DELUSER", NAME, "nosuch", NAME) == 1
    assert engine.execute("ACL", "USERS") == [b"default"]
    assert err(engine, "ACL", "GETUSER") == \
        "ERR wrong number of arguments for 'acl|getuser' command"
    assert err(engine, "ACL", "NOSUCH") == "ERR unknown subcommand 'NOSUCH'. Try ACL HELP."


def test_whoami_names_the_sessions_user() -> None:
    engine = Engine()
    users = users_of(engine)
    users.setuser(NAME, [b"on", b"+@all", b"~*"])
    session = engine.session
    session.user = users.get(NAME)
    try:
        assert engine.execute("ACL", "WHOAMI") == NAME
    finally:
        session.user = None


def test_cat() -> None:
    engine = Engine()
    assert engine.execute("ACL", "CAT")[:4] == [b"keyspace", b"read", b"write", b"set"]
    assert len(engine.execute("ACL", "CAT")) == 21
    stream = engine.execute("ACL", "CAT", "STREAM")
    assert b"xadd" in stream and b"xgroup|create" in stream and b"get" not in stream
    assert b"acl|setuser" in engine.execute("ACL", "CAT", "admin")
    assert b"acl|whoami" not in engine.execute("ACL", "CAT", "admin")
    assert err(engine, "ACL", "CAT", "nosuch") == "ERR Unknown category 'nosuch'"
    assert err(engine, "ACL", "CAT", "a", "b") == \
        "ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP."


def test_dryrun() -> None:
    engine = Engine()
    engine.execute("ACL", "SETUSER", NAME, "on", "~k*", "&ch*", "-@all", "+get", "+publish",
                   "+psubscribe", "+config|get", "+select|0", "+spublish", "+ssubscribe",
                   "+unsubscribe")
    cases = [
        (("get", "k1"), "OK"), (("get", "x"), b"User aclc1 has no permissions to access the 'x' key"),
        (("set", "k", "v"), b"User aclc1 has no permissions to run the 'set' command"),
        (("publish", "ch1", "m"), "OK"),
        (("publish", "zz", "m"), b"User aclc1 has no permissions to access the 'zz' channel"),
        (("psubscribe", "ch*"), "OK"),
        (("spublish", "zz", "m"), b"User aclc1 has no permissions to access the 'zz' channel"),
        (("ssubscribe", "ch1", "zz"),
         b"User aclc1 has no permissions to access the 'zz' channel"),
        (("unsubscribe", "zz"), "OK"),  # the unsubscribes' channels are never checked
        (("psubscribe", "ch1"), b"User aclc1 has no permissions to access the 'ch1' channel"),
        (("CONFIG", "GET", "x"), "OK"),
        (("config", "set", "a", "b"),
         b"User aclc1 has no permissions to run the 'config|set' command"),
        (("select", "0"), "OK"),
        (("select", "1"), b"User aclc1 has no permissions to run the 'select' command"),
        (("auth", "x"), "OK"),  # no_auth: every user may
    ]
    for argv, reply in cases:
        assert engine.execute("ACL", "DRYRUN", NAME, *argv) == reply, argv
    assert err(engine, "ACL", "DRYRUN", "nosuch", "get", "k") == "ERR User 'nosuch' not found"
    assert err(engine, "ACL", "DRYRUN", NAME, "nosuch") == "ERR Command 'nosuch' not found"
    assert err(engine, "ACL", "DRYRUN", NAME, "config", "nosuch") == \
        "ERR Command 'config' not found"
    assert err(engine, "ACL", "DRYRUN", NAME, "config") == \
        "ERR wrong number of arguments for 'config' command"
    assert err(engine, "ACL", "DRYRUN", NAME, "get") == \
        "ERR wrong number of arguments for 'get' command"
    assert err(engine, "ACL", "DRYRUN", NAME, "config", "get") == \
        "ERR wrong number of arguments for 'config|get' command"
    assert err(engine, "ACL", "DRYRUN", NAME) == \
        "ERR wrong number of arguments for 'acl|dryrun' command"


def test_genpass() -> None:
    engine = Engine()
    assert re.fullmatch(rb"[0-9a-f]{64}", engine.execute("ACL", "GENPASS"))
    assert len(engine.execute("ACL", "GENPASS", "5")) == 2
    assert err(engine, "ACL", "GENPASS", "0") == (
        "ERR ACL GENPASS argument must be the number of bits for the output password, a "
        "positive number up to 4096")
    assert err(engine, "ACL", "GENPASS", "x") == "ERR value is not an integer or out of range"
    assert err(engine, "ACL", "GENPASS", "1", "2") == \
        "ERR unknown subcommand or wrong number of arguments for 'GENPASS'. Try ACL HELP."


def test_log() -> None:
    engine = Engine()
    users = users_of(engine)
    assert engine.execute("ACL", "LOG") == []
    user = users.setuser(NAME, [b"on", b"+get"])
    for i in range(12):
        denial = users.check(user, "get", [(b"k%d" % i, frozenset({"RO", "access"}))])
        assert denial is not None
        users.log_denial(denial, b"id=1 addr=x", engine.now())
    entries = engine.execute("ACL", "LOG")
    assert len(entries) == 10  # the default count
    first = entries[0]
    assert first[0::2] == [b"count", b"reason", b"context", b"object", b"username",
                           b"age-seconds", b"client-info", b"entry-id", b"timestamp-created",
                           b"timestamp-last-updated"]
    assert first[1:10:2] == [1, b"key", b"toplevel", b"k11", NAME]
    assert first[15] == 11 and first[17] == first[19]
    assert len(engine.execute("ACL", "LOG", "2")) == 2
    assert engine.execute("ACL", "LOG", "-1") == []
    assert err(engine, "ACL", "LOG", "x") == "ERR value is not an integer or out of range"
    assert err(engine, "ACL", "LOG", "1", "2") == \
        "ERR unknown subcommand or wrong number of arguments for 'LOG'. Try ACL HELP."
    assert engine.execute("ACL", "LOG", "reset") == "OK"
    assert engine.execute("ACL", "LOG") == []


def test_help() -> None:
    lines = Engine().execute("ACL", "HELP")
    assert lines[0] == "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert lines[-2:] == ["HELP", "    Print this help."]
    assert "DRYRUN <username> <command> [<arg> ...]" in lines


def test_the_table_declares_acl_as_redis_does() -> None:
    acl = COMMANDS[b"acl"]
    arities = {name.decode(): sub.arity for name, sub in acl.subcommands.items()}
    assert arities == {"setuser": -3, "getuser": 3, "deluser": -3, "list": 2, "users": 2,
                       "whoami": 2, "cat": -2, "dryrun": -4, "genpass": -2, "log": -2,
                       "save": 2, "load": 2, "help": 2}
    info = Engine().execute("COMMAND", "INFO", "acl", "acl|cat", "acl|setuser")
    assert info[0][1:3] == [-2, []] and info[0][6] == ["@slow"]
    assert info[1][6] == ["@slow"] and info[2][6] == ["@admin", "@slow", "@dangerous"]


def test_table_catalogue() -> None:
    catalogue = TableCatalogue()
    assert catalogue.has_command("acl|setuser") and not catalogue.has_command("nosuch")
    assert "acl|dryrun" in catalogue.subcommands_of("acl")
    assert catalogue.categories_of("xadd") == ["write", "stream", "fast"]
    assert "xadd" in catalogue.commands_in("stream")


# --- settings ---------------------------------------------------------------------------------


def test_requirepass_is_the_default_users_password() -> None:
    engine = Engine(requirepass="s3cret")
    users = users_of(engine)
    default = users.get(b"default")
    assert users.check_password(b"default", b"s3cret")
    engine.execute("CONFIG", "SET", "requirepass", "other")  # the hook: in place
    assert users.get(b"default") is default
    assert users.check_password(b"default", b"other")
    assert not users.check_password(b"default", b"s3cret")
    engine.execute("CONFIG", "SET", "requirepass", "")
    assert engine.execute("ACL", "LIST") == [b"user default on nopass sanitize-payload ~* &* +@all"]


def test_acllog_max_len_and_acl_pubsub_default() -> None:
    engine = Engine()
    assert engine.execute("CONFIG", "GET", "acl*") == [
        b"aclfile", b"", b"acllog-max-len", b"128", b"acl-pubsub-default", b"resetchannels"]
    users = users_of(engine)
    engine.execute("CONFIG", "SET", "acllog-max-len", "2", "acl-pubsub-default", "allchannels")
    assert users.log_max_len == 2
    engine.execute("ACL", "SETUSER", NAME)
    assert engine.execute("ACL", "GETUSER", NAME)[9] == b"&*"
    assert err(engine, "CONFIG", "SET", "acl-pubsub-default", "x") == (
        "ERR CONFIG SET failed (possibly related to argument 'acl-pubsub-default') - "
        "argument(s) must be one of the following: allchannels, resetchannels")
    assert err(engine, "CONFIG", "SET", "aclfile", "/x") == (
        "ERR CONFIG SET failed (possibly related to argument 'aclfile') - can't set "
        "immutable config")
    assert err(engine, "CONFIG", "SET", "user", "x") == \
        "ERR Unknown option or number of arguments for CONFIG SET - 'user'"


def test_config_file_user_lines() -> None:
    settings = parse_config_text('user alice on >pw ~a*\nport 7000\nuser "bob" off\n')
    assert settings["user"] == (("alice", "on", ">pw", "~a*"), ("bob", "off"))
    engine = Engine(user=settings["user"])
    assert engine.execute("ACL", "USERS") == [b"alice", b"bob", b"default"]
    assert engine.execute("ACL", "LIST")[0] == (
        b"user alice on sanitize-payload #" + HASH + b" ~a* resetchannels -@all")
    with pytest.raises(ConfigFileError) as caught:
        parse_config_text("user alice on\nuser alice off\n", "/etc/r.conf")
    assert caught.value.linenum == 2
    assert caught.value.reason == ("Error in user declaration 'alice': Duplicate user found. "
                                   "A user can only be defined once in config files")
    with pytest.raises(ConfigFileError) as caught:
        parse_config_text("user alice on bogus\n")
    assert caught.value.reason == "Error in user declaration 'alice': Syntax error"
    with pytest.raises(AclStartupError) as started:
        users_of(Engine(user=["carol on +nosuch"]))
    assert str(started.value) == (
        "Error loading ACL rule '+nosuch' for the user named 'carol': Unknown command or "
        "category name in ACL\nCritical error while loading ACLs. Exiting.")


def test_users_and_an_aclfile_refuse_to_start(tmp_path: Path) -> None:
    aclfile = tmp_path / "users.acl"
    aclfile.write_bytes(b"user default on nopass ~* &* +@all\n")
    with pytest.raises(AclStartupError) as caught:
        users_of(Engine(aclfile=str(aclfile), user=["alice on"]))
    assert str(caught.value) == acl_commands.USERS_AND_ACLFILE
    assert str(caught.value).startswith(
        "Configuring Redis with users defined in redis.conf and at the same setting an ACL "
        "file path is invalid.")


def test_a_bad_aclfile_refuses_to_start(tmp_path: Path) -> None:
    aclfile = tmp_path / "users.acl"
    aclfile.write_bytes(b"user alice on bogus\nuser\n")
    with pytest.raises(AclStartupError) as caught:
        users_of(Engine(aclfile=str(aclfile)))
    assert str(caught.value) == (
        f"Aborting Redis startup because of ACL errors: {aclfile}:1: Syntax error. {aclfile}:2 "
        "should start with user keyword followed by the username. WARNING: ACL errors "
        "detected, no change to the previously active ACL rules was performed")
    missing = tmp_path / "missing.acl"
    with pytest.raises(AclStartupError) as caught:
        users_of(Engine(aclfile=str(missing)))
    assert str(caught.value) == ("Aborting Redis startup because of ACL errors: Error loading "
                                 f"ACLs, opening file '{missing}': No such file or directory")


def test_config_rewrite_writes_the_users(tmp_path: Path) -> None:
    conf = tmp_path / "redis.conf"
    conf.write_text("port 7000\nuser alice on >pw\n# kept\nuser bob off\n")
    from streamkeep.engine.exec.settings import read_config_file

    engine = Engine(config_file=str(conf), **read_config_file(conf))
    assert conf.read_text() and engine.execute("CONFIG", "REWRITE") == "OK"
    assert conf.read_text().count("user ") == 2  # users not made yet: the lines stay
    engine.execute("ACL", "SETUSER", "carol", "on")
    engine.execute("ACL", "DELUSER", "bob")
    engine.execute("CONFIG", "REWRITE")
    text = conf.read_text()
    assert "user alice on sanitize-payload #" + HASH.decode() + " resetchannels -@all\n" in text
    assert "user bob" not in text and "# kept\n" in text
    assert "user carol on sanitize-payload resetchannels -@all\n" in text
    assert "user default on nopass sanitize-payload ~* &* +@all\n" in text
    again = read_config_file(conf)
    assert [line[0] for line in again["user"]] == ["alice", "carol", "default"]


# --- ACL SAVE / ACL LOAD ------------------------------------------------------------------------


def test_save_and_load_need_an_aclfile() -> None:
    engine = Engine()
    for sub in ("SAVE", "LOAD"):
        assert err(engine, "ACL", sub) == acl_commands.NO_ACLFILE


def test_save_load_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    aclfile = tmp_path / "users.acl"
    aclfile.write_bytes(b"user alice on >pw ~a* +get\nuser default on nopass ~* &* +@all\n")
    engine = Engine(aclfile=str(aclfile))
    assert engine.execute("ACL", "USERS") == [b"alice", b"default"]
    engine.execute("ACL", "SETUSER", "bob", "on", "%R~r*", "+@stream", "(~x +set)")
    engine.execute("ACL", "SETUSER", "default", ">pw")
    assert engine.execute("ACL", "SAVE") == "OK"
    listed = engine.execute("ACL", "LIST")
    assert aclfile.read_bytes() == b"".join(line + b"\n" for line in listed)
    closed: list[list[bytes]] = []
    monkeypatch.setattr(acl_commands, "disconnect",
                        lambda engine, names: closed.append(list(names)))
    default = users_of(engine).get(b"default")
    engine.execute("ACL", "SETUSER", "carol", "on")
    assert engine.execute("ACL", "LOAD") == "OK"
    assert engine.execute("ACL", "LIST") == listed  # carol was not saved
    assert users_of(engine).get(b"default") is default
    assert closed == [[b"alice", b"bob", b"carol"]]
    aclfile.write_bytes(b"user x on bogus\n")
    assert err(engine, "ACL", "LOAD") == (
        f"ERR {aclfile}:1: Syntax error. WARNING: ACL errors detected, no change to the "
        "previously active ACL rules was performed")
    assert engine.execute("ACL", "LIST") == listed
    aclfile.unlink()
    assert err(engine, "ACL", "LOAD") == (
        f"ERR Error loading ACLs, opening file '{aclfile}': No such file or directory")
    gone = tmp_path / "gone"
    gone.mkdir()
    (gone / "users.acl").write_bytes(b"")
    engine2 = Engine(aclfile=str(gone / "users.acl"))
    assert engine2.execute("ACL", "USERS") == [b"default"]
    (gone / "users.acl").unlink()
    gone.rmdir()  # nowhere to write the new file
    assert err(engine2, "ACL", "SAVE") == acl_commands.SAVE_FAILED


def test_deluser_disconnects_the_deleted_users(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    closed: list[list[bytes]] = []
    monkeypatch.setattr(acl_commands, "disconnect",
                        lambda engine, names: closed.append(list(names)))
    engine.execute("ACL", "SETUSER", "a", "on")
    engine.execute("ACL", "SETUSER", "b", "on")
    assert engine.execute("ACL", "DELUSER", "a", "nosuch", "a", "b") == 2
    assert closed == [[b"a", b"b"]]


def test_disconnect_asks_the_server_if_it_can() -> None:
    called: list[bytes] = []
    server = SimpleNamespace(disconnect_user=called.append)
    acl_commands.disconnect(SimpleNamespace(server=server), [b"a", b"b"])
    assert called == [b"a", b"b"]
    acl_commands.disconnect(SimpleNamespace(server=SimpleNamespace()), [b"a"])  # none yet
    acl_commands.disconnect(SimpleNamespace(server=None), [b"a"])


# --- through the server, against redis-server ----------------------------------------------------


@pytest.fixture
def redis_users(redis_server: Any) -> Iterator[Any]:
    """The session redis-server; the users these tests make are deleted after."""
    yield redis_server
    with RespClient(redis_server.host, redis_server.port) as client:
        client.execute("ACL", "DELUSER", NAME, b"aclc2")


def raw_replies(target: Any, commands: list[tuple[Any, ...]], protocol: int = 2) -> list[bytes]:
    """Each command's reply as the exact bytes sent (after HELLO `protocol`)."""
    with socket.create_connection((target.host, target.port), timeout=10) as sock:
        reader = sock.makefile("rb")
        sock.sendall(encode_command("HELLO", str(protocol)))
        read_raw_reply(reader)
        replies = []
        for argv in commands:
            sock.sendall(encode_command(*argv))
            replies.append(read_raw_reply(reader))
    return replies


def as_7_2(reply: bytes, name: bytes = NAME) -> bytes:
    """redis-server 7.0's reply in 7.2's words (see the module docstring)."""
    for old, new in ((b"This user has ", b"User " + name + b" has "),
                     (b"Prints this help.", b"Print this help.")):
        while old in reply:
            at = reply.index(old)
            head = reply[:at]
            start = head.rindex(b"$") if head.rfind(b"$") > head.rfind(b"+") else -1
            reply = reply[:at] + new + reply[at + len(old):]
            if start >= 0:  # a bulk string: its length changes too
                end = reply.index(b"\r\n", start)
                size = int(reply[start + 1:end]) + len(new) - len(old)
                reply = reply[:start + 1] + str(size).encode() + reply[end:]
    return reply


# Users whose description has at most one single-command word (Redis lists those in its hash
# order) and `sanitize-payload` given, so that 7.0's flags are 7.2's.
SAME: list[tuple[Any, ...]] = [
    ("ACL", "SETUSER", NAME, "on", "sanitize-payload", ">pw", "~k*", "%R~r*", "&ch*", "-@all",
     "+get", "(~x +@hash)"),
    ("ACL", "GETUSER", NAME), ("ACL", "GETUSER", "nosuch"),
    ("ACL", "SETUSER", NAME, "+nosuch"), ("ACL", "SETUSER", NAME, "~*", "~x"),
    ("ACL", "SETUSER", "a b"), ("ACL", "SETUSER", NAME, "(~a"),
    ("ACL", "SETUSER", "aclc2", "skip-sanitize-payload", "+@all", "-@stream"),
    ("ACL", "GETUSER", "aclc2"),
    ("ACL", "DRYRUN", NAME, "get", "k1"), ("ACL", "DRYRUN", NAME, "get", "x"),
    ("ACL", "DRYRUN", NAME, "set", "k1", "v"), ("ACL", "DRYRUN", NAME, "publish", "zz", "m"),
    ("ACL", "DRYRUN", NAME, "psubscribe", "ch*"), ("ACL", "DRYRUN", NAME, "config", "get", "x"),
    ("ACL", "DRYRUN", NAME, "config"), ("ACL", "DRYRUN", NAME, "config", "nosuch"),
    ("ACL", "DRYRUN", NAME, "nosuch"), ("ACL", "DRYRUN", "nosuch", "get", "x"),
    ("ACL", "DRYRUN", NAME, "get"), ("ACL", "DRYRUN", NAME),
    ("ACL", "CAT"), ("ACL", "CAT", "nosuch"), ("ACL", "CAT", "a", "b"),
    ("ACL", "GENPASS", "0"), ("ACL", "GENPASS", "x"), ("ACL", "GENPASS", "1", "2"),
    ("ACL", "LOG", "x"), ("ACL", "LOG", "1", "2"), ("ACL", "LOG", "RESET"), ("ACL", "LOG"),
    ("ACL", "WHOAMI"), ("ACL", "HELP"), ("ACL", "NOSUCH"), ("ACL",), ("ACL", "LIST", "x"),
    ("ACL", "DELUSER", NAME, "default"), ("ACL", "DELUSER", NAME, "nosuch", NAME),
    ("ACL", "DELUSER", "aclc2"), ("ACL", "GETUSER", NAME),
]


@pytest.mark.parametrize("protocol", [2, 3])
def test_replies_match_redis(redis_users: Any, served: ServerHandle, protocol: int) -> None:
    theirs = raw_replies(redis_users, SAME, protocol)
    ours = raw_replies(served, SAME, protocol)
    for argv, their, our in zip(SAME, theirs, ours, strict=True):
        assert our == as_7_2(their), f"{argv!r}\nredis: {their!r}\nours:  {our!r}"


def test_list_users_genpass_match_redis(redis_users: Any, served: ServerHandle) -> None:
    setup = ("ACL", "SETUSER", NAME, "on", "sanitize-payload", "#" + HASH.decode(), "~a",
             "&b", "-@all", "+xadd", "(%W~w +set)")
    commands = [setup, ("ACL", "LIST"), ("ACL", "USERS"), ("ACL", "GENPASS"),
                ("ACL", "GENPASS", "7"), ("ACL", "DELUSER", NAME)]
    with RespClient(redis_users.host, redis_users.port) as theirs, \
            RespClient(served.host, served.port) as ours:
        expected = theirs.pipeline(*commands)
        got = ours.pipeline(*commands)
    mine = [b"default", NAME]
    assert [line for line in got[1] if line.split(b" ")[1] in mine] == \
        [line.replace(b" nopass ", b" nopass sanitize-payload ")  # 7.2's default user
         for line in expected[1] if line.split(b" ")[1] in mine]
    assert [n for n in got[2] if n in mine] == [n for n in expected[2] if n in mine]
    assert [len(got[3]), len(got[4])] == [len(expected[3]), len(expected[4])] == [64, 2]
    assert got[0] == expected[0] == "OK" and got[5] == expected[5] == 1
