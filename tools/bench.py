"""Benchmarks for streamkeep (stub; to be written)."""

from __future__ import annotations

import argparse


def main(args: argparse.Namespace | None = None) -> int:
    print("not yet implemented")
    return 0
