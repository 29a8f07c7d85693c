"""Which implementation of every compiled kernel, and which build of the command path, runs:
the report behind INFO server's `streamkeep_native` and `streamkeep_command_path` and
`streamkeep --version`.

Owns the list of kernel facades (every `_x_c.pyx` has one; tests/arch/test_extensions.py
checks that the report names them all) and imports them, so the report covers kernels that
this process has not used yet: the value types' own kernels come with the registry
(engine.model.value_types imports every type's model, and each model its kernels), the others
are named here. The switches and the record live in engine.wire.kernel_switches.

Must not touch: anything but the report.
"""

from __future__ import annotations

import sys

from streamkeep.aof import codec
from streamkeep.engine.exec import lua_host
from streamkeep.engine.model import (
    dict_sample,
    heap,
    ids,
    keyslot,
    lcs,
    listpack,
    packed_columns,
    packed_node,
    pel_claim,
    pel_search,
    value_types,  # noqa: F401  (every type's model and kernels)
)
from streamkeep.engine.wire import argv, compiled, kernel_switches, reply_encoder, request_parser
from streamkeep.snapshot import rdb

# The kernel facades no value type's model imports (importing one is what registers it).
FACADES = (request_parser, reply_encoder, argv, ids, listpack, packed_node, pel_search, pel_claim,
           lcs, keyslot, packed_columns, codec, rdb, lua_host, heap, dict_sample)


def kernels() -> dict[str, str]:
    """Facade name -> "compiled" or "pure", for every kernel (every facade imported records
    itself in engine.wire.kernel_switches)."""
    return dict(kernel_switches.kernels())


def native() -> bool:
    """True when every kernel runs compiled."""
    return all(kind == "compiled" for kind in kernels().values())


def command_path() -> dict[str, str]:
    """Each module the build compiled with mypyc -> "compiled" or "pure" (what an import of
    it gives: a module not imported yet is reported as it would load). Empty for a build
    that compiled none."""
    report = {}
    for name in compiled.compiled_modules():
        module = sys.modules.get(name)
        if module is not None:
            report[name] = "compiled" if compiled.running(module) else "pure"
        else:
            report[name] = "pure" if compiled.reason_pure() else "compiled"
    return report


def _layer(module: str) -> str:
    """The folder a module sits in below its package (exec, commands, runtime, aof...)."""
    parts = module.split(".")
    return parts[2] if parts[1] == "engine" and len(parts) > 3 else parts[1]


def command_path_layers() -> dict[str, int]:
    """The compiled modules that run, counted per layer (exec, commands, runtime...)."""
    by_layer: dict[str, int] = {}
    for name, kind in command_path().items():
        if kind == "compiled":
            by_layer[_layer(name)] = by_layer.get(_layer(name), 0) + 1
    return dict(sorted(by_layer.items()))


def command_path_summary() -> str:
    """"compiled (commands 3, exec 2, model 1, runtime 2)": the compiled modules per layer;
    "pure Python" and why when they do not run; "pure Python (not built)" without them."""
    report = command_path()
    by_layer = command_path_layers()
    if not by_layer:
        return f"pure Python ({compiled.reason_pure() or 'not built'})"
    layers = ", ".join(f"{layer} {n}" for layer, n in by_layer.items())
    pure = sorted(name for name, kind in report.items() if kind == "pure")
    return f"compiled ({layers})" + (f", pure: {', '.join(pure)}" if pure else "")


def summary() -> str:
    """One line: the kernels' report, then the command path's."""
    return f"{kernels_summary()}; command path {command_path_summary()}"


def kernels_summary() -> str:
    """"compiled core (4 kernels)", or which kernels run as pure Python and why."""
    report = kernels()
    pure = sorted(name.rpartition(".")[2] for name, kind in report.items() if kind == "pure")
    if not pure:
        return f"compiled core ({len(report)} kernel{'' if len(report) == 1 else 's'})"
    why = (f"{kernel_switches.NO_EXTENSIONS_VAR} is set" if not kernel_switches.compiled_wanted()
           else "not built")
    if len(pure) == len(report):
        return f"pure Python ({why})"
    return f"compiled core, but pure Python for {', '.join(pure)} ({why})"
