"""A careless user imports what is not a Redis file: random bytes, a gzipped dump.rdb, a text
file, an empty file, a directory that is no appendonlydir, a streamkeep data directory, an
RDB of a version streamkeep does not read, an RDB cut short, an AOF with junk in it. Each is
refused with exit 2 (3 for a file that cannot be read) and one line naming the file and what
was found (with the byte offset where it matters), nothing is created, and SOURCE is left as
it was; a real dump.rdb still imports."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import random
import shutil
import zipfile
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.snapshot import rdb
from tests.support.careless import assert_refused, run, tree_state


def _dump() -> bytes:
    engine = Engine()
    for i in range(50):
        engine.execute("XADD", "orders", f"{i + 1}-0", "n", str(i), "pad", "x" * 20)
    engine.execute("XGROUP", "CREATE", "orders", "g", "0")
    streams = sorted(engine.dbs[0].items())
    return b"".join(rdb.write_rdb(11, [(b"redis-ver", b"7.2.0")],
                                  [(0, len(streams), streams)]))


DUMP = _dump()
RANDOM = random.Random(31).randbytes(4096)
AOF = (b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n"
       b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n1-1\r\n$1\r\nf\r\n$1\r\nv\r\n")


def _zip(data: bytes) -> bytes:
    import io

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("dump.rdb", data)
    return buf.getvalue()


# (file name, its bytes, what the one line must say)
REFUSED = [
    ("random.bin", RANDOM, f"not an RDB or AOF: first bytes {RANDOM[:8].hex(' ')}"),
    ("dump.rdb.gz", gzip.compress(DUMP), "gzip data: decompress it first"),
    ("dump.rdb.bz2", bz2.compress(DUMP), "bzip2 data: decompress it first"),
    ("dump.rdb.xz", lzma.compress(DUMP), "xz data: decompress it first"),
    ("dump.rdb.zst", b"\x28\xb5\x2f\xfd" + DUMP[:40], "zstd data: decompress it first"),
    ("dump.zip", _zip(DUMP), "a zip archive: extract the file from it first"),
    ("passwd", b"root:x:0:0:root:/root:/bin/bash\n_apt:x:42:65534::/nonexistent:/bin/false\n",
     'not an RDB or AOF: first bytes 72 6f 6f 74 3a 78 3a 30 ("root:x:0")'),
    ("empty.rdb", b"", "an empty file"),
    ("v99.rdb", b"REDIS0099" + DUMP[9:], "RDB version 99 is not one streamkeep reads"),
    ("cut.rdb", DUMP[:len(DUMP) // 2],
     f'truncated at byte {len(DUMP) // 2}, inside the value of stream key "orders"'),
    ("no-checksum.rdb", DUMP[:-5], f"truncated at byte {len(DUMP) - 5}, inside the checksum"),
    ("bad-checksum.rdb", DUMP[:-1] + bytes([DUMP[-1] ^ 1]), "checksum mismatch"),
    ("junk-after.aof", AOF + b"FLUSHALL\r\n",
     f"not an AOF: byte {len(AOF)} starts 46 4c 55 53 48 41 4c 4c"),
    ("junk-inside.aof", AOF + b"*2\r\n$4\r\nXADD\r\n$x\r\n",
     f"in the command at byte {len(AOF)}"),
    ("rdb-then-junk.aof", DUMP + b"\x00\x01garbage",
     f"not AOF commands after the RDB preamble: byte {len(DUMP)} starts 00 01"),
    ("segment-000001.aof", b"SKAOF\r\n\x1a" + bytes(40), "a streamkeep AOF segment"),
]


@pytest.mark.parametrize("name,data,said", REFUSED, ids=[r[0] for r in REFUSED])
def test_what_is_not_a_redis_file_is_refused(tmp_path: Path, name: str, data: bytes,
                                             said: str) -> None:
    source = tmp_path / name
    source.write_bytes(data)
    before = tree_state(tmp_path)
    result = run("import", source, "--out", tmp_path / "imported")
    assert_refused(result, 2, source, said)
    assert tree_state(tmp_path) == before and sorted(os.listdir(tmp_path)) == [name]


def test_directories_that_are_no_appendonlydir(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "dump.rdb").write_bytes(DUMP)
    with Engine.open(str(tmp_path / "data")) as engine:
        engine.execute("XADD", "s", "1-1", "f", "v")
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "appendonly.aof.manifest").write_text("file appendonly.aof.1.base.rdb seq 1 type b\n")
    (odd / "appendonly.aof.1.base.rdb").write_bytes(gzip.compress(DUMP))
    before = tree_state(tmp_path)
    for source, said in [(plain, "not a Redis appendonlydir (it should hold one *.manifest "
                                 "file; found none)"),
                         (tmp_path / "data", "a streamkeep data directory, not a Redis file"),
                         (odd, "appendonly.aof.1.base.rdb: gzip data")]:
        result = run("import", source, "--out", tmp_path / "imported")
        assert_refused(result, 2, source, said)
    assert tree_state(tmp_path) == before and not (tmp_path / "imported").exists()


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    # /proc/self/mem lists as a file and fails to read (EIO), even for root.
    for source, said in [("/proc/self/mem", "Input/output error"),
                         (tmp_path / "missing.rdb", "No such file or directory")]:
        result = run("import", source, "--out", tmp_path / "imported")
        assert_refused(result, 3, source, said)
    assert os.listdir(tmp_path) == []


def test_a_symlink_to_a_dump_imports_and_a_real_dump_still_does(tmp_path: Path) -> None:
    (tmp_path / "dump.rdb").write_bytes(DUMP)
    (tmp_path / "link.rdb").symlink_to(tmp_path / "dump.rdb")
    result = run("import", tmp_path / "link.rdb", "--out", tmp_path / "imported")
    assert result.code == 0, result.err
    assert "imported 1 stream(s), 50 entries" in result.out and result.err == ""
    with Engine.open(str(tmp_path / "imported")) as engine:
        assert engine.execute("XLEN", "orders") == 50
    shutil.rmtree(tmp_path / "imported")
    (tmp_path / "appendonly.aof").write_bytes(DUMP + AOF)  # an RDB preamble, then commands
    result = run("import", tmp_path / "appendonly.aof", "--out", tmp_path / "imported")
    assert result.code == 0 and "imported 2 stream(s), 51 entries" in result.out, result.err
