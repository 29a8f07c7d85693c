"""A careless user's damaged snapshot: a byte changed, or 64 bytes overwritten, in each kind of
value a snapshot stores (nodes, node info, streams, groups, consumers, PEL, meta), and in LMDB's
own pages. Every reader refuses it, naming the file (and the table and key where the damage is
in a value), with the documented exit status, one line, no traceback, nothing written:
opening (eager and lazy), `aof verify --deep`, `snapshot info` and `dump`, `restore` and
`export-rdb`. Never a different value, never "clean".

A snapshot of the oldest format (no checksums, no whole-file checksum in the manifest) still
opens; `verify` says it has no checksums. An empty file is refused in those words."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from streamkeep import Engine, ReplyError
from streamkeep.aof.recovery import AOFCorruptError
from tests.support.careless import assert_refused, run, tree_state
from tests.support.inspect_util import cli, manifest
from tests.support.snapshot_util import as_version_1, value_offset

VALUE_TABLES = ("nodes", "nodeinfo", "streams", "groups", "consumers", "pel", "meta")


def build(directory: Path) -> None:
    """Two streams, a group with consumers and pending entries, compacted, then more writes in
    the log after the snapshot."""
    with Engine.open(str(directory), auto_aof_rewrite_percentage=0) as engine:
        for i in range(600):
            engine.execute("XADD", "orders", f"{i + 1}-1", "item", f"value-{i:05d}",
                           "qty", str(i % 7))
        engine.execute("XADD", "audit", "1-1", "who", "me")
        engine.execute("XGROUP", "CREATE", "orders", "billing", "0")
        engine.execute("XREADGROUP", "GROUP", "billing", "alice", "COUNT", "5", "STREAMS",
                       "orders", ">")
        engine.execute("XREADGROUP", "GROUP", "billing", "bob", "COUNT", "5", "STREAMS",
                       "orders", ">")
        engine.compact(wait=True)
        engine.execute("XADD", "orders", "9999-1", "item", "after-the-snapshot")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pristine") / "data"
    build(directory)
    return directory


def copy_of(pristine: Path, where: Path) -> tuple[Path, Path]:
    """A copy of the directory to damage, and its snapshot file."""
    import shutil

    directory = where / "data"
    shutil.copytree(pristine, directory)
    return directory, directory / manifest(directory)["snapshot"]["file"]


def holder(snapshot: Path, table: str) -> Path:
    """The file of the snapshot that holds `table`'s values: a node's are in a part file."""
    if table not in ("nodes", "nodeinfo"):
        return snapshot
    doc = manifest(snapshot.parent)["snapshot"]
    return snapshot.parent / doc["parts"][0]["file"]


def damage(snapshot: Path, table: str, how: str) -> str:
    """Change one stored value of `table` (its middle byte, or 64 bytes from its middle, never
    past it); returns the table so a test can expect it named."""
    snapshot = holder(snapshot, table)
    key, at, length = value_offset(str(snapshot), table, index=1 if table == "nodes" else 0)
    data = bytearray(snapshot.read_bytes())
    middle = at + length // 2
    if how == "flip":
        data[middle] ^= 0x04
    else:
        span = min(64, at + length - middle)
        data[middle:middle + span] = random.Random(table).randbytes(span)
    snapshot.write_bytes(bytes(data))
    return table


@pytest.mark.parametrize("how", ["flip", "overwrite"])
@pytest.mark.parametrize("table", VALUE_TABLES)
def test_a_damaged_value_is_refused_everywhere(pristine: Path, tmp_path: Path, table: str,
                                               how: str) -> None:
    directory, snapshot = copy_of(pristine, tmp_path)
    damage(snapshot, table, how)
    snapshot = holder(snapshot, table)  # the file the errors name
    before = tree_state(directory)

    with pytest.raises(AOFCorruptError) as err:
        Engine.open(str(directory))
    message = str(err.value)
    assert str(snapshot) in message and f"table {table}" in message, message
    assert "rebuild it from a replica" in message

    code, out, _err = cli("aof", "verify", "--deep", str(directory))
    assert code == 2 and "bad-snapshot" in out and snapshot.name in out, out
    assert "status:   clean" not in out

    for command in (("snapshot", "info"), ("snapshot", "dump")):
        code, _out, err_text = cli(*command, str(directory))
        assert code == 2 and "Traceback" not in err_text, (command, err_text)
        assert str(snapshot) in err_text and f"table {table}" in err_text, err_text

    out_dir = tmp_path / "restored"
    code, _out, err_text = cli("restore", str(directory), "--to-time", str(1 << 62),
                               "--out", str(out_dir))
    assert code == 2 and snapshot.name in err_text and not out_dir.exists(), err_text

    rdb = tmp_path / "moved.rdb"
    code, _out, err_text = cli("export-rdb", str(directory), "--out", str(rdb))
    assert code == 2 and snapshot.name in err_text and not rdb.exists(), err_text
    assert ".export-rdb-" not in err_text  # the user's path, not the temporary copy's
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # nothing left behind

    after = tree_state(directory)
    after.pop("LOCK", None), before.pop("LOCK", None)
    assert after == before, "a reader changed the damaged directory"


@pytest.mark.parametrize("table", ["nodes", "nodeinfo", "pel"])
def test_a_lazy_load_finds_it_when_it_reads_the_value(pristine: Path, tmp_path: Path,
                                                      table: str) -> None:
    """With backlog-memory the nodes stay in the file until read: the damage is found then, as
    an error reply naming the file, table and key, never as different entries."""
    directory, snapshot = copy_of(pristine, tmp_path)
    damage(snapshot, table, "flip")
    snapshot = holder(snapshot, table)
    try:
        engine = Engine.open(str(directory), backlog_memory="1mb")
    except AOFCorruptError as err:  # found while loading (node info, PEL): refused
        assert str(snapshot) in str(err) and f"table {table}" in str(err)
        return
    with engine:
        with pytest.raises(ReplyError) as err:
            engine.execute("XRANGE", "orders", "-", "+")
        assert str(snapshot) in str(err.value) and f"table {table}" in str(err.value)
        # A write that meets it stops writes: its change may be half made, and unlogged.
        with pytest.raises(ReplyError):
            engine.execute("XREADGROUP", "GROUP", "billing", "carol", "STREAMS", "orders", ">")
        engine.execute("XRANGE", "orders", "9999", "+")  # resident entries still read
        with pytest.raises(ReplyError, match="writes are refused until the data directory"):
            engine.execute("XADD", "orders", "*", "f", "v")


def test_damage_outside_the_values_is_found_by_the_whole_file_checksum(
        pristine: Path, tmp_path: Path) -> None:
    """A byte of LMDB's own pages (its meta page): no value holds it, the manifest's checksum
    of the whole file does."""
    directory, snapshot = copy_of(pristine, tmp_path)
    data = bytearray(snapshot.read_bytes())
    data[40] ^= 0x01  # inside LMDB's first meta page
    snapshot.write_bytes(bytes(data))
    with pytest.raises(AOFCorruptError, match="the manifest recorded"):
        Engine.open(str(directory))
    result = run("snapshot", "info", directory)
    assert_refused(result, 2, snapshot, "checksum")
    code, out, _err = cli("aof", "verify", str(directory))  # without --deep too
    assert code == 2 and "bad-snapshot" in out


def test_the_report_case_through_the_cli(pristine: Path, tmp_path: Path) -> None:
    """64 bytes of a node overwritten, tried with real processes as the report did."""
    directory, snapshot = copy_of(pristine, tmp_path)
    damage(snapshot, "nodes", "overwrite")
    snapshot = holder(snapshot, "nodes")
    for args, code in ((("aof", "verify", "--deep", directory), 2),
                       (("snapshot", "dump", directory), 2),
                       (("export-rdb", directory, "--out", tmp_path / "x.rdb"), 2)):
        result = run(*args)
        assert result.code == code and "Traceback" not in result.err, (args, result.err)
        assert snapshot.name in result.out + result.err
    # Without a backlog budget the start reads every node (with one, `serve`'s default, a
    # damaged node is found when read: that read's error reply).
    conf = tmp_path / "no-budget.conf"
    conf.write_text("backlog-memory 0\n")
    served = run("serve", "--dir", directory, "--port", "0", "--config", conf)
    assert served.code == 1 and str(snapshot) in served.err and "table nodes" in served.err


def test_an_old_snapshot_without_checksums_still_opens(pristine: Path, tmp_path: Path) -> None:
    """Written as version 1 did (bare values) and named by a manifest without checksums; a
    compaction then writes the current format."""
    import json

    from streamkeep.engine.runtime.core import EngineCore
    from streamkeep.snapshot.services.load import load_snapshot
    from streamkeep.snapshot.writer import write_snapshot

    directory, snapshot = copy_of(pristine, tmp_path)
    state = EngineCore()  # the snapshot's state as one file, as every snapshot was then
    meta = load_snapshot(state, str(snapshot))
    one_file = tmp_path / "one.mdb"
    write_snapshot(state.dbs, str(one_file), meta.lsn, meta.created_ms, meta.repl_id,
                   values=state.keyspaces, expires=state.expires)
    one_file.replace(snapshot)
    as_version_1(str(snapshot))
    doc = manifest(directory)
    doc["snapshot"].pop("crc32")
    doc["snapshot"].pop("parts")
    doc["snapshot"]["size"] = snapshot.stat().st_size
    doc.pop("checksum")
    (directory / "manifest.json").write_text(json.dumps(doc))
    with Engine.open(str(directory)) as engine:
        assert engine.execute("XLEN", "orders") == 601
    code, out, _err = cli("aof", "verify", "--deep", str(directory))
    assert code == 0 and "no checksums" in out and "no checksum of the whole file" in out
    with Engine.open(str(directory), backlog_memory="1mb") as engine:  # cold nodes moved on
        engine.execute("XADD", "orders", "*", "f", "v")
        engine.compact(wait=True)
        digest = engine.digest()
    code, out, _err = cli("aof", "verify", "--deep", str(directory))
    assert code == 0 and "no checksums" not in out, out
    with Engine.open(str(directory)) as engine:
        assert engine.digest() == digest


@pytest.mark.parametrize("snapshot_only", [False, True])
def test_export_refuses_a_damaged_snapshot_before_spark_reads_it(
        pristine: Path, tmp_path: Path, snapshot_only: bool) -> None:
    """The current state (built from a checked copy) or the snapshot as it is (checked whole
    first): either way exit 2 with one line naming the file, before any JVM starts."""
    directory, snapshot = copy_of(pristine, tmp_path)
    damage(snapshot, "nodes", "flip")
    snapshot = holder(snapshot, "nodes")
    before = tree_state(directory)
    out = tmp_path / "export"
    result = run("export", directory, "--out", out, *(["--snapshot-only"] if snapshot_only
                                                      else []))
    line = assert_refused(result, 2, snapshot)
    assert "export-pin-" not in line and ".state-" not in line  # the user's names only
    assert not snapshot_only or "checksum" in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    after = tree_state(directory)
    after.pop("LOCK", None), before.pop("LOCK", None)
    assert after == before


def test_an_empty_file_is_not_a_snapshot(tmp_path: Path) -> None:
    """An empty file handed to the snapshot readers: one line naming it and saying it is
    empty (LMDB alone says "Bad file descriptor"), exit status 2."""
    empty = tmp_path / "EMPTYFILE"
    empty.touch()
    for args in (("snapshot", "info", empty), ("snapshot", "dump", empty)):
        line = assert_refused(run(*args), 2, empty, "not a readable LMDB snapshot (an empty file)")
        assert "Bad file descriptor" not in line
