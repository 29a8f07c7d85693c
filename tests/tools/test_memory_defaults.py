"""tools.memory_defaults: `streamkeep serve` bounds its memory by the machine's when its
settings do not (maxmemory half of it, backlog-memory a quarter of that), keeps what they say
(0 included), and takes a cgroup's limit when it is the smaller; a real server logs the bounds
and serves CONFIG GET maxmemory with them; a shared directory's server adds none."""

from __future__ import annotations

import pytest

from streamkeep.tools import memory_defaults
from streamkeep.tools.memory_defaults import apply_memory_defaults


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_defaults, "physical_memory", lambda: 16 << 30)
    monkeypatch.setattr(memory_defaults, "cgroup_limit", lambda: None)


def test_half_and_a_quarter_of_that_by_default(machine):
    settings: dict[str, object] = {}
    line = apply_memory_defaults(settings)
    assert settings == {"maxmemory": 8 << 30, "backlog-memory": 2 << 30}
    assert line is not None and "maxmemory 8.0gb (half of the machine's memory, 16.0gb)" in line


def test_what_the_settings_say_is_kept(machine):
    settings: dict[str, object] = {"maxmemory": "1gb"}
    apply_memory_defaults(settings)
    assert settings == {"maxmemory": "1gb", "backlog-memory": 256 << 20}
    settings = {"maxmemory": 0}  # no limit, as asked: the backlog takes a quarter of half
    apply_memory_defaults(settings)
    assert settings == {"maxmemory": 0, "backlog-memory": 2 << 30}
    both: dict[str, object] = {"maxmemory": 5, "backlog-memory": 6}
    assert apply_memory_defaults(both) is None and both == {"maxmemory": 5, "backlog-memory": 6}


def test_a_cgroup_limit_below_the_machine_wins(monkeypatch):
    monkeypatch.setattr(memory_defaults, "physical_memory", lambda: 16 << 30)
    monkeypatch.setattr(memory_defaults, "cgroup_limit", lambda: 2 << 30)
    settings: dict[str, object] = {}
    line = apply_memory_defaults(settings)
    assert settings["maxmemory"] == 1 << 30
    assert line is not None and "the cgroup's memory limit" in line


def test_this_machine_has_memory():
    total, _source = memory_defaults.machine_memory()
    assert total > 0


def test_a_server_starts_bounded_and_says_so(tmp_path, spawn):
    server = spawn(tmp_path / "data")
    r = server.client()
    total, _source = memory_defaults.machine_memory()
    maxmemory = int(r.config_get("maxmemory")["maxmemory"])
    assert maxmemory == total // 2
    assert int(r.config_get("backlog-memory")["backlog-memory"]) == maxmemory // 4
    assert r.info("memory")["maxmemory"] == maxmemory
    assert "; by default maxmemory " in server.banner()
    r.close()
