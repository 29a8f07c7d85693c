"""The ACL model (engine.exec.acl) against redis-server 7.0.15: ACL SETUSER's replies and error
lines, ACL LIST, GETUSER, DRYRUN, CAT, GENPASS, DELUSER, the NOPERM lines, ACL LOG and the ACL
file (SAVE's text, LOAD's errors), byte for byte.

The model runs on the redis-server's own command table (tests.support.acl_catalogue reads it
from COMMAND), so the rule compaction of ACL LIST is compared on the same table; a few cases
run on streamkeep's table too, with commands whose categories are stable. Redis lists single
commands in its command dict's hash order (a random seed per process), so those words are
compared as a set (`canonical_rules`); everything else is compared as sent, once the oracle's
7.0 texts are translated to 7.2's where Redis 7.2 changed them (`as_7_2` and its helpers: the
only version differences; see there). Users made here are deleted afterwards; the session
server's `default` user is never changed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep.engine.commands.keyspace import stringmatchlen
from streamkeep.engine.exec.acl import Users
from streamkeep.engine.wire.errors import ReplyError
from tests.support.acl_catalogue import (
    StaticCatalogue,
    canonical_getuser,
    canonical_rules,
    flat,
    redis_catalogue,
    table_catalogue,
)
from tests.support.resp_client import RespClient, RespError, encode_command, read_raw_reply

NAME = b"aclm"
HASH_A = b"ab" * 32


@pytest.fixture(scope="module")
def catalogue(redis_server: Any) -> StaticCatalogue:
    with RespClient(redis_server.host, redis_server.port) as client:
        return redis_catalogue(client)


@pytest.fixture
def redis_acl(redis_server: Any) -> Iterator[RespClient]:
    """A connection to the session server; the users this module makes are deleted after."""
    client = RespClient(redis_server.host, redis_server.port)
    try:
        yield client
    finally:
        client.execute("ACL", "DELUSER", NAME, b"aclm2", b"aclm3")
        client.close()


def _model(catalogue: StaticCatalogue) -> Users:
    return Users(catalogue, stringmatchlen)


# --- Redis 7.2's texts -------------------------------------------------------------------------
# The oracle is redis-server 7.0.15; streamkeep replies as Redis 7.2+ / 8.x do (src/acl.c,
# src/server.c). Where 7.2 changed a text, the oracle's reply is translated to 7.2's before it is
# compared, and nothing else is:
# * ACLCreateUser sets sanitize-payload on every new user (7.0 set neither payload flag), so ACL
#   LIST / ACL SAVE lines and GETUSER's flags show it where neither payload flag is set;
# * DRYRUN's refusals name the user: "User <name> has no permissions ..." (7.0: "This user ...");
# * NOPERM (getAclErrorMessage): "NOPERM User <name> has no permissions to run the '<cmd>'
#   command", "NOPERM No permissions to access a key" / "... a channel" (7.0: "this user has no
#   permissions to ...", "... one of the keys used as arguments" / "one of the channels ...");
# * ACL LOG entries have three more fields (entry-id, timestamp-created,
#   timestamp-last-updated): 7.0's seven are compared (`with_ids=False`).

_PAYLOAD_FLAGS = (b"sanitize-payload", b"skip-sanitize-payload")


def _line_7_2(line: bytes) -> bytes:
    """An ACL LIST / ACL SAVE line (`user <name> <rules>`) with 7.2's sanitize-payload."""
    words = line.split(b" ")
    at = 2
    while at < len(words) and words[at] in (b"on", b"off", b"nopass"):
        at += 1
    if at < len(words) and words[at] not in _PAYLOAD_FLAGS:
        words.insert(at, b"sanitize-payload")
    return b" ".join(words)


def _getuser_7_2(reply: Any) -> Any:
    """A flat GETUSER reply with 7.2's sanitize-payload among its flags."""
    if not isinstance(reply, list) or reply[:1] != [b"flags"]:
        return reply
    flags = list(reply[1])
    if not set(flags) & set(_PAYLOAD_FLAGS):
        flags.append(b"sanitize-payload")  # the last of ACLUserFlags' order
    return [reply[0], flags, *reply[2:]]


def _noperm_7_2(line: str, name: bytes) -> str:
    """A NOPERM line in 7.2's words."""
    run = "NOPERM this user has no permissions to run the "
    if line.startswith(run):
        return f"NOPERM User {name.decode()} has no permissions to run the " + line[len(run):]
    return {"NOPERM this user has no permissions to access one of the keys used as arguments":
            "NOPERM No permissions to access a key",
            "NOPERM this user has no permissions to access one of the channels used as "
            "arguments": "NOPERM No permissions to access a channel"}.get(line, line)


