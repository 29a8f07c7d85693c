"""The README, then the getting-started pages in the order the README lists them, followed top
to bottom by a new user on a fresh copy of the repository (tests/support/walkthrough.py): every
shell line and Python block as written, in one directory, with `make run`'s server running
from the README's first block to the end. Each must succeed: a command that is not on PATH,
an example that collides with an earlier one's data (a group that exists, a directory the
server holds) or a Python example missing a package fails here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_examples import PAGES, README
from tests.support.walkthrough import Walkthrough

GETTING_STARTED = [PAGES / "getting-started" / name
                   for name in ("embedded.md", "server.md", "queue.md", "worker-pool.md",
                                "asyncio.md")]

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walkthrough]:
    walkthrough = Walkthrough(tmp_path)
    try:
        yield walkthrough
    finally:
        walkthrough.close()


def test_the_readme_and_the_getting_started_pages_work_as_written(walk: Walkthrough) -> None:
    assert set(GETTING_STARTED) == set((PAGES / "getting-started").glob("*.md"))
    for page in (README, *GETTING_STARTED):
        walk.follow(page)
    ran = {step.source.split(":")[0] for step in walk.steps}
    assert ran == {"README.md", *(p.relative_to(PAGES.parents[1]).as_posix()
                                  for p in GETTING_STARTED)}
    said = "\n".join(step.output for step in walk.steps)
    assert "compiled core" in said or "pure Python" in said  # streamkeep --version, on PATH
    assert "shipping" in said and "billing" in said  # XINFO GROUPS against make run's server
    assert walk.make_run is not None and walk.make_run.proc.poll() is None
    walk.close()
    assert not walk.stopped_badly, walk.stopped_badly  # Ctrl-C stops each one cleanly
