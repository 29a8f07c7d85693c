"""Data directories for the `aof stats` / `aof dump` tests (tests/tools/inspect), built by a
real Engine, and the CLI run in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streamkeep import Engine

ROOT = Path(__file__).resolve().parents[2]
BINARY = b"\x00\xff\r\n\"\\ bin\xc3"  # not UTF-8, every quoting case


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`streamkeep ARGS` in a subprocess (stdout and stderr captured as bytes)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), *sys.path) if p)
    return subprocess.run([sys.executable, "-m", "streamkeep", *args], capture_output=True,
                          env=env, input=stdin, timeout=120, check=False)


class Clock:
    """A millisecond clock the test moves."""

    def __init__(self, ms: int = 1_795_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def build_workload(path: str, **config: object) -> Clock:
    """Streams in db 0 and db 1 through Redis 7.0 commands: groups, deliveries, acks, claims,
    deletes, trims, a transaction switching databases, binary fields. Times: one minute apart
    per phase (the clock starts at 1_795_000_000_000 ms)."""
    clock = Clock()
    with Engine.open(path, clock=clock, **config) as db:
        db.execute("XGROUP", "CREATE", "orders", "ship", "$", "MKSTREAM")
        db.execute("XGROUP", "CREATE", "orders", "audit", "0")
        for i in range(20):
            clock.ms += 1
            db.execute("XADD", "orders", "*", "item", f"n{i}", "blob", BINARY + bytes([i]))
        db.execute("XADD", BINARY, "1-1", BINARY, BINARY)
        db.execute("XADD", "événements", "*", "clé", "valeur ✓")
        clock.ms += 60_000
        db.execute("XREADGROUP", "GROUP", "ship", "alice", "COUNT", "5", "STREAMS", "orders",
                   ">")
        db.execute("XREADGROUP", "GROUP", "ship", "bob", "COUNT", "3", "STREAMS", "orders", ">")
        db.execute("XREADGROUP", "GROUP", "audit", "carol", "COUNT", "2", "STREAMS", "orders",
                   ">")
        ids = [e[0] for e in db.execute("XRANGE", "orders", "-", "+")]
        db.execute("XACK", "orders", "ship", ids[0], ids[1])
        clock.ms += 1000
        db.execute("XCLAIM", "orders", "ship", "bob", "0", ids[2], ids[3])
        db.execute("XAUTOCLAIM", "orders", "ship", "alice", "0", "0-0", "COUNT", "1")
        db.execute("XDEL", "orders", ids[10], ids[11])
        clock.ms += 60_000
        db.execute("MULTI")
        db.execute("XADD", "orders", "*", "item", "in-multi")
        db.execute("SELECT", "1")
        db.execute("XADD", "other", "*", "k", "v1")
        db.execute("XGROUP", "CREATE", "other", "g1", "0")
        db.execute("EXEC")
        db.execute("XADD", "other", "*", "k", "v2")
        db.execute("XREADGROUP", "GROUP", "g1", "dave", "STREAMS", "other", ">")
        db.execute("SELECT", "0")
        db.execute("XADD", "capped", "MAXLEN", "3", "*", "x", "1")
        for i in range(6):
            db.execute("XADD", "capped", "MAXLEN", "3", "*", "x", str(i))
        db.execute("XTRIM", "orders", "MAXLEN", "15")
        db.execute("XADD", "scratch", "*", "a", "1")
        db.execute("RENAME", "scratch", "scratch2")
        db.execute("XADD", "gone", "*", "a", "1")
        db.execute("DEL", "gone")
        db.execute("XGROUP", "CREATECONSUMER", "orders", "audit", "erin")
        db.execute("XGROUP", "DELCONSUMER", "orders", "audit", "erin")
        db.execute("XGROUP", "SETID", "orders", "audit", ids[4])
    return clock


def records(path: str) -> list[tuple]:
    """Every record of a data directory, read by the engine's own reader."""
    from streamkeep.aof import manifest
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.segment_reader import SegmentReader

    fs = RealFS()
    out: list[tuple] = []
    for seg in manifest.load(fs, path).segments:
        reader = SegmentReader(fs, os.path.join(path, seg.file), seg.segment, seg.first_lsn)
        out += [(lsn, t, db, [list(e) for e in effects])
                for lsn, t, db, effects in reader.records()]
    return out
