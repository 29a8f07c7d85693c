"""The source tree's one map: every folder that holds a package, and the layer its modules are in.

The design card's folders (`engine/`, `aof/`, `snapshot/`, `replication/`, `tools/`) install
under one namespace: a top-level folder `f` is the package `streamkeep.f` (this folder,
`streamkeep/`, is `streamkeep` itself) and a folder below it is a subpackage of the same name.
Everything that needs to know where a module's file is derives it from `FOLDERS`: setup.py
(the packages it installs and the folders they come from, the kernels Cython compiles, the
modules mypyc compiles), the type check (`.ci/typecheck.py`, which hands mypy each file with
its module name), and the tests of the layering.

A module's layer is its folder's: imports point down the `LAYERS` (tests/arch/test_layers.py),
so a reader knows from a file's path what it may import and who may import it.

Must not touch: anything but paths and names (it imports nothing of the project: setup.py
loads it before anything is built).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

# Bottom to top: a module may import its own layer and those below.
LAYERS: Final = ("wire", "model", "formats", "exec", "commands", "runtime", "services", "top")

# Every folder with an `__init__.py` that installs, and its layer. A folder missing here is
# not installed, and the layer test names it.
FOLDERS: Final = {
    "engine/wire": "wire",  # error lines, reply values, RESP, argument parsing, build switches
    "engine/model": "model",  # IDs, streams, groups, effects; the byte kernels
    "aof": "formats",  # the AOF: codec, segments, manifest, journal, recovery
    "snapshot": "formats",  # the snapshot files: layout, reader, writer, segments, RDB
    "engine/exec": "exec",  # command table, context, blocking, config, interfaces
    "engine/exec/lua": "exec",  # (data: scripting's Lua chunks)
    "engine/commands": "commands",  # the command handlers
    "engine/runtime": "runtime",  # EngineCore, the one command path, and its parts
    "engine/runtime/clients": "runtime",  # the redis-py facade's mixins, by command group
    "engine/services": "services",  # the data directory, the public Engine, the work queue
    "snapshot/services": "services",  # loading, building and compacting snapshots
    "replication": "services",  # replicas of a streamkeep or a redis-server primary
    "engine/server": "top",  # the network server
    "engine": "top",  # (its __init__: the public names, re-exported lazily)
    "streamkeep": "top",  # (the namespace's __init__ and `python -m streamkeep`)
    "tools": "top",  # the command-line tools
    "tools/bench": "top",
    "tools/bench/sections": "top",
    "tools/controller": "top",
    "tools/crashbench": "top",
    "tools/export": "top",
    "tools/inspect": "top",
    "tools/report": "top",
}

NAMESPACE: Final = "streamkeep"


def package_of(folder: str) -> str:
    """The package a folder installs as: `engine/wire` -> `streamkeep.engine.wire`."""
    parts = folder.split("/")
    return ".".join(parts) if parts[0] == NAMESPACE else ".".join([NAMESPACE, *parts])


def top_folders() -> list[str]:
    """The checkout's folders that hold the namespace's packages (setuptools' package-dir)."""
    return [folder for folder in FOLDERS if "/" not in folder]


def package_dir() -> dict[str, str]:
    """setuptools' package-dir: each top-level package and its folder."""
    return {package_of(folder): folder for folder in top_folders()}


def module_name(path: str | Path) -> str:
    """The module a source file (`.py`, `.pyi`, `.pyx`, `.pxd`; relative to the checkout) is."""
    rel = Path(path).with_suffix("")
    folder = str(rel.parent).replace("\\", "/")
    if folder not in FOLDERS:
        raise KeyError(f"{path}: its folder {folder!r} is not in streamkeep/folders.py")
    package = package_of(folder)
    return package if rel.name == "__init__" else f"{package}.{rel.name}"


def layer_of_file(path: str | Path) -> str:
    """The layer of a source file (relative to the checkout): its folder's."""
    return FOLDERS[str(Path(path).parent).replace("\\", "/")]


def source_files(root: Path, suffixes: tuple[str, ...] = (".py",)) -> dict[str, Path]:
    """Every source file with one of `suffixes` in the mapped folders, by module name (a
    module with both a `.py` and a `.pyi` is listed once per suffix asked for, the last
    suffix winning)."""
    found: dict[str, Path] = {}
    for suffix in suffixes:
        for folder in FOLDERS:
            for path in sorted((root / folder).glob(f"*{suffix}")):
                found[module_name(path.relative_to(root))] = path
    return found
