"""The compiled core's contract: every kernel has its pure twin, a stub and a facade; the
facades report what runs; and under STREAMKEEP_REQUIRE_EXTENSIONS (make test, CI) every kernel
is compiled and loaded, so a broken build cannot pass on the pure-Python fallback."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import folders
from streamkeep.engine.wire import kernel_switches
from tests.support.kernels import PURE_ONLY, REQUIRE

ROOT = Path(__file__).resolve().parents[2]


def kernel_sources() -> dict[str, Path]:
    """Facade module name -> its compiled kernel's .pyx."""
    return {name.rpartition(".")[0] + "." + pyx.stem[1:-2]: pyx
            for name, pyx in folders.source_files(ROOT, (".pyx",)).items()
            if pyx.stem.startswith("_") and pyx.stem.endswith("_c")}


KERNELS = kernel_sources()


def test_there_are_kernels() -> None:
    assert len(KERNELS) >= 1


def test_the_report_names_every_kernel() -> None:
    """INFO's streamkeep_native and --version cover every kernel, used yet or not."""
    from streamkeep.engine.exec import build_report

    assert set(build_report.kernels()) == set(KERNELS)


@pytest.mark.parametrize("facade", sorted(KERNELS))
def test_each_kernel_has_its_twin_stub_and_facade(facade: str) -> None:
    pyx = KERNELS[facade]
    stem = pyx.stem[:-2]  # "_x"
    pure = pyx.with_name(f"{stem}_py.py")
    stub = pyx.with_name(f"{stem}_c.pyi")
    front = pyx.with_name(f"{stem[1:]}.py")
    assert pure.exists() and stub.exists() and front.exists(), (pure, stub, front)
    # The stub declares what the pure module defines publicly: one interface for mypy.
    stub_names = {n.name for n in ast.parse(stub.read_text()).body
                  if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    pure_names = {n.name for n in ast.parse(pure.read_text()).body
                  if isinstance(n, ast.FunctionDef | ast.ClassDef)
                  and not n.name.startswith("_")}
    assert stub_names <= pure_names, f"the stub names {stub_names - pure_names}, not in {pure}"
    module = importlib.import_module(facade)
    assert facade in kernel_switches.kernels()
    for name in stub_names:
        assert hasattr(module, name), f"{facade} does not export {name}"


@pytest.mark.skipif(not REQUIRE or PURE_ONLY, reason="STREAMKEEP_REQUIRE_EXTENSIONS is not set")
def test_required_kernels_are_reported_native() -> None:
    from streamkeep.engine.exec import build_report

    assert build_report.native()
    assert build_report.summary().startswith("compiled core (")


@pytest.mark.skipif(not REQUIRE or PURE_ONLY, reason="STREAMKEEP_REQUIRE_EXTENSIONS is not set")
@pytest.mark.parametrize("facade", sorted(KERNELS))
def test_required_kernels_are_compiled_and_loaded(facade: str) -> None:
    importlib.import_module(facade)
    assert kernel_switches.kernels()[facade] == "compiled"
    compiled = importlib.import_module(
        f"{facade.rpartition('.')[0]}._{facade.rpartition('.')[2]}_c")
    assert compiled.__file__ is not None and not compiled.__file__.endswith(".py")


def _kernels_in_child(env: dict[str, str]) -> subprocess.CompletedProcess:
    code = ("import importlib, json; from streamkeep.engine.wire import kernel_switches\n"
            f"for m in {sorted(KERNELS)!r}: importlib.import_module(m)\n"
            "print(json.dumps([kernel_switches.kernels(), kernel_switches.native()]))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT.parent, timeout=60)


def test_no_extensions_switch_runs_pure_python() -> None:
    env = {**os.environ, "STREAMKEEP_NO_EXTENSIONS": "1"}
    env.pop("STREAMKEEP_REQUIRE_EXTENSIONS", None)
    done = _kernels_in_child(env)
    assert done.returncode == 0, done.stderr
    assert '"compiled"' not in done.stdout and done.stdout.strip().endswith("false]")


def test_missing_kernel_is_an_error_when_required(tmp_path: Path) -> None:
    """A kernel that cannot import (here: a stand-in module that raises ImportError shadows
    it) fails the import under STREAMKEEP_REQUIRE_EXTENSIONS and falls back without it."""
    facade = sorted(KERNELS)[0]
    package, _, name = facade.rpartition(".")
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, fullname, path=None, target=None):\n"
        f"        if fullname == {package + '._' + name + '_c'!r}:\n"
        "            raise ImportError('blocked by the test')\n"
        "sys.meta_path.insert(0, Block())\n")
    base = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    base.pop("STREAMKEEP_NO_EXTENSIONS", None)
    required = _kernels_in_child({**base, "STREAMKEEP_REQUIRE_EXTENSIONS": "1"})
    assert required.returncode != 0
    assert "STREAMKEEP_REQUIRE_EXTENSIONS" in required.stderr and "blocked" in required.stderr
    base.pop("STREAMKEEP_REQUIRE_EXTENSIONS", None)
    fallback = _kernels_in_child(base)
    assert fallback.returncode == 0, fallback.stderr
    assert f'"{facade}": "pure"' in fallback.stdout
