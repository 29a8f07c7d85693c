"""The client host of the partition tests, run inside its network namespace (tests/support/netns).

    python -m tests.support.partition_client work HOST PORT SEED   until killed: XADDs, reads
        that deliver (XREADGROUP), and WAIT 1 after every few; one line per outcome on stdout:
        `ack ID`, `deliver ID ...`, `confirm ID ...` (what a WAIT that returned 1 covered:
        this connection's writes since its previous such WAIT), `error TEXT` (the outcome of
        the command in flight is unknown; the client reconnects)
    python -m tests.support.partition_client cmd HOST PORT ARG ...   one command, its reply as
        JSON (bytes as text)
    python -m tests.support.partition_client state HOST PORT   the stream's IDs and the group's
        pending IDs as JSON
"""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any

import redis

KEY, GROUP = "s", "g"


def _client(host: str, port: int) -> redis.Redis:
    return redis.Redis(host=host, port=port, socket_timeout=3, socket_connect_timeout=3)


def _say(*words: str) -> None:
    print(" ".join(words), flush=True)


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): _text(v) for k, v in value.items()}
    return value


def work(host: str, port: int, seed: int) -> None:
    rng = random.Random(seed)
    client, covered = _client(host, port), []
    i = 0
    while True:
        try:
            i += 1
            sid = _text(client.xadd(KEY, {"n": str(i)}))
            _say("ack", sid)
            covered.append(sid)
            if rng.random() < 0.2:
                got = client.xreadgroup(GROUP, "c", {KEY: ">"}, count=3)
                ids = [_text(e[0]) for _k, entries in got for e in entries]
                if ids:
                    _say("deliver", *ids)
                    covered += ["d:" + sid for sid in ids]
            if i % 5 == 0 and client.execute_command("WAIT", 1, 200) >= 1 and covered:
                _say("confirm", *covered)
                covered = []
        except (redis.ConnectionError, redis.TimeoutError, OSError) as err:
            _say("error", str(err).replace("\n", " ")[:200])
            covered = []  # a new connection: its WAIT covers none of these
            client.close()
            client = _client(host, port)
            time.sleep(0.05)


def main(argv: list[str]) -> int:
    mode, host, port = argv[0], argv[1], int(argv[2])
    if mode == "work":
        work(host, port, int(argv[3]))
        return 0
    client = _client(host, port)
    if mode == "cmd":
        print(json.dumps(_text(client.execute_command(*argv[3:]))))
        return 0
    ids = [_text(e[0]) for e in client.xrange(KEY)] if client.exists(KEY) else []
    pending: list[str] = []
    if ids:
        pending = [_text(p["message_id"]) for p in
                   client.xpending_range(KEY, GROUP, "-", "+", 10 ** 6)]
    print(json.dumps({"ids": ids, "pending": pending}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
