"""The work queue's at-least-once guarantee with real processes (issue 17 groundwork): worker
processes consuming through `streamkeep serve` are killed with SIGKILL at random moments and
started again, and a poison message keeps failing; in the end every message put is either
acknowledged by a handler or dead-lettered, none lost, none dead-lettered twice, nothing
pending. Then the server itself is killed and restarted (appendfsync always): nothing
acknowledged comes back, and the dead letters and their counts are all there."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamkeep.engine.services.queue import StreamQueue

MESSAGES = 400
WORKERS = 3

# A worker: handles messages (a poison one always fails), noting each handled ID in its log
# file before acknowledging it (so a kill between the two shows as handled, not acknowledged).
# Its visibility timeout is longer than a handler ever takes, even on a loaded machine: a
# healthy worker starved past it would see its messages claimed, and three claims make a
# dead letter (a 0.3 s timeout did, once, on a CI machine running Spark beside it).
_WORKER = """
import sys, time, redis
from streamkeep.engine.services.queue import StreamQueue
port, name, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
q = StreamQueue(redis.Redis(port=port), "jobs", consumer=name, visibility_timeout=1.5,
                max_deliveries=3)
with open(log, "a", buffering=1) as out:
    for msg in q.consume(count=5, block=0.05):
        if msg.fields.get(b"poison"):
            msg.nack()  # a handler that always fails
            continue
        time.sleep(0.01)  # the handler's work: kills land in the middle of it
        out.write(msg.id.decode() + "\\n")
"""


def test_workers_killed_at_random_lose_nothing(tmp_path: Path,
                                               spawn: Callable[..., Any]) -> None:
    server = spawn(tmp_path / "data", "--appendfsync", "always")
    q = StreamQueue(server.client(), "jobs", consumer="producer")
    ids = [q.put({"n": str(i)}, idempotency_key=f"m{i}") for i in range(MESSAGES)]
    poison = q.put({"poison": "1"})
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    logs = [tmp_path / f"w{i}.log" for i in range(WORKERS)]

    def start(i: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", _WORKER, str(server.port), f"w{i}",
                                 str(logs[i])], env=env)

    workers = [start(i) for i in range(WORKERS)]
    deadline = time.monotonic() + 60
    kills = 0
    try:
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.3))
            stats = q.stats()
            if stats["lag"] == 0 and stats["pending"] == 0:
                break
            if kills < 8:
                i = rng.randrange(WORKERS)
                workers[i].send_signal(signal.SIGKILL)
                workers[i].wait()
                kills += 1
                workers[i] = start(i)
    finally:
        for w in workers:
            w.kill()
            w.wait()
    stats = q.stats()
    assert stats["lag"] == 0 and stats["pending"] == 0, stats
    dead = q.dead()
    assert [d.source_id for d in dead] == [poison]  # exactly once
    assert dead[0].deliveries == 3  # exactly max_deliveries, by a nack or (its worker killed
    # holding the third delivery) by the claim after the visibility timeout
    assert dead[0].error.startswith(b"failed") or b"visibility timeout" in dead[0].error
    handled = {line for log in logs if log.exists() for line in log.read_text().split()}
    assert handled == {i.decode() for i in ids}  # every message handled at least once
    assert kills >= 3

    # The server killed and restarted: acknowledged stays acknowledged, the dead letter stays.
    server.kill()
    again = spawn(tmp_path / "data", "--appendfsync", "always")
    q2 = StreamQueue(again.client(), "jobs", consumer="after")
    assert q2.get(10) == []
    assert [d.source_id for d in q2.dead()] == [poison]
    assert q2.stats()["pending"] == 0


# A process embedding the engine (appendfsync always) with THREADS worker threads; each notes
# a handled ID in its log (one line per write, flushed) before acknowledging it. The whole
# process is what SIGKILL kills: the data directory is reopened by the next one.
THREADS = 4
_EMBEDDED = """
import sys, threading, time
from streamkeep import Engine, StreamQueue
path, log = sys.argv[1], sys.argv[2]
engine = Engine.open(path, appendfsync="always")
out = open(log, "a", buffering=1)
lock = threading.Lock()

def work(i):
    q = StreamQueue(engine, "jobs", consumer=f"t{i}", visibility_timeout=1.5,
                    max_deliveries=3)
    for msg in q.consume(count=3, block=0.05):
        if msg.fields.get(b"poison"):
            msg.nack()
            continue
        time.sleep(0.005)
        with lock:
            out.write(msg.id.decode() + "\\n")

for i in range(int(sys.argv[3])):
    threading.Thread(target=work, args=(i,), daemon=True).start()
print("ready", flush=True)
time.sleep(3600)
"""


def test_an_embedding_process_killed_at_random_loses_nothing(tmp_path: Path) -> None:
    from streamkeep import Engine

    path, log = str(tmp_path / "data"), tmp_path / "handled.log"
    with Engine.open(path, appendfsync="always") as engine:
        q = StreamQueue(engine, "jobs", consumer="producer")
        ids = q.put_many([{"n": str(i)} for i in range(MESSAGES)],
                         idempotency_keys=[f"m{i}" for i in range(MESSAGES)])
        poison = q.put({"poison": "1"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    rng = random.Random(11)
    kills = 0
    for _ in range(30):
        proc = subprocess.Popen([sys.executable, "-c", _EMBEDDED, path, str(log), str(THREADS)], env=env,
                                stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        kills += 1
        with Engine.open(path, appendfsync="always") as engine:
            stats = StreamQueue(engine, "jobs", create=False).stats()
        if stats["lag"] == 0 and stats["pending"] == 0:
            break
    assert stats["lag"] == 0 and stats["pending"] == 0, stats
    with Engine.open(path) as engine:
        dead = StreamQueue(engine, "jobs", create=False).dead()
    assert [d.source_id for d in dead] == [poison] and dead[0].deliveries == 3
    handled = set(log.read_text().split())
    assert handled == {i.decode() for i in ids}
    assert kills >= 2
