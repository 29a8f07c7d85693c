"""A careless user's data directory with files cut short, replaced or in the way: every open
refuses with one line naming the file (through `serve`, a real process), changes nothing, and
never starts over what is there. Cutting a segment anywhere inside what was fsynced is
refused, not taken for a torn tail."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.recovery import AOFCorruptError
from tests.support.careless import run, tree_state
from tests.support.inspect_util import manifest, record_offsets, segments


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pristine") / "data"
    with Engine.open(str(directory), appendfsync="always",
                     auto_aof_rewrite_percentage=0) as engine:
        for i in range(300):
            engine.execute("XADD", "s", f"{i + 1}-1", "f", f"v{i}")
        engine.compact(wait=True)
        for i in range(300, 330):
            engine.execute("XADD", "s", f"{i + 1}-1", "f", f"v{i}")
    return directory


@pytest.fixture
def data(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(pristine, copy)
    return copy


def test_a_segment_cut_anywhere_inside_what_was_fsynced_is_refused(data: Path) -> None:
    (segment,) = segments(data)
    original = segment.read_bytes()
    cuts = [*record_offsets(segment)[1:], len(original) - 1, len(original) - 7]
    for cut in cuts:
        segment.write_bytes(original[:cut])
        with pytest.raises(AOFCorruptError) as err:
            Engine.open(str(data))
        assert str(segment) in str(err.value) and "fsynced" in str(err.value), (cut, err.value)
        assert segment.read_bytes() == original[:cut], "a refused open cut the file"


REPLACEMENTS = {  # what: (how, the file the refusal names)
    "the segment replaced by a text file": (
        lambda d: _segment(d).write_text("hello\n" * 20), lambda d: _segment(d)),
    "the snapshot replaced by a text file": (
        lambda d: _snapshot(d).write_text("hello\n"), lambda d: _snapshot(d)),
    "the snapshot's bytes all zeros": (
        lambda d: _snapshot(d).write_bytes(bytes(_snapshot(d).stat().st_size)),
        lambda d: _snapshot(d)),
    "the manifest emptied": (
        lambda d: (d / "manifest.json").write_text(""), lambda d: d / "manifest.json"),
    "the watermark is a directory": (
        lambda d: _in_the_way(d / "watermark"), lambda d: d / "watermark"),
    "the segment is a directory": (lambda d: _in_the_way(_segment(d)), lambda d: _segment(d)),
}


def _segment(d: Path) -> Path:
    return segments(d)[-1]


def _snapshot(d: Path) -> Path:
    return d / manifest(d)["snapshot"]["file"]


def _in_the_way(path: Path) -> None:
    path.unlink()
    path.mkdir()


@pytest.mark.parametrize("what", sorted(REPLACEMENTS))
def test_a_file_replaced_or_in_the_way_is_refused_in_one_line(data: Path, what: str) -> None:
    how, file = REPLACEMENTS[what]
    named = str(file(data))
    how(data)
    before = tree_state(data)
    served = run("serve", "--dir", data, "--port", "0", "--loglevel", "warning")
    assert served.code == 1, served.err
    lines = served.err_lines
    assert len(lines) == 1 and "Traceback" not in served.err, served.err
    assert named in lines[0], lines[0]
    after = tree_state(data)
    after.pop("LOCK", None), before.pop("LOCK", None)
    assert after == before
    assert os.listdir(data), "never started empty"
