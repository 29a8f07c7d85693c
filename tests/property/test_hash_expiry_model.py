"""Hash field expiry (Redis 7.4+, so not in the 7.0 oracle) against a model: random sequences of
HSET, HSETNX, HDEL, HPEXPIRE / HPEXPIREAT with NX, XX, GT and LT, HPERSIST, HPTTL, HGET and
HGETALL over two hashes, each reply compared with what a dict of fields, values and expiry
times says (Redis's documented replies: -2 no such field, 0 condition not met, 1 set, 2 deleted
by a time already past; HPERSIST -1 without a TTL; HSET drops a field's TTL). The clock stands
still while the commands run; then it moves on (to some expiry times exactly, or past them) and the
reads must hide exactly the fields whose time is past (and the replica, fed the effects, agrees).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine
from tests.support.command_strategies import Clock

NOW = 1_000_000
KEYS = [b"h1", b"h2"]
FIELDS = [b"a", b"b", b"c"]

keys = st.sampled_from(KEYS)
field_lists = st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3)
conditions = st.sampled_from([None, b"NX", b"XX", b"GT", b"LT"])
ops = st.one_of(
    st.tuples(st.just("hset"), keys, st.sampled_from(FIELDS), st.sampled_from([b"1", b"x"])),
    st.tuples(st.just("hsetnx"), keys, st.sampled_from(FIELDS), st.just(b"n")),
    st.tuples(st.just("hdel"), keys, st.sampled_from(FIELDS)),
    st.tuples(st.just("hpexpire"), keys, st.sampled_from([0, 1, 100, 5000, 20000]), conditions,
              field_lists),
    st.tuples(st.just("hpexpireat"), keys,
              st.sampled_from([NOW - 1, NOW, NOW + 50, NOW + 5000]), conditions, field_lists),
    st.tuples(st.just("hpersist"), keys, field_lists),
    st.tuples(st.just("hpttl"), keys, field_lists),
    st.tuples(st.just("hget"), keys, st.sampled_from(FIELDS)),
    st.tuples(st.just("hgetall"), keys),
)


class Model:
    """{key: {field: [value, expire_at or None]}}."""

    def __init__(self) -> None:
        self.hashes: dict[bytes, dict[bytes, list[Any]]] = {}

    def fields(self, key: bytes) -> dict[bytes, list[Any]]:
        return self.hashes.get(key, {})

    def drop_if_empty(self, key: bytes) -> None:
        if key in self.hashes and not self.hashes[key]:
            del self.hashes[key]

    def expire(self, key: bytes, at: int, cond: bytes | None, names: list[bytes]) -> list[int]:
        out = []
        for name in names:
            entry = self.fields(key).get(name)
            if entry is None:
                out.append(-2)
                continue
            current = entry[1]
            if ((cond == b"NX" and current is not None) or (cond == b"XX" and current is None)
                    or (cond == b"GT" and (current is None or at <= current))
                    or (cond == b"LT" and current is not None and at >= current)):
                out.append(0)
            elif at <= NOW:
                del self.hashes[key][name]
                out.append(2)
            else:
                entry[1] = at
                out.append(1)
        self.drop_if_empty(key)
        return out

    def run(self, op: tuple[Any, ...]) -> Any:
        kind, key = op[0], op[1]
        fields = self.fields(key)
        if kind == "hset":
            new = op[2] not in fields
            self.hashes.setdefault(key, {})[op[2]] = [op[3], None]
            return int(new)
        if kind == "hsetnx":
            if op[2] in fields:
                return 0
            self.hashes.setdefault(key, {})[op[2]] = [op[3], None]
            return 1
        if kind == "hdel":
            gone = fields.pop(op[2], None) is not None
            self.drop_if_empty(key)
            return int(gone)
        if kind == "hpexpire":
            return self.expire(key, NOW + op[2], op[3], op[4])
        if kind == "hpexpireat":
            return self.expire(key, op[2], op[3], op[4])
        if kind == "hpersist":
            out = []
            for name in op[2]:
                entry = fields.get(name)
                out.append(-2 if entry is None else -1 if entry[1] is None else 1)
                if entry is not None:
                    entry[1] = None
            return out
        if kind == "hpttl":
            return [-2 if name not in fields else -1 if fields[name][1] is None
                    else fields[name][1] - NOW for name in op[2]]
        if kind == "hget":
            return fields[op[2]][0] if op[2] in fields else None
        return {name: entry[0] for name, entry in fields.items()}

    def visible(self, key: bytes, now: int) -> dict[bytes, bytes]:
        """The fields a read sees at `now`: a field expires once its time is past (at its
        very millisecond it is still there, as a key is; setting a time not in the future
        deletes at once)."""
        return {name: value for name, (value, at) in self.fields(key).items()
                if at is None or at >= now}


def argv_of(op: tuple[Any, ...]) -> list[Any]:
    kind, key = op[0], op[1]
    if kind in ("hpexpire", "hpexpireat"):
        cond = [] if op[3] is None else [op[3]]
        return [kind.upper(), key, str(op[2]), *cond, "FIELDS", str(len(op[4])), *op[4]]
    if kind in ("hpersist", "hpttl"):
        return [kind.upper(), key, "FIELDS", str(len(op[2])), *op[2]]
    return [kind.upper(), key, *op[2:]]


def as_dict(reply: Any) -> Any:
    return dict(zip(reply[::2], reply[1::2], strict=True)) if isinstance(reply, list) else reply


@pytest.mark.parametrize("examples", [
    pytest.param(100, id="bounded"),
    pytest.param(3000, id="soak", marks=[pytest.mark.slow, pytest.mark.timeout(1800)]),
])
def test_field_expiry_matches_model(examples: int) -> None:
    @settings(max_examples=examples, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(ops, min_size=1, max_size=40),
           st.sampled_from([0, 1, 49, 50, 100, 4999, 6000]))
    def check_sequence(script: list[tuple[Any, ...]], later: int) -> None:
        clock = Clock()
        clock.now = NOW
        engine, replica = Engine(clock=clock), Engine(clock=clock)
        engine.add_sink(replica.replay.apply)
        model = Model()
        for op in script:
            reply = engine.execute(*argv_of(op))
            if op[0] == "hgetall":
                reply = as_dict(reply)
            assert reply == model.run(op), f"{op!r}: engine {reply!r}"
        clock.now = NOW + later
        for key in KEYS:
            expected = model.visible(key, clock.now)
            assert as_dict(engine.execute("HGETALL", key)) == expected, key
            for name in FIELDS:
                assert engine.execute("HGET", key, name) == expected.get(name), (key, name)
                assert engine.execute("HEXISTS", key, name) == int(name in expected), (key, name)
            assert engine.execute("EXISTS", key) == int(bool(expected)), key
        assert replica.digest() == engine.digest()

    check_sequence()
