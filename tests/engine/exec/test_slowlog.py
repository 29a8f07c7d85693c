"""engine.exec.slowlog: the entries, their bound and their ids, the arguments trimmed and the
passwords redacted as Redis does (src/slowlog.c slowlogCreateEntry, networking.c
redactClientCommandArgument; redis.io SLOWLOG GET)."""

from __future__ import annotations

import pytest

from streamkeep.engine.exec.slowlog import (
    MAX_ARGC,
    MAX_STRING,
    REDACTED,
    SlowLog,
    redact,
    trim_argv,
)


def test_entries_newest_first_with_growing_ids() -> None:
    log = SlowLog()
    for i in range(3):
        log.log([b"XADD", b"s%d" % i], 100 + i, "127.0.0.1:5000", b"app", 128, when=1700)
    assert log.get() == [
        [2, 1700, 102, [b"XADD", b"s2"], b"127.0.0.1:5000", b"app"],
        [1, 1700, 101, [b"XADD", b"s1"], b"127.0.0.1:5000", b"app"],
        [0, 1700, 100, [b"XADD", b"s0"], b"127.0.0.1:5000", b"app"],
    ]
    assert [e[0] for e in log.get(2)] == [2, 1]
    assert len(log.get(-1)) == len(log.get(100)) == 3
    assert log.get(0) == []


def test_the_bound_drops_the_oldest_and_reset_keeps_the_ids() -> None:
    log = SlowLog()
    for i in range(10):
        log.log([b"PING"], i, "", b"", 4)
    assert len(log) == 4 and [e[0] for e in log.get(-1)] == [9, 8, 7, 6]
    log.log([b"PING"], 0, "", b"", 0)  # max-len 0: nothing logged, nothing trimmed
    assert len(log) == 4
    log.log([b"PING"], 0, "", b"", 2)  # a lower bound applies at the next entry
    assert [e[0] for e in log.get(-1)] == [10, 9]
    log.reset()
    assert len(log) == 0
    log.log([b"PING"], 0, "", b"", 2)
    assert log.get()[0][0] == 11  # ids never restart


def test_long_commands_are_trimmed() -> None:
    argv = [b"XADD", b"s", b"*"] + [b"f%d" % i for i in range(40)]
    kept = trim_argv(argv)
    assert len(kept) == MAX_ARGC
    assert kept[:31] == argv[:31]
    assert kept[31] == b"... (12 more arguments)"  # 43 arguments: 31 kept, the 32nd says
    assert trim_argv(argv[:MAX_ARGC]) == argv[:MAX_ARGC]  # exactly 32: all kept
    value = b"v" * 300
    assert trim_argv([b"SET", b"k", value])[2] == b"v" * MAX_STRING + b"... (172 more bytes)"
    assert trim_argv([b"SET", b"k", b"v" * MAX_STRING])[2] == b"v" * MAX_STRING


@pytest.mark.parametrize("argv,expected", [
    ([b"AUTH", b"secret"], [b"AUTH", REDACTED]),
    ([b"auth", b"user", b"secret"], [b"auth", REDACTED, REDACTED]),
    ([b"AUTH", b"a", b"b", b"c"], [b"AUTH", b"a", b"b", b"c"]),  # a syntax error: as sent
    ([b"HELLO", b"3", b"AUTH", b"u", b"p", b"SETNAME", b"n"],
     [b"HELLO", b"3", b"AUTH", REDACTED, REDACTED, b"SETNAME", b"n"]),
    ([b"HELLO", b"3", b"SETNAME", b"n", b"auth", b"u", b"p"],
     [b"HELLO", b"3", b"SETNAME", b"n", b"auth", REDACTED, REDACTED]),
    ([b"HELLO", b"3", b"AUTH", b"u"], [b"HELLO", b"3", b"AUTH", b"u"]),
    ([b"CONFIG", b"SET", b"requirepass", b"pw", b"timeout", b"5", b"MASTERAUTH", b"x"],
     [b"CONFIG", b"SET", b"requirepass", REDACTED, b"timeout", b"5", b"MASTERAUTH", REDACTED]),
    ([b"CONFIG", b"GET", b"requirepass"], [b"CONFIG", b"GET", b"requirepass"]),
    ([b"ACL", b"SETUSER", b"alice", b"on", b">pw", b"+get"],
     [b"ACL", b"SETUSER", REDACTED, REDACTED, REDACTED, REDACTED]),
    ([b"acl", b"GETUSER", b"alice"], [b"acl", b"GETUSER", b"alice"]),
    ([b"CONFIG", b"SET", b"tls-key-file-pass", b"k"],
     [b"CONFIG", b"SET", b"tls-key-file-pass", REDACTED]),
    ([b"XADD", b"auth", b"*", b"requirepass", b"x"],
     [b"XADD", b"auth", b"*", b"requirepass", b"x"]),
])
def test_passwords_are_redacted(argv: list[bytes], expected: list[bytes]) -> None:
    assert redact(argv) == expected
    log = SlowLog()
    log.log(argv, 1, "", b"", 1)
    assert log.get()[0][3] == expected
