"""The compiled command path's switches (setup.py's COMPILED, engine/wire/compiled.py): under
STREAMKEEP_REQUIRE_EXTENSIONS every listed module runs compiled; STREAMKEEP_NO_EXTENSIONS=1 at
run time imports each from its .py source although the compiled module is installed beside it;
a source edited after a build in place is noticed; and a build without a compiler is pure
Python with one line on stderr, or fails under STREAMKEEP_REQUIRE_EXTENSIONS."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import folders
from streamkeep.engine.wire import compiled
from tests.support.kernels import PURE_ONLY, REQUIRE

ROOT = Path(__file__).resolve().parents[3]


def listed_modules() -> list[str]:
    """setup.py's COMPILED, as module names (read from its source: setup.py is no module)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "COMPILED"):
            sources = ast.literal_eval(node.value)
            break
    else:
        raise AssertionError("setup.py has no COMPILED list")
    return [folders.module_name(source) for source in sources]


LISTED = listed_modules()


def files_in_child(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = ("import importlib, json\n"
            f"print(json.dumps({{m: importlib.import_module(m).__file__ for m in {LISTED!r}}}))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT.parent, timeout=60)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("STREAMKEEP_NO_EXTENSIONS", "STREAMKEEP_REQUIRE_EXTENSIONS")}
    return {**env, **extra}


def test_the_list_names_modules_of_the_project() -> None:
    assert LISTED
    for name in LISTED:
        assert name.startswith(("streamkeep.engine.", "streamkeep.aof.", "streamkeep.replication.")), name


@pytest.mark.skipif(not REQUIRE or PURE_ONLY, reason="STREAMKEEP_REQUIRE_EXTENSIONS is not set")
def test_required_modules_are_compiled_and_run() -> None:
    assert sorted(compiled.compiled_modules()) == sorted(LISTED)
    done = files_in_child(clean_env(STREAMKEEP_REQUIRE_EXTENSIONS="1"))
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)
    assert all(not path.endswith(".py") for path in files.values()), files


@pytest.mark.skipif(not compiled.compiled_modules(), reason="the command path was not built")
def test_no_extensions_at_run_time_imports_the_sources() -> None:
    done = files_in_child(clean_env(STREAMKEEP_NO_EXTENSIONS="1"))
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)
    assert sorted(files) == sorted(LISTED)
    assert all(path.endswith(".py") for path in files.values()), files
    assert done.stderr == ""
    version = subprocess.run([sys.executable, "-m", "streamkeep", "--version"],
                             capture_output=True, text=True, timeout=60, cwd=ROOT.parent,
                             env=clean_env(STREAMKEEP_NO_EXTENSIONS="1"))
    assert "command path pure Python (STREAMKEEP_NO_EXTENSIONS is set)" in version.stdout


def test_an_edited_source_makes_the_build_stale(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMKEEP_NO_EXTENSIONS", raising=False)
    source = tmp_path / "x.py"
    source.write_text("A = 1\n")
    manifest = tmp_path / "pkg" / "compiled_sources.txt"
    manifest.parent.mkdir()
    manifest.write_text(f"in-place\npkg.x {compiled.source_digest(source)} ../x.py\n")
    assert compiled.Choice(manifest).why_pure == ""
    source.write_text("A = 1\n")  # touched, the same text: still the compiled one
    os.utime(source, ns=(manifest.stat().st_mtime_ns + 10**9,) * 2)
    assert compiled.Choice(manifest).why_pure == ""
    source.write_text("A = 2\n")
    os.utime(source, ns=(manifest.stat().st_mtime_ns + 10**9,) * 2)
    assert str(source) in compiled.Choice(manifest).why_pure
    assert "make kernels" in compiled.Choice(manifest).why_pure
    installed = manifest.with_name("installed.txt")  # a wheel's: no sources to compare
    installed.write_text("installed\npkg.x 0000\n")
    assert compiled.Choice(installed).why_pure == ""


def test_a_source_edited_while_the_build_ran_makes_it_stale(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The build reads the sources, compiles for a minute or more, then writes its manifest: a
    source edited in between is older than the manifest but newer than what was compiled.
    The manifest's first line says when the sources were read, and that time counts."""
    monkeypatch.delenv("STREAMKEEP_NO_EXTENSIONS", raising=False)
    source = tmp_path / "x.py"
    source.write_text("A = 1\n")
    digest = compiled.source_digest(source)
    read_at = source.stat().st_mtime_ns + 10**9  # the build read the sources
    source.write_text("A = 2\n")  # edited while it compiled
    os.utime(source, ns=(read_at + 10**9,) * 2)
    manifest = tmp_path / "pkg" / "compiled_sources.txt"
    manifest.parent.mkdir()
    manifest.write_text(f"in-place {read_at}\npkg.x {digest} ../x.py\n")
    os.utime(manifest, ns=(read_at + 2 * 10**9,) * 2)  # written when the build ended
    assert str(source) in compiled.Choice(manifest).why_pure
    manifest.write_text(f"in-place\npkg.x {digest} ../x.py\n")  # no time: the file's mtime
    os.utime(manifest, ns=(read_at + 2 * 10**9,) * 2)
    assert compiled.Choice(manifest).why_pure == ""


def _checkout_copy(tmp_path: Path) -> Path:
    """The build's inputs, copied (a build here never touches the checkout's modules)."""
    copy = tmp_path / "src"
    ignore = shutil.ignore_patterns("*.so", "*.c", "__pycache__", "*.html", compiled.MANIFEST.name)
    for folder in folders.top_folders():
        shutil.copytree(ROOT / folder, copy / folder, ignore=ignore)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    return copy


def _build(copy: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                          cwd=copy, capture_output=True, text=True, timeout=300,
                          env=clean_env(CC=str(copy / "no-such-compiler"), **env))


def test_a_build_without_a_compiler(tmp_path: Path) -> None:
    copy = _checkout_copy(tmp_path)
    required = _build(copy, STREAMKEEP_REQUIRE_EXTENSIONS="1")
    assert required.returncode != 0
    assert "no C compiler, and STREAMKEEP_REQUIRE_EXTENSIONS is set" in required.stderr
    optional = _build(copy)
    assert optional.returncode == 0, optional.stderr
    ours = [line for line in optional.stderr.splitlines() if line.startswith("streamkeep:")]
    assert ours == ["streamkeep: no C compiler found; the pure-Python code will run"]
    assert not list(copy.rglob("*.so")) and not (copy / "streamkeep" / compiled.MANIFEST.name
                                                 ).exists()


@pytest.mark.parametrize("command", ["egg_info", "dist_info"])
def test_describing_the_package_generates_no_extension(tmp_path: Path, command: str) -> None:
    """pip's first two calls of an install run setup.py for the build's requirements
    (egg_info) and the metadata (dist_info) and build nothing: they generate no extension
    (mypyc type-checking and compiling the command path cost `make run` a minute each). Seen
    by the compiler check that generating them starts with: not made; a build makes it."""
    copy = _checkout_copy(tmp_path)
    (tmp_path / "meta").mkdir()
    extra = ["--output-dir", str(tmp_path / "meta")] if command == "dist_info" else []
    described = subprocess.run([sys.executable, "setup.py", "-q", command, *extra], cwd=copy,
                               capture_output=True, text=True, timeout=300,
                               env=clean_env(CC=str(copy / "no-such-compiler")))
    assert described.returncode == 0, described.stderr
    assert "streamkeep:" not in described.stderr, described.stderr
    built = _build(copy)
    assert "streamkeep: no C compiler found" in built.stderr, built.stderr
