"""The workload host of the cluster partition test (tests/crash/test_cluster_partitions.py),
run inside its network namespace (tests/support/netns's Bridge):

    python -m tests.support.cluster_client SEED WORKER HOST:PORT ...   until killed

A slot-routing client of its own (a slot map from CLUSTER SLOTS, MOVED and ASK followed, the map
read again from another node after CLUSTERDOWN or a dropped connection) writes over many slots:
SET of unique keys, RPUSH of unique values to a few lists, XADD to a few streams, XREADGROUP
deliveries and XACKs of a consumer group. Every command goes in one pipeline on one connection, then WAIT on the same connection:

    CLUSTER INFO, [ASKING,] the write, CLUSTER INFO;   WAIT 1 <ms>

so the epoch the node held just before and just after the write is known, and WAIT confirms
the replica has it. One JSON line per outcome on stdout:

- `{"op": "set"|"rpush"|"xadd"|"deliver"|"xack", "key", "value"|"ids", "slot", "node",
  "e0", "e1", "ask"}`: acknowledged (the write answered and WAIT answered 1), by `node`,
  whose epoch was e0 before and e1 after it (`ask`: sent after ASKING);
- `{"op": "try-xack", "key", "ids"}`: an XACK about to be sent (its outcome may be unknown);
- `{"op": "doubt", "cmd"}`: the write's outcome is unknown (connection lost, or WAIT did not
  answer 1); never sent again with the same value;
- `{"op": "refused", "cmd", "error"}`: error replies only, retried until given up: not applied.

An error reply (MOVED, ASK, CLUSTERDOWN, TRYAGAIN) means the write was not applied: it is sent
again (a value is never written twice by the client otherwise, so a duplicate in a list is the
server's).
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

import redis
from redis.exceptions import AskError, MovedError, ResponseError

from streamkeep.engine.model.keyslot import SLOTS, key_slot

LISTS = [f"list:{i}" for i in range(4)]
STREAMS = [f"stream:{i}" for i in range(3)]
GROUP = "g"
WAIT_MS = 500
ATTEMPTS = 40  # error replies before a write is given up (refused)
MAX_REDIRECTS = 6

Address = tuple[str, int]


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [text(v) for v in value]
    return value


def epoch_of(reply: Any) -> int:
    """cluster_current_epoch from a CLUSTER INFO reply (-1: the reply was an error)."""
    if isinstance(reply, dict):
        return int(reply.get("cluster_current_epoch", -1))
    if isinstance(reply, (bytes, str)):
        for line in text(reply).splitlines():
            name, _, value = line.partition(":")
            if name == "cluster_current_epoch":
                return int(value)
    return -1


class Router:
    """Commands sent to the node serving their key's slot, redirections followed."""

    def __init__(self, seeds: list[Address], rng: random.Random) -> None:
        self.seeds, self.rng = seeds, rng
        self.owners: list[Address | None] = [None] * SLOTS
        self.links: dict[Address, redis.Redis] = {}

    def link(self, address: Address) -> redis.Redis:
        """The node's client (its connection made on its first command)."""
        found = self.links.get(address)
        if found is None:
            # One connection: the pipeline and the WAIT after it go down the same one.
            pool = redis.BlockingConnectionPool(
                host=address[0], port=address[1], max_connections=1, timeout=5,
                socket_timeout=1.5, socket_connect_timeout=1)
            found = self.links[address] = redis.Redis(connection_pool=pool)
        return found

    def drop(self, address: Address) -> None:
        found = self.links.pop(address, None)
        if found is not None:
            found.close()

    def refresh(self) -> None:
        """The slot map read from the first node (in random order) that answers."""
        nodes = {a for a in self.owners if a is not None} | set(self.seeds)
        for address in self.rng.sample(sorted(nodes), len(nodes)):
            try:
                slots = self.link(address).execute_command("CLUSTER", "SLOTS")
            except (redis.RedisError, OSError):
                self.drop(address)
                continue
            for entry in slots:
                start, end, primary = int(entry[0]), int(entry[1]), entry[2]
                owner = (text(primary[0]), int(primary[1]))
                for slot in range(start, end + 1):
                    self.owners[slot] = owner
            return

    def write(self, argv: list[Any], key: str) -> tuple[Any, dict[str, Any]]:
        """The write's reply and who acknowledged it; raises ResponseError (not applied),
        ConnectionError (unknown) or Doubt (applied, WAIT short)."""
        slot = key_slot(key.encode())
        asked: Address | None = None  # ASK: this command (only) to that node, after ASKING
        for _redirect in range(MAX_REDIRECTS):
            address = asked or self.owners[slot]
            if address is None:
                self.refresh()
                address = self.owners[slot] or self.seeds[0]
            asking = asked is not None
            client = self.link(address)
            pipe = client.pipeline(transaction=False)
            pipe.execute_command("CLUSTER", "INFO")
            if asking:
                pipe.execute_command("ASKING")
            pipe.execute_command(*argv)
            pipe.execute_command("CLUSTER", "INFO")
            try:
                before, *rest = pipe.execute(raise_on_error=False)
                reply, after = rest[-2], rest[-1]
                # WAIT in a round trip of its own: pipelined behind the write it takes
                # hundreds of milliseconds or times out (see the test's docstring).
                waited = (client.execute_command("WAIT", 1, WAIT_MS)
                          if not isinstance(reply, ResponseError) else None)
            except (redis.ConnectionError, redis.TimeoutError, OSError):
                self.drop(address)
                raise
            if isinstance(reply, MovedError):
                self.owners[slot], asked = (reply.host, int(reply.port)), None
                continue
            if isinstance(reply, AskError):
                asked = (reply.host, int(reply.port))
                continue
            if isinstance(reply, ResponseError):
                raise reply
            who = {"slot": slot, "node": f"{address[0]}:{address[1]}", "e0": epoch_of(before),
                   "e1": epoch_of(after), "ask": asking}
            if waited != 1:
                raise Doubt(f"WAIT answered {waited!r}")
            return reply, who
        raise ResponseError(f"more than {MAX_REDIRECTS} redirections for slot {slot}")


