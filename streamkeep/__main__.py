"""`python -m streamkeep`: the `streamkeep` command line (streamkeep.tools.cli)."""

from streamkeep.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
