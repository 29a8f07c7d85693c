"""`streamkeep ... verify` (being written: see issue #14)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a data directory or a segment file")


def main(args: argparse.Namespace) -> int:
    print("streamkeep: not implemented yet", file=sys.stderr)
    return 3
