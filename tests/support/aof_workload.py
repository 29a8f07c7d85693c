"""A deterministic, seeded mixed stream workload for the AOF crash tests, and its child-process
entry point.

`commands(seed)` yields `(time_ms, argv)` forever: a pure function of the seed (one seeded RNG,
consumed the same way by every caller, and no feedback from replies). The workload mixes XADD
(with exact and approximate MAXLEN/MINID trims), XREADGROUP (new and history reads), XACK,
XCLAIM, XAUTOCLAIM, XDEL, XTRIM, XGROUP CREATE/SETID/CREATECONSUMER/DELCONSUMER, DEL and some
read-only commands, over a few small keys so streams, PELs and groups stay alive and small. The
clock advances by 1..20 ms per command (strictly increasing), so auto-generated IDs are
`<time>-0` and the generator knows them without asking the engine.

`run(engine, clock, seed, start, stop, on_ack)` drives an engine through commands
[start, stop): it sets the fake clock before each command, swallows ReplyError (an error reply
is a deterministic, acknowledged reply too) and calls `on_ack(i)` after command i returns.
`reference(seed, counts)` runs an in-memory Engine and returns the digest after each of the
given command counts.

Child process (used by tests/crash/test_aof_crash.py):

    python -m tests.support.aof_workload DIR POLICY SEED [SEGMENT_MAX_BYTES] [START] [LIMIT]

opens `Engine.open(DIR, appendfsync=POLICY, aof_segment_max_bytes=..., clock=fake)`, skips the
first START commands of the sequence (they are already in DIR), then runs commands START,
START+1, ... printing and flushing "ack <i>" after each until LIMIT or until it is killed.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
from collections.abc import Callable, Iterator

from streamkeep import Engine, ReplyError

KEYS = ["s1", "s2", "s3"]
GROUPS = ["g1", "g2"]
CONSUMERS = ["c1", "c2", "c3"]
BASE_TIME = 1_700_000_000_000
DEFAULT_SEGMENT_MAX_BYTES = 2048


class FakeClock:
    """The engine's millisecond clock; the driver sets `now` before each command."""

    def __init__(self, now: int = BASE_TIME) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def commands(seed: int | str) -> Iterator[tuple[int, list[str]]]:
    """The workload: (clock value, argv) for command 0, 1, 2, ... (infinite)."""
    rng = random.Random(f"aof-workload:{seed}")
    now = BASE_TIME
    # IDs the generator knows were added (auto IDs are "<now>-0": the clock strictly increases
    # and no explicit ID is ever ahead of the clock). Deleted or trimmed ones stay listed:
    # acking or claiming a missing ID is part of the workload too.
    known: dict[str, list[str]] = {k: [] for k in KEYS}

    def pick_ids(key: str, most: int) -> list[str]:
        pool = known[key][-40:] or ["0-1"]
        return [rng.choice(pool) for _ in range(rng.randint(1, most))]

    setup = [["XGROUP", "CREATE", k, g, "$", "MKSTREAM"] for k in KEYS[:2] for g in GROUPS]
    for argv in setup:
        now += rng.randint(1, 20)
        yield now, argv
    while True:
        now += rng.randint(1, 20)
        key = rng.choice(KEYS)
        group = rng.choice(GROUPS)
        consumer = rng.choice(CONSUMERS)
        roll = rng.random()
        argv: list[str]
        if roll < 0.30:
            trim: list[str] = []
            r = rng.random()
            if r < 0.15:
                trim = ["MAXLEN", rng.choice(["~", "="]), str(rng.randint(5, 40))]
            elif r < 0.20:
                trim = ["MINID", rng.choice(["~", "="]), f"{now - rng.randint(200, 2000)}-0"]
            r = rng.random()
            if r < 0.05:
                new_id = "1-1"  # smaller than the top item: an error reply
            elif r < 0.15:
                new_id = f"{now}-{rng.randint(1, 5)}"
                known[key].append(new_id)
            else:
                new_id = "*"
                known[key].append(f"{now}-0")
            fields = ["f", f"v{rng.randint(0, 10**6)}"]
            if rng.random() < 0.3:
                fields += ["g", "x" * rng.randint(0, 60)]
            argv = ["XADD", key, *trim, new_id, *fields]
        elif roll < 0.43:
            argv = ["XREADGROUP", "GROUP", group, consumer, "COUNT", str(rng.randint(1, 5))]
            if rng.random() < 0.15:
                argv.append("NOACK")
            argv += ["STREAMS", key, ">"]
        elif roll < 0.48:  # history read: re-delivers the consumer's pending entries
            argv = ["XREADGROUP", "GROUP", group, consumer, "COUNT", str(rng.randint(1, 5)),
                    "STREAMS", key, rng.choice(["0", "0-0"])]
        elif roll < 0.60:
            argv = ["XACK", key, group, *pick_ids(key, 3)]
        elif roll < 0.65:
            argv = ["XCLAIM", key, group, consumer, str(rng.randint(0, 150)),
                    *pick_ids(key, 3)]
            options = rng.sample([["JUSTID"], ["FORCE"], ["RETRYCOUNT", "3"],
                                  ["IDLE", str(rng.randint(0, 50))]], rng.randint(0, 2))
            argv += [a for opt in options for a in opt]
        elif roll < 0.70:
            argv = ["XAUTOCLAIM", key, group, consumer, str(rng.randint(0, 150)),
                    rng.choice(["0-0", "0", rng.choice(known[key] or ["0-0"])]),
                    "COUNT", str(rng.randint(1, 10))]
            if rng.random() < 0.3:
                argv.append("JUSTID")
        elif roll < 0.75:
            argv = ["XDEL", key, *pick_ids(key, 2)]
        elif roll < 0.79:
            if rng.random() < 0.5:
                argv = ["XTRIM", key, "MAXLEN", rng.choice(["~", "="]), str(rng.randint(5, 30))]
            else:
                argv = ["XTRIM", key, "MINID", rng.choice(["~", "="]),
                        f"{now - rng.randint(100, 3000)}-0"]
        elif roll < 0.82:
            argv = ["XGROUP", "CREATE", key, group, rng.choice(["$", "0"])]
            if rng.random() < 0.5:
                argv.append("MKSTREAM")
        elif roll < 0.84:
            argv = ["XGROUP", "SETID", key, group,
                    rng.choice(["$", "0", rng.choice(known[key] or ["0"])])]
        elif roll < 0.86:
            argv = ["XGROUP", "CREATECONSUMER", key, group, consumer]
        elif roll < 0.875:
            argv = ["XGROUP", "DELCONSUMER", key, group, consumer]
        elif roll < 0.88:
            argv = ["DEL", key]
            known[key].clear()
        elif roll < 0.92:
            argv = rng.choice([
                ["XRANGE", key, "-", "+", "COUNT", "5"],
                ["XPENDING", key, group],
                ["XPENDING", key, group, "-", "+", "10"],
                ["XINFO", "STREAM", key],
                ["XLEN", key],
            ])
        else:
            argv = ["XADD", key, "*", "n", str(rng.randint(0, 99))]
            known[key].append(f"{now}-0")
        yield now, argv


