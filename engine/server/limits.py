"""Descriptor arithmetic: how many clients the process's open-files limit (RLIMIT_NOFILE) allows.

Owns Redis's adjustOpenFilesLimit rule: a server needs `maxclients + RESERVED_FDS` descriptors;
it raises the soft limit that far if it can (up to the hard limit), otherwise it lowers
maxclients to what the limit leaves after the reserve, and says so. Must not touch: the config
registry (callers store the result), sockets, files.

RESERVED_FDS covers every descriptor streamkeep itself holds besides clients, counted on a
served data directory at its busiest (a compaction running while the AOF rotates):
  stdin/stdout/stderr 3, the data directory's lock 1, the current AOF segment 1, rotation's new
  segment + manifest temp file + directory fsync 3, the event loop (epoll, its self-pipe or
  eventfd, signal wakeup) 4, one listening socket per bind address (up to 4 counted), the LMDB
  snapshot environment being read or written (data file + lock file) 2, the compaction child's
  pipes (stdin, stdout, stderr: 3, plus the child's pidfd) 4, worker threads (fsync, SAVE's
  wait: threads share the table, no descriptor of their own) 0, log file 1 => 23.
  Redis's CONFIG_MIN_RESERVED_FDS, 32, leaves a margin of 9 above that. Measured under uvloop
  while compactions ran: 18 at most, one client included (14 that are not sockets);
  tests/attacks/test_descriptors.py checks that a served process at its busiest stays below it.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from streamkeep.engine.wire.errors import StreamkeepError

RESERVED_FDS = 32  # Redis's CONFIG_MIN_RESERVED_FDS; see the module docstring for the count
FALLBACK_LIMIT = 1024  # Redis assumes this when the limit cannot be read
RAISE_STEP = 16  # Redis lowers its attempt by this much after each refused setrlimit


class DescriptorLimitError(StreamkeepError):
    """The open-files limit leaves no room for a single client after the reserve: the server
    cannot start (Redis exits). The message is Redis's."""


@dataclass(frozen=True, slots=True)
class Adjustment:
    """The outcome: the maxclients the limit allows, and what to log (warnings, notices)."""

    maxclients: int
    warnings: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()
    fatal: str | None = None  # the limit is not even enough for the reserve


def _try_raise(wanted: int, soft: int, hard: int) -> tuple[int, str | None]:
    """Raise the soft limit towards `wanted` (not above `hard`), as far as the OS lets us,
    stepping down as Redis does. Returns (the limit now in force, the last OS error)."""
    error: str | None = None
    attempt = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    while attempt > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (attempt, hard))
            return attempt, error
        except (OSError, ValueError) as err:
            error = str(err)
            attempt -= RAISE_STEP
    if wanted > hard != resource.RLIM_INFINITY and error is None:
        error = "Operation not permitted"  # setrlimit above the hard limit: EPERM
    return soft, error


def adjust_open_files_limit(maxclients: int, reserved: int = RESERVED_FDS) -> Adjustment:
    """Redis's adjustOpenFilesLimit for `maxclients` (see the module docstring)."""
    wanted = maxclients + reserved
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError) as err:
        return Adjustment(FALLBACK_LIMIT - reserved, warnings=(
            f"Unable to obtain the current NOFILE limit ({err}), assuming {FALLBACK_LIMIT} "
            "and setting the max clients configuration accordingly.",))
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return Adjustment(maxclients)
    best, error = _try_raise(wanted, soft, hard)
    if best >= wanted:
        return Adjustment(maxclients, notices=(
            f"Increased maximum number of open files to {wanted} (it was originally set to "
            f"{soft}).",))
    if best <= reserved:
        return Adjustment(maxclients, fatal=(
            f"Your current 'ulimit -n' of {best} is not enough for the server to start. "
            f"Please increase your open file limit to at least {reserved + 1}. Exiting."))
    lowered = best - reserved
    return Adjustment(lowered, warnings=(
        f"You requested maxclients of {maxclients} requiring at least {wanted} max file "
        "descriptors.",
        f"Server can't set maximum open files to {wanted} because of OS error: {error}.",
        f"Current maximum open files is {best}. maxclients has been reduced to {lowered} to "
        "compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."))


__all__ = ["RESERVED_FDS", "Adjustment", "adjust_open_files_limit"]
