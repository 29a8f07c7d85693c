"""A Jepsen-style partition test: a primary, a replica and a client in network namespaces of
their own (tests/support/netns), faults from a seeded schedule as iptables rules and signals,
then the primary SIGKILLed with writes in flight and the replica promoted. Checked from the
client's own record of what was acknowledged and what WAIT confirmed:

- every write and delivery a `WAIT 1` confirmed is on the promoted replica;
- the replica's stream is a prefix of the old primary's, which, restarted, holds every write
  it acknowledged (`appendfsync always`);
- after every fault the replica converges again by partial sync (the primary counts one full
  sync, the first).

`make test` runs one seed's short schedule; `make soak` (the slow marker) three seeds' long
ones. Faults: the replication link cut or losing packets (iptables rules in the namespaces),
slowed (the replica follows through a relay that holds each chunk while the fault lasts), the
clients cut off from the primary, the replica SIGKILLed and restarted. A failure prints the
seed and the schedule: `run(tmp_path, seed, steps)` replays it."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.netns import Net, available
from tests.support.serve_process import ROOT


@pytest.fixture(autouse=True)
def _hosts() -> None:
    """Namespaces and firewall rules, or a failure saying why not (never a silent skip: root,
    ip and iptables are there wherever `make test` runs)."""
    missing = available()
    if missing is not None:
        pytest.fail(f"the partition test cannot run here: {missing}")


PORT = 6390
PROXY_PORT = 7390  # in the replica's namespace: its link to the primary, slowed at will
FAULTS = ("cut-replication", "slow-replication", "lossy-replication", "cut-clients",
          "kill-replica")
DELAY = 0.2  # seconds the slow link holds every chunk, each way
FAULT_SECONDS = 1.5
CONVERGE_TIMEOUT = 60.0  # a liveness bound: the replica must catch up at all


class Cluster:
    def __init__(self, net: Net, root: Path) -> None:
        self.net, self.root = net, root
        self.slow = root / "slow"  # the proxy delays while this file exists
        net.run("r", [sys.executable, "-m", "tests.support.delay_proxy", str(PROXY_PORT),
                      net.to("r", "p"), str(PORT), str(self.slow), str(DELAY)], cwd=ROOT)
        self.primary = self._serve("p", root / "p")
        self.replica = self._replica()

    def _replica(self) -> subprocess.Popen:
        return self._serve("r", self.root / "r", "--replicaof", "127.0.0.1", str(PROXY_PORT))

    def _serve(self, host: str, datadir: Path, *args: str) -> subprocess.Popen:
        config = self.root / "open.conf"  # clients from the other hosts, without a password
        config.write_text("protected-mode no\n")
        proc = self.net.run(host, [sys.executable, "-m", "streamkeep", "serve", "--dir",
                                   str(datadir), "--bind", "0.0.0.0", "--port", str(PORT),
                                   "--appendfsync", "always", "--config", str(config), *args],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._until(lambda: self._up(host), f"the {host} server never started")
        return proc

    def _up(self, host: str) -> bool:
        try:
            return self.cmd(host, "PING") is True
        except RuntimeError:
            return False

    def cmd(self, host: str, *argv: str) -> object:
        """A command to `host`'s server, sent from the client host."""
        out = self.net.call("c", [sys.executable, "-m", "tests.support.partition_client", "cmd",
                                  self.net.to("c", host), str(PORT), *argv], timeout=30)
        return json.loads(out)

    def state(self, host: str) -> dict:
        out = self.net.call("c", [sys.executable, "-m", "tests.support.partition_client",
                                  "state", self.net.to("c", host), str(PORT)], timeout=60)
        return json.loads(out)  # type: ignore[no-any-return]

    def info(self, host: str, section: str) -> dict[str, str]:
        found = self.cmd(host, "INFO", section)  # (redis-py parses it)
        assert isinstance(found, dict)
        return {key: str(value) for key, value in found.items()}

    @staticmethod
    def _until(check: object, what: str, timeout: float = CONVERGE_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not check():  # type: ignore[operator]
            assert time.monotonic() < deadline, what
            time.sleep(0.1)

    def converged(self) -> bool:
        """The replica's link is up and it has every record the primary had a moment ago (the
        client writes on meanwhile: the primary is asked first)."""
        try:
            primary = int(self.info("p", "replication")["master_repl_offset"])
            replica = self.info("r", "replication")
        except RuntimeError:  # (out of reach for now)
            return False
        return (replica.get("master_link_status") == "up"
                and int(replica.get("slave_repl_offset", -1)) >= primary)

    def fault(self, name: str) -> None:
        net = self.net
        if name == "cut-replication":
            net.cut("p", "r")
        elif name == "slow-replication":
            self.slow.touch()
        elif name == "lossy-replication":
            net.lossy("p", "r", 0.3)
        elif name == "cut-clients":
            net.cut("p", "c")
        elif name == "kill-replica":
            self.replica.send_signal(signal.SIGKILL)
            self.replica.wait()
        time.sleep(FAULT_SECONDS)
        net.heal()
        self.slow.unlink(missing_ok=True)
        if name == "kill-replica":
            self.replica = self._replica()


def _outcomes(lines: list[str]) -> tuple[list[str], set[str], set[str]]:
    """The client's acknowledged XADDs in order, and the writes and deliveries a WAIT
    confirmed."""
    acked, confirmed, delivered = [], set(), set()
    for line in lines:
        word, *rest = line.split()
        if word == "ack":
            acked.append(rest[0])
        elif word == "confirm":
            for item in rest:
                (delivered if item.startswith("d:") else confirmed).add(item.removeprefix("d:"))
    return acked, confirmed, delivered


def _key(sid: str) -> tuple[int, int]:
    ms, seq = sid.split("-")
    return int(ms), int(seq)


def schedule_of(seed: int, steps: int) -> list[str]:
    """The faults in order: every kind once (in an order the seed picks), then at random."""
    rng = random.Random(seed)
    first = rng.sample(FAULTS, len(FAULTS))
    return (first + [rng.choice(FAULTS) for _ in range(steps)])[:steps]


def run(tmp_path: Path, seed: int, steps: int) -> None:
    schedule = schedule_of(seed, steps)
    where = f"seed {seed}, schedule {schedule}"
    with Net() as net:
        cluster = Cluster(net, tmp_path)
        cluster.cmd("p", "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        cluster._until(cluster.converged, f"the replica never synced ({where})")
        out = tmp_path / "client.out"
        with open(out, "w") as sink:
            client = net.run("c", [sys.executable, "-m", "tests.support.partition_client",
                                   "work", net.to("c", "p"), str(PORT), str(seed)],
                             cwd=ROOT, stdout=sink, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            for step, fault in enumerate(schedule):
                cluster.fault(fault)
                cluster._until(cluster.converged,
                               f"no convergence after step {step} ({fault}); {where}")
            full = int(cluster.info("p", "stats")["sync_full"])
            # The primary dies with writes in flight; the replica is promoted.
            cluster.primary.send_signal(signal.SIGKILL)
            cluster.primary.wait()
            client.kill()
            client.wait()
        promoted = cluster.cmd("r", "REPLICAOF", "NO", "ONE")
        assert promoted == "OK", where
        replica = cluster.state("r")
        cluster.primary = cluster._serve("p", tmp_path / "p")  # restarted on its directory
        old = cluster.state("p")
    acked, confirmed, delivered = _outcomes(out.read_text().splitlines())
    assert acked and confirmed, f"the workload did nothing ({where})"
    assert full == 1, f"{full} full syncs: a heal did not continue partially ({where})"
    have = set(replica["ids"])
    assert confirmed <= have, f"WAIT-confirmed writes lost: {sorted(confirmed - have)[:5]}; {where}"
    missing = delivered - set(replica["pending"])
    assert not missing, f"WAIT-confirmed deliveries lost: {sorted(missing)[:5]}; {where}"
    assert set(acked) <= set(old["ids"]), f"acknowledged writes lost by the primary; {where}"
    assert old["ids"][:len(replica["ids"])] == replica["ids"], \
        f"the replica is not a prefix of the primary; {where}"
    assert replica["ids"] == sorted(replica["ids"], key=_key), where
    # The workload never acknowledges a delivery: the group's pending entries only grow, so
    # the replica's, a prefix of the history, are among the old primary's.
    assert set(replica["pending"]) <= set(old["pending"]), \
        f"the replica's consumer group is not a prefix of the primary's; {where}"


def test_partitions_short_schedule(tmp_path: Path) -> None:
    run(tmp_path, seed=38, steps=len(FAULTS))


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_partitions_long_schedule(tmp_path: Path, seed: int) -> None:
    run(tmp_path, seed=seed, steps=20)
