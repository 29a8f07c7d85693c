"""tools/temporaries.py: temporaries named and locked by their maker, swept only when provably a
dead process's (its name's form, this user's, no symlink, the pid gone, the lock free), and
child processes that leave with the command (a session of their own; SIGKILLed by the kernel
when the command is; killed by `cleanup`)."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from streamkeep.tools import temporaries
from tests.support.pids import wait_gone
from tests.support.serve_process import ROOT


def dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_temporary_names_its_maker_and_holds_its_lock(tmp_path: Path) -> None:
    with temporaries.temp_directory("thing", str(tmp_path)) as made:
        name = os.path.basename(made)
        assert name.startswith(f"streamkeep-thing-{os.getpid()}-")
        assert temporaries.is_owned_name(name)
        fd = os.open(made, os.O_RDONLY | os.O_DIRECTORY)
        try:  # held by its maker: nobody else gets it
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        assert temporaries.sweep(str(tmp_path)) == []  # its maker lives
    assert list(tmp_path.iterdir()) == []


def test_only_known_kinds_are_made() -> None:
    with pytest.raises(ValueError, match="not a head"):
        temporaries.owned_name(".out.backup")
    assert temporaries.is_owned_name(temporaries.owned_name(".out.tmp"))


def test_the_sweep_removes_what_a_dead_process_left(tmp_path: Path) -> None:
    gone = dead_pid()
    (tmp_path / f"streamkeep-spark-{gone}-0123abcd").mkdir()
    (tmp_path / f"streamkeep-spark-{gone}-0123abcd" / "inside").write_text("x")
    (tmp_path / f".export.tmp-{gone}-deadbeef").mkdir()
    (tmp_path / f".report.json.tmp-{gone}-00ff00ff").write_text("half")
    assert sorted(temporaries.sweep(str(tmp_path))) == sorted([
        f"streamkeep-spark-{gone}-0123abcd", f".export.tmp-{gone}-deadbeef",
        f".report.json.tmp-{gone}-00ff00ff"])
    assert list(tmp_path.iterdir()) == []


def test_the_sweep_leaves_anything_not_provably_a_dead_process_s(tmp_path: Path) -> None:
    gone = dead_pid()
    kept = [
        f"streamkeep-spark-{os.getpid()}-0123abcd",  # a live process's
        f".export.bak-{gone}-deadbeef",  # a kind it does not make
        f".export.tmp-{gone}-deadbeef.old",  # not its form
        f"export.tmp-{gone}-deadbeef",  # (no leading dot)
        f"streamkeep-spark-{gone}-0123abcz",  # not a token
        f"streamkeep-held-{gone}-0123abcd",  # locked: a forked child of its maker lives
        f"streamkeep-link-{gone}-0123abcd",  # a symlink: what it names is nobody's to delete
    ]
    for name in kept[:-1]:
        (tmp_path / name).mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "precious").write_text("keep")
    (tmp_path / kept[-1]).symlink_to(target)
    held = os.open(tmp_path / kept[-2], os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert temporaries.sweep(str(tmp_path)) == []
    finally:
        os.close(held)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "target"])
    assert (target / "precious").read_text() == "keep"
    assert temporaries.sweep(str(tmp_path)) == [kept[-2]]  # its lock let go


@pytest.mark.skipif(os.geteuid() != 0, reason="another user's file is made by root only")
def test_the_sweep_leaves_another_users_file(tmp_path: Path) -> None:
    name = f"streamkeep-spark-{dead_pid()}-0123abcd"
    (tmp_path / name).mkdir()
    os.chown(tmp_path / name, 65534, 65534)
    assert temporaries.sweep(str(tmp_path)) == []
    assert (tmp_path / name).is_dir()


def test_a_missing_directory_sweeps_nothing(tmp_path: Path) -> None:
    assert temporaries.sweep(str(tmp_path / "none")) == []


def test_cleanup_kills_tracked_children_and_removes_held_temporaries(tmp_path: Path) -> None:
    path = temporaries.temp_directory_path("thing", str(tmp_path))
    child = subprocess.Popen(["sleep", "600"], **temporaries.child_options())
    temporaries.track(child)
    temporaries.cleanup()
    assert child.returncode == -signal.SIGKILL
    assert not os.path.exists(path)


CHILD_OF_A_KILLED_PARENT = """\
import subprocess, sys
from streamkeep.tools import temporaries
child = subprocess.Popen(["sleep", "600"], **temporaries.child_options())
print(child.pid, flush=True)
sys.stdin.read()
"""


def test_a_child_leaves_with_its_parent_even_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", CHILD_OF_A_KILLED_PARENT],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    assert os.getsid(child) == child != os.getsid(0)  # a session of its own
    parent.kill()
    parent.wait()
    wait_gone(child, 20.0)


def test_end_child_stops_a_group_and_reaps_it() -> None:
    # A shell that ignores SIGTERM, with a child of its own in its group.
    proc = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 600 & echo ready; wait"],
                            stdout=subprocess.PIPE, text=True, **temporaries.child_options())
    temporaries.track(proc)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    temporaries.end_child(proc, timeout=0.5, signum=signal.SIGTERM)
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 20
    while _group(proc.pid) and time.monotonic() < deadline:  # (init reaps the sleep)
        time.sleep(0.05)
    assert _group(proc.pid) == []  # nothing of its group is left


def _group(pgid: int) -> list[int]:
    """The running (not zombie) processes of process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_pool_worker_starts_under_every_start_method(method: str) -> None:
    """init_worker keeps a worker whose parent lives: under forkserver the worker's parent is
    the forkserver, not the process that asked for it (a worker that took that for its
    parent's death exited at once, and the pool broke)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(2, mp_context=context, initializer=temporaries.init_worker) as pool:
        assert list(pool.map(abs, [-1, -2, -3])) == [1, 2, 3]


LATE_POOL = """
import multiprocessing, os, signal, sys
from concurrent.futures import ProcessPoolExecutor
from streamkeep.tools import temporaries
from tests.support.interrupts import late_init

if __name__ == "__main__":
    method = sys.argv[1]
    context = multiprocessing.get_context(method)
    started, go_on = context.Queue(), context.Event()
    pool = ProcessPoolExecutor(1, mp_context=context, initializer=late_init,
                               initargs=(started, go_on))
    with temporaries.shielded_starts(forkserver=method == "forkserver"):
        task = pool.submit(abs, -7)
    os.kill(started.get(timeout=60), signal.SIGINT)  # as Ctrl-C reaches the process group
    go_on.set()
    print(task.result(timeout=60))
    pool.shutdown()
"""


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_a_ctrl_c_while_a_worker_starts_does_not_reach_it(method: str) -> None:
    """A worker started under shielded_starts has Ctrl-C blocked until its initializer
    ignores it: a signal that comes in between is dropped, the worker runs its tasks (it used
    to die in its initializer with a traceback, and the pool broke)."""
    done = subprocess.run([sys.executable, "-c", LATE_POOL, method], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "7\n", "")


def test_every_child_process_a_tool_starts_leaves_with_it() -> None:
    """Each subprocess.run/Popen call under tools/ passes `**temporaries.child_options()`: a
    command SIGKILLed takes its children (a bench's redis-benchmark outlived its bench)."""
    import ast

    root = Path(__file__).resolve().parents[2] / "tools"
    untied = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "subprocess"
                    and node.func.attr in ("run", "Popen", "call", "check_call",
                                           "check_output")):
                continue
            if not any(kw.arg is None and "child_options" in ast.unparse(kw.value)
                       for kw in node.keywords):
                untied.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    assert untied == []
