"""Reports people look at: one self-contained HTML file of charts and tables per run.

`streamkeep bench --html FILE`, `streamkeep crashbench --html FILE` and `streamkeep aof stats
--html FILE` each write one page made from the same JSON document their `--json` prints (so
the page and the JSON of a run never disagree, and the manual renders the committed bench JSON
with the same code at `make docs`).

The package, bottom to top (a module imports only those above it):

    charts     matplotlib, imported on first use (a one-line error when it is missing), its
               figures as inline SVG whose series and marks carry ids (``series-<name>``)
    page       the HTML document: inline CSS (screen and print), headings, tables, charts,
               written whole through tools.safe_output
    bench      the bench's rows, references, targets, spread and verdicts; --compare-pure's
               compiled/pure ratios
    crashbench the crash points on the workload's timeline, recovery times, fault models and
               policies, the violations with their details
    aof        an AOF's records and bytes over time by command, its segments and snapshot

Why matplotlib writing static SVG, not a JavaScript chart library inlined: the page needs no
script at all (nothing to fail in a browser's console, nothing fetched, nothing to run before
printing), SVG prints sharp at any size, and matplotlib is the most widely kept plotting
library for Python, already a wheel for every platform streamkeep runs on. It is an optional
dependency (``pip install 'streamkeep[report]'``), imported only when ``--html`` is given.
Must not touch: running or measuring anything; what the JSON documents hold (their modules
own them); stdout.
"""
