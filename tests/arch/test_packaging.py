"""One import namespace: the design card's folders install as streamkeep.*, nothing else.

A real wheel is built from the checkout and its file list checked; the installed (editable)
package is imported from outside the checkout, as a user's program would.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streamkeep import folders

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # The file layout is what is checked here, the same with or without the compiled kernels
    # (their build is `make dev`'s, required in `make test`): compiling them all again for this
    # wheel took a CPU-minute of the suite.
    env = {**os.environ, "STREAMKEEP_NO_EXTENSIONS": "1"}
    env.pop("STREAMKEEP_REQUIRE_EXTENSIONS", None)
    # Two workers of a parallel run may each build it: setuptools' build/ in the checkout is
    # theirs to share, so one builds at a time (a lock on setup.py, no file of its own).
    with open(ROOT / "setup.py", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "--no-build-isolation", "-q", "-w", str(out), str(ROOT)], check=True,
                       capture_output=True, timeout=300, env=env)
    (path,) = out.glob("streamkeep-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_holds_only_the_streamkeep_namespace(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"streamkeep"}


def test_wheel_holds_every_source_module(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = set()
    for folder in folders.top_folders():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).as_posix()
            expected.add("streamkeep/" + rel if folder == "streamkeep"
                         else f"streamkeep/{folder}/{rel}")
    missing = sorted(expected - names)
    assert not missing, f"not packaged (add its folder to streamkeep/folders.py): {missing}"


def test_wheel_holds_the_lua_chunks(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    chunks = {f"streamkeep/engine/exec/lua/{path.name}"
              for path in (ROOT / "engine" / "exec" / "lua").glob("*.lua")}
    assert chunks and chunks <= names, sorted(chunks - names)


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # As a user's program: no PYTHONPATH naming the checkout (a Spark test in this worker
    # sets one for its Python workers).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=env)


@pytest.mark.parametrize("bare", [f for f in folders.top_folders() if f != "streamkeep"])
def test_no_bare_top_level_module(bare: str, tmp_path: Path) -> None:
    result = _run(f"import {bare}", tmp_path)
    assert "ModuleNotFoundError" in result.stderr, result.stderr


def test_documented_entry_points(tmp_path: Path) -> None:
    result = _run("from streamkeep import Engine, ReplyError, StreamkeepError\n"
                  "e = Engine.open()\n"
                  "print(e.execute('XADD', 's', '1-1', 'f', 'v'))\n"
                  "assert issubclass(ReplyError, StreamkeepError)", tmp_path)
    assert result.returncode == 0 and result.stdout == "b'1-1'\n", result.stderr
    cli = subprocess.run([sys.executable, "-m", "streamkeep", "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0 and "serve" in cli.stdout


def test_every_folder_of_files_is_in_the_folder_map() -> None:
    """A folder of files under a source folder that the map leaves out is not installed (and a
    folder of data files only, like the Lua chunks, made setuptools print a 30-line warning
    at every build): each one is in streamkeep/folders.py, which setup.py's packages come from."""
    unlisted = []
    for top in folders.top_folders():
        for sub in sorted((ROOT / top).rglob("*")):
            rel = sub.relative_to(ROOT).as_posix()
            if not sub.is_dir() or any(p.startswith((".", "_")) for p in Path(rel).parts):
                continue
            if rel not in folders.FOLDERS and any(
                    f.is_file() for f in sub.rglob("*") if "__pycache__" not in f.parts):
                unlisted.append(rel)
    assert not unlisted, f"add to streamkeep/folders.py's FOLDERS: {unlisted}"


def test_the_folder_map_is_written_once() -> None:
    """pyproject.toml names no package or folder: setup.py derives both from the map."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"].get("setuptools", {})
    assert "packages" not in config and "package-dir" not in config
    for folder in folders.FOLDERS:
        assert (ROOT / folder).is_dir(), f"{folder} is in the map and not in the checkout"
