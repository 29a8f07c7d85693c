"""The crash bench's seeded workload on the other value types: sorted sets, hashes (with field
expiry), sets and a Redis Functions library whose functions write several keys at once.

Owns which commands the `types` workload runs and with which arguments, and the names and time
bands the model reads its state by. `TypesWorkload(seed)` has `workload.Workload`'s interface
(`next_argv`, `observe`, `index`): its first operation loads the library (`FUNCTION LOAD
REPLACE`), then it mixes ZADD / ZINCRBY / ZREM / ZPOPMIN, HSET / HINCRBY / HDEL / HPEXPIRE /
HPEXPIREAT, SADD / SREM / SPOP / SMOVE and FCALL. Multi-member writes and the functions (a
sorted set, a hash and a set changed by one call) are what "whole or absent" is checked on.

Field expiry stays deterministic across two clocks (the target's and the model's): a relative
TTL (`HPEXPIRE`) lands decades ahead, an absolute one (`HPEXPIREAT`) either further still
(`ABS_AT` and up, kept exact by the model) or in the past (the field goes at once, as HDEL).
Conditions that compare two TTLs (GT, LT) are only used with absolute times.
HSET values carry their operation number and `workload.payload_sum`'s checksum.
Must not touch: how commands reach a target (history), what is checked (invariants).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamkeep.tools.crashbench.workload import payload_sum

ZSETS = (b"cb:z0", b"cb:z1")
HASHES = (b"cb:h0", b"cb:h1")
SETS = (b"cb:t0", b"cb:t1")
MEMBERS = tuple(b"m%d" % i for i in range(24))
PAYLOAD_FIELDS = tuple(b"f%d" % i for i in range(12))
COUNTER_FIELDS = tuple(b"n%d" % i for i in range(4))  # only ever HINCRBY'd: always integers
HASH_FIELDS = PAYLOAD_FIELDS + COUNTER_FIELDS

REL_MS = 10**12  # HPEXPIRE's TTLs: about 31 years, plus up to a second
ABS_AT = 4 * 10**12  # HPEXPIREAT's future times (the 2090s) and up; exact in the model
PAST_AT = 10**6  # HPEXPIREAT's past times and up (the field is deleted at once)

LIBRARY = b"""#!lua name=cblib
redis.register_function('cb_transfer', function(keys, args)
  redis.call('ZINCRBY', keys[1], args[2], args[1])
  redis.call('HINCRBY', keys[2], args[3], args[2])
  return redis.call('SADD', keys[3], args[1])
end)
redis.register_function('cb_popmove', function(keys, args)
  local popped = redis.call('ZPOPMIN', keys[1])
  if popped[1] then redis.call('SADD', keys[2], popped[1]) end
  return popped
end)
"""

# Relative weights of the operation kinds after the library is loaded.
MIX = (("zadd", 12), ("zincrby", 7), ("zrem", 5), ("zpopmin", 4),
       ("hset", 12), ("hincrby", 7), ("hdel", 4), ("hpexpire", 4), ("hpexpireat", 4),
       ("sadd", 10), ("srem", 4), ("spop", 4), ("smove", 4),
       ("fcall_transfer", 8), ("fcall_popmove", 4))


@dataclass
class TypesWorkload:
    """The command stream of one seed (see the module docstring)."""

    seed: int
    index: int = 0  # the next operation's number
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"crashbench-types:{self.seed}")
        self._kinds = [k for k, _w in MIX]
        self._weights = [w for _k, w in MIX]

    def next_argv(self) -> list[bytes]:
        """The next operation's command (its number is `index`; `observe` advances it)."""
        if self.index == 0:
            return [b"FUNCTION", b"LOAD", b"REPLACE", LIBRARY]
        kind = self.rng.choices(self._kinds, self._weights)[0]
        return getattr(self, f"_{kind}")()

    def observe(self, argv: Sequence[bytes], reply: Any) -> None:
        """Move on to the next operation (the choices never depend on replies: a member or
        field a write names may be absent, which is an outcome the model reproduces)."""
        self.index += 1

    # --- choices -----------------------------------------------------------------------------

    def _some(self, pool: Sequence[bytes], most: int) -> list[bytes]:
        return self.rng.sample(list(pool), self.rng.randint(1, most))

    def _score(self) -> bytes:
        # Integers and halves: exact in binary, so every score's text is the same everywhere.
        return b"%g" % (self.rng.randint(-40, 40) / 2)

    def _fields(self, pool: Sequence[bytes], most: int) -> list[bytes]:
        fields = self._some(pool, most)
        return [b"FIELDS", b"%d" % len(fields), *fields]

    # --- sorted sets ---------------------------------------------------------------------------

    def _zadd(self) -> list[bytes]:
        argv = [b"ZADD", self.rng.choice(ZSETS)]
        flag = self.rng.choice((None, None, None, b"NX", b"XX", b"GT", b"LT", b"CH"))
        if flag is not None:
            argv.append(flag)
        for member in self._some(MEMBERS, 4):
            argv += [self._score(), member]
        return argv

    def _zincrby(self) -> list[bytes]:
        return [b"ZINCRBY", self.rng.choice(ZSETS), self._score(), self.rng.choice(MEMBERS)]

    def _zrem(self) -> list[bytes]:
        return [b"ZREM", self.rng.choice(ZSETS), *self._some(MEMBERS, 3)]

    def _zpopmin(self) -> list[bytes]:
        return [b"ZPOPMIN", self.rng.choice(ZSETS), b"%d" % self.rng.randint(1, 3)]

    # --- hashes --------------------------------------------------------------------------------

    def _hset(self) -> list[bytes]:
        argv = [b"HSET", self.rng.choice(HASHES)]
        for name in self._some(PAYLOAD_FIELDS, 4):
            data = self.rng.randbytes(self.rng.randint(0, 24)).hex().encode()
            argv += [name, b"%d:%s:%s" % (self.index, payload_sum(self.index, data), data)]
        return argv

    def _hincrby(self) -> list[bytes]:
        return [b"HINCRBY", self.rng.choice(HASHES), self.rng.choice(COUNTER_FIELDS),
                b"%d" % self.rng.randint(-5, 9)]

    def _hdel(self) -> list[bytes]:
        return [b"HDEL", self.rng.choice(HASHES), *self._some(HASH_FIELDS, 3)]

    def _hpexpire(self) -> list[bytes]:
        argv = [b"HPEXPIRE", self.rng.choice(HASHES),
                b"%d" % (REL_MS + self.rng.randint(0, 1000))]
        flag = self.rng.choice((None, None, b"NX", b"XX"))
        return argv + ([flag] if flag else []) + self._fields(HASH_FIELDS, 3)

    def _hpexpireat(self) -> list[bytes]:
        base = PAST_AT if self.rng.random() < 0.25 else ABS_AT
        argv = [b"HPEXPIREAT", self.rng.choice(HASHES),
                b"%d" % (base + self.rng.randint(0, 10**6))]
        flag = self.rng.choice((None, None, b"NX", b"XX", b"GT", b"LT"))
        return argv + ([flag] if flag else []) + self._fields(HASH_FIELDS, 3)

    # --- sets ----------------------------------------------------------------------------------

    def _sadd(self) -> list[bytes]:
        return [b"SADD", self.rng.choice(SETS), *self._some(MEMBERS, 4)]

    def _srem(self) -> list[bytes]:
        return [b"SREM", self.rng.choice(SETS), *self._some(MEMBERS, 3)]

    def _spop(self) -> list[bytes]:
        count = self.rng.choice((None, 1, 2, 3))
        return [b"SPOP", self.rng.choice(SETS)] + ([b"%d" % count] if count else [])

    def _smove(self) -> list[bytes]:
        src, dst = self.rng.sample(SETS, 2)
        return [b"SMOVE", src, dst, self.rng.choice(MEMBERS)]

    # --- functions -----------------------------------------------------------------------------

    def _fcall_transfer(self) -> list[bytes]:
        return [b"FCALL", b"cb_transfer", b"3", self.rng.choice(ZSETS), self.rng.choice(HASHES),
                self.rng.choice(SETS), self.rng.choice(MEMBERS), b"%d" % self.rng.randint(1, 9),
                self.rng.choice(COUNTER_FIELDS)]

    def _fcall_popmove(self) -> list[bytes]:
        return [b"FCALL", b"cb_popmove", b"2", self.rng.choice(ZSETS), self.rng.choice(SETS)]
