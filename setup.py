"""The compiled core's build: every `_*_c.pyx` kernel beside its pure-Python twin, compiled
with Cython (a build requirement, from PyPI) and gcc. The rest of the package is declared in
pyproject.toml.

- STREAMKEEP_NO_EXTENSIONS=1: nothing is compiled; the install runs the pure-Python code.
- STREAMKEEP_REQUIRE_EXTENSIONS=1: a kernel that fails to compile fails the install (CI).
- Otherwise each extension is optional: with no compiler (or no Cython in a build without
  isolation) the install still succeeds and the pure-Python twins run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
# The design card's folders and the packages they install as (pyproject's package-dir).
FOLDERS = {"engine": "streamkeep.engine", "aof": "streamkeep.aof",
           "snapshot": "streamkeep.snapshot", "replication": "streamkeep.replication"}
DIRECTIVES = {"language_level": "3", "embedsignature": False}


def _switch(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "no", "false")


NO_EXTENSIONS = _switch("STREAMKEEP_NO_EXTENSIONS")
REQUIRE = _switch("STREAMKEEP_REQUIRE_EXTENSIONS") and not NO_EXTENSIONS


def kernel_sources() -> dict[str, str]:
    """Module name -> .pyx path (relative, as setuptools wants) for every compiled kernel."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("_*_c.pyx")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            found[".".join([package, *rel.parts])] = str(path.relative_to(ROOT))
    return found


class OptionalBuildExt(build_ext):
    """build_ext that reports a kernel it could not compile and goes on (unless required)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any toolchain failure means "pure Python"
            if REQUIRE:
                raise
            print(f"streamkeep: the compiled core was not built ({exc}); "
                  "the pure-Python code will run", file=sys.stderr)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            if REQUIRE:
                raise
            print(f"streamkeep: {ext.name} was not compiled ({exc}); "
                  "its pure-Python twin will run", file=sys.stderr)


def extensions() -> list:
    if NO_EXTENSIONS:
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:
        if REQUIRE:
            raise
        print("streamkeep: Cython is not installed; the pure-Python code will run",
              file=sys.stderr)
        return []
    modules = [Extension(name, [source], optional=not REQUIRE,
                         extra_compile_args=["-O2"])
               for name, source in kernel_sources().items()]
    try:
        return cythonize(modules, compiler_directives=DIRECTIVES, quiet=True)
    except Exception as exc:  # a Cython error: the same as a missing compiler
        if REQUIRE:
            raise
        print(f"streamkeep: the compiled core could not be generated ({exc}); "
              "the pure-Python code will run", file=sys.stderr)
        return []


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
