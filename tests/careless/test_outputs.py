"""A careless user points a command's output at the wrong place: inside a data directory (the
one read, another one, through a symlink), at the source itself, over an existing file or into
a non-empty directory without --force, a directory where a file goes or the other way round.
Every command that writes an output refuses with exit 3 and one line naming the path, and
nothing anywhere changes; --force replaces an existing output but never writes inside a data
directory; and an output is there whole or not at all, even after a Ctrl-C."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.snapshot import rdb
from tests.support.careless import assert_refused, interrupt, run, tree_state


@dataclass
class World:
    root: Path
    data: Path  # a data directory: compacted, then written to
    other: Path  # another data directory
    dump: Path  # a Redis dump.rdb
    existing: Path  # somebody's file
    full: Path  # somebody's directory, not empty
    snapshot: Path  # data's snapshot file


def _state(root: Path) -> tuple[dict[str, str], list[str]]:
    """Every file's bytes under `root`, and every directory's name (an empty one left behind
    counts too)."""
    dirs = sorted(os.path.relpath(os.path.join(r, d), root)
                  for r, ds, _fs in os.walk(root) for d in ds)
    return tree_state(root), dirs


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("careless-outputs")
    data = root / "data"
    with Engine.open(str(data)) as engine:
        for i in range(30):
            engine.execute("XADD", "orders", f"{i + 1}-0", "n", str(i))
        engine.compact(wait=True)
        engine.execute("XADD", "orders", "100-0", "n", "late")
        snapshot = data / str(engine.datadir.journal.manifest.snapshot.file)  # type: ignore
        streams = sorted(engine.dbs[0].items())
        dump = root / "dump.rdb"
        dump.write_bytes(b"".join(rdb.write_rdb(11, [], [(0, len(streams), streams)])))
    with Engine.open(str(root / "other")) as engine:
        engine.execute("XADD", "s", "1-1", "f", "v")
    (root / "existing.rdb").write_bytes(b"somebody's file")
    (root / "full").mkdir()
    (root / "full" / "keep.txt").write_text("somebody's directory")
    (root / "manifest-link.rdb").symlink_to(data / "manifest.json")
    (root / "data-link").symlink_to(data)
    return World(root, data, root / "other", dump, root / "existing.rdb", root / "full",
                 snapshot)


# (command line, what the one line must name) with {name} standing for World's paths.
REFUSED = [
    # export-rdb: the first careless user's case, and its siblings
    ("export-rdb {data} --out {data}/manifest.json", "{data}/manifest.json"),
    ("export-rdb {data} --out {data}/manifest.json --force", "{data}/manifest.json"),
    ("export-rdb {data} --out {data}/dump.rdb", "streamkeep data directory {data}"),
    ("export-rdb {data} --out {data}", "{data} is a streamkeep data directory"),
    ("export-rdb {data} --out {other}/dump.rdb --force", "{other}"),
    ("export-rdb {data} --out {root}/manifest-link.rdb --force", "{root}/manifest-link.rdb"),
    ("export-rdb {data} --out {root}/data-link/x.rdb", "{root}/data-link/x.rdb"),
    ("export-rdb {data} --out {existing}", "{existing} exists (--force overwrites it)"),
    ("export-rdb {data} --out {full}", "{full} is a directory"),
    ("export-rdb {data} --out {root}/no/such/x.rdb", "{root}/no/such"),
    # restore: NEWDIR is a new data directory, never in or over another
    ("restore {data} --to-lsn 5 --out {data}/restored", "{data}/restored"),
    ("restore {data} --to-lsn 5 --out {data}", "{data}"),
    ("restore {data} --to-lsn 5 --out {other}", "{other}"),
    ("restore {data} --to-lsn 5 --out {full}", "{full} exists and is not an empty directory"),
    ("restore {data} --to-lsn 5 --out {existing}", "{existing}"),
    # import: DIR likewise; the source is not an output
    ("import {dump} --out {data}", "{data} is a streamkeep data directory"),
    ("import {dump} --out {data}/imported", "{data}/imported"),
    ("import {dump} --out {root}/data-link/imported", "{root}/data-link/imported"),
    ("import {dump} --out {full}", "{full} exists and is not an empty directory"),
    ("import {dump} --out {dump}", "{dump} is the source"),
    # export: refused before Spark starts
    ("export {data} --out {data}/export", "{data}/export"),
    ("export {data} --out {data} --force", "{data}"),
    ("export {data} --out {other} --force", "{other}"),
    ("export {snapshot} --out {snapshot} --force", "{snapshot}"),
    ("export {data} --out {full}", "{full} exists (--force overwrites it)"),
    ("export {data} --out {full} --overwrite --table streams --work-dir {data}", "{data}"),
    ("export {data} --out {existing} --force", "{existing} exists and is not a directory"),
    ("export {data} --out {root} --force", "{root} contains the source {data}"),
    # crashbench --json: refused before the run
    ("crashbench --ops 20 --model none --json {data}/report.json --force", "{data}/report.json"),
    ("crashbench --ops 20 --model none --json {existing}", "{existing} exists"),
]


def _fill(text: str, world: World) -> str:
    return text.format(**{k: str(v) for k, v in vars(world).items()})


@pytest.mark.parametrize("command,named", REFUSED, ids=[c for c, _ in REFUSED])
def test_an_output_where_it_must_not_go_is_refused(world: World, command: str,
                                                   named: str) -> None:
    before = _state(world.root)
    result = run(*_fill(command, world).split())
    assert_refused(result, 3, _fill(named, world))
    assert result.out == ""
    assert _state(world.root) == before  # nothing written, created or removed anywhere


def test_force_replaces_an_existing_output_and_only_that(world: World, tmp_path: Path) -> None:
    out = tmp_path / "dump.rdb"
    out.write_bytes(b"yesterday's dump")
    assert run("export-rdb", world.data, "--out", out, "--force").code == 0
    assert rdb.read_rdb(out.read_bytes())[0] >= 9  # a whole RDB, not the old bytes
    restored = tmp_path / "restored"
    restored.mkdir()  # an empty directory: nothing to lose, no --force needed
    assert run("restore", world.data, "--to-lsn", "31", "--out", restored).code == 0
    imported = tmp_path / "imported"
    result = run("import", world.dump, "--out", imported)
    assert result.code == 0, result.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump.rdb", "imported", "restored"]


def _no_temporaries(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.startswith(".")]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory big enough that writing its RDB, restoring or importing it takes a
    while, and its dump.rdb beside it."""
    data = tmp_path_factory.mktemp("careless-big") / "data"
    with Engine.open(str(data), appendfsync="no") as engine:
        for i in range(40_000):
            engine.execute("XADD", f"s{i % 4}", "*", "n", str(i), "pad", "x" * 64)
        streams = sorted(engine.dbs[0].items())
        (data.parent / "dump.rdb").write_bytes(
            b"".join(rdb.write_rdb(11, [], [(0, len(streams), streams)])))
    return data


@pytest.mark.parametrize("after", [0.3, 0.8, 1.5, 3.0])
def test_ctrl_c_leaves_a_whole_output_or_none(big: Path, tmp_path: Path, after: float) -> None:
    """Whenever Ctrl-C lands, the output is complete (it finished first) or absent, and no
    temporary is left beside it."""
    before = tree_state(big)
    out = tmp_path / "dump.rdb"
    interrupt("export-rdb", big, "--out", out, after=after, must_run=False)
    if out.exists():
        rdb.read_rdb(out.read_bytes())  # whole: its checksum holds
    restored = tmp_path / "restored"
    interrupt("restore", big, "--to-lsn", "39999", "--out", restored, after=after,
              must_run=False)
    if restored.exists():
        with Engine.open(str(restored)) as engine:
            assert engine.datadir.journal.lsn == 39_999  # type: ignore[union-attr]
    imported = tmp_path / "imported"
    interrupt("import", big.parent / "dump.rdb", "--out", imported, after=after,
              must_run=False)
    if imported.exists():
        with Engine.open(str(imported)) as engine:
            assert sum(s.length for s in engine.dbs[0].values()) == 40_000
    assert _no_temporaries(tmp_path) == []
    assert tree_state(big) == before
