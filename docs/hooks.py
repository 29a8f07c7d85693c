"""The manual's MkDocs hook: each page's `<!-- generate: NAME [ARGUMENT] -->` markers become the
content `streamkeep.tools.docs` renders from the project's registries (command table, config
registry, CLI parsers, bench registry and committed results) when the site is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamkeep.tools import docs
from streamkeep.tools.main import build_parser


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    sources = docs.Sources(parser=build_parser(), docs_dir=Path(config["docs_dir"]))
    return docs.expand(markdown, sources)