class Doubt(Exception):
    """The write was answered but WAIT did not confirm it."""


class Workload:
    def __init__(self, seed: int, worker: int, seeds: list[Address]) -> None:
        self.rng = random.Random(seed * 1000 + worker)
        self.worker = worker  # (its keys, values and consumer name its own)
        self.router = Router(seeds, self.rng)
        self.n = 0
        self.unacked: dict[str, list[str]] = {s: [] for s in STREAMS}  # confirmed deliveries

    def attempt(self, argv: list[Any], key: str) -> tuple[Any, dict[str, Any]] | None:
        """The write sent until applied (None: given up or in doubt, already reported)."""
        last = ""
        for _ in range(ATTEMPTS):
            try:
                return self.router.write(argv, key)
            except ResponseError as err:
                message = str(err)
                if "BUSYGROUP" in message:
                    return None
                if "CLUSTERDOWN" in message or "cluster is down" in message.lower():
                    self.router.refresh()
                time.sleep(0.05)
                last = message
            except (redis.ConnectionError, redis.TimeoutError, OSError, Doubt) as err:
                say(op="doubt", cmd=text(argv), error=str(err)[:200])
                self.router.refresh()
                return None
        say(op="refused", cmd=text(argv), error=last[:200])
        return None

    def setup(self) -> None:
        for stream in STREAMS:
            self.attempt(["XGROUP", "CREATE", stream, GROUP, "0", "MKSTREAM"], stream)

    def step(self) -> None:
        self.n += 1
        n, roll = f"{self.worker}:{self.n}", self.rng.random()
        if roll < 0.5:
            key, value = f"k:{n}", f"v{n}"
            done = self.attempt(["SET", key, value], key)
            if done:
                say(op="set", key=key, value=value, **done[1])
        elif roll < 0.75:
            key, value = self.rng.choice(LISTS), f"v{n}"
            done = self.attempt(["RPUSH", key, value], key)
            if done:
                say(op="rpush", key=key, value=value, **done[1])
        elif roll < 0.9:
            key = self.rng.choice(STREAMS)
            done = self.attempt(["XADD", key, "*", "n", n], key)
            if done:
                say(op="xadd", key=key, value=text(done[0]), **done[1])
        else:
            self.consume(self.rng.choice(STREAMS))

    def consume(self, key: str) -> None:
        pending = self.unacked[key]
        if pending and self.rng.random() < 0.5:
            ids, self.unacked[key] = pending[:5], pending[5:]
            say(op="try-xack", key=key, ids=ids)
            done = self.attempt(["XACK", key, GROUP, *ids], key)
            if done:
                say(op="xack", key=key, ids=ids, **done[1])
            return
        done = self.attempt(["XREADGROUP", "GROUP", GROUP, f"c{self.worker}", "COUNT", "5", "STREAMS", key,
                             ">"], key)
        if done and done[0]:
            ids = [text(entry[0]) for _stream, entries in done[0] for entry in entries]
            if ids:
                say(op="deliver", key=key, ids=ids, **done[1])
                pending.extend(ids)


def main(argv: list[str]) -> int:
    seeds = [(host, int(port)) for host, _, port in (a.rpartition(":") for a in argv[2:])]
    workload = Workload(int(argv[0]), int(argv[1]), seeds)
    workload.router.refresh()
    workload.setup()
    say(op="ready")
    while True:
        workload.step()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
