"""Connection and persistence commands (engine.commands.connection) on an embedded engine: AUTH
and HELLO's parsing and error lines, RESET, SHUTDOWN's flag rules, DEBUG DIGEST; the persistence
commands' replies through their handlers with a stand-in data directory. None of these log
anything."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from streamkeep.engine.commands import connection
from streamkeep.engine.exec.context import Later
from streamkeep.engine.exec.settings import REDIS_VERSION
from streamkeep.engine.wire.errors import ReplyError, StorageError
from streamkeep.engine.wire.reply import RespMap
from tests.support.effects_util import Recorded

SYNTAX = "ERR syntax error"


@pytest.fixture
def rec() -> Recorded:
    return Recorded()


def test_password_matches_only_the_whole_password() -> None:
    assert connection.password_matches(b"s3cret", "s3cret")
    assert not connection.password_matches(b"s3cre", "s3cret")
    assert not connection.password_matches(b"s3cret!", "s3cret")
    assert not connection.password_matches(b"", "s3cret")
    # A configured password that is not UTF-8 (surrogateescape) matches its own bytes.
    assert connection.password_matches(b"\xff\xfe", b"\xff\xfe".decode("utf-8", "surrogateescape"))


@pytest.mark.parametrize(("name", "valid"), [
    (b"worker-1", True), (b"", True), (b"~!@#", True),
    (b"a b", False), (b"a\nb", False), (b"caf\xc3\xa9", False), (b"\x7f", False),
])
def test_valid_client_name_is_printable_ascii_without_spaces(name: bytes, valid: bool) -> None:
    assert connection.valid_client_name(name) is valid


def test_auth_without_a_configured_password(rec: Recorded) -> None:
    assert rec.err("AUTH", "anything") == connection.NO_PASSWORD
    assert rec.effects("AUTH", "default", "anything") == ("OK", [])  # any password works
    assert rec.err("AUTH", "bob", "anything") == connection.WRONGPASS
    assert rec.err("AUTH", "a", "b", "c") == SYNTAX
    assert rec.err("AUTH") == "ERR wrong number of arguments for 'auth' command"


def test_auth_with_requirepass() -> None:
    rec = Recorded(requirepass="s3cret")
    assert rec.err("AUTH", "wrong") == connection.WRONGPASS
    assert rec.err("AUTH", "s3cre") == connection.WRONGPASS
    assert rec("AUTH", "s3cret") == "OK"
    assert rec("AUTH", "default", "s3cret") == "OK"
    assert rec.err("AUTH", "bob", "s3cret") == connection.WRONGPASS
    assert rec.records == []


def hello_reply(proto: int) -> list[Any]:
    return [b"server", b"redis", b"version", REDIS_VERSION.encode(), b"proto", proto,
            b"id", 0, b"mode", b"standalone", b"role", b"master", b"modules", []]


def test_hello_reply_shape(rec: Recorded) -> None:
    assert rec.effects("HELLO") == (hello_reply(2), [])
    assert rec("HELLO", "3") == hello_reply(3)
    assert rec("HELLO", "2", "AUTH", "default", "pw", "SETNAME", "me") == hello_reply(2)
    # The reply is a map (RESP3 sends it as one), its values bulk strings.
    raw, _ = rec.engine.submit(rec.engine.session, (b"HELLO",))
    assert isinstance(raw, RespMap)


@pytest.mark.parametrize(("argv", "line"), [
    (("HELLO", "1"), "NOPROTO unsupported protocol version"),
    (("HELLO", "4"), "NOPROTO unsupported protocol version"),
    (("HELLO", "two"), "ERR Protocol version is not an integer or out of range"),
    (("HELLO", "99999999999999999999"), "ERR Protocol version is not an integer or out of range"),
    (("HELLO", "2", "AUTH", "default"), "ERR Syntax error in HELLO option 'AUTH'"),
    (("HELLO", "2", "SETNAME"), "ERR Syntax error in HELLO option 'SETNAME'"),
    (("HELLO", "3", "bogus"), "ERR Syntax error in HELLO option 'bogus'"),
    (("HELLO", "2", "SETNAME", "a b"), connection.BAD_NAME),
    (("HELLO", "2", "AUTH", "bob", "pw"), connection.WRONGPASS),
])
def test_hello_errors(rec: Recorded, argv: tuple[str, ...], line: str) -> None:
    assert rec.err(*argv) == line


def test_hello_setname_names_the_session(rec: Recorded) -> None:
    rec("HELLO", "2", "setname", "worker")
    assert rec("CLIENT", "GETNAME") == b"worker"
    # A refused HELLO changes nothing: the name is checked before anything is set.
    rec.err("HELLO", "2", "SETNAME", "other", "AUTH", "bob", "pw")
    assert rec("CLIENT", "GETNAME") == b"worker"


def test_quit_on_an_embedded_engine(rec: Recorded) -> None:
    assert rec.effects("QUIT") == ("OK", [])
    assert rec("XLEN", "s") == 0  # the session goes on: there is no connection to close


def test_reset_ends_the_transaction_and_restores_the_session(rec: Recorded) -> None:
    rec("SELECT", "3")
    rec("CLIENT", "SETNAME", "worker")
    rec("WATCH", "k")
    rec("MULTI")
    assert rec.effects("RESET") == ("RESET", [])
    assert rec.err("EXEC") == "ERR EXEC without MULTI"
    assert rec("CLIENT", "GETNAME") is None
    rec("XADD", "k", "1-1", "f", "v")
    assert rec.records[-1].db == 0
    rec("SELECT", "3")
    assert rec("DBSIZE") == 0


@pytest.mark.parametrize("flags", [
    ("bogus",), ("SAVE", "NOSAVE"), ("ABORT", "NOW"), ("ABORT", "SAVE"), ("NOSAVE", "ABORT"),
    ("ABORT", "FORCE"),
])
def test_shutdown_flag_rules(rec: Recorded, flags: tuple[str, ...]) -> None:
    assert rec.err("SHUTDOWN", *flags) == SYNTAX


def test_shutdown_without_a_server(rec: Recorded) -> None:
    assert rec.err("SHUTDOWN", "abort") == "ERR No shutdown in progress."
    needs_server = "ERR SHUTDOWN needs the network server (embedded: Engine.close())"
    for flags in ((), ("NOSAVE", "NOW", "FORCE"), ("save",)):
        assert rec.err("SHUTDOWN", *flags) == needs_server


def test_shutdown_asks_the_server_and_sends_no_reply() -> None:
    asked: list[bool] = []
    server = SimpleNamespace(request_shutdown=asked.append)
    ctx = SimpleNamespace(engine=SimpleNamespace(server=server, scripting=None))
    assert connection.shutdown(ctx, (b"SHUTDOWN", b"SAVE", b"NOW")) is connection.NO_REPLY
    assert connection.shutdown(ctx, (b"SHUTDOWN",)) is connection.NO_REPLY
    assert asked == [True, False]


def test_persistence_commands_need_a_data_directory(rec: Recorded) -> None:
    in_memory = "ERR this engine keeps no data directory (it runs in memory)"
    for argv in (("SAVE",), ("BGSAVE",), ("BGSAVE", "schedule"), ("BGREWRITEAOF",)):
        assert rec.err(*argv) == in_memory
    assert rec.err("BGSAVE", "now") == SYNTAX  # the syntax is checked first
    assert rec.err("BGSAVE", "SCHEDULE", "x") == SYNTAX
    assert isinstance(rec("LASTSAVE"), int)


class StandInDataDir:
    """The handlers' view of a data directory (engine.exec.interfaces.Persistence)."""

    def __init__(self, starts: bool = True, fails: StorageError | None = None,
                 saved_ms: int | None = None) -> None:
        self.starts = starts
        self.fails = fails
        self.saved_ms = saved_ms
        self.compactions = 0

    def start_background_save(self) -> bool:
        if self.fails is not None:
            raise self.fails
        return self.starts

    def compact(self, wait: bool = True) -> None:
        self.compactions += 1
        if self.fails is not None:
            raise self.fails

    def last_save_ms(self) -> int | None:
        return self.saved_ms


