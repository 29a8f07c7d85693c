"""The crash bench's workloads by name (`--workload`): the streams one (workload) and the other
types' (types_workload). Owns the choice only; must not touch what a workload runs.
"""

from __future__ import annotations

from streamkeep.tools.crashbench.types_workload import TypesWorkload
from streamkeep.tools.crashbench.workload import Workload

WORKLOADS = ("streams", "types")  # `--workload`: workload's or types_workload's


def new_workload(name: str, seed: int) -> Workload | TypesWorkload:
    """The seeded workload `name` (one of WORKLOADS): `Workload` or `TypesWorkload`."""
    if name == "types":
        return TypesWorkload(seed)
    if name != "streams":
        raise ValueError(f"--workload {name}: one of {', '.join(WORKLOADS)}")
    return Workload(seed)
