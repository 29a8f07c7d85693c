"""The engine reaches persistence only through declared interfaces.

Everything under engine/ (the server included; not engine/services/datadir.py, the data
directory itself, which makes the journal and wires it in) uses the journal only through
`engine.exec.interfaces.Log` and the data directory only through `Persistence`: every
attribute read or written on a name or attribute called `journal` / `datadir` there must be
declared by the interface. The compactor uses the journal only through `CompactionLog`.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from streamkeep.engine.exec import interfaces
from streamkeep.snapshot.services import compactor

ROOT = Path(__file__).resolve().parents[2]


def _members(protocol: type) -> set[str]:
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {n for n, _ in inspect.getmembers(protocol) if not n.startswith("_")}
    return names


LOG = _members(interfaces.Log)
PERSISTENCE = _members(interfaces.Persistence)
COMPACTION_LOG = _members(compactor.CompactionLog)


def _uses(path: Path, holder: str) -> list[tuple[int, str]]:
    """(line, attribute) for every `<...>.holder.attr` or `holder.attr` in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        name = value.attr if isinstance(value, ast.Attribute) else (
            value.id if isinstance(value, ast.Name) else None)
        if name == holder:
            found.append((node.lineno, node.attr))
    return found


# (tools/ sit on top: the bench reads the journal's own counters, fsyncs per record)
DATA_DIRECTORY = ROOT / "engine" / "services" / "datadir.py"  # the journal's owner
ENGINE_FILES = sorted(p for p in (ROOT / "engine").rglob("*.py") if p != DATA_DIRECTORY)


@pytest.mark.parametrize(("holder", "allowed"), [("journal", LOG), ("datadir", PERSISTENCE)])
def test_engine_uses_only_the_declared_interface(holder: str, allowed: set[str]) -> None:
    wrong = [f"{path.relative_to(ROOT)}:{line} uses {holder}.{attr}"
             for path in ENGINE_FILES for line, attr in _uses(path, holder)
             if attr not in allowed]
    assert not wrong, "\n".join(wrong)


def test_compactor_uses_only_compaction_log() -> None:
    path = ROOT / "snapshot" / "services" / "compactor.py"
    wrong = [f"compactor.py:{line} uses journal.{attr}" for line, attr in _uses(path, "journal")
             if attr not in COMPACTION_LOG]
    assert not wrong, "\n".join(wrong)


def test_the_implementations_provide_the_interfaces() -> None:
    from streamkeep.aof.journal import Journal
    from streamkeep.engine.services.datadir import DataDir

    for protocol, cls in ((interfaces.Log, Journal), (interfaces.Persistence, DataDir),
                          (compactor.CompactionLog, Journal)):
        methods = {n for n, v in vars(protocol).items()
                   if not n.startswith("_") and (callable(v) or isinstance(v, property))}
        missing = {m for m in methods if not hasattr(cls, m)}
        assert not missing, f"{cls.__name__} lacks {missing} of {protocol.__name__}"