def as_7_2(reply: Any, name: bytes) -> Any:
    """A DRYRUN reply of redis-server 7.0 in 7.2's words (`name`: the user asked about)."""
    if isinstance(reply, bytes) and reply.startswith(b"This user has "):
        return b"User " + name + reply[len(b"This user"):]
    return reply


def _redis_setuser(client: RespClient, name: bytes, rules: list[bytes]) -> str:
    try:
        return str(client.execute("ACL", "SETUSER", name, *rules))
    except RespError as err:
        return str(err)


def _model_setuser(users: Users, name: bytes, rules: list[bytes]) -> str:
    try:
        users.setuser(name, rules)
    except ReplyError as err:
        return str(err)
    return "OK"


def _line(lines: list[bytes], name: bytes) -> list[bytes] | None:
    found = [line for line in lines if line.startswith(b"user " + name + b" ")]
    return canonical_rules(found[0]) if found else None


def _same_setuser(client: RespClient, users: Users, name: bytes, rules: list[bytes]) -> None:
    assert _model_setuser(users, name, rules) == _redis_setuser(client, name, rules), rules
    listed = [_line_7_2(line) for line in client.execute("ACL", "LIST")]
    assert _line(users.list_lines(), name) == _line(listed, name), rules
    expected = canonical_getuser(_getuser_7_2(client.execute("ACL", "GETUSER", name)))
    assert canonical_getuser(flat(users.getuser(name))) == expected, rules


# --- SETUSER, LIST, GETUSER: every rule and every error -------------------------------------

CASES: list[list[bytes]] = [
    [],
    [b"on"], [b"off"], [b"ON", b"oFf", b"on"],
    [b">secret"], [b">a", b">b", b">a"], [b">a", b"<a"], [b"<nope"], [b">x", b"resetpass"],
    [b"#" + HASH_A], [b"#" + HASH_A, b"!" + HASH_A], [b"!" + HASH_A], [b"#abc"],
    [b"#" + HASH_A.upper()], [b"!zz"], [b"nopass", b">p"], [b">p", b"nopass"],
    [b"~k*"], [b"%R~r*", b"%W~w*", b"%RW~b*"], [b"%R~a", b"%W~a"], [b"%rw~x"], [b"%R"],
    [b"%"], [b"%~x"], [b"%RR~x"], [b"%X~a"], [b"~"], [b"~a b"], [b"allkeys"], [b"~*", b"~x"],
    [b"allkeys", b"resetkeys", b"~y"], [b"%RW~*", b"~z"],
    [b"&ch*"], [b"&"], [b"allchannels"], [b"&*", b"&x"], [b"allchannels", b"resetchannels"],
    [b"+get"], [b"-get"], [b"+GET", b"+Set"], [b"+nosuch"], [b"-nosuch"], [b"+"], [b"-"],
    [b"+config|get"], [b"-config|get"], [b"+config|nosuch"], [b"+config|get|x"],
    [b"-config|get|x"], [b"+get|"], [b"-get|x"], [b"+get|x"], [b"+select|0", b"+select|1"],
    [b"+select|0", b"+select"], [b"+select|0", b"-@all"], [b"+nosuch|x"],
    [b"+@all"], [b"-@all"], [b"+@ALL"], [b"allcommands"], [b"nocommands"], [b"+@nosuch"],
    [b"+@"], [b"-@"], [b"+@stream", b"+@hash", b"-xadd"], [b"+@all", b"-debug", b"+debug|digest"],
    [b"+@all", b"-@dangerous", b"-@admin", b"+config|get"], [b"-@all", b"+@slow", b"-config"],
    [b"+@write", b"+@read", b"-@keyspace"], [b"+@read", b"-get"], [b"+@all", b"-@string"],
    [b"-@all", b"+@string", b"+@hash", b"+@stream", b"+@keyspace"],
    [b"()"], [b"(~a +get)"], [b"(~a", b"+get)"], [b"(~a", b"+get", b"&c)"], [b"(~a"],
    [b"("], [b")"], [b'(")'], [b"(~a +get (b)"], [b"(~a +get x)"], [b"(+nosuch)"],
    [b"(~a +get)", b"(%R~b +set)", b"clearselectors"], [b"(~a +get)", b"reset"],
    [b"reset"], [b"on", b">p", b"~a", b"&b", b"+get", b"(~c +set)", b"reset"],
    [b"sanitize-payload"], [b"skip-sanitize-payload"], [b""], [b"bogus"], [b"a b"],
    [b"on\0x"], [b"~a\0b"], [b'(~"a b")'], [b"('~a' +get)"], [b'(~"a\\x41" &"c")'],
    [b"%R~*"], [b"%R~*", b"%W~*"], [b"(~a", b"+get)", b"(", b"~b", b")"],
]


