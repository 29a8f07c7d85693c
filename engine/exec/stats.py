"""Server statistics as Redis keeps them: per-command counters (INFO commandstats), error replies
by error code (INFO errorstats) and `total_error_replies` (INFO stats).

Owns `ServerStats` and the rules (Redis's src/server.c `call`, `rejectCommand`,
`incrementErrorCount`, networking.c `afterErrorReply`):
- a command is counted as a call once it ran (`calls`, and the time its handler took, `usec`);
  one refused before running (unknown subcommand aside: arity, NOAUTH, MISCONF, a refusal while
  queueing in MULTI) counts a `rejected_calls` and no call; one that ran and replied an error
  counts a call and a `failed_calls`;
- every error reply counts once in `total_error_replies` and under its code: the first word of
  the error line when a space ends it within the first 32 bytes of the reply ("-" included),
  ERR otherwise;
- at most 128 distinct codes: the one after them empties the table, which then holds
  `ERRORSTATS_DISABLED` with count 1 and counts nothing more by code until `reset` (CONFIG
  RESETSTAT); `total_error_replies` goes on counting.
The engine's command path updates the counters (engine.runtime.core); the hot path indexes a
command's counter list directly (CALLS, NANOS, REJECTED, FAILED). Must not touch: the command
table, sessions, I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

# A command's counters: a list indexed by these (mutated in place: the engine's dispatch table
# holds a reference to each list).
CALLS, NANOS, REJECTED, FAILED = 0, 1, 2, 3
Counters = list[int]

ERROR_STATS_NUMBER = 128  # Redis's cap on distinct error codes
ERRORSTATS_DISABLED = "ERRORSTATS_DISABLED"
ERROR_CODE_SCAN = 31  # Redis looks for the space in the reply's first 32 bytes, "-" included
_UNSAFE_INFO = str.maketrans("#:\n\r", "____")  # getSafeInfoString
_F32 = struct.Struct("f")


def error_code(line: str) -> str:
    """The errorstats code of an error line (without its leading "-"), as afterErrorReply
    takes it: the first word if a space ends it within the first 32 bytes, else ERR."""
    space = line.find(" ", 0, ERROR_CODE_SCAN)
    return line[:space] if space >= 0 else "ERR"


def safe_info_name(name: str) -> str:
    """A name as INFO prints it: the characters its format cannot carry become '_'."""
    return name.translate(_UNSAFE_INFO)


def _f32(x: float) -> float:
    return _F32.unpack(_F32.pack(x))[0]


def usec_per_call(usec: int, calls: int) -> str:
    """Redis's `%.2f` of `(float)usec / calls`: a single-precision division."""
    return "0.00" if calls == 0 else f"{_f32(_f32(usec) / _f32(calls)):.2f}"


class ServerStats:
    """The counters of one engine. Updated and read under the engine lock."""

    __slots__ = ("commands", "errors", "errors_enabled", "total_error_replies")

    def __init__(self, names: Iterable[str] = ()) -> None:
        # Every command's counters from the start, in INFO's order; a name not declared yet
        # gets its list on first use (`counters`).
        self.commands: dict[str, Counters] = {name: [0, 0, 0, 0] for name in names}
        self.errors: dict[str, int] = {}
        self.errors_enabled = True
        self.total_error_replies = 0

    def counters(self, name: str) -> Counters:
        """The counter list of the command named `name` ("xadd", "client|info")."""
        found = self.commands.get(name)
        if found is None:
            found = self.commands[name] = [0, 0, 0, 0]
        return found

    # --- recording -----------------------------------------------------------------------

    def error_reply(self, line: str) -> None:
        """One error reply was sent (afterErrorReply)."""
        self.total_error_replies += 1
        if not self.errors_enabled:
            return
        code = error_code(line)
        errors = self.errors
        count = errors.get(code)
        if count is not None:
            errors[code] = count + 1
        elif len(errors) >= ERROR_STATS_NUMBER:
            errors.clear()
            errors[ERRORSTATS_DISABLED] = 1
            self.errors_enabled = False
        else:
            errors[code] = 1

    def rejected(self, counters: Counters | None, line: str) -> None:
        """A command refused before it ran (None: an unknown command or subcommand)."""
        if counters is not None:
            counters[REJECTED] += 1
        self.error_reply(line)

    def failed(self, counters: Counters, nanos: int, line: str) -> None:
        """A command that ran and replied the error `line`."""
        counters[CALLS] += 1
        counters[NANOS] += nanos
        counters[FAILED] += 1
        self.error_reply(line)

    def late_failure(self, counters: Counters | None, line: str) -> None:
        """A command already counted as a call replied the error `line` after all (SAVE's
        wait for its compaction)."""
        if counters is not None:
            counters[FAILED] += 1
        self.error_reply(line)

    def reset(self) -> None:
        """CONFIG RESETSTAT: every counter to zero, errorstats enabled and empty."""
        for counters in self.commands.values():
            counters[:] = (0, 0, 0, 0)
        self.errors.clear()
        self.errors_enabled = True
        self.total_error_replies = 0

    # --- reading -------------------------------------------------------------------------

    def total_calls(self) -> int:
        """Every call counted (Redis's total_commands_processed counts the same calls)."""
        return sum(counters[CALLS] for counters in self.commands.values())

    def commandstats(self) -> list[tuple[str, str]]:
        """INFO commandstats: the commands called or refused since the last reset."""
        fields = []
        for name, (calls, nanos, rejected, failed) in self.commands.items():
            if calls or rejected or failed:
                usec = nanos // 1000
                fields.append((f"cmdstat_{safe_info_name(name)}",
                               f"calls={calls},usec={usec},"
                               f"usec_per_call={usec_per_call(usec, calls)},"
                               f"rejected_calls={rejected},failed_calls={failed}"))
        return fields

    def errorstats(self) -> list[tuple[str, str]]:
        """INFO errorstats: one line per error code, in byte order (Redis's radix tree)."""
        codes = sorted(self.errors, key=lambda c: c.encode("utf-8", "surrogateescape"))
        return [(f"errorstat_{safe_info_name(code)}", f"count={self.errors[code]}")
                for code in codes]


__all__ = ["CALLS", "ERRORSTATS_DISABLED", "ERROR_STATS_NUMBER", "FAILED", "NANOS", "REJECTED",
           "Counters", "ServerStats", "error_code", "safe_info_name", "usec_per_call"]
