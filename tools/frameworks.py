"""Task frameworks at pinned versions: their sources and a virtualenv each, in a cache outside
the project's venv, for their own test suites (tests/support/framework_suites.py) and the
bench's framework rows (:mod:`.bench.datatypes`).

Owns :class:`Suite` (one framework: its pinned version, where its source comes from, what its
venv installs, how its tests find their server), :data:`SUITES`, the cache's place
(:func:`cache_dir`: ``STREAMKEEP_SUITES_CACHE``, else :data:`DEFAULT_CACHE`),
:func:`fetch_source` (the source at its pinned version, by git, pip's sdist or a local copy,
or a local repository's other ref; its tests' conftest patched) and :func:`ensure_venv` (the
framework's own venv, made once and again when its pins change). A failed fetch or install
raises what the tool raised (``subprocess.CalledProcessError``, ``OSError``): the callers decide
what that means.
Must not touch: the checkout's files (sources and venvs live in the cache), the project's
venv (its Python only makes the frameworks' venvs), any server.
"""

from __future__ import annotations

import fcntl
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

ROOT = Path(__file__).resolve().parents[1]
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
    # Its tests reach redis-py's default localhost:6379 (hard-coded, or through processes they
    # start): the harness sends those connections to the server under test.
    redirect_default: bool = False
    # Its tests need a cluster: it runs against the cluster legs (a redis-server cluster and a
    # streamkeep cluster, three primaries with a replica each), never a single server.
    cluster: bool = False
    # More test paths after pytest_args' first (all dropped when --paths names others).
    more_paths: tuple[str, ...] = ()
    # Environment its tests read to choose their mode (pydocket's REDIS_VERSION=...-cluster).
    env: tuple[tuple[str, str], ...] = ()
    # Its tests that pass against the redis-server cluster but need what a streamkeep cluster
    # does not do (slot migration, failover, gossip-driven admin): node id -> why.
    out_of_scope: tuple[tuple[str, str], ...] = ()


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


def _patch_taskiq_redis(src: Path) -> None:
    # The tests come from git; the package from PyPI's pinned release (installed in the venv): the
    # tree's copy goes, or pytest's rootdir on sys.path would import it instead.
    shutil.rmtree(src / "taskiq_redis", ignore_errors=True)
    # Its redis_url fixture reads TEST_REDIS_URL, else a docker-compose port.
    _append_once(src / "tests" / "conftest.py", '''\
@pytest.fixture
def redis_url() -> str:
    return os.environ["STREAMKEEP_SUITE_URL"]
''')


def _patch_rq(src: Path) -> None:
    # RQ's tests connect with redis-py's defaults (Redis(), redis://127.0.0.1:6379/N, in the
    # test process and in the workers and CLIs it starts): the harness's sitecustomize sends
    # localhost:6379 to the server under test (Suite.redirect_default); nothing to patch.
    return None


def _patch_celery(src: Path) -> None:
    # t/integration reads its broker and backend URLs from TEST_BROKER/TEST_BACKEND at import
    # (an AMQP broker by default); its tasks' own redis-py client uses localhost:6379, which the
    # harness redirects. A unix:// URL is kombu's and the backend's redis+socket://.
    _append_once(src / "t" / "integration" / "conftest.py", '''\
def _streamkeep_url() -> str:
    url = os.environ["STREAMKEEP_SUITE_URL"]
    return "redis+socket://" + url[len("unix://"):] if url.startswith("unix://") else url


TEST_BROKER = _streamkeep_url()
TEST_BACKEND = _streamkeep_url()
''')


def _patch_redis_py_cluster(src: Path) -> None:
    # redis-py's own conftest takes the cluster's URL as --redis-url: nothing to patch.
    return None


def _patch_pydocket_cluster(src: Path) -> None:
    # docket's fixtures start a three-primary cluster container when REDIS_VERSION names
    # "-cluster" and give its tests a redis+cluster:// URL of its first node: the cluster under
    # test instead (its tests flush nothing on a cluster, each docket has a name of its own).
    _append_once(src / "tests" / "conftest.py", '''\
@pytest.fixture(scope="session")
def redis_server():
    yield None


@pytest.fixture(scope="session")
def redis_port(redis_server) -> int:
    return int(os.environ["STREAMKEEP_SUITE_PORT"])


@pytest.fixture
def redis_url(redis_port: int) -> str:
    return f"redis+cluster://{os.environ['STREAMKEEP_SUITE_HOST']}:{redis_port}"
''')


