"""Planted durability bugs: a switch for tests only, never for production.

Owns the set of known durability bugs the crash bench must find (tests/crash/
test_planted_bugs.py plants each in turn and checks that the bench reports it) and the one
question the product code asks, `planted(name)`. The set is read once, when this module is
first imported, from the environment variable STREAMKEEP_PLANTED_BUGS (comma-separated names
from BUGS); unset or empty, nothing is planted and every `planted()` is False. Because it is
read at import, a test plants bugs in a child process it starts with the variable set.

It lives in the wire layer, the bottom one, so that every layer with a planted site (aof,
snapshot, commands) may import it. Must not import anything of the project but the errors.
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
