"""engine.wire.errors: the exception families under one base, and the error lines many
commands share, to the byte (how Redis prints arguments inside them included)."""

from __future__ import annotations

import pytest

from streamkeep.engine.wire import errors
from streamkeep.engine.wire.errors import (
    ReplyError,
    StorageError,
    StreamkeepError,
    no_such_group,
    nogroup,
    printable,
    storage_reply,
    subcommand_syntax,
    unknown_command,
    unknown_subcommand,
    wrong_arity,
)


def test_one_base_for_replies_and_storage_failures() -> None:
    assert issubclass(ReplyError, StreamkeepError)
    assert issubclass(StorageError, StreamkeepError)
    assert not issubclass(StorageError, ReplyError)
    err = ReplyError("ERR boom")
    assert str(err) == err.line == "ERR boom"
    assert err.args == ("ERR boom",)


def test_a_storage_failure_replies_err_and_its_message() -> None:
    reply = storage_reply(StorageError("segment-000001.aof: offset 40: bad CRC"))
    assert type(reply) is ReplyError
    assert str(reply) == "ERR segment-000001.aof: offset 40: bad CRC"


def test_shared_lines() -> None:
    assert errors.SYNTAX == "ERR syntax error"
    assert errors.NOT_INTEGER == "ERR value is not an integer or out of range"
    assert errors.INVALID_STREAM_ID == \
        "ERR Invalid stream ID specified as stream command argument"
    assert errors.WRONGTYPE == \
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert errors.NO_SUCH_KEY == "ERR no such key"


@pytest.mark.parametrize(("arg", "limit", "text"), [
    (b"plain", 1 << 30, "plain"),
    (b"cut\x00here", 1 << 30, "cut"),  # a C string: up to the first NUL
    (b"line\r\nbreak", 1 << 30, "line  break"),
    (b"abcdef", 3, "abc"),
])
def test_printable(arg: bytes, limit: int, text: str) -> None:
    assert printable(arg, limit) == text


def test_printable_keeps_bytes_that_are_not_utf8() -> None:
    text = printable(b"\xff\xfeok")
    assert text.encode("utf-8", "surrogateescape") == b"\xff\xfeok"


def test_wrong_arity() -> None:
    assert str(wrong_arity("xadd")) == "ERR wrong number of arguments for 'xadd' command"
    assert str(wrong_arity("xgroup|create")) == \
        "ERR wrong number of arguments for 'xgroup|create' command"


def test_unknown_command_quotes_each_argument() -> None:
    assert str(unknown_command([b"FOO", b"a", b"b c"])) == \
        "ERR unknown command 'FOO', with args beginning with: 'a' 'b c' "
    assert str(unknown_command([b"foo"])) == \
        "ERR unknown command 'foo', with args beginning with: "


def test_unknown_command_stops_arguments_at_nul_and_line_breaks_become_spaces() -> None:
    assert str(unknown_command([b"x\ny", b"a\x00hidden", b"1\r2"])) == \
        "ERR unknown command 'x y', with args beginning with: 'a' '1 2' "


def test_unknown_command_arguments_stop_at_128_bytes() -> None:
    line = str(unknown_command([b"foo", b"a" * 200, b"never"]))
    assert line == "ERR unknown command 'foo', with args beginning with: '" + "a" * 128 + "' "
    line = str(unknown_command([b"foo", b"b" * 120, b"c" * 50, b"never"]))
    # 123 bytes after the first argument: the second is cut to the 5 bytes left
    assert line.endswith("'" + "b" * 120 + "' 'ccccc' ")


def test_unknown_command_name_is_cut_at_128_bytes() -> None:
    line = str(unknown_command([b"n" * 300]))
    assert line == f"ERR unknown command '{'n' * 128}', with args beginning with: "


def test_subcommand_lines_name_the_command_uppercased() -> None:
    argv = [b"xinfo", b"bogus"]
    assert str(unknown_subcommand(argv)) == "ERR unknown subcommand 'bogus'. Try XINFO HELP."
    assert str(subcommand_syntax(argv)) == \
        "ERR unknown subcommand or wrong number of arguments for 'bogus'. Try XINFO HELP."


def test_nogroup_lines() -> None:
    assert str(no_such_group(b"orders", b"billing")) == \
        "NOGROUP No such consumer group 'billing' for key name 'orders'"
    assert str(nogroup(b"orders", b"billing")) == \
        "NOGROUP No such key 'orders' or consumer group 'billing'"
    assert str(nogroup(b"orders", b"billing", " in XREADGROUP with GROUP option")) == \
        "NOGROUP No such key 'orders' or consumer group 'billing' in XREADGROUP with GROUP option"
    assert str(nogroup(b"a\nb", b"g\x00rest")) == "NOGROUP No such key 'a b' or consumer group 'g'"