@pytest.mark.parametrize("rules", CASES, ids=[repr(r)[:60] for r in CASES])
def test_setuser_list_getuser_match_redis(redis_acl, catalogue, rules) -> None:
    users = _model(catalogue)
    _same_setuser(redis_acl, users, NAME, rules)


def test_setuser_builds_on_the_existing_user_and_fails_atomically(redis_acl, catalogue) -> None:
    users = _model(catalogue)
    for rules in ([b"on", b">p", b"~a", b"+get"], [b"+set", b"~b", b"+nosuch"],
                  [b"(~c +xadd)", b"-get"], [b"<p", b"<p"], [b"%R~d", b"allkeys"]):
        _same_setuser(redis_acl, users, NAME, rules)


@pytest.mark.parametrize("name", [b"a b", b"a\0b", b"\t", b"x\n"])
def test_bad_usernames(redis_acl, catalogue, name) -> None:
    users = _model(catalogue)
    assert _model_setuser(users, name, [b"on"]) == _redis_setuser(redis_acl, name, [b"on"])


def test_default_user_and_users(redis_acl, catalogue) -> None:
    users = _model(catalogue)
    listed = [_line_7_2(line) for line in redis_acl.execute("ACL", "LIST")]
    assert _line(users.list_lines(), b"default") == _line(listed, b"default")
    assert flat(users.getuser(b"default")) == \
        _getuser_7_2(redis_acl.execute("ACL", "GETUSER", b"default"))
    assert users.getuser(b"nosuch") is None is redis_acl.execute("ACL", "GETUSER", b"nosuch")
    for name in (NAME, b"aclm2"):
        _same_setuser(redis_acl, users, name, [b"on"])
    mine = [n for n in redis_acl.execute("ACL", "USERS") if n in (b"default", NAME, b"aclm2")]
    assert users.users() == mine


def test_deluser(redis_acl, catalogue) -> None:
    users = _model(catalogue)
    _same_setuser(redis_acl, users, NAME, [b"on"])
    for names in ([b"default", NAME], [NAME, b"nosuch", NAME], [b"nosuch"]):
        try:
            expected: Any = redis_acl.execute("ACL", "DELUSER", *names)
        except RespError as err:
            expected = str(err)
        try:
            got: Any = users.deluser(names)
        except ReplyError as err:
            got = str(err)
        assert got == expected


def test_resp3_and_resp2_getuser_bytes(redis_server, catalogue) -> None:
    """GETUSER's exact bytes in RESP3 and RESP2 (a user whose command rules have at most one
    single-command word, so no hash order is involved). `sanitize-payload` is given so that
    7.0's flags are 7.2's (see as_7_2)."""
    from streamkeep.engine.wire.reply_encoder import encode_reply

    rules = [b"on", b"sanitize-payload", b"#" + HASH_A, b"~a", b"%R~b", b"&c", b"-@all", b"+get", b"(~d +@hash)"]
    users = _model(catalogue)
    users.setuser(NAME, rules)
    for protocol in (3, 2):
        replies = _raw_replies(redis_server, [
            (b"HELLO", str(protocol).encode()), (b"ACL", b"SETUSER", NAME, *rules),
            (b"ACL", b"GETUSER", NAME), (b"ACL", b"DELUSER", NAME)])
        assert encode_reply(users.getuser(NAME), protocol) == replies[2]


def _raw_replies(server: Any, commands: list[tuple[bytes, ...]]) -> list[bytes]:
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        reader = sock.makefile("rb")
        replies = []
        for argv in commands:
            sock.sendall(encode_command(*argv))
            replies.append(read_raw_reply(reader))
    return replies


# --- the hypothesis run: random rule sequences -----------------------------------------------

_COMMANDS = [b"get", b"set", b"xadd", b"xrange", b"hset", b"hget", b"del", b"publish",
             b"subscribe", b"config", b"config|get", b"config|set", b"client|id", b"select",
             b"xgroup|create", b"xinfo", b"nosuch"]