def _patch_taskiq_redis_cluster(src: Path) -> None:
    # As for its single-server tests; its cluster brokers' redis_cluster_url fixture reads
    # TEST_REDIS_CLUSTER_URL, else a docker-compose port: the cluster under test instead.
    shutil.rmtree(src / "taskiq_redis", ignore_errors=True)
    _append_once(src / "tests" / "conftest.py", '''\
@pytest.fixture
def redis_cluster_url() -> str:
    return os.environ["STREAMKEEP_SUITE_URL"]
''')


def _both_clients(tests: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """redis-py's `TestClass::test` of tests/test_cluster.py and its asyncio twin (the same
    name in tests/test_asyncio/test_cluster.py, run once, with a connection pool)."""
    named: list[tuple[str, str]] = []
    for test, why in tests.items():
        named.append((f"tests/test_cluster.py::{test}", why))
        if not test.startswith("TestClusterMonitor::") and test not in _SYNC_ONLY:
            named.append((f"tests/test_asyncio/test_cluster.py::{test}[pool]", why))
    return tuple(named)


_SYNC_ONLY = ("TestClusterRedisCommands::test_client_tracking",)
_CONTROLLER = ("a node's slots are the topology's, given whole by CLUSTER SETTOPOLOGY: "
               "ADDSLOTS/DELSLOTS (gossip-driven admin) belong to a controller")
_NO_BITMAPS = "streamkeep has no bitmap commands (BITOP): a single server refuses it too"
_NO_HLL = "streamkeep has no HyperLogLog (PFADD): a single server refuses it too"
_NO_GEO = "streamkeep has no geo commands (GEOADD): a single server refuses it too"
_NO_COMMAND = "streamkeep does not implement {}: a single server refuses it too"

# redis-py's cluster tests that pass against the redis-server cluster and need what stays out
# of the streamkeep cluster's scope: slot changes by gossip-driven admin commands (a
# controller's), or commands streamkeep implements on no server (no cluster matter).
REDIS_PY_OUT_OF_SCOPE: tuple[tuple[str, str], ...] = _both_clients({
    "TestRedisClusterObj::test_not_require_full_coverage_cluster_down_error": _CONTROLLER,
    **{f"TestClusterRedisCommands::test_cluster_bitop_{case}": _NO_BITMAPS
       for case in ("not", "not_empty_string", "not_in_place", "single_string",
                    "string_operands")},
    "TestClusterRedisCommands::test_cluster_pfcount": _NO_HLL,
    "TestClusterRedisCommands::test_cluster_pfmerge": _NO_HLL,
    **{f"TestClusterRedisCommands::{test}": _NO_GEO
       for test in ("test_cluster_georadius_store", "test_cluster_georadius_store_dist",
                    "test_cluster_geosearchstore", "test_geosearchstore_dist")},
    "TestClusterRedisCommands::test_cluster_sort_store": _NO_COMMAND.format("SORT"),
    "TestClusterRedisCommands::test_cluster_randomkey": _NO_COMMAND.format("RANDOMKEY"),
    "TestClusterRedisCommands::test_memory_stats": _NO_COMMAND.format("MEMORY STATS"),
    "TestClusterRedisCommands::test_memory_malloc_stats":
        _NO_COMMAND.format("MEMORY MALLOC-STATS"),
    "TestClusterRedisCommands::test_client_pause": _NO_COMMAND.format("CLIENT PAUSE"),
    "TestClusterRedisCommands::test_client_unpause": _NO_COMMAND.format("CLIENT UNPAUSE"),
    "TestClusterRedisCommands::test_client_tracking": _NO_COMMAND.format("CLIENT TRACKING"),
    "TestClusterRedisCommands::test_client_trackinginfo":
        _NO_COMMAND.format("CLIENT TRACKINGINFO"),
    **{f"TestClusterMonitor::{test}": _NO_COMMAND.format("MONITOR")
       for test in ("test_wait_command_not_found", "test_response_values",
                    "test_command_with_quoted_key", "test_command_with_binary_data",
                    "test_command_with_escaped_data")},
})


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
    "taskiq-redis": Suite(
        # The sdist has no tests: they come from git at the release's tag.
        "taskiq-redis", "1.2.4", "taskiq-redis==1.2.4",
        "https://github.com/taskiq-python/taskiq-redis", "1.2.4",
        ("taskiq-redis==1.2.4", "redis==8.1.0", "taskiq==0.13.0", "pytest==9.2.0",
         "pytest-timeout==2.4.0", "anyio==4.16.0", "freezegun==1.5.5", "fakeredis==2.41.0"),
        ("tests", "-p", "anyio", "-k", "not cluster and not sentinel"),
        _patch_taskiq_redis, unix=True,
        note="list (LPUSH/BRPOP), pub/sub and stream brokers, schedule sources, result backend;"
             " no cluster/sentinel tests; the tests from git, the package from PyPI"),
    "rq": Suite(
        "rq", "3.0.0", "rq==3.0.0", None, None,
        ("{src}", "redis==8.1.0", "pytest==9.2.0", "pytest-timeout==2.4.0", "psutil==7.2.2"),
        ("tests", "-o", "addopts="),
        _patch_rq, unix=True, redirect_default=True,
        note="its whole suite (its slow and SSL tests skip themselves); localhost:6379"
             " redirected to the server under test"),
    "celery": Suite(
        "celery", "5.7.0", "celery==5.7.0", None, None,
        # its requirements/test.txt's pins, and the extras t/integration imports
        ("{src}[redis,pydantic,auth,sqlalchemy]", "kombu==5.7.0", "redis==8.1.0",
         "psutil==7.2.2", "pytest==9.1.1", "pytest-rerunfailures==16.7", "pytest-timeout==2.4.0",
         "pytest-subtests==0.15.0", "pytest-order==1.5.0", "pytest-celery==1.3.0",
         "freezegun==1.5.5"),
        ("t/integration", "-o", "addopts=",
         # Azure's backend (it imports the Azure SDK before it would skip), memcached's, SQLite's
         *(f"--ignore=t/integration/test_{name}.py"
           for name in ("backend", "cache_backend", "database_backend",
                        # a process's memory and threads measured over many worker start-ups
                        "backend_leak_in_fixture_teardown", "mem_leak_in_exception_handling",
                        "events_state_memory_leak")),
         # a task waits up to its own timeouts (its flaky tests allow 300 s): the harness's
         # per-test timeout, before these, is raised
         "--timeout=120"),
        _patch_celery, unix=True, redirect_default=True,
        note="t/integration (Redis broker and result backend, one prefork session worker) less"
             " its Azure, memcached and SQLite backends' tests and its memory-leak tests"),
    # ---- the cluster suites: against a three-primary, three-replica cluster
    "redis-py-cluster": Suite(
        # The release the project's venv uses; its tests are in git only.
        "redis-py-cluster", "8.1.0", "redis==8.1.0", "https://github.com/redis/redis-py",
        "v8.1.0",
        ("{src}", "pytest==8.4.2", "pytest-asyncio==1.1.0", "pytest-timeout==2.4.0",
         "packaging", "ujson", "opentelemetry-api", "opentelemetry-sdk",
         # its pytest settings name a coverage warning
         "coverage"),
        ("tests/test_cluster.py", "--redis-url={url}", "-o", "addopts=",
         # its CI's cluster run's markers
         "-m", "not onlynoncluster and not redismod and not fixed_client"
               " and not multidb_integration"),
        _patch_redis_py_cluster, unix=False, cluster=True,
        more_paths=("tests/test_cluster_transaction.py", "tests/test_asyncio/test_cluster.py"),
        out_of_scope=REDIS_PY_OUT_OF_SCOPE,
        note="tests/test_cluster.py, test_cluster_transaction.py, test_asyncio/test_cluster.py"
             " with its CI's cluster markers, --redis-url at the first node"),
    "pydocket-cluster": Suite(
        "pydocket-cluster", "0.27.0", "pydocket==0.27.0", None, None,
        ("{src}", "docker", "pytest>=9", "pytest-asyncio>=0.24", "pytest-timeout",
         "pytest-xdist"),
        ("tests/fundamentals", "-o", "addopts=", "--import-mode=importlib", "-p", "no:randomly",
         "--ignore=tests/fundamentals/test_cron.py",
         # Its warnings are errors, and a cluster client some test leaves unclosed warns when
         # the garbage collector takes it, in whichever later test's setup that falls (one of
         # test_strikelist.py's, against either cluster): the client's own leak, no server's.
         "-W", "ignore::ResourceWarning"),
        _patch_pydocket_cluster, unix=False, cluster=True,
        more_paths=("tests/test_docket_keys.py", "tests/test_lua_decorator.py",
                    "tests/test_results_storage.py", "tests/test_strikelist.py"),
        env=(("REDIS_VERSION", "8.10-cluster"),),
        note="tests/fundamentals and its tests that branch on a cluster (docket keys, Lua,"
             " results, strike list) in its cluster mode (REDIS_VERSION=...-cluster: a"
             " redis+cluster:// URL of the first node)"),
    "taskiq-redis-cluster": Suite(
        "taskiq-redis-cluster", "1.2.4", "taskiq-redis==1.2.4",
        "https://github.com/taskiq-python/taskiq-redis", "1.2.4",
        ("taskiq-redis==1.2.4", "redis==8.1.0", "taskiq==0.13.0", "pytest==9.2.0",
         "pytest-timeout==2.4.0", "anyio==4.16.0", "freezegun==1.5.5", "fakeredis==2.41.0"),
        ("tests", "-p", "anyio", "-k", "cluster"),
        _patch_taskiq_redis_cluster, unix=False, cluster=True,
        note="its cluster brokers, schedule sources and result backend (tests named cluster)"),
}


