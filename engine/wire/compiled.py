"""Which build of the command path runs: the modules mypyc compiled, or their own .py sources.

setup.py compiles the command path's modules (its `COMPILED` list) with mypyc from the same .py
files that run without a compiler; each compiled module is an extension module beside its
source, and Python's importer prefers the extension. The build writes a manifest beside this
file (`compiled_sources.txt`: the build's kind (for a build in place, with the time it read the
sources), then one line per compiled module: its name, the SHA-1 of the source it was compiled
from and, for a build in place, that source's path). This module, installed by the package's
__init__ before any other streamkeep module loads, decides once per process which of the two
runs:

- `STREAMKEEP_NO_EXTENSIONS=1`: every compiled module is imported from its .py source (a
  meta-path finder hands it to the source loader), so the whole package runs as Python even
  where compiled modules are installed.
- A build in place (`make dev`, `make kernels`) whose sources changed since (a .py edited, a
  branch merged): the compiled modules are old code, so none of them runs (they share one
  library; a mix of old compiled code and new source is not a program), one line on stderr
  says so; under `STREAMKEEP_REQUIRE_EXTENSIONS=1` the import fails instead.
- Otherwise the compiled modules run.

Must not touch: anything but the import system's choice of loader for the compiled modules
(it imports no streamkeep module: it runs before them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import ExtensionFileLoader, ModuleSpec, PathFinder, SourceFileLoader
from pathlib import Path
from types import ModuleType
from typing import Final

__all__ = ["MANIFEST", "Choice", "compiled_modules", "install", "reason_pure", "running"]

MANIFEST: Final = Path(__file__).with_name("compiled_sources.txt")
_NO_EXTENSIONS: Final = "STREAMKEEP_NO_EXTENSIONS"
_REQUIRE: Final = "STREAMKEEP_REQUIRE_EXTENSIONS"
IN_PLACE: Final = "in-place"  # the manifest's first line for a build beside the sources


def _switch(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "no", "false")


def source_digest(path: Path) -> str:
    """The SHA-1 of a source file, as the manifest records it."""
    import hashlib  # (only for a source newer than the build: every import pays nothing)

    return hashlib.sha1(path.read_bytes()).hexdigest()


def _read_manifest(manifest: Path) -> tuple[str, int | None, dict[str, tuple[str, str]]]:
    """(the build's kind, when it read the sources (ns, None if not recorded), module ->
    (source digest, source path relative to the manifest))."""
    try:
        lines = manifest.read_text().splitlines()
    except OSError:
        return "", None, {}
    if not lines:
        return "", None, {}
    kind, _, taken = lines[0].strip().partition(" ")
    digests = {}
    for line in lines[1:]:
        module, digest, source = (line.split(" ", 2) + ["", ""])[:3]
        if module:
            digests[module] = (digest, source)
    return kind, int(taken) if taken.isdigit() else None, digests


class Choice:
    """The process's decision, made when the package is first imported, from the manifest."""

    def __init__(self, manifest: Path = MANIFEST) -> None:
        self.manifest = manifest
        self.kind, self.read_at, self.digests = _read_manifest(manifest)
        self.why_pure = ""
        if _switch(_NO_EXTENSIONS):
            self.why_pure = f"{_NO_EXTENSIONS} is set"
        elif self.kind == IN_PLACE:
            stale = self._stale()
            if stale:
                self.why_pure = (f"{stale} changed since it was compiled; `make kernels` "
                                 "compiles it again")

    def _stale(self) -> str:
        """The first compiled source whose text differs from the one compiled (its mtime is
        checked first, its hash only when newer than the time the build read the sources: a
        source edited while the build ran is older than the manifest written after it)."""
        built = self.read_at if self.read_at is not None else self.manifest.stat().st_mtime_ns
        for digest, source in self.digests.values():
            path = self.manifest.parent / source
            try:
                if path.stat().st_mtime_ns > built and source_digest(path) != digest:
                    return os.path.normpath(path)
            except OSError:
                return os.path.normpath(path)
        return ""


class _Finder:
    """A meta-path finder for the compiled modules only: the source loader when the pure build
    is asked for (or the compiled one is stale), else the normal search."""

    def __init__(self, choice: Choice) -> None:
        self.choice = choice
        self.warned = False

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in self.choice.digests:
            return None
        why = self.choice.why_pure
        if not why:
            return None  # the normal search finds the compiled module first
        if _switch(_REQUIRE) and not _switch(_NO_EXTENSIONS):
            raise ImportError(f"{fullname}: the compiled module does not run ({why}) while "
                              f"{_REQUIRE} is set")
        if not self.warned and not _switch(_NO_EXTENSIONS):
            self.warned = True
            print(f"streamkeep: {why}; the pure-Python command path runs", file=sys.stderr)
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.origin is None or spec.origin.endswith(".py"):
            return spec
        source = Path(spec.origin).parent / f"{fullname.rpartition('.')[2]}.py"
        if not source.exists():
            return spec
        from importlib.util import spec_from_file_location

        return spec_from_file_location(fullname, source,
                                       loader=SourceFileLoader(fullname, str(source)))


_FINDER: _Finder | None = None


def install() -> None:
    """Put the finder first on sys.meta_path (once; the package's __init__ calls it). Without
    a manifest nothing was compiled and nothing is installed."""
    global _FINDER
    if _FINDER is not None:
        return
    choice = Choice()
    if not choice.digests:
        return
    _FINDER = _Finder(choice)
    sys.meta_path.insert(0, _FINDER)


def compiled_modules() -> tuple[str, ...]:
    """The modules the build compiled (none for a pure install)."""
    return tuple(_FINDER.choice.digests) if _FINDER is not None else ()


def reason_pure() -> str:
    """Why the compiled modules do not run ("" when they do, or when none were built)."""
    return _FINDER.choice.why_pure if _FINDER is not None else ""


def running(module: ModuleType) -> bool:
    """True when `module` was loaded from its compiled extension."""
    return isinstance(getattr(module, "__loader__", None), ExtensionFileLoader)
