"""Damaged stream nodes from outside: RESTORE of a DUMP payload, and `streamkeep import` of a
dump.rdb, whose node listpack is hostile while everything around it is right (the payload's and
the file's CRC-64 recomputed, so the damage reaches the node's own checks; the cases and the
payloads: tests/support/hostile_nodes.py).

RESTORE answers Redis's line for a payload with a good checksum and bad content, `ERR Bad data
format` (a wrong checksum: `ERR DUMP payload version or checksum are wrong`); import exits 2
naming the file, the key and its offset, and leaves no directory; never a crash, a hang or
another exception. Cases: a catalogue by kind (truncations, a header lying about the length or
the element count, element lengths near 2**32, counters that disagree with the entries, IDs
out of order or before the master ID, empty nodes, bad flags, field and element counts), and
random damage (bytes set, cut, inserted; 4-byte lengths planted), bounded here and long under
the slow marker, in a child process (a crash fails the test, not the run). A damaged node
RESTORE accepts (the damage hit a value's bytes) must then be an ordinary stream for every
command. Redis's own verdicts on the catalogue: tests/differential/test_dump_bytes_redis.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.tools.main import main
from tests.support.hostile_nodes import (
    BAD,
    catalogue,
    payload,
    rdb_file,
    restore_outcome,
    with_node,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalogue_node_is_valid_where_it_is_put() -> None:
    e = Engine(clock=lambda: 1_700_000_000_000)
    name, good = catalogue()[0]
    assert restore_outcome(e, with_node(payload(), 1, good)) == "OK", name


@pytest.mark.parametrize("k", [0, 1, 3])
@pytest.mark.parametrize("case", catalogue()[1:], ids=lambda c: c[0])
def test_hostile_nodes_are_bad_data_format(case: tuple[str, bytes], k: int) -> None:
    e = Engine(clock=lambda: 1_700_000_000_000)
    data = with_node(payload(), k, case[1])
    assert restore_outcome(e, data) == BAD
    wrong_crc = data[:-1] + bytes([data[-1] ^ 1])
    assert restore_outcome(e, wrong_crc) == "ERR DUMP payload version or checksum are wrong"
    assert e.execute("EXISTS", "t") == 0


FUZZ = "import sys; from tests.support.hostile_nodes import fuzz; " \
       "print(fuzz(int(sys.argv[1]), int(sys.argv[2])))"


def _child(seed: int, rounds: int, timeout: float) -> None:
    """The fuzz in a child process, in the mode the test runs in (pure when
    STREAMKEEP_NO_EXTENSIONS is set); the timeout only stops a hang."""
    done = subprocess.run([sys.executable, "-c", FUZZ, str(seed), str(rounds)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "'ERR Bad data format'" in done.stdout


def test_random_damage_is_refused_or_harmless() -> None:
    _child(7, int(os.environ.get("STREAMKEEP_FUZZ_ROUNDS", "2500")), timeout=600)


@pytest.mark.slow
def test_random_damage_is_refused_or_harmless_long() -> None:
    _child(1000, int(os.environ.get("STREAMKEEP_FUZZ_ROUNDS_LONG", "60000")), timeout=3600)


FUZZ_FILE = "import sys; from tests.support.hostile_nodes import fuzz_file; " \
            "print(fuzz_file(int(sys.argv[1]), int(sys.argv[2])))"


def test_random_damage_around_the_nodes_of_a_file_is_refused_saying_where() -> None:
    """The whole stream value damaged (its structure as the file's reader walks it, then its
    nodes as RESTORE reads them), in a child process in the test's mode."""
    done = subprocess.run([sys.executable, "-c", FUZZ_FILE, "11",
                           os.environ.get("STREAMKEEP_FUZZ_ROUNDS", "2500")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    assert "'file refused'" in done.stdout and "'value refused'" in done.stdout, done.stdout


# --- streamkeep import ------------------------------------------------------------------------

IMPORT_CASES = ["cut by 9, header agreeing", "header total 4294967295",
                "string length 4294967295", "counters 2/1", "IDs descending", "empty node",
                "flags 4", "element count 0", "wrong backlen"]


@pytest.mark.parametrize("name", IMPORT_CASES)
def test_import_names_the_file_and_the_key(tmp_path, capsys, name: str) -> None:
    lp = dict(catalogue())[name]
    source = tmp_path / "dump.rdb"
    source.write_bytes(with_node(rdb_file(), 2, lp))
    out = tmp_path / "out"
    assert main(["import", str(source), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f'{source}: the value of stream key "s" (db 0) at byte ' in err, err
    assert "is damaged" in err and "Traceback" not in err
    assert not out.exists()


def test_import_of_the_file_undamaged(tmp_path) -> None:
    source = tmp_path / "dump.rdb"
    source.write_bytes(rdb_file())
    assert main(["import", str(source), "--out", str(tmp_path / "out")]) == 0
