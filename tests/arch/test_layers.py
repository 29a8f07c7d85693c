"""The layering rule: imports point one way, from the top of the project down.

Every import of every module is parsed with `ast` (module level, inside functions, inside
`if TYPE_CHECKING:`), resolved to the project module it loads, and checked against the layers.
A module's layer is its folder's, from the source tree's one map (streamkeep/folders.py), bottom
to top (a module may import its own layer and those below):

    wire      engine/wire                    error lines, reply values, RESP, argument parsing
    model     engine/model                   IDs, streams, groups, digest, effects
    formats   aof, snapshot                  the AOF's and the snapshots' files
    exec      engine/exec                    command table, context, blocking, config, interfaces
    commands  engine/commands                the command handlers
    runtime   engine/runtime                 EngineCore (the one command path) and its parts,
                                             the redis-py facade
    services  engine/services, snapshot/services, replication
                                             the data directory, the public Engine, the work
                                             queue, compaction, replicas
    top       engine/server, tools, the packages' __init__s, `python -m streamkeep`

An upward edge allowed at run time would be named in ALLOWED_UPWARD, with its reason; there is
none: the public Engine (engine.services.engine) composes the core, the data directory and
replication from above. Imports under `if TYPE_CHECKING:` never point up either: a command
handler sees the engine as the exec layer's EngineState (engine.exec.engine_state), which the core
extends, never as the core itself.

Also enforced: no module imports another module's private (`_name`) names or reaches them as
`module._name`; no import cycle among run-time imports; importing a codec or the snapshot
reader loads no command module.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamkeep import folders

ROOT = Path(__file__).resolve().parents[2]
LAYERS = folders.LAYERS

# (importer, imported): run-time imports that point up, each with its reason. None today.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

# Packages whose __init__ re-exports lazily: importing a name from them loads the module
# that defines it, which is the edge that counts.
LAZY_EXPORTS = {
    "streamkeep": {"Engine": "streamkeep.engine.services.engine",
                   "Session": "streamkeep.engine.runtime.core",
                   "Record": "streamkeep.engine.model.effects",
                   "ReplyError": "streamkeep.engine.wire.errors",
                   "StreamkeepError": "streamkeep.engine.wire.errors"},
}
LAZY_EXPORTS["streamkeep.engine"] = LAZY_EXPORTS["streamkeep"]


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    line: int
    type_only: bool
    names: tuple[str, ...]


def module_files() -> dict[str, Path]:
    """Every project module by its installed name (compiled kernels' `.pyx` sources too)."""
    return folders.source_files(ROOT, (".pxd", ".pyx", ".py"))


MODULES = module_files()


def twin_facade(module: str) -> str | None:
    """`pkg.x` for a compiled kernel `pkg._x_c` or its pure twin `pkg._x_py`, else None."""
    package, _, name = module.rpartition(".")
    for suffix in ("_c", "_py"):
        if name.startswith("_") and name.endswith(suffix) and len(name) > len(suffix) + 1:
            return f"{package}.{name[1:-len(suffix)]}"
    return None


def layer_of(module: str) -> str:
    """A module's layer: its folder's in the map."""
    if module.endswith("__mypyc"):  # the compiled command path's shared code: its modules'
        return "wire"  # (each module's own extension imports it, whatever its layer)
    if module not in MODULES:
        raise AssertionError(f"{module} is no module in a folder of streamkeep/folders.py")
    return folders.layer_of_file(MODULES[module].relative_to(ROOT))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


# Cython's import statements, one per line: `from a.b cimport c`, `cimport a.b`, `import a`
# (a Python `from a import b` too; parenthesized and continued imports are not used in .pyx).
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(\S+)\s+c?import\s+(.+)|c?import\s+(.+))$")


def _installed_name(name: str) -> str:
    """A kernel cimports a shared `.pxd` by its folder path (`engine.model.x`: Cython finds a
    .pxd from the checkout's root, and one of inline functions needs no run-time module): the
    module that path is, by its installed name."""
    top = name.split(".")[0]
    if top != folders.NAMESPACE and top in folders.top_folders():
        return f"{folders.NAMESPACE}.{name}"
    return name