def run(
    engine: Engine,
    clock: FakeClock,
    seed: int | str,
    start: int,
    stop: int | None,
    on_ack: Callable[[int], None] | None = None,
) -> int:
    """Run commands [start, stop) of the workload on `engine`; returns the next index."""
    i = 0
    for i, (now, argv) in enumerate(commands(seed)):  # noqa: B007
        if stop is not None and i >= stop:
            return i
        if i < start:
            continue
        clock.now = now
        with contextlib.suppress(ReplyError):  # error replies are deterministic: acked too
            engine.execute(*argv)
        if on_ack is not None:
            on_ack(i)
    return i


def reference(seed: int | str, counts: list[int]) -> dict[int, str]:
    """Digest of an in-memory engine after the first k commands, for each k in counts."""
    clock = FakeClock()
    return digests_after(Engine(clock=clock), clock, seed, counts)


def digests_after(
    engine: Engine, clock: FakeClock, seed: int | str, counts: list[int]
) -> dict[int, str]:
    """Run the workload on `engine`; its digest after the first k commands, for each k."""
    out: dict[int, str] = {}
    done = 0
    for k in sorted(set(counts)):
        run(engine, clock, seed, done, k)
        done = k
        out[k] = engine.digest()
    return out


def main(argv: list[str]) -> None:
    directory, policy, seed = argv[0], argv[1], argv[2]
    segment_max = int(argv[3]) if len(argv) > 3 else DEFAULT_SEGMENT_MAX_BYTES
    start = int(argv[4]) if len(argv) > 4 else 0
    limit = int(argv[5]) if len(argv) > 5 else None
    clock = FakeClock()
    engine = Engine.open(directory, appendfsync=policy, aof_segment_max_bytes=segment_max,
                         clock=clock)
    out = sys.stdout.fileno()

    def ack(i: int) -> None:
        os.write(out, b"ack %d\n" % i)  # one small write: never split across a kill

    os.write(out, b"ready\n")
    run(engine, clock, seed, start, limit, ack)
    engine.close()
    os.write(out, b"done\n")


if __name__ == "__main__":
    main(sys.argv[1:])
