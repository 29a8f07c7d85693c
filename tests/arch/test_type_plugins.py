"""No generic module names a value type: each type is one plug-in, reached through registries.

A type's own modules are its model (and its kernels), its commands, its formats module (its RDB
codec, snapshot chunks and export table) and its client mixin; everything else reaches a type
through the three registries that list them: engine/model/value_types.py (the model's:
`ValueType`, `TYPES`), snapshot/rdb_types.py (the formats') and engine/runtime/redis_api.py
(the client facade, composed of one mixin per command group). "Naming" a type is importing
one of its own modules, one of its names (its `ValueType` constant, its value or limits
classes), reading an engine field that is its alone, or comparing with its TYPE word. The
benches' and the crash bench's workloads (tools/bench, tools/crashbench) exercise each type by
name on purpose and are not generic code. The four collection types are held to it; streams
(the snapshot's own tables) and strings (bare bytes in the keys table) are the core's.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("engine", "aof", "snapshot", "replication", "tools", "streamkeep")
NOT_GENERIC = ("tools/bench/", "tools/crashbench/")
REGISTRIES = frozenset({"engine/model/value_types.py", "snapshot/rdb_types.py",
                        "engine/runtime/redis_api.py"})

# Each type's own modules (by file name, in any layer's folder) and names.
OWN: dict[str, frozenset[str]] = {
    "zset": frozenset({"zset", "score_search", "_score_search_c", "_score_search_py", "zsets",
                       "zset_ranges", "zset_algebra", "rdb_zset", "sorted_sets"}),
    "hash": frozenset({"hashes", "packed_hash", "hash_expiry", "rdb_hash"}),
    "set": frozenset({"sets", "rdb_set"}),
    "list": frozenset({"lists", "list_node", "_list_node_c", "_list_node_py", "rdb_list"}),
}
NAMES: dict[str, frozenset[str]] = {
    "zset": frozenset({"ZSET", "ZSet", "ZSetLimits"}),
    "hash": frozenset({"HASH", "Hash", "PackedHash", "HashLimits"}),
    "set": frozenset({"SET", "RSet", "SetLimits"}),
    "list": frozenset({"LIST", "QuickList", "ListLimits", "ColdListNode", "ListHome"}),
}
FIELDS: dict[str, frozenset[str]] = {
    "zset": frozenset({"zset_limits"}), "hash": frozenset({"hash_limits", "hash_ttls"}),
    "set": frozenset({"set_limits"}), "list": frozenset({"list_limits"}),
}
# Where a type's names are its own: its value_types constant, its model's classes.
NAME_SOURCES = (".value_types", ".zset", ".hashes", ".packed_hash", ".sets", ".lists",
                ".residency")


def types_named(source: str, path: str) -> set[str]:
    """The collection types a module's source names (see the module docstring)."""
    own = {t for t, stems in OWN.items() if Path(path).stem in stems}
    named: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            named |= {t for t, stems in OWN.items() if module.rsplit(".", 1)[-1] in stems}
            for alias in node.names:
                named |= {t for t, stems in OWN.items() if alias.name in stems}
                if module.endswith(NAME_SOURCES):
                    named |= {t for t, names in NAMES.items() if alias.name in names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                named |= {t for t, stems in OWN.items()
                          if alias.name.rsplit(".", 1)[-1] in stems}
        elif isinstance(node, ast.Attribute):
            named |= {t for t, fields in FIELDS.items() if node.attr in fields}
        elif isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in OWN:
                    named.add(side.value)
    return named - own


@cache
def namers() -> dict[str, list[str]]:
    """Each collection type -> the product modules that name it outside its own."""
    found: dict[str, list[str]] = {t: [] for t in OWN}
    for folder in PRODUCT:
        for file in sorted((ROOT / folder).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            if path.startswith(NOT_GENERIC):
                continue
            for t in types_named(file.read_text(), path):
                found[t].append(path)
    return found


@pytest.mark.parametrize("type_name", sorted(OWN))
def test_only_the_registries_name_a_type(type_name: str) -> None:
    outside = sorted(set(namers()[type_name]) - REGISTRIES)
    assert outside == [], f"generic modules name the {type_name} type: {outside}"
    assert len(namers()[type_name]) <= 3


def test_the_check_sees_each_way_of_naming_a_type() -> None:
    assert types_named("from streamkeep.engine.model.value_types import HASH", "x.py") == {"hash"}
    assert types_named("from streamkeep.engine.model.zset import ZSetLimits", "x.py") == {"zset"}
    assert types_named("from streamkeep.engine.commands import sets", "x.py") == {"set"}
    assert types_named("import streamkeep.snapshot.rdb_list", "x.py") == {"list"}
    assert types_named("x = engine.hash_ttls", "x.py") == {"hash"}
    assert types_named("if vt.name == 'list': pass", "x.py") == {"list"}
    assert types_named("from streamkeep.engine.model.value_types import TYPES", "x.py") == set()
    assert types_named("from streamkeep.engine.model.zset import ZSet", "zsets.py") == set()