_CATS = [b"all", b"read", b"write", b"stream", b"hash", b"string", b"keyspace", b"pubsub",
         b"admin", b"dangerous", b"fast", b"slow", b"connection", b"nosuch"]
_PATTERNS = [b"*", b"k*", b"a", b"s?", b"h[ab]", b"", b"x y"]
_PASSWORDS = [b"p1", b"p2"]

_simple = st.sampled_from([b"on", b"off", b"nopass", b"resetpass", b"allkeys", b"resetkeys",
                           b"allchannels", b"resetchannels", b"allcommands", b"nocommands",
                           b"clearselectors", b"reset", b"bogus", b"sanitize-payload"])
_selector_rule = st.one_of(
    st.builds(lambda p, s: p + s, st.sampled_from([b"~", b"%R~", b"%W~", b"%RW~", b"&"]),
              st.sampled_from(_PATTERNS)),
    st.builds(lambda p, c: p + c, st.sampled_from([b"+", b"-"]), st.sampled_from(_COMMANDS)),
    st.builds(lambda p, c: p + c, st.sampled_from([b"+@", b"-@"]), st.sampled_from(_CATS)),
    st.sampled_from([b"+select|0", b"+get|k", b"allkeys", b"resetkeys", b"allchannels",
                     b"resetchannels", b"allcommands", b"nocommands"]))
_user_rule = st.one_of(
    _simple, _selector_rule,
    st.builds(lambda p, w: p + w, st.sampled_from([b">", b"<"]), st.sampled_from(_PASSWORDS)),
    st.lists(_selector_rule, max_size=4).map(lambda rs: b"(" + b" ".join(rs) + b")"))
_rule_lists = st.lists(st.lists(_user_rule, max_size=6), min_size=1, max_size=3)

# argv for DRYRUN; keys and flags come from the server's COMMAND GETKEYSANDFLAGS.
DRYRUNS: list[list[bytes]] = [
    [b"get", b"k1"], [b"get", b"a"], [b"set", b"k1", b"v"], [b"set", b"h1", b"v"],
    [b"xadd", b"s1", b"*", b"f", b"v"], [b"xrange", b"s1", b"-", b"+"],
    [b"hset", b"ha", b"f", b"v"], [b"hget", b"hb", b"f"], [b"del", b"a", b"k2", b"x"],
    [b"publish", b"a", b"m"], [b"publish", b"kk", b"m"], [b"subscribe", b"a", b"k*"],
    [b"psubscribe", b"k*"], [b"config", b"get", b"maxmemory"], [b"config", b"set", b"x", b"y"],
    [b"select", b"0"], [b"select", b"1"], [b"client", b"id"], [b"get", b"x y"],
    [b"xgroup", b"create", b"s1", b"g", b"$"], [b"copy", b"a", b"k1"],
]
_CHANNEL_COMMANDS = {b"publish": (1, 2, False), b"subscribe": (1, None, False),
                     b"psubscribe": (1, None, True)}


def _keys_and_flags(client: RespClient, argv: list[bytes]) -> list[tuple[bytes, frozenset[str]]]:
    try:
        found = client.execute("COMMAND", "GETKEYSANDFLAGS", *argv)
    except RespError:  # "The command has no key arguments"
        return []
    return [(key, frozenset(f.decode() if isinstance(f, bytes) else f for f in flags))
            for key, flags in found]


def _model_dryrun(users: Users, client: RespClient, name: bytes, argv: list[bytes]) -> Any:
    command = argv[0].decode()
    if users.catalogue.subcommands_of(command):
        command += "|" + argv[1].decode().lower()
    channels: list[bytes] = []
    pattern = False
    if argv[0] in _CHANNEL_COMMANDS:
        start, end, pattern = _CHANNEL_COMMANDS[argv[0]]
        channels = argv[start:end]
    try:
        return users.dryrun(name, command, _keys_and_flags(client, argv), channels, pattern,
                            argv[1] if len(argv) > 1 else None)
    except ReplyError as err:
        return str(err)


def _redis_dryrun(client: RespClient, name: bytes, argv: list[bytes]) -> Any:
    try:
        return as_7_2(client.execute("ACL", "DRYRUN", name, *argv), name)
    except RespError as err:
        return str(err)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(steps=_rule_lists)
