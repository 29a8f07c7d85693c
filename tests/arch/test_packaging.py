"""One import namespace: the design card's folders install as streamkeep.*, nothing else.

A real wheel is built from the checkout and its file list checked; the installed (editable)
package is imported from outside the checkout, as a user's program would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"engine", "aof", "snapshot", "replication", "tools", "streamkeep"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # The file layout is what is checked here, the same with or without the compiled kernels
    # (their build is `make dev`'s, required in `make test`): compiling them all again for this
    # wheel took a CPU-minute of the suite.
    env = {**os.environ, "STREAMKEEP_NO_EXTENSIONS": "1"}
    env.pop("STREAMKEEP_REQUIRE_EXTENSIONS", None)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(ROOT)], check=True, capture_output=True,
                   timeout=300, env=env)
    (path,) = out.glob("streamkeep-*.whl")
    return zipfile.ZipFile(path)


def test_wheel_holds_only_the_streamkeep_namespace(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"streamkeep"}


def test_wheel_holds_every_source_module(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    expected = set()
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).as_posix()
            expected.add("streamkeep/" + rel if folder == "streamkeep"
                         else f"streamkeep/{folder}/{rel}")
    missing = sorted(expected - names)
    assert not missing, f"not packaged (add the package to pyproject.toml): {missing}"


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


@pytest.mark.parametrize("bare", ["engine", "tools", "aof", "snapshot", "replication"])
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


def _folder(package: str, package_dir: dict[str, str]) -> Path:
    """Where pyproject's package-dir puts `package` (its longest mapped prefix)."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        mapped = package_dir.get(".".join(parts[:n]))
        if mapped is not None:
            return ROOT.joinpath(mapped, *parts[n:])
    return ROOT.joinpath(*parts)


def test_every_folder_of_files_in_a_package_is_a_listed_package() -> None:
    """A folder of files inside a package (the Lua chunks) that `packages` does not list makes
    setuptools print a 30-line warning at every build, and later setuptools versions stop
    shipping it: each such folder is a package of its own in pyproject.toml."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = set(config["packages"])
    unlisted = []
    for package in sorted(packages):
        for sub in sorted(_folder(package, config["package-dir"]).iterdir()):
            if not sub.is_dir() or sub.name.startswith((".", "_")):  # (__pycache__)
                continue
            if f"{package}.{sub.name}" not in packages and any(
                    f.is_file() for f in sub.rglob("*") if "__pycache__" not in f.parts):
                unlisted.append(f"{package}.{sub.name}")
    assert not unlisted, f"add to pyproject.toml's [tool.setuptools] packages: {unlisted}"
