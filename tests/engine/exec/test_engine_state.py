"""engine.exec.engine_state: EngineState, the engine as its command handlers see it. Every field it
declares is there on a new engine (a handler never meets a missing one), a handler is handed
that engine, the settings hot paths read are copied out of the config, and the hooks a
service registers run when CONFIG SET changes their settings."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from streamkeep import Engine
from streamkeep.engine.exec import engine_state
from streamkeep.engine.exec.engine_state import EngineState

SOURCE = Path(__file__).resolve().parents[3] / "engine" / "exec" / "engine_state.py"


def declared_fields() -> list[str]:
    """The names EngineState's class body declares (read from the source: the compiled
    class keeps no annotations)."""
    tree = ast.parse(SOURCE.read_text())
    cls = next(node for node in tree.body
               if isinstance(node, ast.ClassDef) and node.name == "EngineState")
    return [node.target.id for node in cls.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)]


def test_the_source_read_is_the_module_the_engine_runs() -> None:
    assert Path(engine_state.__file__).stem.startswith("engine_state")
    assert "dbs" in declared_fields() and "run_queued" in declared_fields()
    assert "write_gate" not in declared_fields()  # (a method: no field)


def test_a_new_engine_sets_every_declared_field() -> None:
    engine = Engine()
    try:
        assert isinstance(engine, EngineState)
        missing = [name for name in declared_fields() if not hasattr(engine, name)]
        assert not missing
    finally:
        engine.close()


def test_a_handler_is_handed_the_engine_as_its_state() -> None:
    engine = Engine()
    seen: list[Any] = []
    try:
        entry = engine.dispatch.table[b"PING"]  # this engine's entry: its handler swapped for a spy
        ping = entry.handler
        entry.handler = lambda ctx, argv: seen.append(ctx.engine) or ping(ctx, argv)
        assert engine.execute("PING") == "PONG"
        assert seen == [engine]
    finally:
        engine.close()


def test_hot_settings_are_copied_out_of_the_config() -> None:
    engine = Engine()
    try:
        engine.set_config("stream-node-max-entries", 7)
        engine.set_config("notify-keyspace-events", "Kt")
        assert engine.node_max_entries == 7
        assert engine.notify_flags == engine.config["notify-keyspace-events"] != 0
    finally:
        engine.close()


def test_config_hooks_run_after_config_set_and_info_sections_are_served() -> None:
    engine = Engine()
    try:
        ran: list[int] = []
        engine.on_config(["timeout"], lambda: ran.append(1))
        engine.execute("CONFIG", "SET", "timeout", "20")
        assert ran == [1]
        engine.add_info_section("keyspace", lambda: [("db0", "keys=42")])
        assert b"db0:keys=42" in engine.execute("INFO", "keyspace")
    finally:
        engine.close()
