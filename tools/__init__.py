"""Command-line entry points (``streamkeep``), demo and benchmark tooling."""
