"""The file-layer seam: nothing under aof/ or snapshot/ except aof/fs.py, nor the data directory
(engine/services/datadir.py), touches files directly.

The crash-recovery tests swap the `FileSystem` (power loss, I/O errors); a direct `open(`,
`os.write`, `os.rename`, `shutil...` elsewhere would bypass them and leave durability untested.
The modules are parsed with `ast`, so aliases (`import os as o`, `from os import rename`) and
calls in any position are caught, and comments or strings are not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("aof", "snapshot")
MODULES = (Path("engine/services/datadir.py"),)  # outside those packages, on the seam too
ALLOWED = {Path("aof/fs.py")}

FORBIDDEN_OS = {
    "write", "open", "rename", "replace", "fsync", "fdatasync", "truncate", "ftruncate",
    "unlink", "remove", "listdir",
    # the same operations under other names
    "pwrite", "writev", "pwritev", "fdopen", "scandir", "rmdir", "removedirs", "makedirs",
    "mkdir", "link", "symlink", "sync", "sendfile", "copy_file_range",
}
FORBIDDEN_MODULES = {"shutil", "tempfile", "fcntl"}  # fcntl: locks go through fs.lock too
FORBIDDEN_ATTRS = {("io", "open"), ("io", "FileIO"), ("os", "walk")}


def violations(source: str, filename: str = "<source>") -> list[str]:
    """Every direct file operation in `source`, as "line: what"."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    module_alias: dict[str, str] = {}  # local name -> module it names (os, shutil, ...)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                module_alias[alias.asname or top] = top
                if top in FORBIDDEN_MODULES:
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if top in FORBIDDEN_MODULES:
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if (top == "os" and alias.name in FORBIDDEN_OS) or (top, alias.name) in (
                        FORBIDDEN_ATTRS) or (top == "builtins" and alias.name == "open"):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and (
                node.func.id == "open"):
            found.append(f"{node.lineno}: open(")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = module_alias.get(node.value.id)
            if module is None:
                continue
            if (module == "os" and node.attr in FORBIDDEN_OS) or module in FORBIDDEN_MODULES \
                    or (module, node.attr) in FORBIDDEN_ATTRS or (
                        module == "builtins" and node.attr == "open"):
                found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def modules() -> list[Path]:
    out = []
    for package in PACKAGES:
        out += sorted((ROOT / package).rglob("*.py"))
    out += [ROOT / module for module in MODULES]
    return [p for p in out if p.relative_to(ROOT) not in ALLOWED]


def test_the_seam_has_modules_to_check() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"aof/journal.py", "aof/recovery.py", "aof/manifest.py", "aof/codec.py",
            "engine/services/datadir.py"} <= names
    assert (ROOT / "aof/fs.py").exists()


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_direct_file_io_outside_fs(path: Path) -> None:
    found = violations(path.read_text(), str(path))
    assert not found, (f"{path.relative_to(ROOT)} bypasses aof.fs (use the FileSystem it is "
                       "given):\n" + "\n".join(found))


@pytest.mark.parametrize("snippet", [
    "f = open('x', 'wb')",
    "import os\nos.write(fd, b'x')",
    "import os\nos.open(p, os.O_RDONLY)",
    "import os\nos.rename(a, b)",
    "import os\nos.replace(a, b)",
    "import os\nos.fsync(fd)",
    "import os\nos.fdatasync(fd)",
    "import os\nos.truncate(p, 0)",
    "import os\nos.ftruncate(fd, 0)",
    "import os\nos.unlink(p)",
    "import os\nos.remove(p)",
    "import os\nnames = os.listdir(d)",
    "import shutil\nshutil.copy(a, b)",
    "from shutil import rmtree",
    "import os as _o\n_o.rename(a, b)",
    "from os import fsync\nfsync(fd)",
    "import os\nsync = os.fdatasync\nsync(fd)",
    "import builtins\nbuiltins.open('x')",
    "import io\nio.open('x')",
])
def test_the_linter_catches(snippet: str) -> None:
    assert violations(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "import os\np = os.path.join(a, b)",
    "import os\nmsg = os.strerror(5)",
    "# os.write(fd, data) in a comment\nx = 'open(' ",
    "fs.open_append(path)\nfs.write(fd, data)\nfs.rename(a, b)",
    "self.open = 1\nobj.open(x)",
])
def test_the_linter_allows(snippet: str) -> None:
    assert not violations(snippet), snippet
