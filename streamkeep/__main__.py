"""`python -m streamkeep`: the `streamkeep` command line (streamkeep.tools.main)."""

from streamkeep.tools.main import main

if __name__ == "__main__":
    raise SystemExit(main())
