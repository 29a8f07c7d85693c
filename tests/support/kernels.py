"""Both implementations of a compiled kernel, for tests that must hold for each.

`twins(package, name)` gives pytest parameters for `package._name_py` (the pure-Python
reference) and `package._name_c` (the Cython kernel), with ids "pure" and "compiled";
`kernel_fixture(...)` turns them into a module-valued fixture:

    codec_impl = kernel_fixture("streamkeep.aof", "codec")

    def test_roundtrip(codec_impl):
        assert codec_impl.decode(codec_impl.encode(x)) == x

The compiled half is skipped when the kernel was not built (STREAMKEEP_NO_EXTENSIONS, or no
compiler), and fails instead when STREAMKEEP_REQUIRE_EXTENSIONS is set (make test, CI), so a
broken build cannot pass as "skipped". Differential tests compare the two on one input with
`pure_and_compiled(...)`.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import pytest

REQUIRE = os.environ.get("STREAMKEEP_REQUIRE_EXTENSIONS", "").strip().lower() not in (
    "", "0", "no", "false")
PURE_ONLY = os.environ.get("STREAMKEEP_NO_EXTENSIONS", "").strip().lower() not in (
    "", "0", "no", "false")


def compiled(package: str, name: str) -> ModuleType | None:
    """The compiled kernel, None if it is not built (a failure under REQUIRE)."""
    if PURE_ONLY:
        return None
    try:
        return importlib.import_module(f"{package}._{name}_c")
    except ImportError as exc:
        if REQUIRE:
            pytest.fail(f"{package}._{name}_c did not import ({exc}) while "
                        "STREAMKEEP_REQUIRE_EXTENSIONS is set")
        return None


def pure(package: str, name: str) -> ModuleType:
    return importlib.import_module(f"{package}._{name}_py")


def kernel_fixture(package: str, name: str) -> Any:
    """A module-scoped fixture parametrized over the pure and the compiled kernel."""

    @pytest.fixture(params=["pure", "compiled"], scope="module")
    def implementation(request: pytest.FixtureRequest) -> ModuleType:
        if request.param == "pure":
            return pure(package, name)
        module = compiled(package, name)
        if module is None:
            pytest.skip(f"{package}._{name}_c is not built")
        return module

    return implementation


def pure_and_compiled(package: str, name: str) -> tuple[ModuleType, ModuleType]:
    """Both twins, for a test that feeds them the same input (skipped if not built)."""
    module = compiled(package, name)
    if module is None:
        pytest.skip(f"{package}._{name}_c is not built")
    return pure(package, name), module


def outcome(function: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """("ok", result) or ("error", (type name, message)): what two twins must agree on."""
    try:
        return "ok", function(*args, **kwargs)
    except Exception as exc:  # the twins must raise the same type with the same message
        return "error", (type(exc).__name__, str(exc))