def ctx_with(datadir: StandInDataDir | None, started_ms: int = 7_000) -> Any:
    return SimpleNamespace(engine=SimpleNamespace(datadir=datadir, started_ms=started_ms))


def test_bgsave_and_bgrewriteaof_replies() -> None:
    started = ctx_with(StandInDataDir(starts=True))
    busy = ctx_with(StandInDataDir(starts=False))
    assert connection.bgsave(started, (b"BGSAVE",)) == "Background saving started"
    assert connection.bgsave(started, (b"BGSAVE", b"SCHEDULE")) == "Background saving started"
    assert connection.bgsave(busy, (b"BGSAVE", b"schedule")) == "Background saving scheduled"
    with pytest.raises(ReplyError, match="^ERR Background save already in progress$"):
        connection.bgsave(busy, (b"BGSAVE",))
    assert (connection.bgrewriteaof(started, (b"BGREWRITEAOF",))
            == "Background append only file rewriting started")
    with pytest.raises(ReplyError,
                       match="^ERR Background append only file rewriting already in progress$"):
        connection.bgrewriteaof(busy, (b"BGREWRITEAOF",))


def test_storage_failures_become_error_replies() -> None:
    broken = ctx_with(StandInDataDir(fails=StorageError("snapshot.mdb: disk full")))
    for handler, argv in ((connection.bgsave, (b"BGSAVE",)),
                          (connection.bgrewriteaof, (b"BGREWRITEAOF",))):
        with pytest.raises(ReplyError, match="^ERR snapshot.mdb: disk full$"):
            handler(broken, argv)


