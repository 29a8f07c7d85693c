"""README.md is the front page: short (what streamkeep is and for whom, the quick start, an
embedded and a server example, how it compares, a few figures with the commands that reproduce
them), with the rest in the manual it links to; every link it has leads to a file that exists.
Its examples run in tests/careless/test_readme.py."""

from __future__ import annotations

import re

from tests.support.doc_examples import PAGES, README, ROOT, command_lines

TEXT = README.read_text()


def test_the_readme_is_a_short_front_page() -> None:
    assert len(TEXT.splitlines()) <= 250
    for heading in ("## Quick start", "## Embedded", "## Server", "## How it compares",
                    "## Figures", "## The manual"):
        assert heading in TEXT, heading
    assert "make run" in TEXT and "make test" in TEXT
    assert "| fakeredis | persist-queue |" in TEXT


def test_its_figures_come_with_the_commands_that_reproduce_them() -> None:
    lines = command_lines(TEXT)
    assert any(argv[0] == "bench" for argv in lines)
    assert any(argv[0] == "crashbench" for argv in lines)


def test_every_link_leads_to_a_file_and_every_guide_is_linked() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", TEXT)
    assert links
    for link in links:
        assert (ROOT / link).exists(), link
    linked = {(ROOT / link).resolve() for link in links}
    for page in (PAGES / "guides").glob("*.md"):
        assert page.resolve() in linked, page.name
    for page in (PAGES / "getting-started").glob("*.md"):
        assert page.resolve() in linked, page.name
