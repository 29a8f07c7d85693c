"""A careless user's damaged AOF: what opening, `serve`, `aof verify` and `aof fix` do with a
byte flipped in data the log had already fsynced, against a torn tail it had not.

The directory is the one the report describes: an `always` directory, cleanly shut down, a
consumer group with deliveries at the end of the log. Every byte of its last records is flipped
in turn: opening must refuse every time (naming the segment, the byte offset, the LSN and the
`aof fix` option), never truncate, never open with less. A tail past the synced watermark is cut
as before, but saved first and warned about with its records and LSNs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.recovery import AOFCorruptError
from tests.support.careless import run, tree_state
from tests.support.inspect_util import record_offsets, segments

N = 40  # XADDs before the group's reads


def build(directory: Path) -> int:
    """The report's directory; returns its last LSN."""
    with Engine.open(str(directory), appendfsync="always") as engine:
        for i in range(N):
            engine.execute("XADD", "jobs", f"{i + 1}-1", "task", f"t{i}", "pad", "x" * 40)
        engine.execute("XGROUP", "CREATE", "jobs", "workers", "0")
        for consumer in ("alice", "bob"):
            engine.execute("XREADGROUP", "GROUP", "workers", consumer, "COUNT", "3",
                           "STREAMS", "jobs", ">")
        engine.execute("XACK", "jobs", "workers", "1-1")
        assert engine.journal is not None
        return engine.journal.lsn


@pytest.fixture
def closed(tmp_path: Path) -> tuple[Path, int]:
    directory = tmp_path / "data"
    return directory, build(directory)


def test_every_flipped_byte_of_the_last_records_is_refused(closed: tuple[Path, int]) -> None:
    directory, last_lsn = closed
    (segment,) = segments(directory)
    original = segment.read_bytes()
    offsets = record_offsets(segment)
    start = offsets[-3]  # the last three records: the XREADGROUPs and the XACK
    for at in range(start, len(original)):
        damaged = bytearray(original)
        damaged[at] ^= 0x20
        segment.write_bytes(bytes(damaged))
        before = tree_state(directory)
        with pytest.raises(AOFCorruptError) as err:
            Engine.open(str(directory))
        message = str(err.value)
        assert str(segment) in message and "byte offset" in message, (at, message)
        assert "aof fix --force-skip-damaged" in message, message
        record = max(i for i, o in enumerate(offsets) if o <= at)
        assert f"LSN {record + 1}" in message, (at, message)
        after = tree_state(directory)
        after.pop("LOCK"), before.pop("LOCK")
        assert after == before, f"a refused open changed the directory (byte {at})"
    segment.write_bytes(original)
    with Engine.open(str(directory)) as engine:
        assert engine.journal is not None and engine.journal.lsn == last_lsn


def test_the_report_directory_end_to_end(closed: tuple[Path, int]) -> None:
    """The report's case through the tools a user reaches for: serve refuses with one line,
    verify says why (exit 2), fix gets past it with --force-skip-damaged, keeping a copy."""
    directory, last_lsn = closed
    (segment,) = segments(directory)
    data = bytearray(segment.read_bytes())
    at = len(data) - 300
    data[at] ^= 1
    segment.write_bytes(bytes(data))
    before = tree_state(directory)

    served = run("serve", "--dir", directory, "--port", "0")
    assert served.code == 1 and "Traceback" not in served.err, served.err
    assert str(segment) in served.err and "aof fix --force-skip-damaged" in served.err
    after = tree_state(directory)
    after.pop("LOCK", None), before.pop("LOCK", None)
    assert after == before

    verified = run("aof", "verify", directory)
    assert verified.code == 2 and f"{segment.name}:" in verified.out, verified.out
    assert "opening the directory would refuse" in verified.out

    refused = run("aof", "fix", "--yes", directory)
    assert refused.code == 2 and "--force-skip-damaged" in refused.err
    assert "Traceback" not in refused.err

    fixed = run("aof", "fix", "--yes", "--force-skip-damaged", directory)
    assert fixed.code == 0, fixed.err
    assert list(directory.glob("segment-*.aof.cut-*")), "what was dropped was not saved"
    with Engine.open(str(directory)) as engine:
        assert engine.journal is not None and engine.journal.lsn < last_lsn


def test_a_torn_tail_past_the_watermark_is_cut_saved_and_warned_about(
        closed: tuple[Path, int], caplog: pytest.LogCaptureFixture) -> None:
    """A tail written after the last fsync (what a power loss leaves): opening still cuts it,
    but keeps a copy and says what it dropped."""
    directory, last_lsn = closed
    (segment,) = segments(directory)
    size = segment.stat().st_size
    with segment.open("ab") as f:  # half a record nobody fsynced
        f.write(b"\x40\x00\x00\x00" + bytes(20))
    with caplog.at_level(logging.WARNING, logger="streamkeep.aof"), \
            Engine.open(str(directory)) as engine:
        assert engine.journal is not None and engine.journal.lsn == last_lsn
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    side = Path(f"{segment}.cut-{size}")
    assert side.read_bytes() == b"\x40\x00\x00\x00" + bytes(20)
    assert str(side) in warning and f"LSN {last_lsn + 1}" in warning and "1 record" in warning
    assert segment.stat().st_size == size