def test_random_rules_setuser_list_dryrun(redis_acl, catalogue, steps) -> None:
    users = _model(catalogue)
    redis_acl.execute("ACL", "DELUSER", NAME)
    for rules in steps:
        _same_setuser(redis_acl, users, NAME, rules)
    for argv in DRYRUNS:
        assert _model_dryrun(users, redis_acl, NAME, argv) == _redis_dryrun(redis_acl, NAME, argv)


@pytest.mark.parametrize("rules", [
    [b"on", b"~k*", b"&a", b"-@all", b"+get", b"+set", b"+publish", b"+subscribe"],
    [b"on", b"%R~k*", b"%W~h*", b"+@all"],
    [b"on", b"~a", b"+@all", b"(~k* +get)", b"(%W~h* +set)", b"(&k* +@pubsub)"],
    [b"on", b"resetkeys", b"-@all", b"+select|0", b"+get|k1", b"+config|get"],
    [b"on", b"~*", b"-@all", b"+@stream", b"+@keyspace"],
])
def test_dryrun_matches_redis(redis_acl, catalogue, rules) -> None:
    users = _model(catalogue)
    _same_setuser(redis_acl, users, NAME, rules)
    for argv in DRYRUNS:
        assert _model_dryrun(users, redis_acl, NAME, argv) == _redis_dryrun(redis_acl, NAME, argv)
    assert _model_dryrun(users, redis_acl, b"nosuch", [b"get", b"a"]) == \
        _redis_dryrun(redis_acl, b"nosuch", [b"get", b"a"])


# --- streamkeep's own table, with stable categories ------------------------------------------

@pytest.mark.parametrize("rules", [
    [b"-@all", b"+@stream"], [b"+@all", b"-@stream"], [b"-@all", b"+@stream", b"-xadd"],
    [b"-@all", b"+@hash", b"+get"], [b"+@all", b"-xadd", b"-hset"],
    [b"-@all", b"+xadd", b"+xrange", b"+xlen", b"~s*", b"(~h* +hget)"],
])
def test_list_on_streamkeeps_table(redis_acl, rules) -> None:
    _same_setuser(redis_acl, _model(table_catalogue()), NAME, rules)


# --- CAT, GENPASS ----------------------------------------------------------------------------

def test_cat_matches_redis(redis_acl, catalogue) -> None:
    users = _model(catalogue)
    assert users.categories() == redis_acl.execute("ACL", "CAT")
    for cat in (b"stream", b"HASH", b"slow", b"scripting"):
        assert sorted(users.commands_in_category(cat)) == \
            sorted(redis_acl.execute("ACL", "CAT", cat))
    for cat in (b"nosuch", b"x" * 200, b"all"):
        with pytest.raises(ReplyError) as caught:
            users.commands_in_category(cat)
        with pytest.raises(RespError) as expected:
            redis_acl.execute("ACL", "CAT", cat)
        assert str(caught.value) == str(expected.value)


@pytest.mark.parametrize("bits", [None, b"1", b"4", b"5", b"7", b"64", b"255", b"4096"])
def test_genpass_lengths(redis_acl, bits) -> None:
    expected = redis_acl.execute("ACL", "GENPASS", *([bits] if bits else []))
    got = Users.genpass(bits)
    assert len(got) == len(expected)
    assert set(got) <= set(b"0123456789abcdef")


@pytest.mark.parametrize("bits", [b"0", b"-1", b"4097", b"x", b"1.5", b""])
def test_genpass_errors(redis_acl, bits) -> None:
    with pytest.raises(RespError) as expected:
        redis_acl.execute("ACL", "GENPASS", bits)
    with pytest.raises(ReplyError) as caught:
        Users.genpass(bits)
    assert str(caught.value) == str(expected.value)


# --- NOPERM lines and the log ----------------------------------------------------------------

def test_noperm_lines_and_log(start_redis, catalogue) -> None:
    """What a refused client is told, and the ACL LOG entries (all but the times and the
    client's info, which the caller supplies)."""
    server = start_redis()
    rules = [b"on", b">pw", b"~k*", b"&c*", b"-@all", b"+get", b"+publish", b"+auth",
             b"+config|get"]
    users = _model(catalogue)
    users.setuser(NAME, rules)
    commands = [[b"get", b"x"], [b"get", b"k1"], [b"set", b"k", b"v"], [b"publish", b"z", b"m"],
                [b"config", b"set", b"a", b"b"], [b"get", b"x"]]
    with RespClient(server.host, server.port) as admin, \
            RespClient(server.host, server.port) as client:
        admin.execute("ACL", "SETUSER", NAME, *rules)
        client.execute("AUTH", NAME, b"pw")
        for argv in commands:
            try:
                expected: Any = client.execute(*argv)
            except RespError as err:
                expected = _noperm_7_2(str(err), NAME)
            got = _model_dryrun_line(users, admin, argv)
            assert got == expected, argv
        with pytest.raises(RespError):
            client.execute("AUTH", NAME, b"wrong")
        users.log_auth_failure(NAME, b"info", 0)
        log = admin.execute("ACL", "LOG")
    mine = flat(users.log_entries(10, 0, with_ids=False))  # 7.0's seven fields
    strip = {b"age-seconds", b"client-info"}
    assert [_without(e, strip) for e in mine] == [_without(e, strip) for e in log]


