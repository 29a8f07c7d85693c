"""The runtime layer is a hub and its leaves: EngineCore (engine/runtime/core.py) makes its parts
and calls them; a part calls nothing of the core but the one command path, `run_command`.

What the tests read, from the sources (parsed with `ast`, never imported):

* The core: the class `EngineCore` in engine/runtime/core.py, whose class statement (its
  docstring, comments and blank lines included) is at most MAX_CORE_LINES lines.
* Its parts: the engine/runtime modules core.py imports at its module level (a function-level
  import, such as `redis()`'s of the redis-py facade, is a user of the core, not a part).
* The core inside a part: every function parameter, variable or attribute annotated with a
  type that names `EngineCore` (`core: EngineCore`, `self.core: EngineCore`, a class-level
  `core: EngineCore`), and every name or `self.` attribute assigned from one of those
  (`self.core = core`, `core = self.core`), followed to a fixed point; a name is recognised
  wherever it is used in that module (a part uses no such name for anything else). Each use
  of one must be `<it>.run_command` (called, or bound as a value) or an assignment of it to
  another such name: reading an attribute of the core, calling another of its methods,
  reaching a sibling part through it (`core.waiting.serve_ready()`) or handing the core on
  (`Ctx(core, ...)`) all fail. A part reads the engine's state through an `EngineState`
  (engine/exec/engine_state.py: what handlers see) and gets the other parts it uses when it is
  made.
* The state's methods run the state's own code: EngineCore overrides no method EngineState
  defines, so a part calling `state.now()` or `state.write_gate(...)` never calls into the
  core.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "engine" / "runtime"
CORE = RUNTIME / "core.py"
STATE = ROOT / "engine" / "exec" / "engine_state.py"
MAX_CORE_LINES = 450
# The one method of the core a part may call.
ALLOWED = "run_command"
RUNTIME_PACKAGE = "streamkeep.engine.runtime."


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(node for node in tree.body
                if isinstance(node, ast.ClassDef) and node.name == name)


def _methods(cls: ast.ClassDef) -> set[str]:
    return {node.name for node in cls.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def class_lines(source: str, name: str) -> int:
    """How many lines the class statement `name` spans in `source`."""
    cls = _class(ast.parse(source), name)
    assert cls.end_lineno is not None
    return cls.end_lineno - cls.lineno + 1


def parts_of(core_source: str) -> list[str]:
    """The engine/runtime modules core.py imports at its module level: the core's parts."""
    parts = set()
    for node in ast.parse(core_source).body:
        if isinstance(node, ast.ImportFrom) and node.module is not None \
                and node.module.startswith(RUNTIME_PACKAGE):
            parts.add(node.module.removeprefix(RUNTIME_PACKAGE))
    return sorted(parts)


def _names_core(annotation: ast.expr | None) -> bool:
    """An annotation naming EngineCore: `EngineCore`, `EngineCore | None`, "EngineCore"..."""
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "EngineCore":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and "EngineCore" in node.value:
            return True
    return False


def _self_attr(node: ast.expr) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "self":
        return node.attr
    return None


class _Holders:
    """The names and `self.` attributes through which a part module holds the core."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: set[str] = set()
        self.attrs: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and _names_core(node.annotation):
                self.names.add(node.arg)
            elif isinstance(node, ast.AnnAssign) and _names_core(node.annotation):
                self._add(node.target, in_class_body=True)
        while True:  # assignments from a holder, to a fixed point
            before = (len(self.names), len(self.attrs))
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign) and self.holds(node.value):
                    for target in node.targets:
                        self._add(target)
                elif isinstance(node, ast.AnnAssign) and node.value is not None \
                        and self.holds(node.value):
                    self._add(node.target)
            if (len(self.names), len(self.attrs)) == before:
                break

    def _add(self, target: ast.expr, in_class_body: bool = False) -> None:
        attr = _self_attr(target)
        if attr is not None:
            self.attrs.add(attr)
        elif isinstance(target, ast.Name):
            self.names.add(target.id)
            if in_class_body:  # (a class-level `core: EngineCore` declares self.core)
                self.attrs.add(target.id)

    def holds(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.names
        attr = _self_attr(node)
        return attr is not None and attr in self.attrs


def core_uses(source: str) -> list[str]:
    """Every use of the core in a part module's `source` other than `.run_command` (and the
    assignments that hold it): "line: what" for each."""
    tree = ast.parse(source)
    holders = _Holders(tree)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)) or not isinstance(node.ctx, ast.Load):
            continue
        if not holders.holds(node):
            continue
        parent = parents[node]
        if isinstance(parent, ast.Attribute) and parent.attr == ALLOWED:
            continue
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is node:
            continue  # held under another name: that name's uses are checked too
        if isinstance(parent, ast.Attribute):
            found.append((node.lineno, f"{ast.unparse(node)}.{parent.attr}"))
        else:
            found.append((node.lineno, f"{ast.unparse(node)} passed on in "
                                       f"{type(parent).__name__}"))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_the_core_class_is_at_most_450_lines() -> None:
    lines = class_lines(CORE.read_text(), "EngineCore")
    assert lines <= MAX_CORE_LINES, (
        f"EngineCore is {lines} lines (at most {MAX_CORE_LINES}): move what a part owns "
        f"into the part, and let callers call the part")


def test_a_part_calls_nothing_of_the_core_but_run_command() -> None:
    parts = parts_of(CORE.read_text())
    assert {"batches", "waiting", "replay", "refusals", "expiry_cycle"} <= set(parts), parts
    found = []
    for part in parts:
        path = RUNTIME / f"{part}.py"
        found += [f"{path.relative_to(ROOT)}:{use}" for use in core_uses(path.read_text())]
    assert not found, "a part reaches the core other than through run_command:\n" + \
        "\n".join(found)


def test_the_core_overrides_no_method_of_the_state() -> None:
    core = _methods(_class(ast.parse(CORE.read_text()), "EngineCore"))
    state = _methods(_class(ast.parse(STATE.read_text()), "EngineState"))
    assert not core & state, f"EngineCore overrides EngineState's {sorted(core & state)}"


PLANTED = '''
from streamkeep.engine.runtime.core import EngineCore

class Part:
    core: EngineCore

    def __init__(self, state: EngineState, core: EngineCore | None) -> None:
        self.state = state
        self.runner = core

    def runs(self, ctx, entry, argv):
        run = self.runner.run_command
        return run(ctx, entry, argv), self.core.run_command(ctx, entry, argv)

    def reaches(self, ctx):
        core = self.runner
        core.commit(ctx, 0)
        self.core.waiting.serve_ready()
        return Ctx(core, None, 0), self.state.lock
'''


def test_the_checks_find_what_they_look_for() -> None:
    """The checks fail on a part that reaches into the core, and pass the same part's
    run_command and state reads; the class count is the class statement's."""
    uses = core_uses(PLANTED)
    assert [use.split(": ", 1)[1] for use in uses] == [
        "core.commit", "self.core.waiting", "core passed on in Call"], uses
    assert class_lines(PLANTED, "Part") == 16
    assert parts_of("from streamkeep.engine.runtime.waiting import WaitingReaders\n"
                    "def f():\n    from streamkeep.engine.runtime.redis_api import RedisAPI\n"
                    ) == ["waiting"]
