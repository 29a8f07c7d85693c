"""The security guide (docs/src/guides/security.md) followed as written, as an operator would on
a fresh machine (tests/support/walkthrough.py): its CA and certificates made with openssl, the
TLS-only server started from its config and ACL file, its users made, the producer's Python
block run, certificate and password rotation; then what each step promised is checked in what
they printed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.doc_examples import PAGES
from tests.support.walkthrough import Walkthrough

GUIDE = PAGES / "guides" / "security.md"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def walk(tmp_path: Path) -> Iterator[Walkthrough]:
    walkthrough = Walkthrough(tmp_path)
    try:
        yield walkthrough
    finally:
        walkthrough.close()


def test_the_security_guide_works_as_written(walk: Walkthrough) -> None:
    walk.follow(GUIDE)
    said = "\n".join(step.output for step in walk.steps)
    served = "".join(server.output() for server in walk.servers)
    assert " TLS port " in served and " port 0" not in served
    assert "admin" in said  # ACL WHOAMI
    assert "No permissions to access a key" in said
    assert "User producer has no permissions to run the 'xrange' command" in said
    assert "User worker has no permissions to run the 'xadd' command" in said  # DRYRUN
    assert "producer-pass" not in (walk.repo / "users.acl").read_text()  # hashes only
    for line in ("user producer on", "user worker on", "user exporter on", "user sentinel on",
                 "user replica on"):
        assert line in (walk.repo / "users.acl").read_text()
    walk.close()
    assert not walk.stopped_badly, walk.stopped_badly
