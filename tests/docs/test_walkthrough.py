"""The README, then the getting-started pages in the order the README lists them, followed top
to bottom by a new user on a fresh copy of the repository (tests/support/walkthrough.py: what a
clone has, not what a reader's own run left in the checkout), every
shell line and Python block as written, in one directory, with `make run`'s server running
from the README's first block to the end. Each must succeed: a command that is not on PATH,
an example that collides with an earlier one's data (a group that exists, a directory the
server holds) or a Python example missing a package fails here."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_examples import PAGES, README, ROOT
from tests.support.walkthrough import Walkthrough, copy_checkout

GETTING_STARTED = [PAGES / "getting-started" / name
                   for name in ("embedded.md", "server.md", "queue.md", "worker-pool.md",
                                "asyncio.md", "cluster.md", "cluster-controller.md")]

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
    # What the pages made at the top of the copy, a reader's run makes in the checkout: git
    # ignores it (no `git add .` commits a data directory).
    made = sorted(p.name + "/" * p.is_dir() for p in walk.repo.iterdir()
                  if p.name != ".venv" and not (ROOT / p.name).exists())
    assert made and not [name for name in made if not ignored(name)], made


def ignored(name: str) -> bool:
    """Whether the checkout's .gitignore ignores `name` (a path from its top)."""
    return subprocess.run(["git", "check-ignore", "-q", "--no-index", name], cwd=ROOT,
                          check=False).returncode == 0


def test_the_directories_the_pages_make_are_ignored_by_git() -> None:
    """Each `./<name>` directory the README and the getting-started pages open or serve is
    in .gitignore: a reader who follows them in the checkout leaves nothing git shows."""
    named = set()
    for page in (README, *GETTING_STARTED):
        named |= set(re.findall(r"""(?:Engine\.open\(|--dir |["' ])\./([\w.-]+)""",
                                page.read_text()))
    assert {"embedded-data", "queue-data", "pool-data"} <= named
    assert not [name for name in sorted(named) if not ignored(f"{name}/")], named


def test_the_copy_has_what_a_clone_has(tmp_path: Path) -> None:
    """The walk's copy of the checkout: the tracked files, and new files inside a tracked
    directory (a module not added yet), but nothing a reader left at the top (the README's
    ./embedded-data, whose group the README's example would then find existing)."""
    repo = tmp_path / "checkout"
    for name, text in (("README.md", "x"), ("pkg/a.py", "a"), (".gitignore", "*.pyc\n")):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    for name in ("pkg/new.py", "pkg/b.pyc", "embedded-data/manifest.json", "notes.txt"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("left")
    copy_checkout(tmp_path / "copy", repo)
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix()
                    for p in (tmp_path / "copy").rglob("*") if p.is_file())
    assert copied == [".gitignore", "README.md", "pkg/a.py", "pkg/new.py"]
