"""A Jepsen-style test of a cluster run by its controller: three primaries with a replica each
(hosts n1..n6), etcd and a controller on `ctl`, a second controller on `ctl2`, the workload on
`w`, each host a network namespace with one address on a shared bridge (tests/support/netns's
Bridge). A seeded schedule of faults while the workload writes (tests/support/cluster_client):

- `isolate-primary`: a primary cut from every host long enough to be failed over;
- `cut-primary-controllers`: a primary cut from both controllers only (its replica, still
  acknowledging its stream, keeps it serving until the controller promotes the replica);
- `cut-replica`: a replica cut from its primary;
- `kill-primary`: a primary SIGKILLed, restarted on its directory after it was failed over;
- `kill-controller`: the leading controller SIGKILLed (the other takes over), then restarted;
- `move-slots`: `streamkeep cluster migrate-slots` run from `ctl` for a range of slots holding
  a list or a stream of the workload, to another primary, while the writes go on.

After every fault the network heals and the cluster must settle (every node on etcd's epoch,
every replica linked); at the end, with everything healed and up, checked from the workload's
own record (only writes a `WAIT 1` confirmed count as acknowledged):

- every acknowledged SET key holds its value; every acknowledged list value is in its list
  exactly once (and no value at all twice: the client never sends a value again after an
  unknown outcome); every acknowledged XADD is in its stream;
- each consumer group's pending entries exist in the stream, a delivery acknowledged with
  XACK (and WAIT) is not pending, and a WAIT-confirmed delivery never XACKed still is;
- every key is on its slot's owner only (each primary's keys against etcd's topology), and
  every node's CLUSTER SLOTS is etcd's;
- no two nodes acknowledged writes to one slot in the same epoch (the epoch a node held just
  before and just after the write, when they agree; writes sent after ASKING apart: during a
  move the slot's source and target both serve it, at one epoch).

The workload sends WAIT in a round trip of its own after the write.

`make test` runs one seed's short schedule; `make soak` (the slow marker) 50 seeds' longer
ones. A failure names the seed and the schedule: `run(tmp_path, seed, steps)` replays it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import redis

from streamkeep.engine.model.keyslot import key_slot
from streamkeep.tools.controller import record
from streamkeep.tools.controller.etcd import Etcd
from tests.support.cluster_client import GROUP, LISTS, STREAMS
from tests.support.netns import Bridge, available
from tests.support.serve_process import ROOT

NODES = ("n1", "n2", "n3", "n4", "n5", "n6")
FINAL_READ_S = 20.0  # how long a final check's read is sent again while it fails
_FAILED = object()  # a command that got no reply or an error
CONTROLLERS = ("ctl", "ctl2")
HOSTS = (*NODES, *CONTROLLERS, "w")
PORT = 7000
ETCD_PORT = 2379
CLUSTER = "jepsen"
NODE_TIMEOUT_MS = 1000
FAULTS = ("isolate-primary", "cut-primary-controllers", "cut-replica", "kill-primary",
          "kill-controller", "move-slots")
FAILING_OVER = ("isolate-primary", "kill-primary")
OUTAGE = 3.0  # seconds a failing-over fault lasts: three node timeouts
SHORT_FAULT = 2.0  # seconds the others last
SETTLE_TIMEOUT = 90.0  # a liveness bound: the cluster must settle at all
MOVE_SLOTS = 24  # slots per move
WORKERS = 3  # workload processes on w: one stuck on a partitioned shard stalls no other
PY = sys.executable


@pytest.fixture(autouse=True)
def _hosts() -> None:
    """Namespaces and firewall rules, or a failure saying why not (never a silent skip)."""
    missing = available()
    if missing is not None:
        pytest.fail(f"the cluster partition test cannot run here: {missing}")


class Cluster:
    """The hosts, their processes, and a view from `w` (a thread in its namespace)."""

    def __init__(self, net: Bridge, root: Path) -> None:
        self.net, self.root = net, root
        self.logs = root / "logs"
        self.logs.mkdir()
        self.url = f"http://{net.addr['ctl']}:{ETCD_PORT}"
        self.view: ThreadPoolExecutor = net.inside("w")
        self.clients: dict[str, redis.Redis] = {}
        self.etcd: Etcd | None = None
        self.nodes: dict[str, subprocess.Popen] = {}
        self.controllers: dict[str, subprocess.Popen] = {}
        self.stats: Counter[str] = Counter()
        net.run("ctl", ["etcd", "--name", "one", "--data-dir", str(root / "etcd"),
                        "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                        "--listen-peer-urls", "http://127.0.0.1:2380",
                        "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                        "--initial-cluster", "one=http://127.0.0.1:2380",
                        "--logger", "zap", "--log-level", "warn"],
                stdout=subprocess.DEVNULL, stderr=self._log("etcd"))
        for host in NODES:
            self.serve(host)
        for host in CONTROLLERS:
            self.control(host)
        self.until(self.etcd_up, "etcd never answered")

    def _log(self, name: str) -> Any:
        return open(self.logs / f"{name}.log", "ab")  # noqa: SIM115  (the child holds it)

    # --- processes -------------------------------------------------------------------------

    def serve(self, host: str) -> None:
        config = self.root / f"{host}.conf"  # clients from the other hosts, no password
        config.write_text(f"protected-mode no\ncluster-announce-ip {self.net.addr[host]}\n")
        argv = [PY, "-m", "streamkeep", "serve", "--dir", str(self.root / host), "--bind",
                "0.0.0.0", "--port", str(PORT), "--config", str(config),
                "--cluster-enabled", "yes", "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--appendfsync", "always"]
        log = self._log(host)
        process = self.nodes[host] = self.net.run(host, argv, cwd=ROOT, stdout=log, stderr=log)

        def up() -> bool:
            assert process.poll() is None, \
                f"{host} exited: {(self.logs / f'{host}.log').read_text()[-1500:]}"
            return self.ask(host, "PING") is True
        self.until(up, f"{host} never started")

    def control(self, host: str) -> None:
        log = self._log(host)
        self.controllers[host] = self.net.run(
            host, [PY, "-m", "streamkeep", "cluster", "controller", "--etcd", self.url,
                   "--cluster", CLUSTER, "--name", host], cwd=ROOT, stdout=log, stderr=log)

    @staticmethod
    def kill(process: subprocess.Popen) -> None:
        process.send_signal(signal.SIGKILL)
        process.wait()

    def create(self) -> None:
        self.net.call("ctl", [PY, "-m", "streamkeep", "cluster", "create", "--etcd", self.url,
                              "--cluster", CLUSTER, "--replicas", "1",
                              *(f"{self.net.addr[h]}:{PORT}" for h in NODES)], timeout=120)

    # --- the view from w --------------------------------------------------------------------

    def on_w(self, fn: Callable[[], Any]) -> Any:
        return self.view.submit(fn).result()

    def ask(self, host: str, *argv: Any, **options: Any) -> Any:
        """A command to `host`'s node, from w; None when it cannot be reached or refuses."""
        reply = self.on_w(lambda: self._send(host, argv, options))
        return None if reply is _FAILED else reply

    def ask_settled(self, host: str, *argv: Any, **options: Any) -> Any:
        """`ask` for the final checks: a command that fails (a timeout on a loaded machine, a
        node still loading) is sent again for up to FINAL_READ_S; what it then answers (or
        None) is the check's. A failure that lasts (a key on a node that does not own its
        slot: MOVED) still reads as None."""
        deadline = time.monotonic() + FINAL_READ_S
        while True:
            reply = self.on_w(lambda: self._send(host, argv, options))
            if reply is not _FAILED:
                return reply
            if time.monotonic() > deadline:
                return None
            time.sleep(0.5)

    def _send(self, host: str, argv: tuple[Any, ...], options: dict[str, Any]) -> Any:
        try:
            client = self.clients.get(host)
            if client is None:
                client = self.clients[host] = redis.Redis(
                    host=self.net.addr[host], port=PORT, socket_timeout=2,
                    socket_connect_timeout=1, single_connection_client=True)
            return client.execute_command(*argv, **options)
        except (redis.RedisError, OSError):
            dropped = self.clients.pop(host, None)
            if dropped is not None:
                dropped.close()
            return _FAILED

    def load(self) -> record.Record | None:
        def read() -> record.Record | None:
            if self.etcd is None:
                self.etcd = Etcd(self.url, timeout=2)
            try:
                return record.load(self.etcd, CLUSTER)
            except Exception:  # noqa: BLE001  (etcd unreachable for now: asked again)
                self.etcd.close()
                self.etcd = None
                return None
        return self.on_w(read)  # type: ignore[no-any-return]

    def etcd_up(self) -> bool:
        def ping() -> bool:
            try:
                with Etcd(self.url, timeout=1) as etcd:
                    etcd.get(record.key(CLUSTER, "leader"))
            except Exception:  # noqa: BLE001  (not up yet)
                return False
            return True
        return self.on_w(ping)  # type: ignore[no-any-return]

    def host_of(self, current: record.Record, node_id: str) -> str:
        ip = current.topology.nodes[node_id].ip
        return next(h for h in NODES if self.net.addr[h] == ip)

    def primaries(self, current: record.Record) -> list[str]:
        return sorted(self.host_of(current, n.id) for n in current.topology.nodes.values()
                      if n.is_primary and current.topology.slot_ranges(n.id))

    def replica_of(self, current: record.Record, host: str) -> str:
        node = next(n for n in current.topology.nodes.values() if n.ip == self.net.addr[host])
        return self.host_of(current, current.topology.replicas_of(node.id)[0].id)

    @staticmethod
    def until(check: Callable[[], bool], what: str, timeout: float = SETTLE_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, what
            time.sleep(0.1)

    def settled(self) -> bool:
        """Every node holds etcd's epoch and answers as the topology says (a primary ok, a
        replica linked to its primary), nothing on the move."""
        current = self.load()
        if current is None or any(n.migrating or n.importing
                                  for n in current.topology.nodes.values()):
            return False
        for node in current.topology.nodes.values():
            host = self.host_of(current, node.id)
            info = self.ask(host, "CLUSTER", "INFO")
            if not isinstance(info, (bytes, str, dict)):
                return False
            fields = _fields(info)
            if int(fields.get("cluster_current_epoch", -1)) != current.epoch:
                return False
            role = self.ask(host, "ROLE")
            if not role:
                return False
            if node.is_primary:
                if role[0] != b"master" or fields.get("cluster_state") != "ok":
                    return False
            elif role[0] != b"slave" or role[3] != b"connected":
                return False
        return True

    # --- the nemesis ------------------------------------------------------------------------

    def fault(self, name: str, rng: random.Random) -> str:
        """The fault injected and healed; what it hit."""
        current = self.load()
        assert current is not None
        primary = rng.choice(self.primaries(current))
        net = self.net
        before = self.primaries(current)
        if name == "isolate-primary":
            net.isolate(primary)
            time.sleep(OUTAGE)
        elif name == "cut-primary-controllers":
            for host in CONTROLLERS:
                net.cut(primary, host)
            time.sleep(SHORT_FAULT)
        elif name == "cut-replica":
            net.cut(primary, self.replica_of(current, primary))
            time.sleep(SHORT_FAULT)
        elif name == "kill-primary":
            self.kill(self.nodes[primary])
            time.sleep(OUTAGE)
            self.serve(primary)
        elif name == "kill-controller":
            leader = self.leader()
            primary = leader
            self.kill(self.controllers[leader])
            time.sleep(SHORT_FAULT)
            self.control(leader)
        elif name == "move-slots":
            return self.move(current, rng)
        net.heal()
        after = self.load()
        if after is not None and self.primaries(after) != before:
            self.stats["failovers"] += 1
        return primary

    def leader(self) -> str:
        def read() -> str:
            etcd = Etcd(self.url, timeout=2)
            try:
                found = etcd.get(record.key(CLUSTER, "leader"))
            finally:
                etcd.close()
            return found[0].decode() if found else CONTROLLERS[0]
        name: str = self.on_w(read)
        return name if name in CONTROLLERS else CONTROLLERS[0]

    def move(self, current: record.Record, rng: random.Random) -> str:
        """A range of slots holding one of the workload's lists or streams moved to another
        primary, from ctl, while the workload writes on."""
        topology = current.topology
        key = rng.choice([*LISTS, *STREAMS])
        first = key_slot(key.encode())
        owner = topology.owners[first]
        slots = [first]
        while (len(slots) < MOVE_SLOTS and slots[-1] + 1 < len(topology.owners)
               and topology.owners[slots[-1] + 1] == owner):
            slots.append(slots[-1] + 1)
        others = [h for h in self.primaries(current)
                  if topology.nodes[owner or ""].ip != self.net.addr[h]]
        target = rng.choice(others)
        self.net.call("ctl", [PY, "-m", "streamkeep", "cluster", "migrate-slots", "--etcd",
                              self.url, "--cluster", CLUSTER, "--to",
                              f"{self.net.addr[target]}:{PORT}", "--slots",
                              f"{slots[0]}-{slots[-1]}"], timeout=300)
        self.stats["moves"] += 1
        return f"{key} slots {slots[0]}-{slots[-1]} to {target}"

    # --- the end ----------------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """Every primary's keys, and what the checks read, through the slots' owners (etcd)."""
        current = self.load()
        assert current is not None
        keys: dict[str, list[str]] = {}
        for host in self.primaries(current):
            found = self.ask_settled(host, "KEYS", "*")
            assert found is not None, f"{host} did not answer KEYS"
            keys[host] = [k.decode() for k in found]
        owner_of = {k: h for h, ks in keys.items() for k in ks}

        def read(key: str, *argv: Any, **options: Any) -> Any:
            return self.ask_settled(owner_of[key], *argv, **options) if key in owner_of else None
        lists = {k: [v.decode() for v in read(k, "LRANGE", k, 0, -1) or []] for k in LISTS}
        streams = {k: [e[0].decode() for e in read(k, "XRANGE", k, "-", "+") or []]
                   for k in STREAMS}
        pending = {k: [p["message_id"].decode() for p in
                       read(k, "XPENDING", k, GROUP, "-", "+", 10 ** 6, parse_detail=True)
                       or []]
                   for k in STREAMS}
        sets = {k: (read(k, "GET", k) or b"").decode() for k in owner_of if k.startswith("k:")}
        views = {h: self.ask(h, "CLUSTER", "SLOTS") for h in NODES}
        return {"record": current, "keys": keys, "lists": lists, "streams": streams,
                "pending": pending, "sets": sets, "views": views}

    def close(self) -> None:
        def shut() -> None:
            for client in self.clients.values():
                client.close()
            if self.etcd is not None:
                self.etcd.close()
        self.on_w(shut)


def _fields(info: Any) -> dict[str, str]:
    if isinstance(info, dict):
        return {str(k): str(v) for k, v in info.items()}
    text = info.decode() if isinstance(info, bytes) else str(info)
    return dict(line.partition(":")[::2] for line in text.splitlines() if ":" in line)


def schedule_of(seed: int, steps: int) -> list[str]:
    """The faults in order: a move and a failing-over fault among the first two (every run
    has both), the rest of the kinds in an order the seed picks, then at random."""
    rng = random.Random(seed)
    first = ["move-slots", rng.choice(FAILING_OVER)]
    rng.shuffle(first)
    rest = [f for f in FAULTS if f not in first]
    rng.shuffle(rest)
    return (first + rest + [rng.choice(FAULTS) for _ in range(steps)])[:max(steps, 2)]


def history(lines: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The workload's record by op (a line cut short by the kill at the end skipped)."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        found[entry["op"]].append(entry)
    return found


def check(seen: dict[str, Any], done: dict[str, list[dict[str, Any]]], where: str) -> int:
    """The checks of the module's docstring; the number of acknowledged writes checked."""
    acked = [e for op in ("set", "rpush", "xadd", "deliver", "xack") for e in done[op]]
    assert done["set"] and done["rpush"] and done["xadd"], f"the workload did little; {where}"
    for entry in done["set"]:
        assert seen["sets"].get(entry["key"]) == entry["value"], \
            f"acknowledged SET {entry['key']} = {entry['value']} lost: " \
            f"{seen['sets'].get(entry['key'])!r}; {where}"
    for key, values in seen["lists"].items():
        twice = [v for v, n in Counter(values).items() if n > 1]
        assert not twice, f"{key} holds values twice: {twice[:5]}; {where}"
        missing = {e["value"] for e in done["rpush"] if e["key"] == key} - set(values)
        assert not missing, f"acknowledged pushes to {key} lost: {sorted(missing)[:5]}; {where}"
    for key, ids in seen["streams"].items():
        missing = {e["value"] for e in done["xadd"] if e["key"] == key} - set(ids)
        assert not missing, f"acknowledged XADDs to {key} lost: {sorted(missing)[:5]}; {where}"
        pending = set(seen["pending"][key])
        assert pending <= set(ids), \
            f"{key}'s group has pending entries not in the stream: " \
            f"{sorted(pending - set(ids))[:5]}; {where}"
        xacked = {i for e in done["xack"] if e["key"] == key for i in e["ids"]}
        assert not xacked & pending, \
            f"{key}: XACKed deliveries still pending: {sorted(xacked & pending)[:5]}; {where}"
        tried = {i for e in done["try-xack"] if e["key"] == key for i in e["ids"]}
        delivered = {i for e in done["deliver"] if e["key"] == key for i in e["ids"]}
        lost = delivered - tried - pending
        assert not lost, f"{key}: confirmed deliveries not pending: {sorted(lost)[:5]}; {where}"
    current = seen["record"]
    topology = current.topology
    hosts_of = {node.id: node.ip for node in topology.nodes.values()}
    total = 0
    for host, keys in seen["keys"].items():
        total += len(keys)
        for key in keys:
            owner = topology.owners[key_slot(key.encode())]
            assert owner is not None and hosts_of[owner] == seen["addr"][host], \
                f"{key} (slot {key_slot(key.encode())}) on {host}, not its owner; {where}"
    assert total == len({k for ks in seen["keys"].values() for k in ks}), \
        f"a key on two primaries; {where}"
    expected = sorted(_slot_view(seen["views"][seen["first"]]))
    for host, view in seen["views"].items():
        assert view is not None and sorted(_slot_view(view)) == expected, \
            f"{host}'s CLUSTER SLOTS differs: {view}; {where}"
    by_slot_epoch: dict[tuple[int, int, bool], set[str]] = defaultdict(set)
    for entry in acked:
        if entry["e0"] == entry["e1"] >= 0:
            by_slot_epoch[entry["slot"], entry["e0"], entry["ask"]].add(entry["node"])
    split = {k: v for k, v in by_slot_epoch.items() if len(v) > 1}
    assert not split, f"(slot, epoch, asking) acknowledged by two nodes: " \
                      f"{sorted(split.items())[:5]}; {where}"
    return len(acked)


def _slot_view(slots: Any) -> list[tuple[int, int, str]]:
    return [(int(e[0]), int(e[1]), f"{e[2][0].decode()}:{e[2][1]}") for e in slots]


def run(tmp_path: Path, seed: int, steps: int) -> dict[str, Any]:
    schedule = schedule_of(seed, steps)
    where = f"seed {seed}, schedule {schedule}"
    rng = random.Random(seed * 7919)
    started = time.monotonic()
    with Bridge(HOSTS) as net:
        cluster = Cluster(net, tmp_path)
        try:
            cluster.create()
            cluster.until(cluster.settled, f"the cluster never settled ({where})")
            outs = [tmp_path / f"workload-{i}.out" for i in range(WORKERS)]
            workers = []
            for i, out in enumerate(outs):
                with open(out, "w") as sink:  # (the child holds it)
                    workers.append(net.run(
                        "w", [PY, "-m", "tests.support.cluster_client", str(seed), str(i),
                              *(f"{net.addr[h]}:{PORT}" for h in NODES)],
                        cwd=ROOT, stdout=sink, stderr=cluster._log(f"workload-{i}")))
            cluster.until(lambda: all(o.stat().st_size > 1000 for o in outs),
                          f"no writes ({where})")
            hits = []
            for step, fault in enumerate(schedule):
                hits.append(f"{fault}: {cluster.fault(fault, rng)}")
                cluster.until(cluster.settled,
                              f"no settling after step {step} ({hits[-1]}); {where}")
            time.sleep(1.0)
            for worker in workers:
                cluster.kill(worker)
            net.heal()
            cluster.until(cluster.settled, f"the end never settled; {where}; {hits}")
            seen = cluster.dump()
            seen["addr"] = dict(net.addr)
            seen["first"] = NODES[0]
        finally:
            cluster.close()
    where += f"; faults hit: {hits}"
    done = history([line for out in outs for line in out.read_text().splitlines()])
    checked = check(seen, done, where)
    return {"seed": seed, "schedule": schedule, "acknowledged": checked,
            "doubt": len(done["doubt"]), "refused": len(done["refused"]),
            "faults": len(schedule), "failovers": cluster.stats["failovers"],
            "moves": cluster.stats["moves"], "seconds": round(time.monotonic() - started, 1)}


def test_cluster_partitions_short_schedule(tmp_path: Path) -> None:
    print(run(tmp_path, seed=11, steps=len(FAULTS)))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 51))
def test_cluster_partitions_long_schedule(tmp_path: Path, seed: int) -> None:
    print(run(tmp_path, seed=seed, steps=8))
