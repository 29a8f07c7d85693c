"""Helpers for the offline inspection commands' tests (tests/tools/inspect/): `Written` (a data
directory written by the seeded AOF workload, with the command count behind each LSN so a
reference digest can be computed for any LSN), `write_dir`, `cli` (run `streamkeep ...` in
process: exit status, stdout, stderr), and byte-level damage helpers (`segments`,
`record_offsets`, `flip_byte`, `append_bytes`)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from streamkeep.aof import codec
from streamkeep.tools.main import main as cli_main
from tests.support.aof_workload import FakeClock, reference, run
from tests.support.datadir import open_dir

SEED = "inspect"


@dataclass
class Written:
    path: Path
    seed: str
    commands: int  # commands run
    lsn: int  # the last LSN written
    count_at: dict[int, int] = field(default_factory=dict)  # LSN -> commands run once it exists
    times: dict[int, int] = field(default_factory=dict)  # LSN -> its record's time_ms

    def digest_at(self, lsn: int) -> str:
        """The digest an in-memory engine has right after the record of `lsn`."""
        k = self.count_at[lsn] if lsn else 0
        return reference(self.seed, [k])[k]


def write_dir(path: Path, commands: int = 400, compact_after: int | None = None,
              seed: str = SEED, **options: object) -> Written:
    """Run the workload's first `commands` commands on a data directory (small segments; a
    compaction after `compact_after` commands if given) and close it."""
    clock = FakeClock()
    engine = open_dir(path, clock, **options)
    written = Written(path, seed, commands, 0)

    def ack(i: int) -> None:
        lsn = engine.journal.lsn  # type: ignore[union-attr]
        if lsn not in written.count_at:
            written.count_at[lsn] = i + 1
            written.times[lsn] = clock.now

    try:
        if compact_after is None:
            run(engine, clock, seed, 0, commands, ack)
        else:
            run(engine, clock, seed, 0, compact_after, ack)
            engine.compact(wait=True)
            run(engine, clock, seed, compact_after, commands, ack)
        written.lsn = engine.journal.lsn  # type: ignore[union-attr]
    finally:
        engine.close()
    return written


def cli(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    """`streamkeep *argv` in process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main(list(argv))
            except SystemExit as exc:  # argparse's usage errors
                code = int(exc.code or 0)
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def verify_json(path: Path | str) -> tuple[int, dict]:
    code, out, _err = cli("aof", "verify", "--json", str(path))
    return code, json.loads(out)


def manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def segments(path: Path) -> list[Path]:
    """The manifest's segment files, in order."""
    return [path / s["file"] for s in manifest(path)["segments"]]


def record_offsets(segment: Path) -> list[int]:
    """Byte offset of each record of a (sound) segment."""
    data = segment.read_bytes()
    offsets, pos = [], codec.HEADER_SIZE
    while pos < len(data):
        offsets.append(pos)
        length, _crc = codec.FRAME.unpack_from(data, pos)
        pos += codec.FRAME_SIZE + length
    return offsets


def flip_byte(file: Path, offset: int) -> None:
    data = bytearray(file.read_bytes())
    data[offset] ^= 0xFF
    file.write_bytes(bytes(data))


def append_bytes(file: Path, data: bytes) -> None:
    with open(file, "ab") as out:
        out.write(data)
