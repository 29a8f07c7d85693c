"""The crash bench's workloads by name (`--workload`): the streams one (workload), the other
types' (types_workload) and the lists' (lists_workload). Owns the choice only; must not touch
what a workload runs.
"""

from __future__ import annotations

from streamkeep.tools.crashbench.lists_workload import ListsWorkload
from streamkeep.tools.crashbench.types_workload import TypesWorkload
from streamkeep.tools.crashbench.workload import Workload

# `--workload`: workload's, types_workload's or lists_workload's
WORKLOADS = ("streams", "types", "lists")

AnyWorkload = Workload | TypesWorkload | ListsWorkload


def new_workload(name: str, seed: int) -> AnyWorkload:
    """The seeded workload `name` (one of WORKLOADS): `Workload`, `TypesWorkload` or
    `ListsWorkload`."""
    if name == "types":
        return TypesWorkload(seed)
    if name == "lists":
        return ListsWorkload(seed)
    if name != "streams":
        raise ValueError(f"--workload {name}: one of {', '.join(WORKLOADS)}")
    return Workload(seed)
