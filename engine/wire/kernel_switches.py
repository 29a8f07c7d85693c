"""Which implementation of each compiled kernel runs: the Cython module or its pure-Python twin.

Owns: the two switches read at import time (and by setup.py at build time, under the same
names), and the record of what each kernel facade loaded:

- `STREAMKEEP_NO_EXTENSIONS=1`: every facade takes the pure-Python module.
- `STREAMKEEP_REQUIRE_EXTENSIONS=1`: a compiled module that does not import is an error
  (`make test` and CI set it), so a broken build can never hide behind the fallback.

A kernel is a pair of modules beside its facade, in the facade's own layer: `_x_c.pyx`
(compiled) and `_x_py.py` (the readable reference, tested against it) behind `x.py`. The
facade calls `want_compiled()` and imports the compiled twin in one `try`; its `except
ImportError` branch calls `missing()` (an error under STREAMKEEP_REQUIRE_EXTENSIONS) and
imports the pure twin, its `else` branch calls `loaded()`. `kernels()` tells what ran
(`streamkeep --version`, INFO server).

Must not touch: anything but the environment and this record (it sits at the bottom layer so
that every layer's facades can use it).
"""

from __future__ import annotations

import os
from typing import Final

from streamkeep.engine.wire.errors import StreamkeepError

__all__ = ["NO_EXTENSIONS_VAR", "REQUIRE_EXTENSIONS_VAR", "ExtensionMissing", "NotWanted",
           "compiled_wanted", "kernels", "loaded", "missing", "native", "want_compiled"]

NO_EXTENSIONS_VAR: Final = "STREAMKEEP_NO_EXTENSIONS"
REQUIRE_EXTENSIONS_VAR: Final = "STREAMKEEP_REQUIRE_EXTENSIONS"

# facade module name -> "compiled" | "pure"
_KERNELS: dict[str, str] = {}


class ExtensionMissing(StreamkeepError, ImportError):
    """A compiled kernel did not import while STREAMKEEP_REQUIRE_EXTENSIONS was set (an
    ImportError too: the import that needed it failed)."""


def _switch(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "no", "false")


def compiled_wanted() -> bool:
    """False when STREAMKEEP_NO_EXTENSIONS asks for the pure-Python code."""
    return not _switch(NO_EXTENSIONS_VAR)


class NotWanted(StreamkeepError, ImportError):
    """STREAMKEEP_NO_EXTENSIONS is set: the facade takes its pure-Python module."""


def want_compiled() -> None:
    """A facade's first step: raise NotWanted (an ImportError, so the facade's one `except
    ImportError` branch imports the pure module) when the pure-Python code is asked for."""
    if not compiled_wanted():
        raise NotWanted(f"{NO_EXTENSIONS_VAR} is set")


def loaded(facade: str, compiled: bool) -> None:
    """Record which implementation the facade `facade` (its `__name__`) took."""
    _KERNELS[facade] = "compiled" if compiled else "pure"


def missing(facade: str, error: ImportError) -> None:
    """The compiled twin of `facade` did not import: raise under STREAMKEEP_REQUIRE_EXTENSIONS,
    else record that the pure module runs (the caller imports it next)."""
    if _switch(REQUIRE_EXTENSIONS_VAR) and compiled_wanted():
        raise ExtensionMissing(
            f"{facade}: its compiled kernel did not import ({error}) while "
            f"{REQUIRE_EXTENSIONS_VAR} is set; build it with `pip install -e .` (gcc and the "
            f"Python headers are needed) or unset the variable to run the pure-Python code"
        ) from error
    loaded(facade, False)


def kernels() -> dict[str, str]:
    """The facades imported so far and the implementation each runs ("compiled" or "pure")."""
    return dict(sorted(_KERNELS.items()))


def native() -> bool:
    """True when at least one kernel was imported and every imported kernel is compiled."""
    return bool(_KERNELS) and all(kind == "compiled" for kind in _KERNELS.values())
