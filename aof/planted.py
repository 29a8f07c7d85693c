"""Planted durability bugs: known bugs the crash bench must find, off unless a test plants them.

Why product code reads this: the crash bench (tools/crashbench) claims to find durability bugs,
and a bench that has never caught one proves nothing. So each bug in BUGS is a real code path
at the place the real bug would be (an early acknowledgement in aof.journal, a manifest
replaced without its directory fsync in aof.manifest, recovery rules in aof.recovery, XADD's ID
clock and XCLAIM's replay in engine.commands), behind one `if planted(name):`, and
tests/crash/test_planted_bugs.py plants each in turn and checks that the bench reports it.

Off by default: the set is read once, when this module is first imported, from the
environment variable STREAMKEEP_PLANTED_BUGS (comma-separated names from BUGS); unset or empty,
nothing is planted and every `planted()` is False. An unknown name is refused
(`UnknownPlantedBug`), at import and at every `planted()` call, so a typo never plants nothing
silently. Because it is read at import, a test plants bugs in a child process it starts with
the variable set. Never for production: nothing but those tests sets the variable, and a
server started with it set loses or corrupts data on purpose.

Owns BUGS, the switch and the one question product code asks, `planted(name)`. It lives in the
formats layer, the lowest one that holds a planted site (aof.journal, aof.manifest), so every
layer with one (formats, commands, services) may import it. Must not import anything of the
project but the errors.
"""

from __future__ import annotations

import os

from streamkeep.engine.wire.errors import StreamkeepError

ENV = "STREAMKEEP_PLANTED_BUGS"

# Each name is one `if planted(...)` at the place the real bug would be.
BUGS = frozenset({
    "ack-before-fsync",  # appendfsync always: a command acknowledged before its fdatasync
    "everysec-stops-when-idle",  # everysec syncs only on writes: nothing once writes stop
    "manifest-rename-no-dirfsync",  # the manifest replaced without the directory fsync
    "zero-tail-is-damage",  # recovery refuses a zero-filled tail instead of truncating it
    "rot-is-a-torn-tail",  # recovery cuts damage to fsynced records as if it were a torn tail
    "ldi-backwards",  # replaying a claim moves the group's last-delivered ID back
    "star-id-reuse",  # XADD * ignores the clock: IDs lost with a tail are handed out again
    "failed-write-kept",  # a record that could not be written is dropped, its command not undone
})


class UnknownPlantedBug(StreamkeepError):
    """A name that is not in BUGS: a typo would otherwise plant nothing, silently."""


def _read(value: str) -> frozenset[str]:
    names = frozenset(n.strip() for n in value.split(",") if n.strip())
    unknown = names - BUGS
    if unknown:
        raise UnknownPlantedBug(f"{ENV} names unknown bugs: {', '.join(sorted(unknown))}")
    return names


ACTIVE: frozenset[str] = _read(os.environ.get(ENV, ""))


def planted(name: str) -> bool:
    """Whether the bug `name` (one of BUGS) is planted in this process."""
    if name not in BUGS:
        raise UnknownPlantedBug(f"no planted bug is called {name!r}")
    return name in ACTIVE
