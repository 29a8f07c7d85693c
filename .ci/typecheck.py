"""mypy over the whole source tree, each file under the module name the folder map gives it.

The design card's folders install as `streamkeep.engine`, `streamkeep.aof`, ... while on disk
they are `engine/`, `aof/`, ...; mypy's command line names a module after the folders above its
file, so it is handed each file with its module name instead (mypy's BuildSource), read from
streamkeep/folders.py: the files type-checked are the files in the checkout, where they are.
Settings come from pyproject.toml's [tool.mypy]. Exit status 1 when mypy reports an error.

    python .ci/typecheck.py          (what `make lint` runs, from the checkout's root)
"""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.fscache import FileSystemCache
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "streamkeep"))
import folders  # noqa: E402  (the map alone: importing the package would load its code)


def main() -> int:
    sources = [BuildSource(str(path.relative_to(ROOT)), name)
               for name, path in folders.source_files(ROOT, (".py", ".pyi")).items()]
    fscache = FileSystemCache()
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), "-c", "pass"],
                                 fscache=fscache)
    try:
        messages = build.build(sources, options, fscache=fscache).errors
    except CompileError as err:
        messages = err.messages
    for line in messages:
        print(line)
    files = len({s.path for s in sources})
    if any(": error:" in line for line in messages):
        print(f"mypy: errors in the {files} source files checked", file=sys.stderr)
        return 1
    print(f"Success: no issues found in {files} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
