"""Differential test of Redis Cluster's key-to-slot map (engine.model.keyslot, and its pure
reference whichever twin the facade runs) against a cluster-enabled redis-server's CLUSTER
KEYSLOT: the keys the cluster specification names, thousands of random keys with hash tags
(empty, nested, several, unclosed) and a few long ones."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from streamkeep.engine.model.keyslot import key_slot
from tests.support.cluster_redis import cluster_redis  # noqa: F401  (the fixture)
from tests.support.kernels import pure
from tests.support.resp_client import RespClient

pytestmark = pytest.mark.redis

BATCH = 500  # commands pipelined at once
SPEC_KEYS = [b"123456789", b"foo", b"bar", b"{user1000}.following", b"{user1000}.followers",
             b"foo{}{bar}", b"foo{{bar}}zap", b"foo{bar}{zap}", b"", b"{", b"}", b"{}", b"}{",
             b"{{}}", b"{a}", b"a{b", b"\x00{\xff}"]


def random_keys(rng: random.Random, count: int) -> Iterator[bytes]:
    """Keys of braces and a few letters, of any bytes, and of a readable name around a tag."""
    for _ in range(count):
        kind = rng.random()
        if kind < 0.4:
            yield bytes(rng.choice(b"{{}}ab\x00") for _ in range(rng.randint(0, 16)))
        elif kind < 0.7:
            yield rng.randbytes(rng.randint(0, 40))
        else:
            tag = b"%d" % rng.randrange(10_000) if rng.random() < 0.9 else b""
            yield b"user:{" + tag + b"}:" + rng.choice([b"following", b"followers", b"x{y}"])


def test_key_slot_is_cluster_keyslot(cluster_redis) -> None:  # noqa: F811
    rng = random.Random(16384)
    keys = [*SPEC_KEYS, *random_keys(rng, 4000),
            b"{" * 100_000, b"}{" * 50_000, rng.randbytes(1 << 20),
            b"{" + rng.randbytes(1 << 16).replace(b"}", b"") + b"}tail"]
    reference = pure("streamkeep.engine.model", "keyslot")
    wrong = []
    with RespClient(cluster_redis.host, cluster_redis.port) as redis:
        for at in range(0, len(keys), BATCH):
            batch = keys[at:at + BATCH]
            slots = redis.pipeline(*[("CLUSTER", "KEYSLOT", key) for key in batch])
            wrong += [(key[:40], len(key), slot, key_slot(key), reference.key_slot(key))
                      for key, slot in zip(batch, slots, strict=True)
                      if not key_slot(key) == reference.key_slot(key) == slot]
        assert redis.execute("CLUSTER", "KEYSLOT", "foo") == 12182  # (a cluster node answers)
    assert not wrong, f"(key, length, Redis's slot, ours, the reference's): {wrong[:10]}"
