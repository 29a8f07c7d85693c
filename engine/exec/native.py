"""Which implementation of every compiled kernel runs: the report behind INFO server's
`streamkeep_native` and `streamkeep --version`.

Owns the list of kernel facades (every `_x_c.pyx` has one; tests/arch/test_extensions.py
checks that this list names them all) and imports them, so the report covers kernels that
this process has not used yet. The switches and the record live in engine.wire.extensions.

Must not touch: anything but the report.
"""

from __future__ import annotations

from streamkeep.aof import codec
from streamkeep.engine.exec import call_timing
from streamkeep.engine.model import ids, lcs, listpack, packed_node, pel_claim, pel_search
from streamkeep.engine.wire import argv, extensions, reply_encoder, request_parser
from streamkeep.snapshot import rdb

# Every kernel facade (importing one is what registers it).
FACADES = (request_parser, reply_encoder, argv, ids, listpack, packed_node, pel_search, pel_claim,
           lcs, codec, rdb, call_timing)


def kernels() -> dict[str, str]:
    """Facade name -> "compiled" or "pure", for every kernel."""
    return {name: kind for name, kind in extensions.kernels().items()
            if name in {facade.__name__ for facade in FACADES}}


def native() -> bool:
    """True when every kernel runs compiled."""
    return all(kind == "compiled" for kind in kernels().values())


def summary() -> str:
    """One line: "compiled core (4 kernels)", or which kernels run as pure Python and why."""
    report = kernels()
    pure = sorted(name.rpartition(".")[2] for name, kind in report.items() if kind == "pure")
    if not pure:
        return f"compiled core ({len(report)} kernel{'' if len(report) == 1 else 's'})"
    why = (f"{extensions.NO_EXTENSIONS_VAR} is set" if not extensions.compiled_wanted()
           else "not built")
    if len(pure) == len(report):
        return f"pure Python ({why})"
    return f"compiled core, but pure Python for {', '.join(pure)} ({why})"