# ---------------------------------------------------------------- sources and venvs

def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, **child_options())


def fetch_source(suite: Suite, cache: Path, override: Path | None,
                 ref: str | None = None) -> Path:
    """The suite's source tree in the cache, at its pinned version, with its tests patched.

    `ref` (with a git repository as `override`) takes that ref instead of the pinned tag: for a
    copy of the repository that lacks the tag (its tree is kept apart, named for the ref)."""
    dest = cache / "src" / (f"{suite.name}-{suite.version}" + (f"+{ref}" if ref else ""))
    if not dest.exists():
        tmp = Path(tempfile.mkdtemp(dir=cache))
        try:
            is_git = override is not None and any(
                (override / p).exists() for p in ("HEAD", ".git"))
            if override is not None and is_git:
                _git_archive(override, ref or suite.git_tag or f"v{suite.version}",
                             tmp / "tree")
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
    # No binary for this package only: its build backend (pip prepares the sdist's metadata)
    # comes as a wheel, as some (uv_build, a Rust program) cannot be built from source here.
    name = suite.requirement.split("==")[0]
    _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", name,
          "-d", str(tmp), suite.requirement])
    (archive,) = tmp.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    (top,) = (p for p in tmp.iterdir() if p.is_dir())
    top.rename(tmp / "tree")


def ensure_venv(suite: Suite, cache: Path, src: Path) -> Path:
    """The suite's own venv (made and installed once; again when its pins change). Made under
    a lock of its own: two processes wanting it at once (two test workers, two bench rows)
    must not clear it under each other."""
    venv = cache / "venvs" / suite.name
    spec = [a.replace("{src}", str(src)) for a in suite.install]
    digest = hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]
    stamp = venv / ".stamp"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{suite.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and stamp.read_text() == digest:
            return venv
        _run([str(PROJECT_PYTHON), "-m", "venv", "--clear", str(venv)])
        # -I: the caller's PYTHONPATH (a test run's) must not make pip find a pin satisfied
        # by a package the venv itself will not have (its children run isolated too)
        _run([str(venv / "bin" / "python"), "-I", "-m", "pip", "install", "-q", *spec])
        stamp.write_text(digest)
    return venv
