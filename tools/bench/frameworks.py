"""Task frameworks at pinned versions: their sources and a virtualenv each, in a cache outside
the project's venv, for their own test suites (tests/support/framework_suites.py) and the
bench's framework rows (:mod:`.datatypes`).

Owns :class:`Suite` (one framework: its pinned version, where its source comes from, what its
venv installs, how its tests find their server), :data:`SUITES`, the cache's place
(:func:`cache_dir`: ``STREAMKEEP_SUITES_CACHE``, else :data:`DEFAULT_CACHE`),
:func:`fetch_source` (the source at its pinned version, by git, pip's sdist or a local copy,
its tests' conftest patched) and :func:`ensure_venv` (the framework's own venv, made once and
again when its pins change). A failed fetch or install raises what the tool raised
(``subprocess.CalledProcessError``, ``OSError``): the callers decide what that means.
Must not touch: the checkout's files (sources and venvs live in the cache), the project's
venv (its Python only makes the frameworks' venvs), any server.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from streamkeep.tools.temporaries import child_options

ROOT = Path(__file__).resolve().parents[2]
PROJECT_PYTHON = ROOT / ".venv" / "bin" / "python"
DEFAULT_CACHE = ROOT / ".venv" / "framework-suites"
MARKER = "# --- streamkeep framework-suite harness ---"


def cache_dir() -> Path:
    """Where the frameworks' sources and venvs live: ``STREAMKEEP_SUITES_CACHE`` or
    :data:`DEFAULT_CACHE`."""
    return Path(os.environ.get("STREAMKEEP_SUITES_CACHE", DEFAULT_CACHE))


@dataclass(frozen=True)
class Suite:
    """One framework: where its source and tests come from, what its tests need installed,
    how they are pointed at a server, and which of its tests run."""

    name: str
    version: str
    requirement: str  # pip's name==version (the sdist)
    git_url: str | None  # when the sdist has no tests
    git_tag: str | None
    install: tuple[str, ...]  # pip arguments; "{src}" is the source tree
    pytest_args: tuple[str, ...]  # the first is the tests' path (--paths replaces it)
    patch: Callable[[Path], None]
    unix: bool  # accepts a unix:// URL
    note: str = ""


def _append_once(path: Path, block: str) -> None:
    text = path.read_text(encoding="utf-8")
    if MARKER in text:
        text = text[:text.index(MARKER)]
    path.write_text(text.rstrip("\n") + "\n\n\n" + MARKER + "\n" + block, encoding="utf-8")


def _patch_streaq(src: Path) -> None:
    # streaq's redis_url fixture names a docker-compose host.
    _append_once(src / "tests" / "conftest.py", '''\
@pytest.fixture(scope="session")
def redis_url() -> str:
    return os.environ["STREAMKEEP_SUITE_URL"]
''')


def _patch_arq(src: Path) -> None:
    # arq's fixtures start a testcontainers Redis; theirs are replaced by the server under test.
    conftest = src / "tests" / "conftest.py"
    text = conftest.read_text(encoding="utf-8")
    text = text.replace("from testcontainers.redis import RedisContainer\n", "")
    text = text.replace("Generator[RedisContainer, None, None]", "Generator[None, None, None]")
    text = text.replace("redis_container: RedisContainer", "redis_container: None")
    conftest.write_text(text, encoding="utf-8")
    _append_once(conftest, '''\
@pytest.fixture(scope='session')
def redis_container():
    yield None


@pytest.fixture(scope='session')
def test_redis_host(redis_container) -> str:
    return os.environ['STREAMKEEP_SUITE_HOST']


@pytest.fixture(scope='session')
def test_redis_port(redis_container) -> int:
    return int(os.environ['STREAMKEEP_SUITE_PORT'])
''')


def _patch_pydocket(src: Path) -> None:
    # docket's fixtures start a Redis container per xdist worker.
    _append_once(src / "tests" / "conftest.py", '''\
@pytest.fixture(scope="session")
def redis_server():
    yield None


@pytest.fixture(scope="session")
def redis_port(redis_server) -> int:
    return int(os.environ.get("STREAMKEEP_SUITE_PORT") or 0)


@pytest.fixture
def redis_url(redis_port: int) -> str:
    url = os.environ["STREAMKEEP_SUITE_URL"]
    with sync_redis(url) as r:
        r.flushall()  # type: ignore
    return url
''')


SUITES: dict[str, Suite] = {
    "streaq": Suite(
        "streaq", "6.4.0", "streaq==6.4.0", "https://github.com/tastyware/streaq", "v6.4.0",
        # coredis as its lock file pins it: later ones changed XREADGROUP's reply shape
        ("{src}[web]", "coredis==6.3.0", "pytest>=8.4", "pytest-timeout", "trio", "uvloop",
         "httpx"),
        ("tests", "-k", "not sentinel and not cluster and not trio and not uvloop"),
        _patch_streaq, unix=True,
        note="basic worker only (no sentinel/cluster), asyncio backend only (no trio/uvloop)"),
    "arq": Suite(
        "arq", "0.28.0", "arq==0.28.0", None, None,
        # redis-py as its lock file pins it: 5.x deprecates close(), an error in its tests
        ("{src}", "redis[hiredis]==4.6.0", "pytest==8.4.2", "pytest-asyncio==0.23.6",
         "pytest-mock", "pytest-timeout", "pytz", "tzdata", "msgpack", "dirty-equals",
         "pydantic", "watchfiles"),
        ("tests",), _patch_arq, unix=False,
        note="TCP only: its tests build clients from host and port"),
    "pydocket": Suite(
        "pydocket", "0.27.0", "pydocket==0.27.0", None, None,
        ("{src}", "docker", "pytest>=9", "pytest-asyncio>=0.24", "pytest-timeout",
         "pytest-xdist"),
        ("tests/fundamentals", "-o", "addopts=", "--import-mode=importlib", "-p", "no:randomly",
         # its cron conformance table lives outside the sdist's tree
         "--ignore=tests/fundamentals/test_cron.py"),
        _patch_pydocket, unix=True,
        note="tests/fundamentals only (test_cron.py left out: its data file is not in the sdist),"
             " one process (its addopts' xdist and coverage dropped)"),
}


# ---------------------------------------------------------------- sources and venvs

def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, **child_options())


def fetch_source(suite: Suite, cache: Path, override: Path | None) -> Path:
    """The suite's source tree in the cache, at its pinned version, with its tests patched."""
    dest = cache / "src" / f"{suite.name}-{suite.version}"
    if not dest.exists():
        tmp = Path(tempfile.mkdtemp(dir=cache))
        try:
            is_git = override is not None and any(
                (override / p).exists() for p in ("HEAD", ".git"))
            if override is not None and is_git:
                _git_archive(override, suite.git_tag or f"v{suite.version}", tmp / "tree")
            elif override is not None:
                shutil.copytree(override, tmp / "tree")
            elif suite.git_url:
                _run(["git", "clone", "-q", "--depth", "1", "--branch", str(suite.git_tag),
                      suite.git_url, str(tmp / "tree")])
            else:
                _sdist(suite, tmp)
            dest.parent.mkdir(parents=True, exist_ok=True)
            (tmp / "tree").rename(dest)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    suite.patch(dest)
    return dest


def _git_archive(repo: Path, tag: str, into: Path) -> None:
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(repo if (repo / "HEAD").exists()
                                                      else repo / ".git"),
                              "archive", tag], check=True, capture_output=True,
                             **child_options()).stdout
    subprocess.run(["tar", "x", "-C", str(into)], input=archive, check=True, **child_options())


def _sdist(suite: Suite, tmp: Path) -> None:
    _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
          "-d", str(tmp), suite.requirement])
    (archive,) = tmp.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    (top,) = (p for p in tmp.iterdir() if p.is_dir())
    top.rename(tmp / "tree")


def ensure_venv(suite: Suite, cache: Path, src: Path) -> Path:
    """The suite's own venv (made and installed once; again when its pins change)."""
    venv = cache / "venvs" / suite.name
    spec = [a.replace("{src}", str(src)) for a in suite.install]
    digest = hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]
    stamp = venv / ".stamp"
    if stamp.exists() and stamp.read_text() == digest:
        return venv
    _run([str(PROJECT_PYTHON), "-m", "venv", "--clear", str(venv)])
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *spec])
    stamp.write_text(digest)
    return venv
