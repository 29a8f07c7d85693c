"""Unit tests of command modules: one in-memory engine at a settable clock, driven through
`execute` and `submit` alone, the effects each write logs, and the records replayed on a fresh
engine (the property the AOF and replicas rely on: same records, same state digest).

Owns `Recorded` and `logged_claim` (the XCLAIM effect a delivery or claim logs, spelled out for
comparisons). Error lines come from tests.support.diffutil.err; the fake clock is
tests.support.command_strategies.Clock. Must not touch: the engine's internals (its state is
read through commands: DEBUG DIGEST, XINFO, XRANGE ...).
"""

from __future__ import annotations

from typing import Any

from streamkeep import Engine, Record, Session
from streamkeep.engine.wire.reply import to_plain
from tests.support.command_strategies import Clock
from tests.support.diffutil import err


def argv_bytes(argv: tuple[Any, ...]) -> tuple[bytes, ...]:
    """A command's arguments as the engine takes them (str encoded, ints written out)."""
    return tuple(a if isinstance(a, bytes) else str(a).encode() for a in argv)


def logged_claim(key: bytes, group: bytes, consumer: bytes, sid: bytes, time: bytes,
                 count: bytes, last_id: bytes | None = None) -> list[bytes]:
    """`XCLAIM key group consumer 0 sid TIME time RETRYCOUNT count FORCE JUSTID [LASTID id]`:
    what a delivery or a claim logs (a history read leaves LASTID out)."""
    effect = [b"XCLAIM", key, group, consumer, b"0", sid, b"TIME", time, b"RETRYCOUNT", count,
              b"FORCE", b"JUSTID"]
    return effect + [b"LASTID", last_id] if last_id is not None else effect


class Recorded:
    """An in-memory engine whose clock reads `clock.now` (ms), keeping every record it logs."""

    def __init__(self, now: int = 1_000_000, **config: Any) -> None:
        self.clock = Clock()
        self.clock.now = now
        self.engine = Engine(clock=self.clock, **config)
        self.records: list[Record] = []
        self.engine.add_sink(self.records.append)

    def __call__(self, *argv: Any) -> Any:
        """The plain reply (errors raised as ReplyError)."""
        return self.engine.execute(*argv)

    def err(self, *argv: Any) -> str:
        """The error line argv is refused with (fails if it succeeds)."""
        return err(self.engine, *argv)

    def effects(self, *argv: Any, session: Session | None = None) -> tuple[Any, list[list[bytes]]]:
        """Run argv through submit (on `session`, else the engine's own): its plain reply and
        the effects it logged (not those of clients it woke up, which log records of their
        own)."""
        logged: list[list[bytes]] = []
        reply, _lsn = self.engine.submit(session or self.engine.session, argv_bytes(argv),
                                         logged)
        return to_plain(reply), logged

    def digest(self) -> str:
        return self.engine.execute("DEBUG", "DIGEST")

    def replay(self, records: list[Record] | None = None) -> Engine:
        """A fresh engine (its own clock far off: it must not matter) that applied these
        records (by default every record logged so far)."""
        replica = Engine(clock=lambda: 10**12)
        for record in self.records if records is None else records:
            replica.replay.apply(record)
        return replica

    def assert_replays(self) -> None:
        """Replaying the records reproduces this engine's state exactly."""
        assert self.replay().execute("DEBUG", "DIGEST") == self.digest()
