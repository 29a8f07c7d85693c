"""engine.model.limits: every type's encoding limits declared by its type and applied from the
config by one mechanism (their settings registered with CONFIG, the engine's one object per type
changed in place by CONFIG SET, so values read the new limits at their next write)."""

from __future__ import annotations

import pytest

from streamkeep import Engine
from streamkeep.engine.exec.settings import ALIASES, DEFAULT_CONFIG, PARAMS
from streamkeep.engine.model.limits import Limits, Setting
from streamkeep.engine.model.value_types import TYPES

LIMITED = [vt for vt in TYPES if vt.limits is not None]


class Pair(Limits):
    SETTINGS = (Setting("pair-a", "a", "int", 1, "a"), Setting("pair-b", "b", "memory", 2, "b"))

    def __init__(self) -> None:
        self.a = 0
        self.b = 0


def test_apply_sets_each_setting_from_the_config() -> None:
    limits = Pair.from_config({"pair-a": 7, "pair-b": "8", "other": 9})
    assert (limits.a, limits.b) == (7, 8)
    limits.apply({"pair-a": 1, "pair-b": 2})
    assert (limits.a, limits.b) == (1, 2)
    with pytest.raises(KeyError):
        limits.apply({"pair-a": 1})


@pytest.mark.parametrize("vt", LIMITED, ids=lambda vt: vt.name)
def test_a_types_settings_are_configs_with_their_defaults(vt) -> None:
    assert vt.limits is not None and vt.limits.SETTINGS
    defaults = vt.limits()
    for setting in vt.limits.SETTINGS:
        param = PARAMS[setting.name]
        assert (param.kind, param.default, param.lo, param.hi) == (
            setting.kind, setting.default, setting.lo, setting.hi)
        assert DEFAULT_CONFIG[setting.name] == setting.default
        assert getattr(defaults, setting.attr) == setting.default, setting.name
        if setting.alias:
            assert ALIASES[setting.alias] == setting.name


@pytest.mark.parametrize("vt", LIMITED, ids=lambda vt: vt.name)
def test_config_set_changes_the_engines_one_object_in_place(vt) -> None:
    engine = Engine()
    limits = engine.limits[vt.slot]
    assert type(limits) is vt.limits
    setting = vt.limits.SETTINGS[0]
    value = setting.default + 3
    engine.execute("CONFIG", "SET", setting.name, str(value))
    assert engine.limits[vt.slot] is limits and getattr(limits, setting.attr) == value
    assert engine.execute("CONFIG", "GET", setting.name) == [setting.name.encode(),
                                                             str(value).encode()]


def test_a_new_limit_reaches_an_existing_value_at_its_next_write() -> None:
    engine = Engine()
    engine.execute("HSET", "h", "f", "v")
    assert engine.execute("OBJECT", "ENCODING", "h") == b"listpack"
    engine.execute("CONFIG", "SET", "hash-max-listpack-entries", "1")
    engine.execute("HSET", "h", "g", "w")
    assert engine.execute("OBJECT", "ENCODING", "h") == b"hashtable"
