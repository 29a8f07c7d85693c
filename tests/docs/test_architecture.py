"""docs/src/architecture.md is checked against the code: its layout names every product module
under its folder, and every name its walk-throughs give is one the code has.

The layout section is a text block of folder entries (`engine/`, then `  wire/  errors (...),
reply (...), ...` indented under it): each product module (a `.py` or `.pyx` file of a
product folder, but a package's `__init__` and a kernel's two twins, `_x_c` and `_x_py`,
which its facade `x` stands for) must be named in its folder's entry. The walk-throughs (the
sections after the layout) name files (`engine/server/network.py`), which must exist, and
functions, classes, methods and attributes (`Client.data_received`, `run_command`), each part
of which must be defined somewhere in the product code; command words (`XADD`), settings
(`stream-node-max-entries`) and code snippets are not names.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "src" / "architecture.md"
PRODUCT = ("engine", "aof", "snapshot", "replication", "tools", "streamkeep")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_PATH = re.compile(r"[a-z_/]+\.(py|pyx|pxd|md|json)")
_KERNEL_TWIN = re.compile(r"_.+_(c|py)")


def sections() -> dict[str, str]:
    """The page's `## ` sections by title."""
    text = PAGE.read_text()
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def layout_entries(block: str) -> dict[str, set[str]]:
    """The layout block's folder entries: folder path -> the words of its entry. A line
    whose first word ends with "/" opens a folder, nested under the one above it when
    indented further; the lines after it, up to the next folder, are its entry."""
    entries: dict[str, set[str]] = {}
    stack: list[tuple[int, str]] = []
    current: str | None = None
    for line in block.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        indent = len(line) - len(line.lstrip())
        first = stripped.split()[0]
        if first.endswith("/") and re.fullmatch(r"[a-z_]+/", first):
            while stack and stack[-1][0] >= indent:
                stack.pop()
            parent = stack[-1][1] if stack else ""
            current = parent + first
            stack.append((indent, current))
            entries.setdefault(current.rstrip("/"), set()).update(
                _WORD.findall(stripped[len(first):]))
        elif current is not None:
            entries[current.rstrip("/")].update(_WORD.findall(stripped))
    return entries


def product_modules() -> dict[str, set[str]]:
    """Each product folder -> the modules the layout must name in it."""
    found: dict[str, set[str]] = {}
    for top in PRODUCT:
        for file in sorted((ROOT / top).rglob("*")):
            if file.suffix not in (".py", ".pyx") or "__pycache__" in file.parts:
                continue
            stem = file.stem
            if stem == "__init__" or _KERNEL_TWIN.fullmatch(stem):
                continue
            folder = file.parent.relative_to(ROOT).as_posix()
            found.setdefault(folder, set()).add(stem)
    return found


def test_the_layout_names_every_product_module() -> None:
    block = re.search(r"```text\n(.*?)```", sections()["The layout"], re.S)
    assert block, "the layout section has no text block"
    entries = layout_entries(block.group(1))
    missing = [f"{folder}/{stem}" for folder, stems in sorted(product_modules().items())
               for stem in sorted(stems) if stem not in entries.get(folder, set())]
    assert missing == [], f"architecture.md's layout does not name: {missing}"


@cache
def defined_names() -> frozenset[str]:
    """Every name the product code defines: modules, classes, functions, methods, module
    and class attributes, attributes assigned on `self`, keyword parameters."""
    names: set[str] = set()
    for top in PRODUCT:
        for file in (ROOT / top).rglob("*.py*"):
            if file.suffix not in (".py", ".pyx", ".pxd", ".pyi"):
                continue
            names.add(file.stem)
            if file.suffix != ".py":
                names.update(re.findall(r"(?:def|class)\s+([A-Za-z_]\w*)", file.read_text()))
                continue
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names.add(node.target.id)
    return frozenset(names)


def walkthrough_names() -> list[tuple[str, str]]:
    """(section, name) of every code span of the walk-through sections that is a name."""
    spans = []
    for title, body in sections().items():
        if title in ("The layers", "The layout"):
            continue
        for span in re.findall(r"`([^`\n]+)`", body):
            if _PATH.fullmatch(span) or (_NAME.fullmatch(span) and not span.isupper()):
                spans.append((title, span))
    return spans


def test_every_name_the_walkthroughs_give_exists() -> None:
    names = defined_names()
    missing = []
    for title, span in walkthrough_names():
        if _PATH.fullmatch(span):
            if not (ROOT / span).exists():
                missing.append(f"{title}: {span}")
        elif any(part not in names for part in span.split(".")):
            missing.append(f"{title}: {span}")
    assert missing == [], f"architecture.md names what the code does not have: {missing}"


def test_the_checks_catch_what_they_should() -> None:
    entries = layout_entries("engine/\n  wire/       errors (lines), reply\n"
                             "  model/      ids (IDs)\naof/          fs, codec\n")
    assert entries == {"engine": set(), "engine/wire": {"errors", "lines", "reply"},
                       "engine/model": {"ids", "IDs"}, "aof": {"fs", "codec"}}
    assert "run_command" in defined_names() and "no_such_function_here" not in defined_names()
