"""The AOF fault tests' file layers, re-exported from the crash bench, which owns them
(tools/crashbench/faultfs.py: `TrackingFS` models power loss, `FaultyFS` injects I/O errors).
Owns nothing itself; must not grow helpers of its own (they belong in the bench).
"""

from __future__ import annotations

from streamkeep.tools.crashbench.faultfs import (
    MODELS,
    TAILS,
    FaultSpec,
    FaultyFS,
    PowerCut,
    TrackingFS,
    stop_threads,
)

__all__ = ["MODELS", "TAILS", "FaultSpec", "FaultyFS", "PowerCut", "TrackingFS", "stop_threads"]
