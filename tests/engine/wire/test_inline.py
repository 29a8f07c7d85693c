"""The inline-command splitter (engine/wire/inline.py): Redis's sdssplitargs rules, quotes,
escapes and blanks, and its one error line."""

from __future__ import annotations

import pytest

from streamkeep.engine.wire.errors import ProtocolError
from streamkeep.engine.wire.inline import ERR_QUOTES, split_inline_args


@pytest.mark.parametrize(
    ("line", "args"),
    [
        (b"SET k v", [b"SET", b"k", b"v"]),
        (b"  SET \t k   v  ", [b"SET", b"k", b"v"]),
        (b'ECHO "hello world"', [b"ECHO", b"hello world"]),
        (b"ECHO 'hello world'", [b"ECHO", b"hello world"]),
        (b'ECHO ""', [b"ECHO", b""]),
        (b"ECHO ''", [b"ECHO", b""]),
        (b'""', [b""]),
        (b'ECHO "\\x41\\x4g\\n\\r\\t\\b\\a\\q\\\\\\""', [b"ECHO", b'Ax4g\n\r\t\b\aq\\"']),
        (b'ECHO "\\xfF\\x00"', [b"ECHO", b"\xff\x00"]),
        (b"ECHO 'it\\'s' '\\n'", [b"ECHO", b"it's", b"\\n"]),
        (b'ECHO a"b c"d', None),  # closing quote followed by 'd'
        (b'ECHO a"b c"', [b"ECHO", b"ab c"]),
        (b"ECHO 'a' \"b\"", [b"ECHO", b"a", b"b"]),
        (b'ECHO "a"\x0bb', [b"ECHO", b"a", b"b"]),  # \v is a blank after a quote ...
        (b"ECHO a\x0bb", [b"ECHO", b"a\x0bb"]),  # ... but not inside a bare token
        (b"ECHO \x0b\x0c a", [b"ECHO", b"a"]),  # ... and skipped between tokens
        (b"ECHO\ra", [b"ECHO", b"a"]),
        (b"ECHO a\r", [b"ECHO", b"a"]),
        (b"ECHO \xff\xfe", [b"ECHO", b"\xff\xfe"]),
        (b'ECHO "\xff"', [b"ECHO", b"\xff"]),
        (b"", []),
        (b" \t ", []),
    ],
)
def test_split_inline_args(line: bytes, args: list[bytes] | None) -> None:
    if args is None:
        with pytest.raises(ProtocolError, match="unbalanced quotes"):
            split_inline_args(line)
    else:
        assert split_inline_args(line) == args


def test_unbalanced_quotes_are_redis_error_line() -> None:
    with pytest.raises(ProtocolError) as info:
        split_inline_args(b'ECHO "a')
    assert str(info.value) == ERR_QUOTES == "ERR Protocol error: unbalanced quotes in request"
