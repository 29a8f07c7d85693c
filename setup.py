"""The compiled core's build, two parts, both compiled by gcc. The rest of the package is
declared in pyproject.toml.

- The byte kernels: every `_*_c.pyx` beside its pure-Python twin, compiled with Cython.
- The command path: the modules named in COMPILED, compiled with mypyc from their own .py
  files (mypy, pinned in pyproject's build requirements, is the compiler). They form one
  shared library (`streamkeep/command_path__mypyc`) and one small extension module beside each
  source; the build writes a manifest (engine/wire/compiled.py reads it at import time, so
  STREAMKEEP_NO_EXTENSIONS=1 runs the .py sources even where the compiled modules are
  installed, and a source edited after a build in place is noticed). The group is built or
  left out as a whole.

- STREAMKEEP_NO_EXTENSIONS=1: nothing is compiled; the install runs the pure-Python code.
- STREAMKEEP_REQUIRE_EXTENSIONS=1: a kernel or module that fails to compile fails the install
  (CI).
- Otherwise each part is optional: with no compiler (or no Cython or mypy in a build without
  isolation) the install still succeeds, says so in one line on stderr, and the pure-Python
  code runs.
- STREAMKEEP_MYPYC_OPT: mypyc's C optimisation level (default 2).
- The C files compile in parallel, one gcc per core (`build_ext -j N` says how many): the
  kernels beside the command path, whose C is one file per module (mypyc's multi_file).
- The commands that only describe the package (egg_info, dist_info: pip's first two calls of
  an install) generate no extension; only a build does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def _load_folders():  # type: ignore[no-untyped-def]
    """streamkeep/folders.py, the source tree's one map, read before anything is built (the
    package itself cannot be imported yet)."""
    spec = importlib.util.spec_from_file_location("streamkeep_folders", ROOT / "streamkeep" / "folders.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


folders = _load_folders()
DIRECTIVES = {"language_level": "3", "embedsignature": False}

# The command path compiled by mypyc: source files relative to the checkout. A module here must
# not rely on what a native class cannot do (assigning __class__, attributes added at run time,
# weak references) and its annotations must hold at run time (mypyc checks them).
COMPILED = [
    "engine/wire/args.py",
    "engine/wire/argspec.py",
    "engine/model/consumer_groups.py",
    "engine/model/idmp_maps.py",
    "engine/model/effects.py",
    "engine/model/pel_store.py",
    "engine/model/residency.py",
    "engine/model/stream.py",
    "engine/model/scores.py",
    "engine/model/zset.py",
    "engine/model/bucket_table.py",
    "engine/model/hashes.py",
    "engine/model/sets.py",
    "engine/model/lists.py",
    "engine/exec/blocking.py",
    "engine/exec/context.py",
    "engine/exec/keys.py",
    "engine/exec/engine_state.py",
    "engine/exec/transactions.py",
    "engine/exec/latency.py",
    "engine/exec/notify.py",
    "engine/exec/slowlog.py",
    "engine/exec/stats.py",
    "engine/exec/table.py",
    "engine/exec/pubsub.py",
    "engine/exec/scripting.py",
    "engine/exec/cluster.py",
    "engine/exec/eviction.py",
    "engine/commands/expiry.py",
    "engine/commands/groups.py",
    "engine/commands/idmp.py",
    "engine/commands/keyspace.py",
    "engine/commands/read.py",
    "engine/commands/streams.py",
    "engine/commands/strings.py",
    "engine/commands/trimming.py",
    "engine/commands/zsets.py",
    "engine/commands/hashes.py",
    "engine/commands/sets.py",
    "engine/commands/lists.py",
    "engine/commands/zset_ranges.py",
    "engine/commands/zset_algebra.py",
    "engine/commands/functions.py",
    "engine/exec/functions.py",
    "engine/runtime/core.py",
    "engine/runtime/dispatch.py",
    "engine/runtime/records.py",
    "engine/runtime/monitoring.py",
    "engine/runtime/batches.py",
    "engine/runtime/expiry_cycle.py",
    "engine/runtime/evictions.py",
    "engine/runtime/refusals.py",
    "engine/runtime/replay.py",
    "engine/runtime/waiting.py",
    "engine/runtime/async_steps.py",
    "engine/runtime/acl_fast.py",
    "engine/services/engine.py",
    "engine/services/queue.py",
    "engine/server/network.py",
    "aof/journal.py",
    "replication/redis_commands.py",
]
# The shared library of the compiled modules (a module name inside the namespace).
GROUP = "streamkeep.command_path"
# Beside the module that reads it (engine/wire/compiled.py), installed or in place.
MANIFEST_MODULE = "engine/wire/compiled.py"
MANIFEST = ROOT / MANIFEST_MODULE.rpartition("/")[0] / "compiled_sources.txt"
DIGESTS: dict[str, str] = {}  # source -> SHA-1 of the text mypyc compiled
READ_AT = [0]  # when the digests were taken (ns): a source newer than that is checked


def _switch(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "no", "false")


NO_EXTENSIONS = _switch("STREAMKEEP_NO_EXTENSIONS")
REQUIRE = _switch("STREAMKEEP_REQUIRE_EXTENSIONS") and not NO_EXTENSIONS


def kernel_sources() -> dict[str, str]:
    """Module name -> .pyx path (relative, as setuptools wants) for every compiled kernel."""
    return {name: str(path.relative_to(ROOT))
            for name, path in folders.source_files(ROOT, (".pyx",)).items()
            if path.name.startswith("_") and path.stem.endswith("_c")}


# Kernels that link a system library: module -> (its pkg-config name, its header, the folders
# to look for that header in without pkg-config, the library's name, the Debian package with
# the headers).
SYSTEM_LIBRARIES = {
    "streamkeep.engine.exec._lua_host_c": (
        "lua5.1", "lua.h", ["/usr/include/lua5.1", "/usr/local/include/lua5.1"], "lua5.1",
        "liblua5.1-0-dev"),
}


def system_library(module: str) -> dict[str, list[str]] | None:
    """The compile and link options of a kernel's system library ({} for a kernel without
    one), or None when its headers are missing: that kernel is left out (its pure twin runs),
    an error under STREAMKEEP_REQUIRE_EXTENSIONS."""
    if module not in SYSTEM_LIBRARIES:
        return {}
    pkg, header, folders_, library, package = SYSTEM_LIBRARIES[module]
    try:
        cflags = subprocess.run(["pkg-config", "--cflags-only-I", pkg], capture_output=True,
                                text=True, check=True).stdout.split()
        return {"include_dirs": [flag[2:] for flag in cflags if flag.startswith("-I")],
                "libraries": [library]}
    except (OSError, subprocess.CalledProcessError):
        pass
    for folder in folders_:
        if (Path(folder) / header).exists():
            return {"include_dirs": [folder], "libraries": [library]}
    missing = f"streamkeep: {module} needs the headers of {pkg} (Debian: {package})"
    if REQUIRE:
        raise SystemExit(f"{missing}, and STREAMKEEP_REQUIRE_EXTENSIONS is set")
    print(f"{missing}; its pure-Python twin will run", file=sys.stderr)
    return None


def module_name(source: str) -> str:
    return folders.module_name(source)


def _is_mypyc(ext) -> bool:  # type: ignore[no-untyped-def]
    return ext.name == GROUP + "__mypyc" or ext.name in {module_name(s) for s in COMPILED}


class OptionalBuildExt(build_ext):
    """build_ext that reports a kernel it could not compile and goes on (unless required),
    builds the mypyc group as a whole and writes its manifest."""

    group_built = False

    def run(self) -> None:
        inplace = self.inplace  # (setuptools builds in build/ and copies when in place)
        group = any(_is_mypyc(ext) for ext in self.extensions)
        if group:
            if inplace:
                _remove_dropped_modules()
            self._write_manifest(inplace, built=False)  # nothing compiled runs while rebuilt
        try:
            super().run()
        except Exception as exc:  # any toolchain failure means "pure Python"
            if REQUIRE:
                raise
            print(f"streamkeep: the compiled core was not built ({exc}); "
                  "the pure-Python code will run", file=sys.stderr)
        if group:
            self._write_manifest(inplace, built=self.group_built)

    def build_extensions(self) -> None:
        """Every C file compiled by one of `jobs` gcc processes at a time: the extensions are
        built side by side, and an extension's own files in parallel too (the command path's
        library is most of the build's C)."""
        jobs = self.parallel if isinstance(self.parallel, int) and self.parallel > 0 else (
            len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
        _compile_in_parallel(self.compiler, jobs or 1)
        mypyc = [ext for ext in self.extensions if _is_mypyc(ext)]
        kernels = [ext for ext in self.extensions if not _is_mypyc(ext)]
        with ThreadPoolExecutor(max_workers=len(kernels) + 1) as pool:
            done = [pool.submit(self.build_extension, ext) for ext in kernels]
            if mypyc:
                done.append(pool.submit(self._build_group, mypyc))
            for future in done:
                future.result()

    def _build_group(self, group: list) -> None:
        """The shared library first, then the modules; one failure leaves them all out (a
        module without its library, or the library's module without its extension, would
        mix old and new code)."""
        built = []
        try:
            for ext in group:
                build_ext.build_extension(self, ext)
                built.append(self.get_ext_fullpath(ext.name))
        except Exception as exc:
            for path in built:
                Path(path).unlink(missing_ok=True)
            if REQUIRE:
                raise
            print(f"streamkeep: the command path was not compiled ({exc}); "
                  "its pure-Python modules will run", file=sys.stderr)
            return
        self.group_built = True

    def _write_manifest(self, inplace: bool, built: bool) -> None:
        """engine/wire/compiled_sources.txt beside the module that reads it: the
        build's kind, then `module sha1 source` per module (engine/wire/compiled.py); none
        when the group was not built."""
        package = module_name(MANIFEST_MODULE).rpartition(".")[0].split(".")
        target = MANIFEST if inplace else Path(self.build_lib, *package, MANIFEST.name)
        if not built or not DIGESTS:
            target.unlink(missing_ok=True)
            return
        lines = [f"in-place {READ_AT[0]}" if inplace else "installed"]
        for source in COMPILED:
            where = os.path.relpath(ROOT / source, MANIFEST.parent) if inplace else ""
            lines.append(f"{module_name(source)} {DIGESTS[source]} {where}".rstrip())
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n")

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            if REQUIRE:
                raise
            print(f"streamkeep: {ext.name} was not compiled ({exc}); "
                  "its pure-Python twin will run", file=sys.stderr)


def _compile_in_parallel(compiler, jobs: int) -> None:  # type: ignore[no-untyped-def]
    """Make `compiler.compile` compile its sources on threads, each file a gcc of its own,
    at most `jobs` of them at once across every thread of the build."""
    compile_one = compiler._compile
    compile_all = compiler.compile
    slots = threading.BoundedSemaphore(jobs)

    def bounded(*args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        with slots:
            compile_one(*args, **kwargs)

    def compile_sources(sources, *args, **kwargs) -> list:  # type: ignore[no-untyped-def]
        if len(sources) < 2:
            return compile_all(sources, *args, **kwargs)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            objects = pool.map(lambda source: compile_all([source], *args, **kwargs), sources)
            return [obj for each in objects for obj in each]

    compiler._compile = bounded
    compiler.compile = compile_sources


def _remove_dropped_modules() -> None:
    """A module the last build in place compiled and COMPILED no longer names: its extension
    beside the source would load (and fail, its code gone from the new library)."""
    try:
        lines = MANIFEST.read_text().splitlines()[1:]
    except OSError:
        return
    current = {module_name(source) for source in COMPILED}
    for line in lines:
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] not in current:
            source = (MANIFEST.parent / parts[2]).resolve()
            for built in source.parent.glob(f"{source.stem}.*.so"):
                built.unlink()


def _typed_sources() -> dict[str, Path]:
    """What mypyc type-checks: every module but the tools and `python -m streamkeep` (the
    imports of the compiled ones reach the rest), each file under the module name the folder
    map gives it, the kernels by their stubs."""
    return {name: path for name, path in folders.source_files(ROOT, (".py", ".pyi")).items()
            if not name.startswith(("streamkeep.tools", "streamkeep.__main__"))}


def command_path() -> list:
    """The mypyc extensions (empty, with one line on stderr, when mypy is missing or the
    sources do not compile).

    mypyc's own entry point (mypycify) names a module after the folders above its file, which
    here would make engine/x.py the module `engine.x`; so this runs mypycify's steps itself
    with each file given its module name from the folder map (mypy's BuildSource), on the
    files where they are. mypy is pinned (pyproject's build requirements): these steps are
    that version's."""
    try:
        from mypy.build import BuildSource
        from mypy.fscache import FileSystemCache
        from mypy.main import process_options
        from mypyc import build as mypyc_build
        from mypyc.common import RUNTIME_C_FILES
        from mypyc.options import CompilerOptions
    except ImportError:
        if REQUIRE:
            raise
        print("streamkeep: mypy is not installed; the command path runs as pure Python",
              file=sys.stderr)
        return []
    # The sources' digests as compiled (an edit during the build is then a stale build).
    READ_AT[0] = time.time_ns()
    DIGESTS.update({source: hashlib.sha1((ROOT / source).read_bytes()).hexdigest()
                    for source in COMPILED})
    target_dir = ROOT / "build" / "mypyc"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        compiled = {module_name(source) for source in COMPILED}
        every = [BuildSource(str(path.relative_to(ROOT)), name)
                 for name, path in _typed_sources().items()]
        mypyc_sources = [source for source in every if source.module in compiled]
        fscache = FileSystemCache()
        _, options = process_options(
            ["--config-file", str(ROOT / "pyproject.toml"), "--no-warn-unused-configs",
             "-c", "pass"], fscache=fscache, mypyc=True)
        # (what mypycify's configuration step sets for a build in one group)
        options.python_version = sys.version_info[:2]
        options.show_traceback = True
        options.export_types = True
        options.incremental = False
        options.preserve_asts = True
        for source in mypyc_sources:
            options.per_module_options.setdefault(source.module, {})["mypyc"] = True
        compiler_options = CompilerOptions(multi_file=True,  # one C file per module: in parallel
                                           target_dir=str(target_dir), group_name=GROUP)
        groups = mypyc_build.construct_groups(mypyc_sources, False, True, GROUP)
        group_cfiles, _ops, source_deps = mypyc_build.generate_c(
            every, options, groups, fscache, compiler_options=compiler_options)
    except (Exception, SystemExit) as exc:  # mypyc reports its errors and exits
        if REQUIRE:
            print("streamkeep: the command path could not be compiled (mypyc's messages "
                  "above) and STREAMKEEP_REQUIRE_EXTENSIONS is set", file=sys.stderr)
            raise
        print(f"streamkeep: the command path could not be compiled ({exc!r}); "
              "its pure-Python modules will run", file=sys.stderr)
        return []
    finally:
        os.chdir(cwd)
    (group_sources, _name), = groups
    cfiles = []
    for cfile, text in group_cfiles[0]:
        path = target_dir / cfile
        if text:
            mypyc_build.write_file(str(path), text)
        if path.suffix == ".c":
            cfiles.append(str(path))
    # mypyc's runtime library, compiled into the group's shared library.
    include_dirs = set()
    runtime = list(RUNTIME_C_FILES)
    for dep in source_deps:
        runtime += [dep.path, dep.get_header()]
        include_dirs.update(dep.include_dirs)
    for name in runtime:
        text = (Path(mypyc_build.include_dir()) / name).read_text(encoding="utf-8")
        mypyc_build.write_file(str(target_dir / name), text)
        if name.endswith(".c"):
            cfiles.append(str(target_dir / name))
    mypyc_build.setup_mypycify_vars()
    cflags = mypyc_build.get_cflags(opt_level=os.environ.get("STREAMKEEP_MYPYC_OPT", "2"),
                                    multi_file=True)
    headers = sorted(str(path) for path in target_dir.rglob("*.h"))
    built = mypyc_build.build_using_shared_lib(
        group_sources, GROUP, cfiles, headers, str(target_dir), cflags,
        [str(Path(mypyc_build.include_dir()) / d) for d in sorted(include_dirs)])
    # mypyc writes a dotted group's header under its package folder and the modules' C files
    # (multi_file) above it, including the header by its bare name.
    header_dir = str(target_dir / Path(*GROUP.split(".")[:-1]))
    for ext in built:
        ext.include_dirs.append(header_dir)
    return built


def have_compiler() -> bool:
    """Whether the C compiler the build would run exists (the CC variable, else Python's)."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    command = getattr(compiler, "compiler_so", None) or ["cc"]
    return shutil.which(command[0]) is not None


def extensions() -> list:
    if NO_EXTENSIONS:
        return []
    if not have_compiler():  # one line, not one per module
        if REQUIRE:
            raise SystemExit("streamkeep: no C compiler, and STREAMKEEP_REQUIRE_EXTENSIONS "
                             "is set")
        print("streamkeep: no C compiler found; the pure-Python code will run",
              file=sys.stderr)
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
    modules = []
    for name, source in kernel_sources().items():
        linked = system_library(name)
        if linked is None:
            continue
        modules.append(Extension(name, [source], optional=not REQUIRE,
                                 extra_compile_args=["-O2"], **linked))
    try:
        kernels = cythonize(modules, compiler_directives=DIRECTIVES, quiet=True)
    except Exception as exc:  # a Cython error: the same as a missing compiler
        if REQUIRE:
            raise
        print(f"streamkeep: the compiled core could not be generated ({exc}); "
              "the pure-Python code will run", file=sys.stderr)
        kernels = []
    return [*kernels, *command_path()]


# pip runs this file three times for one install: for the build's requirements (egg_info), for
# the metadata (dist_info), and for the build itself. The first two build nothing: generating the
# extensions for them (Cython, and mypyc type-checking and compiling the command path to C) cost
# `make run` two extra minutes. A word naming any other command (or a path that looks like one)
# means a build, which generates them.
DESCRIBING = ("egg_info", "dist_info")
BUILDING = ("build", "bdist", "install", "develop", "editable", "sdist")


def describing_only(argv: list[str]) -> bool:
    """Whether the setup commands in `argv` (this file's arguments) only describe the package."""
    words = [a for a in argv if not a.startswith("-")]
    return bool(words) and words[0] in DESCRIBING and not any(
        w.startswith(BUILDING) for w in words)


# The packages and their folders come from the folder map (pyproject.toml names neither).
setup(packages=[folders.package_of(folder) for folder in folders.FOLDERS],
      package_dir=folders.package_dir(),
      ext_modules=[] if describing_only(sys.argv[1:]) else extensions(),
      cmdclass={"build_ext": OptionalBuildExt})