def _pyx_as_python(source: str) -> str:
    """The import lines of a Cython source, rewritten as Python for `ast` (cimport -> import);
    `cimport` of C libraries (libc, cpython) names no project module and is dropped."""
    lines = []
    for line in source.splitlines():
        match = _PYX_IMPORT.match(line)
        if not match:
            continue
        base, names, plain = match.groups()
        if base is not None:
            lines.append(f"from {_installed_name(base)} import {names.split('#')[0].strip()}")
        else:
            lines.append(f"import {_installed_name(plain.split('#')[0].strip())}")
        if lines[-1].split()[1].split(".")[0] != "streamkeep":
            lines.pop()
    return "\n".join(lines) + "\n"


def imports_of(module: str, path: Path) -> list[Edge]:
    """Every project import in the module, resolved to the module it loads."""
    source = path.read_text()
    if path.suffix in (".pyx", ".pxd"):
        source = _pyx_as_python(source)
    tree = ast.parse(source, str(path))
    edges: list[Edge] = []

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "streamkeep":
                    edges.append(Edge(module, alias.name, node.lineno, type_only, ()))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, path).split(".")
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, *([base] if base else [])])
            if base.split(".")[0] != "streamkeep":
                return
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:  # `from package import module`
                    edges.append(Edge(module, sub, node.lineno, type_only, ()))
                elif base in LAZY_EXPORTS and alias.name in LAZY_EXPORTS[base]:
                    edges.append(Edge(module, LAZY_EXPORTS[base][alias.name], node.lineno,
                                      type_only, (alias.name,)))
                else:
                    edges.append(Edge(module, base, node.lineno, type_only, (alias.name,)))
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)
    return edges


ALL_EDGES = [edge for module, path in MODULES.items() for edge in imports_of(module, path)]


def test_pyx_imports_are_read() -> None:
    """A compiled kernel's imports and cimports count like a Python module's."""
    source = ("# cython: boundscheck=False\nfrom libc.string cimport memcmp\n"
              "from streamkeep.engine.runtime.core cimport Engine\n"
              "cimport streamkeep.aof.codec\nimport streamkeep.engine.wire.reply_parser  # why\n"
              "from engine.model.helpers cimport Buf\n"
              "def f(x):\n    return x\n")
    assert _pyx_as_python(source).splitlines() == [
        "from streamkeep.engine.runtime.core import Engine", "import streamkeep.aof.codec",
        "import streamkeep.engine.wire.reply_parser",
        "from streamkeep.engine.model.helpers import Buf"]


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)
    for edge in ALL_EDGES:
        assert edge.imported in MODULES, f"{edge.importer}:{edge.line} imports " \
            f"{edge.imported}, which is not a project module"


def test_imports_point_down() -> None:
    wrong = []
    for edge in ALL_EDGES:
        if edge.type_only:
            continue
        src, dst = LAYERS.index(layer_of(edge.importer)), LAYERS.index(layer_of(edge.imported))
        if dst > src and (edge.importer, edge.imported) not in ALLOWED_UPWARD:
            wrong.append(f"{edge.importer}:{edge.line} ({LAYERS[src]}) imports "
                         f"{edge.imported} ({LAYERS[dst]})")
    assert not wrong, "imports that point up a layer:\n" + "\n".join(wrong)


def test_allowed_upward_edges_exist() -> None:
    """A named exception that no longer happens is removed from the list, not kept."""
    seen = {(e.importer, e.imported) for e in ALL_EDGES}
    assert set(ALLOWED_UPWARD) <= seen


def test_type_only_imports_point_down_too() -> None:
    """Annotations name nothing above their own layer: the handlers and the exec layer name
    the engine they run in as EngineState (engine.exec.engine_state), the services what they are
    handed of persistence at their own layer."""
    wrong = []
    for edge in ALL_EDGES:
        if not edge.type_only:
            continue
        src, dst = LAYERS.index(layer_of(edge.importer)), LAYERS.index(layer_of(edge.imported))
        if dst > src:
            wrong.append(f"{edge.importer}:{edge.line} imports {edge.imported} for types")
    assert not wrong, "\n".join(wrong)


def _top_package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[1] == "engine" and len(parts) > 2 else ".".join(parts[:2])


