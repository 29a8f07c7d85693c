"""Hypothesis drives the engine (embedded, and behind the network server) and a real redis-server
(7.0.15) with the same random sequences of sorted-set, hash, set and generic commands
(tests.support.type_strategies) and of list commands (this module's `list_step`: three list keys
with `list-max-listpack-size` 4, so lists of several nodes; pushes, pops with counts, LINSERT,
LSET, LREM, LTRIM, LMOVE, RPOPLPUSH, LMPOP, LPOS, the blocking pops with a 10 ms timeout,
DUMP/RESTORE, RENAME and COPY of lists) and compares every reply and error line, then every
key's type, content, encoding and TTL.

Left out: a lex range (ZRANGEBYLEX, ZLEXCOUNT, ZREMRANGEBYLEX, ZRANGE/ZRANGESTORE BYLEX) over a
sorted set whose scores differ, which Redis documents as unspecified (its skiplist walk then
depends on the nodes' random levels; streamkeep bisects on the members).

Normalised, where 7.0 and 8.x differ or where Redis's order is its hashtable's:
* a score's text (7.0 prints %.17g, 8.x the shortest round trip): replies of the sorted-set
  commands go through `num`, which reads every number-like bulk as a double on both sides;
* a hash's HKEYS / HVALS / HGETALL when the oracle's hash is a hashtable, and every set's members
  (7.0 has no listpack sets: a small set of strings is a hashtable there) compared as multisets;
* a set's OBJECT ENCODING: 8.x's listpack is 7.0's hashtable, so only `intset` must agree;
* a list's OBJECT ENCODING: 7.0 says `quicklist` for every list, 7.2+ `listpack` for a small
  one, so both read as `quicklist`;
* a TTL: whether there is one (the two clocks are not the same clock).
SPOP, SRANDMEMBER, ZRANDMEMBER and HRANDFIELD pick at random: checked by their properties against
the oracle's content (members belong, counts and distinctness right, scores and values match);
SPOP's pick is then removed from the oracle's set with SREM so both stay equal. ZRANK
WITHSCORE (7.2+) is checked against the oracle's ZRANK and ZSCORE. DUMP payloads differ between
versions, so each side RESTOREs its own, or both the oracle's. Any command may also run inside
a Redis Function (FCALL), and the blocking pops with a 10 ms timeout (never through FCALL for
the list ones: 7.0 refuses BLPOP, BRPOP, BLMOVE and BRPOPLPUSH in scripts, 7.2+ runs them).

The RESP3 variant (network server only) sends the same sequences after HELLO 3 and compares a
sorted-set or list command's reply byte for byte (doubles read as values), any other reply
whole, or for an aggregate its RESP3 type and length. Hash field expiry (7.4+) is covered by
tests/property/test_types_replay.py, tests/property/test_hash_expiry_model.py and
tests/engine/commands/test_hash_expiry.py.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from streamkeep import Engine
from tests.support.diffutil import ServedEngine, WallClock, outcome, reset_redis_config
from tests.support.resp_client import encode_command, read_raw_reply
from tests.support.type_lockstep import DEFAULTS, LIST_COMMANDS, Lockstep, fuzz, steps
from tests.support.type_strategies import Step


@pytest.fixture
def lockstep(redis_raw, backend):
    reset_redis_config(redis_raw)
    lock = Lockstep(backend(Engine(clock=WallClock())), redis_raw)
    yield lock
    for name, value in DEFAULTS.items():
        redis_raw.execute("CONFIG", "SET", name, value)
    redis_raw.execute("FLUSHALL")
    outcome(redis_raw, "FUNCTION", "DELETE", "fuzzlib")  # (absent if the run failed early)


@pytest.mark.parametrize("examples", [
    pytest.param(40, id="bounded"),
    # (1,000 sequences of up to 30 steps per backend: `make soak` only)
    pytest.param(1000, id="soak", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])
def test_types_match_redis(lockstep: Lockstep, examples: int) -> None:
    fuzz(lockstep, examples)


# --- RESP3 ---------------------------------------------------------------------------------

_DOUBLE = re.compile(rb"^,([^\r]*)\r\n", re.M)


class Resp3:
    """A connection after HELLO 3 that returns each reply as the exact bytes sent."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=30)
        self.file = self.sock.makefile("rb")
        self("HELLO", "3")

    def __call__(self, *argv: bytes | str) -> bytes:
        self.sock.sendall(encode_command(*argv))
        return read_raw_reply(self.file)

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def doubles(data: bytes) -> bytes:
    """Every RESP3 double as Python's repr of its value (7.0 prints %.17g, 8.x the shortest
    round trip), a zero without its sign: 7.0.15 replies 0 for a score added as -0, where
    8.x's d2string keeps the sign streamkeep keeps (tests/engine/model/test_zset.py)."""
    return _DOUBLE.sub(lambda m: b"," + repr(float(m.group(1)) + 0.0).encode() + b"\r\n", data)


def resp3_step(ours: Resp3, theirs: Resp3, argv: list[bytes]) -> None:
    """A sorted-set command's reply byte for byte (doubles as values); any other's whole when
    it is not an aggregate (an aggregate's order may be a hashtable's), else its header: the
    RESP3 type (map, set, array) and length."""
    mine, oracle = doubles(ours(*argv)), doubles(theirs(*argv))
    name = argv[0].upper()
    if name.startswith((b"Z", b"BZ")) or name in LIST_COMMANDS or oracle[:1] not in b"*%~":
        assert mine == oracle, f"\nargv:   {argv!r}\nengine: {mine!r}\nredis:  {oracle!r}"
    else:
        head = [data.split(b"\r\n", 1)[0] for data in (mine, oracle)]
        assert head[0] == head[1], f"\nargv:   {argv!r}\nengine: {mine!r}\nredis:  {oracle!r}"


@pytest.fixture
def resp3_pair(redis_raw, redis_server) -> Iterator[tuple[Lockstep, Resp3, Resp3]]:
    """Over the network server only: a RESP2 lockstep (setup and state) and a RESP3
    connection to each side."""
    reset_redis_config(redis_raw)
    served = ServedEngine(Engine(clock=WallClock()))
    lock = Lockstep(served, redis_raw)
    ours = Resp3(served.handle.host, served.handle.port)
    theirs = Resp3(redis_server.host, redis_server.port)
    try:
        yield lock, ours, theirs
    finally:
        ours.close()
        theirs.close()
        served.close()
        for name, value in DEFAULTS.items():
            redis_raw.execute("CONFIG", "SET", name, value)
        redis_raw.execute("FLUSHALL")
        outcome(redis_raw, "FUNCTION", "DELETE", "fuzzlib")


@pytest.mark.parametrize("examples", [
    pytest.param(25, id="bounded"),
    pytest.param(500, id="soak", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])
def test_types_match_redis_resp3(resp3_pair: tuple[Lockstep, Resp3, Resp3],
                                 examples: int) -> None:
    """The same sequences over RESP3 (doubles, maps, sets, nested score pairs), minus the
    random picks, FCALL, TTL and OBJECT ENCODING (normalised by the RESP2 state check: two
    clocks; 8.x's listpack sets)."""
    lock, ours, theirs = resp3_pair

    @settings(max_examples=examples, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.filter_too_much])
    @given(steps)
    def run(script: list[Step]) -> None:
        lock.reset()
        for kind, argv in script:
            if (kind == "cmd" and argv[0] not in (b"FCALL", b"OBJECT", b"TTL")
                    and not lock.lex_on_mixed_scores(argv)):
                resp3_step(ours, theirs, argv)
        lock.same_state()

    run()
