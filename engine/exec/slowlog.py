"""The slow log: the latest commands that took at least `slowlog-log-slower-than` microseconds,
as Redis keeps them (src/slowlog.c; redis.io SLOWLOG GET).

Owns `SlowLog`: its entries, newest first, each with a unique growing id, the Unix time it was
logged, the command's duration in microseconds, its arguments as the client sent them (at most
32: the 32nd says how many more there were; an argument longer than 128 bytes is cut there and
says how many bytes more), the client's address and name; the bound (`slowlog-max-len`: older
entries go as a new one comes; 0 logs nothing), RESET, and what SLOWLOG GET shows. The
arguments a password travels in are logged as "(redacted)" (AUTH, HELLO's AUTH, CONFIG SET of
requirepass or masterauth), as Redis's redactClientCommandArgument does.

The engine decides what is slow (one comparison of the time it already measured for the
command statistics); only then is an entry built. Must not touch: the command table, sessions,
I/O.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

MAX_ARGC = 32  # Redis's SLOWLOG_ENTRY_MAX_ARGC
MAX_STRING = 128  # SLOWLOG_ENTRY_MAX_STRING
REDACTED = b"(redacted)"
SENSITIVE_CONFIGS = frozenset({b"requirepass", b"masterauth", b"tls-key-file-pass",
                               b"tls-client-key-file-pass"})
# The commands `redact` looks into.
_REDACTING = frozenset({b"auth", b"hello", b"config", b"acl"})
DEFAULT_GET_COUNT = 10


def redact(argv: Sequence[bytes]) -> list[bytes]:
    """The arguments as the slow log keeps them: the ones carrying a password replaced, where
    Redis replaces them (AUTH of one or two arguments, each AUTH clause of HELLO until an
    option it does not know, every argument of ACL SETUSER from the user's name on, the
    values of the sensitive settings of CONFIG SET)."""
    out = list(argv)
    command = out[0].lower() if out else b""
    if command == b"auth" and len(out) <= 3:
        for i in range(1, len(out)):
            out[i] = REDACTED
    elif command == b"hello":
        j = 2  # HELLO protover [AUTH username password] [SETNAME clientname]
        while j < len(out):
            more = len(out) - j - 1
            option = out[j].lower()
            if option == b"auth" and more >= 2:
                out[j + 1] = out[j + 2] = REDACTED
                j += 3
            elif option == b"setname" and more:
                j += 2
            else:
                break
    elif command == b"acl" and len(out) > 2 and out[1].lower() == b"setuser":
        for i in range(2, len(out)):  # (every rule: one may be a password; the name too)
            out[i] = REDACTED
    elif command == b"config" and len(out) > 3 and out[1].lower() == b"set":
        for i in range(2, len(out) - 1, 2):
            if out[i].lower() in SENSITIVE_CONFIGS:
                out[i + 1] = REDACTED
    return out


def trim_argv(argv: Sequence[bytes]) -> list[bytes]:
    """At most MAX_ARGC arguments (the last one kept says how many more there were), each
    at most MAX_STRING bytes (and how many more it had)."""
    argc = len(argv)
    if argc <= MAX_ARGC and max(map(len, argv), default=0) <= MAX_STRING:
        return list(argv)  # (the common case: nothing to cut)
    kept = min(argc, MAX_ARGC)
    out = []
    for j in range(kept):
        if kept != argc and j == kept - 1:
            out.append(b"... (%d more arguments)" % (argc - kept + 1))
            break
        arg = argv[j]
        if len(arg) > MAX_STRING:
            arg = arg[:MAX_STRING] + b"... (%d more bytes)" % (len(arg) - MAX_STRING)
        out.append(bytes(arg))
    return out


class SlowLog:
    """Entries oldest first (`entries`; GET shows them newest first), at most `max_len` of
    them once a command has been logged since the bound was lowered (as Redis trims: when it
    logs). Each entry is kept as GET replies it: [id, Unix time, µs, arguments, client address,
    client name]."""

    __slots__ = ("entries", "next_id")

    def __init__(self) -> None:
        self.entries: deque[list] = deque(maxlen=128)
        self.next_id = 0  # never reset, not even by RESET (Redis's slowlog_entry_id)

    def log(self, argv: Sequence[bytes], usec: int, addr: str, name: bytes, max_len: int,
            when: int | None = None) -> None:
        """A command that took `usec` (already found slow): logged unless the log is off
        (`max_len` 0), then the oldest entries beyond `max_len` dropped."""
        if max_len <= 0:
            return
        entries = self.entries
        if entries.maxlen != max_len:  # slowlog-max-len changed: the deque bounds it
            entries = self.entries = deque(entries, maxlen=max_len)
        if argv and argv[0].lower() in _REDACTING:
            argv = redact(argv)
        entries.append([self.next_id, int(time.time()) if when is None else when, usec,
                        trim_argv(argv), addr.encode(), name])
        self.next_id += 1

    def get(self, count: int = DEFAULT_GET_COUNT) -> list[list]:
        """SLOWLOG GET: the newest `count` entries (-1: all)."""
        entries = self.entries
        if count < 0 or count > len(entries):
            count = len(entries)
        return [entries[-1 - i] for i in range(count)]

    def reset(self) -> None:
        self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)


__all__ = ["MAX_ARGC", "MAX_STRING", "REDACTED", "SlowLog", "redact", "trim_argv"]
