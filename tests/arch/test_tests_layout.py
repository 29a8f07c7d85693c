"""The tests mirror the tree: a unit test module is found from the module it tests.

`tests/<package>/test_<module>.py` tests `<package>/<module>.py` (or the package
`<package>/<module>/`); scenario suites live in their own folders; shared helpers live in
tests/support; no test module imports another test module (they share helpers, not tests).
"""

from __future__ import annotations

import ast
from pathlib import Path

from streamkeep import folders

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SCENARIOS = {"differential", "crash", "property", "arch", "attacks", "careless", "docs",
             "frameworks", "ha"}
SOURCE_FOLDERS = set(folders.top_folders()) - {"streamkeep"}  # (the namespace: tested in arch/)


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py"))


def test_unit_tests_name_a_source_module() -> None:
    orphans = []
    for path in _test_files():
        parts = path.relative_to(TESTS).parts
        if parts[0] in SCENARIOS:
            continue
        assert parts[0] in SOURCE_FOLDERS, f"{path}: tests/ holds only {SOURCE_FOLDERS} " \
            f"and the scenario folders {SCENARIOS}"
        module = Path(*parts[:-1]) / parts[-1].removeprefix("test_")
        if not (ROOT / module).is_file() and not (ROOT / module.with_suffix("")).is_dir():
            orphans.append(f"{path.relative_to(ROOT)} names no module {module}")
    assert not orphans, "\n".join(orphans)


def test_no_test_module_imports_another() -> None:
    wrong = []
    for path in [*TESTS.rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("tests.") and (
                        name.rsplit(".", 1)[-1].startswith("test_") or name == "tests.conftest"):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_helpers_live_in_support() -> None:
    stray = [p.relative_to(ROOT) for p in TESTS.rglob("*.py")
             if not p.name.startswith("test_") and p.name not in ("__init__.py", "conftest.py")
             and "support" not in p.relative_to(TESTS).parts]
    assert not stray, f"helpers outside tests/support: {stray}"


# The packages whose every module is tested beside it (the tools are tested through their
# commands in tests/tools and the scenario suites).
MIRRORED = [f for f in folders.top_folders() if f not in ("streamkeep", "tools")]


def test_every_core_module_has_its_unit_test_file() -> None:
    """A reader finds the tests of `<pkg>/<module>.py` in `tests/<pkg>/test_<module>.py`.
    A compiled kernel's twins (`_x_c.pyx`, `_x_py.py`) are tested through their facade's file
    and the kernel tests that run both on the same inputs."""
    missing = []
    for folder in MIRRORED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "__init__.py" or path.name.startswith("_"):
                continue
            rel = path.relative_to(ROOT)
            test = TESTS / rel.parent / f"test_{path.name}"
            if not test.is_file():
                missing.append(f"{rel} has no {test.relative_to(ROOT)}")
    assert not missing, "\n".join(missing)
