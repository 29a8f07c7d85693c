"""The crash bench's workloads by name."""

from __future__ import annotations

import pytest

from streamkeep.tools.crashbench.lists_workload import ListsWorkload
from streamkeep.tools.crashbench.types_workload import TypesWorkload
from streamkeep.tools.crashbench.workload import Workload
from streamkeep.tools.crashbench.workloads import WORKLOADS, new_workload


def test_each_name_gives_its_seeded_workload() -> None:
    assert WORKLOADS == ("streams", "types", "lists")
    assert isinstance(new_workload("streams", 1), Workload)
    assert isinstance(new_workload("types", 1), TypesWorkload)
    assert isinstance(new_workload("lists", 1), ListsWorkload)


def test_an_unknown_name_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="streams, types, lists"):
        new_workload("queues", 1)
