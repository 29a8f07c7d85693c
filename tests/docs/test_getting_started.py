"""The getting-started pages as a newcomer follows them: each page's ```python blocks run in
order in a fresh working directory (nothing but what the blocks make), with the results the
page promises; its shell lines are real `streamkeep` commands."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from streamkeep import Engine
from streamkeep.aof.fs import lock_holder
from streamkeep.aof.manifest import LOCK_FILE
from streamkeep.tools.main import build_parser
from tests.support.doc_examples import PAGES, command_lines, python_blocks, run_python_blocks
from tests.support.pids import wait_gone

EMBEDDED = PAGES / "getting-started" / "embedded.md"
SERVER = PAGES / "getting-started" / "server.md"
QUEUE = PAGES / "getting-started" / "queue.md"
POOL = PAGES / "getting-started" / "worker-pool.md"
ASYNCIO = PAGES / "getting-started" / "asyncio.md"
CLUSTER = PAGES / "getting-started" / "cluster.md"


def run_page(page: Path, cwd: Path) -> list[str]:
    code = python_blocks(page.read_text())
    assert code, f"{page.name} has no example"
    return run_python_blocks(code, cwd, str(page.relative_to(PAGES)))


def test_the_embedded_page_runs_in_memory_then_on_disk(tmp_path: Path) -> None:
    in_memory, on_disk = run_page(EMBEDDED, tmp_path)
    lines = in_memory.splitlines()
    assert lines[0].startswith("{'pending': 1,")
    assert lines[-1] == ("NOGROUP No such key 'orders' or consumer group 'nope' in XREADGROUP "
                         "with GROUP option")
    assert on_disk == "1\n"
    with Engine.open(str(tmp_path / "jobs-data")) as db:
        assert db.execute("XLEN", "jobs") == 1


def test_the_server_page_serves_redis_py_and_shuts_down_cleanly(tmp_path: Path) -> None:
    (out,) = run_page(SERVER, tmp_path)
    entry, pending = out.splitlines()
    assert re.fullmatch(r"\d+-0 \{'item': 'book', 'qty': '1'\}", entry), out
    assert pending == "0"
    # The clean shutdown released the directory: it opens, with the group's ack in it.
    with Engine.open(str(tmp_path / "py-data")) as db:
        assert db.redis().xpending("orders", "shipping")["pending"] == 0
        assert db.execute("XLEN", "orders") == 1


def test_the_server_pages_example_stops_its_server_when_it_raises(tmp_path: Path) -> None:
    """The example with an error where the newcomer's own code would go: the script fails,
    and its server is gone with it (the directory's lock free), not left running."""
    (code,) = python_blocks(SERVER.read_text())
    lines = code.splitlines()
    at = next(i for i, line in enumerate(lines) if "r.xadd(" in line)
    indent = lines[at][:len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at, f"{indent}raise RuntimeError('the script fails here')")
    # Its output to a file: a server left running would hold a pipe open after the script.
    with open(tmp_path / "stderr", "w+") as stderr:
        done = subprocess.run([sys.executable, "-c", "\n".join(lines)], cwd=tmp_path,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=stderr, timeout=120, check=False)
        stderr.seek(0)
        said = stderr.read()
    holder = lock_holder(str(tmp_path / "py-data" / LOCK_FILE))
    if holder is not None:  # (left running: this test's to end)
        os.kill(holder, signal.SIGKILL)
        wait_gone(holder, 30)
    assert done.returncode == 1 and "RuntimeError: the script fails here" in said
    assert holder is None, "the example left its server running"
    with Engine.open(str(tmp_path / "py-data")) as db:  # stopped cleanly: the group is there
        assert db.execute("XINFO", "GROUPS", "orders")[0][1] == b"shipping"


def test_the_queue_tutorial_handles_everything_and_dead_letters_the_poison(
        tmp_path: Path) -> None:
    (out,) = run_page(QUEUE, tmp_path)
    handled, poison, stats = out.splitlines()
    # cat.png and the 20 dogs; the crashed worker's message came back after its timeout
    assert handled == "21"
    source_id, deliveries, consumer, *rest = poison.split(" ", 3)
    assert deliveries == "3" and consumer in ("b'alice'", "b'bob'")
    assert "ValueError: cannot decode corrupt.png" in rest[0]
    assert rest[0].endswith("{b'image': b'corrupt.png'}")
    figures = ast.literal_eval(stats)
    assert figures["dead"] == 0 and figures["lag"] == 1  # requeued: a new message


@pytest.mark.parametrize("page", [EMBEDDED, SERVER, QUEUE, POOL, ASYNCIO, CLUSTER],
                         ids=lambda p: p.name)
def test_the_shell_lines_are_real_commands(page: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    for argv in command_lines(page.read_text()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exit_:
            pytest.fail(f"{page.name}: streamkeep {' '.join(argv)}: exit {exit_.code}: "
                        f"{capsys.readouterr().err}")


def test_the_worker_pool_page_shares_one_directory_then_its_server_leaves(
        tmp_path: Path) -> None:
    from tests.support.pids import wait_gone
    from tests.support.shared_dirs import servers_of, stop_servers

    data = tmp_path / "pool-data"
    try:
        (out,) = run_page(POOL, tmp_path)
        stats, consumers, poison = out.splitlines()
        assert stats == "101 0 0 1"
        assert consumers == "[b'w0', b'w1', b'w2', b'w3']"
        assert poison == "3 b'ValueError: cannot decode corrupt.png'"
        # Its server outlived the page's process, and leaves once idle (idle_shutdown 5).
        for pid in servers_of(data):
            wait_gone(pid, 60)
        assert "shut down cleanly (idle)" in (data / "shared.log").read_text()
        assert not (data / "shared.sock").exists()
    finally:
        stop_servers(data)


def test_the_asyncio_page_runs_in_process_then_on_a_shared_directory(tmp_path: Path) -> None:
    from tests.support.shared_dirs import stop_servers

    try:
        in_process, queue, shared = run_page(ASYNCIO, tmp_path)
        assert in_process.splitlines() == ["orders {'item': 'book', 'qty': '1'}", "[1, 1]",
                                           "1"]
        # every order handled once, none left pending: in process and on a shared directory
        assert queue == "100 100 0\n" and shared == "100 0\n"
        with Engine.open(str(tmp_path / "queue-data")) as db:
            assert db.execute("XLEN", "orders") == 100
    finally:
        stop_servers(tmp_path / "shared-data")


@pytest.mark.redis
def test_the_cluster_page_makes_a_cluster_and_a_node_comes_back(spawn, tmp_path: Path) -> None:
    """The page's three nodes (spawned here on free ports: the page's 7000-7002 may be taken),
    its `cluster create` line, its client block, its MOVED line, and the restarted node
    serving what it had."""
    from redis.cluster import RedisCluster

    from streamkeep.engine.model.keyslot import key_slot
    from streamkeep.tools.cluster import spread

    text = CLUSTER.read_text()
    servers = [spawn(tmp_path / f"node-{7000 + i}", "--cluster-enabled", "yes",
                     "--appendfsync", "always") for i in range(3)]
    ports = {str(7000 + i): str(server.port) for i, server in enumerate(servers)}

    def here(line: str) -> str:
        return re.sub(r"\b700[0-2]\b", lambda m: ports[m.group(0)], line)

    create = next(argv for argv in command_lines(text) if argv[:2] == ["cluster", "create"])
    made = subprocess.run([sys.executable, "-m", "streamkeep", *map(here, create)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[-1] == "topology epoch 1"
    (code,) = python_blocks(text)
    out = run_python_blocks([here(code)], tmp_path, "getting-started/cluster.md")[0]
    assert out.splitlines() == ["1 b'1'", str(sorted(s.port for s in servers))]
    # The page's MOVED line: the slot, and the second node its owner.
    slot = key_slot(b"{tenant-0}:submitted")
    assert f"(error) MOVED {slot} 127.0.0.1:7001" in text
    assert spread(3)[1][0] <= slot <= spread(3)[1][1]
    # The second node killed and started again on its directory: the same slots and keys.
    servers[1].kill()
    spawn(tmp_path / "node-7001", "--cluster-enabled", "yes", "--appendfsync", "always",
          "--port", str(servers[1].port), port=servers[1].port)
    rc = RedisCluster(host="127.0.0.1", port=servers[0].port)
    try:
        assert rc.get("{tenant-0}:submitted") == b"1"
        assert rc.xlen("{tenant-0}:jobs") == 1
    finally:
        rc.close()