def test_save_waits_outside_the_handler() -> None:
    datadir = StandInDataDir()
    later = connection.save(ctx_with(datadir), (b"SAVE",))
    assert isinstance(later, Later) and datadir.compactions == 0  # nothing ran yet
    assert later.wait() == "OK" and datadir.compactions == 1
    failing = connection.save(ctx_with(StandInDataDir(fails=StorageError("no space"))), (b"SAVE",))
    with pytest.raises(ReplyError, match="^ERR no space$"):
        failing.wait()


def test_lastsave_is_the_snapshot_time_else_the_start_in_seconds() -> None:
    assert connection.lastsave(ctx_with(StandInDataDir(saved_ms=1_700_000_123_999)),
                               (b"LASTSAVE",)) == 1_700_000_123
    assert connection.last_save_time(ctx_with(StandInDataDir(saved_ms=None), 42_999).engine) == 42
    assert connection.last_save_time(ctx_with(None, 5_000).engine) == 5


def test_debug_digest_follows_the_state(rec: Recorded) -> None:
    empty = rec("DEBUG", "DIGEST")
    assert isinstance(empty, str) and len(empty) >= 32
    rec("XADD", "s", "1-1", "f", "v")
    one = rec("DEBUG", "digest")
    assert one != empty
    other = Recorded(now=5)  # another engine, another clock: the same data, the same digest
    other("XADD", "s", "1-1", "f", "v")
    assert other("DEBUG", "DIGEST") == one
    rec("XDEL", "s", "1-1")
    assert rec("DEBUG", "DIGEST") != one
    assert rec.effects("DEBUG", "DIGEST")[1] == []


def test_debug_help_and_errors(rec: Recorded) -> None:
    help_lines = rec("DEBUG", "HELP")
    assert help_lines[0].startswith("DEBUG <subcommand>")
    assert "DIGEST" in help_lines and "HELP" in help_lines
    assert rec.err("DEBUG", "BOGUS") == "ERR unknown subcommand 'BOGUS'. Try DEBUG HELP."
    assert rec.err("DEBUG", "DIGEST", "x") == (
        "ERR wrong number of arguments for 'debug|digest' command")
