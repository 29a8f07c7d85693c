"""engine.wire.kernel_switches: the two switches (STREAMKEEP_NO_EXTENSIONS,
STREAMKEEP_REQUIRE_EXTENSIONS), `want_compiled`, `missing`, and the record of what each facade
loaded. The switches are read when called; a facade calls them once, when it is imported, so
what a facade picks is tested in child processes started with the variables set. The record
is process-wide, so the calls that add to it run in child processes too.

(tests/arch/test_extensions.py checks the contract over every kernel: twins, stubs, and a
kernel that fails to import under the require switch.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep.engine.wire import kernel_switches
from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.engine.wire.kernel_switches import (
    NO_EXTENSIONS_VAR,
    REQUIRE_EXTENSIONS_VAR,
    ExtensionMissing,
    NotWanted,
)

ON = ["1", "yes", "true", "TRUE", " on ", "anything"]
OFF = ["", "0", "no", "false", "False", " NO "]
IDS_FACADE = "streamkeep.engine.model.ids"


def child_json(code: str, tmp_path: Path, **switches: str) -> dict:
    """Run `code` (which prints one JSON document) in a fresh interpreter whose environment has
    exactly the given switches (by their variable names) of the two."""
    env = {k: v for k, v in os.environ.items()
           if k not in (NO_EXTENSIONS_VAR, REQUIRE_EXTENSIONS_VAR)}
    env.update(switches)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


IMPORT_A_FACADE = """
import json
from streamkeep.engine.wire import kernel_switches
before = kernel_switches.kernels()
from streamkeep.engine.model import ids
print(json.dumps({"before": before, "kernels": kernel_switches.kernels(),
                  "native": kernel_switches.native(), "module": ids.format_id.__module__}))
"""


def compiled_ids_built() -> bool:
    return importlib.util.find_spec("streamkeep.engine.model._ids_c") is not None


@pytest.mark.parametrize("value", ON)
def test_no_extensions_on_means_the_pure_code(monkeypatch: pytest.MonkeyPatch,
                                              value: str) -> None:
    monkeypatch.setenv(NO_EXTENSIONS_VAR, value)
    assert kernel_switches.compiled_wanted() is False
    with pytest.raises(NotWanted, match=NO_EXTENSIONS_VAR):
        kernel_switches.want_compiled()


@pytest.mark.parametrize("value", [*OFF, None])
def test_no_extensions_off_or_unset_wants_the_compiled_code(monkeypatch: pytest.MonkeyPatch,
                                                            value: str | None) -> None:
    if value is None:
        monkeypatch.delenv(NO_EXTENSIONS_VAR, raising=False)
    else:
        monkeypatch.setenv(NO_EXTENSIONS_VAR, value)
    assert kernel_switches.compiled_wanted() is True
    kernel_switches.want_compiled()  # no NotWanted


def test_not_wanted_is_caught_as_an_import_error() -> None:
    """A facade's one `except ImportError` branch handles both a missing kernel and the
    switch."""
    assert issubclass(NotWanted, ImportError) and issubclass(NotWanted, StreamkeepError)
    assert issubclass(ExtensionMissing, ImportError)
    assert issubclass(ExtensionMissing, StreamkeepError)


def test_missing_is_an_error_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NO_EXTENSIONS_VAR, raising=False)
    monkeypatch.setenv(REQUIRE_EXTENSIONS_VAR, "1")
    cause = ImportError("no module named _x_c")
    with pytest.raises(ExtensionMissing) as caught:
        kernel_switches.missing("streamkeep.example.x", cause)
    message = str(caught.value)
    assert message.startswith("streamkeep.example.x: its compiled kernel did not import "
                              "(no module named _x_c) while STREAMKEEP_REQUIRE_EXTENSIONS is set")
    assert caught.value.__cause__ is cause
    assert "streamkeep.example.x" not in kernel_switches.kernels()  # refused, not recorded


def test_missing_without_the_require_switch_records_the_pure_module(tmp_path: Path) -> None:
    code = """
import json
from streamkeep.engine.wire import kernel_switches
kernel_switches.missing("pkg.x", ImportError("gone"))
print(json.dumps(kernel_switches.kernels()))
"""
    assert child_json(code, tmp_path) == {"pkg.x": "pure"}
    # Asking for the pure code wins over requiring the compiled code: nothing is missing then.
    assert child_json(code, tmp_path, **{NO_EXTENSIONS_VAR: "1", REQUIRE_EXTENSIONS_VAR: "1"}) \
        == {"pkg.x": "pure"}


def test_the_record_and_native(tmp_path: Path) -> None:
    code = """
import json
from streamkeep.engine.wire import kernel_switches as x
steps = [[x.kernels(), x.native()]]
x.loaded("pkg.b", True)
steps.append([x.kernels(), x.native()])
x.loaded("pkg.a", False)
steps.append([x.kernels(), x.native()])
x.loaded("pkg.a", True)
steps.append([list(x.kernels()), x.native()])
print(json.dumps(steps))
"""
    assert child_json(code, tmp_path) == [
        [{}, False],  # nothing imported yet: not native
        [{"pkg.b": "compiled"}, True],
        [{"pkg.a": "pure", "pkg.b": "compiled"}, False],
        [["pkg.a", "pkg.b"], True],  # sorted by facade; a facade's last word stands
    ]


def test_kernels_is_a_copy(tmp_path: Path) -> None:
    code = """
import json
from streamkeep.engine.wire import kernel_switches as x
x.loaded("pkg.a", True)
x.kernels()["pkg.a"] = "pure"
print(json.dumps(x.kernels()))
"""
    assert child_json(code, tmp_path) == {"pkg.a": "compiled"}


def test_a_facade_imported_under_no_extensions_runs_the_pure_twin(tmp_path: Path) -> None:
    got = child_json(IMPORT_A_FACADE, tmp_path, **{NO_EXTENSIONS_VAR: "1"})
    assert IDS_FACADE not in got["before"]
    assert got["kernels"][IDS_FACADE] == "pure"
    assert got["module"] == "streamkeep.engine.model._ids_py"
    assert got["native"] is False


def test_no_extensions_wins_over_require(tmp_path: Path) -> None:
    got = child_json(IMPORT_A_FACADE, tmp_path,
                     **{NO_EXTENSIONS_VAR: "1", REQUIRE_EXTENSIONS_VAR: "1"})
    assert got["kernels"][IDS_FACADE] == "pure"


@pytest.mark.skipif(not compiled_ids_built(), reason="the ids kernel is not built")
@pytest.mark.parametrize("switches", [{}, {NO_EXTENSIONS_VAR: "0"}, {REQUIRE_EXTENSIONS_VAR: "1"}])
def test_a_facade_imported_otherwise_runs_the_compiled_kernel(tmp_path: Path,
                                                              switches: dict[str, str]) -> None:
    got = child_json(IMPORT_A_FACADE, tmp_path, **switches)
    assert got["kernels"][IDS_FACADE] == "compiled"
    assert got["module"] == "streamkeep.engine.model._ids_c"
