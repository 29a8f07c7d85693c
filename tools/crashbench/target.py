"""What the crash bench drives: a `Target` runs one command and returns its reply as plain
Python values (bytes for bulk strings, str for simple strings, int, None, nested lists), raises
`CommandFailed` for an error reply (the command was answered: an outcome, not a crash) and
`ConnectionLost` when no reply came (the target died: the outcome is unknown).
Owns these three names only; the targets themselves live with their crash modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from streamkeep.engine.wire.errors import StreamkeepError


class CommandFailed(StreamkeepError):
    """An error reply: the exact error line, without the leading '-'."""


class ConnectionLost(StreamkeepError):
    """No reply: the target crashed (or was killed) while the command was in flight."""

    in_flight: list[bytes] | None = None  # the command, when a runner knows it


class Target(Protocol):
    def execute(self, argv: Sequence[bytes]) -> Any:
        """Run one command; its reply, CommandFailed or ConnectionLost."""
        ...
