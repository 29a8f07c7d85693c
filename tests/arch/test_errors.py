"""One exception base: every exception class the project defines derives from StreamkeepError,
in its families (ReplyError for error replies, ProtocolError for a peer's malformed RESP,
StorageError for files and data directories), and storage errors reach clients through one
function, `storage_reply`.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from streamkeep import folders
from streamkeep.engine.wire.errors import (
    ProtocolError,
    ReplyError,
    StorageError,
    StreamkeepError,
    storage_reply,
)

ROOT = Path(__file__).resolve().parents[2]


def _modules() -> dict[str, Path]:
    return folders.source_files(ROOT)


def _exception_classes() -> list[tuple[str, str]]:
    found = []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception", "Limit"))
                                                 or b.id in ("ValueError", "OSError"))
                    for b in node.bases):
                found.append((module, node.name))
    return found


# The crash bench's simulated power failure is a BaseException on purpose: nothing in the engine
# (which handles StreamkeepError and OSError) may catch it, as nothing survives a power cut.
# The async facade's suspension of a replaying run is control flow, a BaseException for the same
# reason: no handler between a facade method and its runner may take it for a command's failure.
NOT_ERRORS = {("streamkeep.tools.crashbench.faultfs", "PowerCut"),
              ("streamkeep.engine.runtime.async_steps", "Suspend")}
EXCEPTIONS = [e for e in _exception_classes() if e not in NOT_ERRORS]


def test_the_scan_finds_the_known_families() -> None:
    names = {name for _, name in EXCEPTIONS}
    assert {"ReplyError", "StorageError", "ProtocolError", "CompactionError",
            "FormatError", "SnapshotError", "LockedError", "ManifestError"} <= names


@pytest.mark.parametrize(("module", "name"), EXCEPTIONS)
def test_every_exception_derives_from_the_base(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, StreamkeepError), f"{module}.{name}"


@pytest.mark.parametrize("name", ["CompactionError", "FormatError", "SnapshotError",
                                  "LockedError", "ManifestError", "AOFCorruptError",
                                  "SegmentError", "BuildError"])
def test_storage_errors_are_one_family(name: str) -> None:
    cls = next(getattr(importlib.import_module(m), n) for m, n in EXCEPTIONS if n == name)
    assert issubclass(cls, StorageError)
    assert not issubclass(cls, ReplyError)


def test_protocol_errors_are_not_reply_errors() -> None:
    assert not issubclass(ProtocolError, ReplyError)
    assert not issubclass(ReplyError, ProtocolError)


def test_storage_error_reply_line() -> None:
    err = storage_reply(StorageError("/data/segment-000002.aof: CRC mismatch at byte offset 96"))
    assert isinstance(err, ReplyError)
    assert err.line == "ERR /data/segment-000002.aof: CRC mismatch at byte offset 96"