def test_no_private_names_across_modules() -> None:
    """`from x import _name` and `x._name` (x a project module) only inside x itself."""
    wrong = [f"{e.importer}:{e.line} imports {e.imported}.{name}"
             for e in ALL_EDGES for name in e.names
             if name.startswith("_") and e.imported != e.importer]
    # A facade choosing between its own kernel twins imports them, and only it may (and a
    # compiled kernel its pure twin, for inputs it leaves to the reference).
    wrong += [f"{e.importer}:{e.line} imports {e.imported}" for e in ALL_EDGES
              if e.imported.rpartition(".")[2].startswith("_") and e.imported in MODULES
              and twin_facade(e.imported) not in (e.importer, twin_facade(e.importer))]
    for module, path in MODULES.items():
        if path.suffix in (".pyx", ".pxd"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamkeep"):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("streamkeep") and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                wrong.append(f"{module}:{node.lineno} reaches {aliases[node.value.id]}."
                             f"{node.attr}")
    assert not wrong, "private names used across modules:\n" + "\n".join(wrong)


def test_no_import_cycles() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for edge in ALL_EDGES:
        if not edge.type_only and edge.imported != edge.importer:
            graph[edge.importer].add(edge.imported)
    # Tarjan's strongly connected components.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in graph:
        if v not in index:
            strongconnect(v)
    # A package's __init__ importing its own submodules (the command registry) and those
    # submodules importing a sibling through the package is one component by construction.
    cycles = [c for c in cycles if not _is_package_registry(c)]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def _is_package_registry(component: list[str]) -> bool:
    packages = [m for m in component if MODULES[m].name == "__init__.py"]
    return len(packages) == 1 and all(m.startswith(packages[0]) for m in component)


@pytest.mark.parametrize("module", ["streamkeep.aof.codec", "streamkeep.engine.wire.request_parser",
                                    "streamkeep.engine.wire.reply_encoder",
                                    "streamkeep.engine.wire.reply_parser",
                                    "streamkeep.snapshot.reader", "streamkeep.aof.segment_reader"])
def test_codecs_import_cheaply(module: str) -> None:
    """The inspection CLI, the replica link and every Spark worker import these: they must
    not load the command table, the engine or the server."""
    code = (f"import sys, {module}; "
            "print(' '.join(m for m in sys.modules if m.startswith('streamkeep')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT.parent).stdout.split()
    # (the parent packages streamkeep and streamkeep.engine load too: lazy, they import nothing)
    heavy = [m for m in out if m not in ("streamkeep", "streamkeep.engine")
             and layer_of(m) in ("exec", "commands", "runtime", "services", "top")]
    assert not heavy, f"import {module} loads {heavy}"
    # A compiled kernel's twins (`_x_c`, `_x_py`) are its facade's code split in two, the
    # switch modules pick between them and between a compiled module and its source, and the
    # command path's shared library holds compiled modules' code: none counts as one more.
    counted = [m for m in out if twin_facade(m) is None and not m.endswith("__mypyc")
               and m not in ("streamkeep.engine.wire.kernel_switches", "streamkeep.engine.wire.compiled")]
    assert len(counted) <= 12, out


def test_the_layer_table_is_the_documented_one() -> None:
    """The manual's architecture page shows the same layers, in the same order, in its table
    (and each in its picture)."""
    page = (ROOT / "docs" / "src" / "architecture.md").read_text()
    positions = [page.find(f"**{layer}**") for layer in LAYERS]
    assert all(p >= 0 for p in positions), "architecture.md names every layer in bold"
    assert positions == sorted(positions), "architecture.md lists the layers bottom to top"
    picture = page[page.index("```mermaid"):]
    picture = picture[:picture.index("\n```\n")]
    assert all(f"<b>{layer}</b>" in picture for layer in LAYERS), "a layer missing in the picture"


def test_the_documented_table_names_each_folder_in_its_layer() -> None:
    """Each folder of the map is named on its layer's row of the architecture page's table, so
    the page cannot drift from the rule."""
    page = (ROOT / "docs" / "src" / "architecture.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| \*\*(\w+)\*\* \| (.*?) \|", page,
                                                          re.M)}
    assert set(rows) == set(LAYERS)
    wrong = [f"{folder}/ ({layer}) is not on the {layer} row"
             for folder, layer in folders.FOLDERS.items()
             if f"`{folder}/`" not in rows[layer]]
    assert not wrong, "\n".join(wrong)


def test_every_module_is_in_a_mapped_folder() -> None:
    """A source file in a folder the map leaves out has no layer (and is not installed)."""
    stray = [str(path.relative_to(ROOT)) for top in folders.top_folders()
             for path in (ROOT / top).rglob("*.py")
             if str(path.parent.relative_to(ROOT)) not in folders.FOLDERS]
    assert not stray, f"add their folders to streamkeep/folders.py: {stray}"