def _model_dryrun_line(users: Users, client: RespClient, argv: list[bytes]) -> Any:
    user = users.get(NAME)
    assert user is not None
    command = argv[0].decode()
    if users.catalogue.subcommands_of(command):
        command += "|" + argv[1].decode().lower()
    channels = argv[1:2] if argv[0] == b"publish" else []
    denial = users.check(user, command, _keys_and_flags(client, argv), channels)
    if denial is None:
        return client.execute(*argv)
    users.log_denial(denial, b"info", 0)
    return denial.error_line()


def _without(entry: list[Any], names: set[bytes]) -> list[Any]:
    pairs = zip(entry[::2], entry[1::2], strict=True)
    return [x for k, v in pairs if k not in names for x in (k, v)]


# --- the ACL file ----------------------------------------------------------------------------

def test_save_text_matches_redis(start_redis, tmp_path, catalogue) -> None:
    aclfile = tmp_path / "users.acl"
    aclfile.write_bytes(b"user default on nopass ~* &* +@all\n")
    server = start_redis("--aclfile", str(aclfile))
    users = _model(catalogue)
    setups = [(b"zed", [b"on", b">p1", b">p2", b"~a", b"~b", b"(~c +get)", b"(~d +set)"]),
              (b"amy", [b"off", b"%R~r*", b"&x", b"-@all", b"+@stream"]),
              (b"default", [b">pw", b"-debug"])]
    with RespClient(server.host, server.port) as client:
        for name, rules in setups:
            client.execute("ACL", "SETUSER", name, *rules)
            users.setuser(name, rules)
        client.execute("AUTH", "pw")
        client.execute("ACL", "SAVE")
    saved = aclfile.read_bytes()
    assert [canonical_rules(x) for x in users.dump_aclfile().splitlines()] == \
        [canonical_rules(_line_7_2(x)) for x in saved.splitlines()]
    again = _model(catalogue)
    again.load_aclfile(saved, str(aclfile))
    assert again.dump_aclfile() == users.dump_aclfile()


LOAD_FILES = [
    b"user a on\nuser a off\n", b"# comment\n", b"user\n", b"usr x\n", b"User x on\n",
    b"user x bogus\nuser y +nosuch\n\nuser z (~a\n", b'user x "a b\n', b"user x on\tallkeys\n",
    b"user x on bogus >p #zz <q +nosuch -nosuch2 %\n", b"user x on\x01 allkeys\n",
    b"user x\x0bx on\n", b"user x (~a +get\nuser y on\n", b'user "x y" on\n',
    b"user x on ~a ~b &c +get -set\nuser y off\n", b"  user x on  \r\n", b"user x  on\n",
    b"user x on ~a ~*\n", b"user x on (~a +get) (%R~b +set) (&c)\n",
    b"user x on ~* ~a\nuser y +@nosuch &* &c\n",
]


@pytest.mark.parametrize("text", LOAD_FILES, ids=[repr(t)[:50] for t in LOAD_FILES])
def test_load_matches_redis(start_redis, tmp_path, catalogue, text) -> None:
    aclfile = tmp_path / "users.acl"
    aclfile.write_bytes(b"user default on nopass ~* &* +@all\n")
    server = start_redis("--aclfile", str(aclfile))
    aclfile.write_bytes(text)
    users = _model(catalogue)
    with RespClient(server.host, server.port) as client:
        try:
            expected = str(client.execute("ACL", "LOAD"))
        except RespError as err:
            expected = str(err)
        listed = client.execute("ACL", "LIST")
    try:
        users.load_aclfile(text, str(aclfile))
        got = "OK"
    except ReplyError as err:
        got = str(err)
    assert got == expected
    assert [canonical_rules(x) for x in users.list_lines()] == \
        [canonical_rules(_line_7_2(x)) for x in listed]
