"""Demo of streamkeep (stub; to be written)."""

from __future__ import annotations


def main() -> int:
    print("not yet implemented")
    return 0
