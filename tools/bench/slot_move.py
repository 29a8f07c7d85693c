"""The cluster section's slot-move row: a slot holding many stream entries moved to another
primary by the controller while a producer writes to it.

A real etcd, two primaries (`streamkeep serve --cluster-enabled yes --appendfsync everysec`),
`streamkeep cluster controller` (a child process): the first primary serves every slot, the
second is added empty. One slot is filled with streams (1,000 entries each; N entries in all,
1,000,000 in a full run), then a producer XADDs to a stream of that slot, 16 at a time,
following ASK and MOVED as a cluster client does: its rate for a while before the move, then
during `streamkeep cluster migrate-slots` of the slot (run in this process), which is
timed; then every key of the slot checked to be at the target and, once trimmed, none at
the source. Must not touch: the
section's declarations.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Final

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import StreamkeepServer
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST, EtcdServer, ServerFailed

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv

ENTRIES: Final = 1_000_000
QUICK_ENTRIES: Final = 20_000
PER_STREAM: Final = 1000
TAG: Final = b"{m}"  # the slot moved (15627: the first primary's, as every slot is)
BEFORE_SECONDS: Final = 3.0
PIPELINE: Final = 16
CLUSTER: Final = "bench-move"
XADD: Final = [b"XADD", TAG + b"live", b"*", b"f", b"v"]
TRIM_WAIT: Final = 30.0  # seconds the source's copies may take to be trimmed
RETRY_PAUSE: Final = 0.001  # seconds before commands answered TRYAGAIN are sent again


def slot_move(env: BenchEnv) -> Measurement:
    from streamkeep.engine.model.keyslot import key_slot

    entries = QUICK_ENTRIES if env.quick else ENTRIES
    root = temporaries.temp_directory_path("bench-slot-move")
    controller: subprocess.Popen[bytes] | None = None
    etcd = EtcdServer(os.path.join(root, "etcd"))
    nodes = [StreamkeepServer(extra=("--cluster-enabled", "yes")) for _ in range(2)]
    try:
        try:
            etcd.start()
            for node in nodes:
                node.start()
        except ServerFailed as err:
            raise Skip(str(err)) from None
        controller = subprocess.Popen(
            [sys.executable, "-m", "streamkeep", "cluster", "controller", "--etcd", etcd.url,
             "--cluster", CLUSTER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            **temporaries.child_options())
        _made(etcd.url, nodes)
        _fill(nodes[0], entries)
        slot = key_slot(TAG)
        producer = Producer(nodes)
        producer.start()
        time.sleep(BEFORE_SECONDS)
        before = producer.rate_since_start()
        producer.mark()
        started = time.monotonic()
        _migrate(etcd.url, slot, nodes[1])
        took = time.monotonic() - started
        during = producer.rate_since_mark()
        producer.stop()
        if producer.error:
            raise Skip(f"the producer failed: {producer.error}")
        _check(nodes, slot, -(-entries // PER_STREAM))
    finally:
        if controller is not None:
            temporaries.kill_group(controller)
        for node in nodes:
            node.stop()
        etcd.stop()
        temporaries.remove(root)
    return Measurement(entries / took, count=entries, figures={
        "during_before": during / before if before else 0.0, "entries_per_s": entries / took},
        notes=[f"slot move: {entries:,} entries in {took:.2f} s; producer {before:,.0f} XADD/s "
               f"before, {during:,.0f} during"])


def _cli(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "streamkeep", "cluster", *args],
                          capture_output=True, text=True, check=False,
                          **temporaries.child_options())
    if done.returncode:
        raise Skip(f"cluster {args[0]}: {done.stderr.strip()[-300:]}")


def _made(url: str, nodes: list[StreamkeepServer]) -> None:
    _cli("create", "--etcd", url, "--cluster", CLUSTER, f"{HOST}:{nodes[0].port}")
    _cli("add-node", "--etcd", url, "--cluster", CLUSTER, f"{HOST}:{nodes[1].port}")


def _migrate(url: str, slot: int, target: StreamkeepServer) -> None:
    """`cluster migrate-slots` of the slot, in this process (the move timed, not a Python
    start-up beside it)."""
    import argparse

    from streamkeep.tools.controller.operations import migrate_slots

    migrate_slots(argparse.Namespace(etcd=url, cluster=CLUSTER, to=f"{HOST}:{target.port}",
                                     slots=str(slot)))


def _check(nodes: list[StreamkeepServer], slot: int, streams: int) -> None:
    """Every stream of the slot at the target, none left at the source (once the
    controller's trim of the source's copies, which follows the switch, is done)."""
    deadline = time.monotonic() + TRIM_WAIT
    while True:
        counts = []
        for node in nodes:
            with node.target(timeout=10.0) as target:
                counts.append(int(target.execute([b"CLUSTER", b"COUNTKEYSINSLOT",
                                                  b"%d" % slot])))
        if counts[0] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if counts != [0, streams + 1]:
        raise Skip(f"the slot's keys after the move: {counts} (source, target), expected "
                   f"[0, {streams + 1}]")


def _fill(node: StreamkeepServer, entries: int) -> None:
    """`entries` stream entries in the moved slot, PER_STREAM to a stream."""
    with node.target(timeout=60.0) as target:
        batch = []
        for n in range(entries):
            key = TAG + b"s:%d" % (n // PER_STREAM)
            batch.append([b"XADD", key, b"*", b"f", b"%d" % n])
            if len(batch) == 1000:
                target.pipeline(batch)
                batch = []
        if batch:
            target.pipeline(batch)


class Producer(threading.Thread):
    """XADDs to a stream of the moved slot, PIPELINE at a time, following ASK (the commands
    asked elsewhere sent there together, each after ASKING), MOVED and TRYAGAIN (sent again
    after a pause) as a cluster client does; a command MOVED or TRYAGAIN is not counted (it
    was not run)."""

    def __init__(self, nodes: list[StreamkeepServer]) -> None:
        super().__init__(name="bench-producer", daemon=True)
        self.nodes = nodes
        self.count = 0
        self.started = self.marked = 0.0
        self.at_mark = 0
        self.error = ""
        self.stopped = threading.Event()

    def run(self) -> None:
        targets = {node.port: node.target(timeout=30.0) for node in self.nodes}
        current = self.nodes[0].port
        self.started = time.monotonic()
        try:
            while not self.stopped.is_set():
                replies = targets[current].pipeline([XADD] * PIPELINE)
                asked: dict[int, int] = {}
                retry = False
                for reply in replies:
                    text = str(reply) if isinstance(reply, Exception) else ""
                    if text.startswith("TRYAGAIN"):
                        retry = True  # (the switch: not run, sent again shortly)
                    elif text.startswith("ASK "):
                        port = int(text.rsplit(":", 1)[1])
                        asked[port] = asked.get(port, 0) + 1
                    elif text.startswith("MOVED "):
                        current = int(text.rsplit(":", 1)[1])
                    elif text:
                        raise RuntimeError(text)
                    else:
                        self.count += 1
                for port, count in asked.items():  # (the redirected ones, in one round trip)
                    answers = targets[port].pipeline([[b"ASKING"], XADD] * count)
                    failed = next((a for a in answers if isinstance(a, Exception)), None)
                    if failed is not None:
                        raise RuntimeError(str(failed))
                    self.count += count
                if retry:
                    time.sleep(RETRY_PAUSE)
        except Exception as err:  # noqa: BLE001  (reported as the row's failure)
            self.error = str(err)
        finally:
            for target in targets.values():
                target.close()

    def rate_since_start(self) -> float:
        return self.count / (time.monotonic() - self.started)

    def mark(self) -> None:
        self.marked, self.at_mark = time.monotonic(), self.count

    def rate_since_mark(self) -> float:
        return (self.count - self.at_mark) / (time.monotonic() - self.marked)

    def stop(self) -> None:
        self.stopped.set()
        self.join()


__all__ = ["slot_move"]
