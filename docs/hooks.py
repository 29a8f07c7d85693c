"""The manual's MkDocs hook: each page's `<!-- generate: NAME [ARGUMENT] -->` markers become the
content `streamkeep.tools.docs` renders from the project's registries (command table, config
registry, CLI parsers, bench registry and committed results) when the site is built."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from streamkeep.tools import docs
from streamkeep.tools.main import build_parser


@cache
def _sources(docs_dir: str) -> docs.Sources:
    """Built once per build, not once per page: the parser is the whole CLI's."""
    return docs.Sources(parser=build_parser(), docs_dir=Path(docs_dir))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return docs.expand(markdown, _sources(config["docs_dir"]))
