"""What a client of a `streamkeep serve` knows about its keys with TTLs, for the expiry crash
tests (tests/crash/test_expiry_sigkill.py): the states its acknowledged writes leave, and the
check of a restarted server against them.

A `KeyState` is one key's value (a string's bytes, or a stream's entry tokens in order; None for
a missing key) and its absolute expiry as bounds `(lo, hi)` in wall-clock ms. A relative TTL is
known only up to the command's round trip: `PX ms` sent at `send` and answered at `ack` sets an
expiry in `[send + ms, ack + ms]`; a `PEXPIRETIME` answered afterwards narrows it to one value,
which must then survive every restart exactly (the effects log absolute times). A key's
`candidates` are the states it may be in: one after an acknowledged write, two (before and
after) for the command in flight when the server was killed.

`Writer` is one client thread: its own keys (`c<n>:s*` strings, `c<n>:n*` counters, `c<n>:x*`
streams), a seeded mix of SET (PX, PXAT, EX, no TTL), SETEX, GETEX (PX, PERSIST), GET, PERSIST,
PEXPIRE, INCR and XADD, every reply checked against its ledger while it runs (`violations`).
`observe` reads a key in one MULTI (its PEXPIRETIME and value) and `match` judges it against
the candidates, returning the state it is now known to be in.
Must not touch: the server's files or process (the test kills and restarts it).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import redis

Value = bytes | tuple[bytes, ...] | None
SHORT_MS = (40, 400)  # short TTLs: they pass while the workload runs, or while it is down
LONG_MS = 3_600_000  # long TTLs: they must come back from every restart unchanged
FAILED = (redis.ConnectionError, redis.TimeoutError, ConnectionError, OSError)


def now_ms() -> int:
    """The server's clock (engine.runtime.core.wall_clock_ms reads the same wall clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class KeyState:
    value: Value  # None: the key does not exist
    expire: tuple[int, int] | None = None  # absolute expiry in [lo, hi] ms; None: no TTL

    def alive_at(self, t: int) -> bool | None:
        """True/False if the key certainly exists/is gone at server time t; None if unknown.
        (Redis's keyIsExpired: expired when now > the expiry.)"""
        if self.value is None:
            return False
        if self.expire is None or t <= self.expire[0]:
            return True
        return False if t > self.expire[1] else None

    def settled(self, t: int) -> KeyState:
        """The same state, GONE once its expiry has certainly passed at time t."""
        return GONE if self.alive_at(t) is False else self


GONE = KeyState(None)


def kind_of(key: str) -> str:
    return {"s": "string", "n": "string", "x": "stream"}[key.split(":")[-1][0]]


def observe(client: redis.Redis, key: str) -> tuple[Value, int, int, int]:
    """`(value, PEXPIRETIME, t0, t1)` read atomically (MULTI) between wall times t0 and t1."""
    pipe = client.pipeline(transaction=True)
    pipe.pexpiretime(key)
    if kind_of(key) == "stream":
        pipe.xrange(key)
    else:
        pipe.get(key)
    t0 = now_ms()
    pet, raw = pipe.execute()
    t1 = now_ms()
    if kind_of(key) == "stream":
        value: Value = tuple(fields[b"t"] for _id, fields in raw) if raw else None
    else:
        value = raw
    return value, pet, t0, t1


def match(state: KeyState, value: Value, pet: int, t0: int, t1: int) -> KeyState | None:
    """The state the key is known to be in if what was read (`value`, `PEXPIRETIME`, between
    server times t0 and t1) is consistent with `state`; None if it is not."""
    missing = value is None and pet == -2
    if state.value is None:
        return GONE if missing else None
    if missing:  # gone: only if its expiry may have passed by the read
        return GONE if state.expire is not None and state.expire[0] < t1 else None
    if value != state.value:
        return None
    if state.expire is None:
        return state if pet == -1 else None
    lo, hi = state.expire
    # Present with its TTL: the same absolute expiry, and not one that had passed (a key whose
    # TTL passed is never readable).
    if pet < 0 or not lo <= pet <= hi or pet < t0:
        return None
    return replace(state, expire=(pet, pet))


def judge(candidates: list[KeyState], value: Value, pet: int, t0: int,
          t1: int) -> KeyState | None:
    for state in candidates:
        known = match(state, value, pet, t0, t1)
        if known is not None:
            return known
    return None


class Writer(threading.Thread):
    """One client: a seeded workload over its own keys until the server goes away (or `stop`
    is set). `ledger[key]` holds the key's candidate states; `violations` what its replies
    contradicted; `acked` how many commands were answered."""

    def __init__(self, n: int, ledger: dict[str, list[KeyState]], seed: str,
                 port: int, stop: threading.Event) -> None:
        super().__init__(name=f"writer-{n}", daemon=True)
        self.n, self.ledger, self.stop = n, ledger, stop
        self.rng = random.Random(f"expiry-writer:{seed}:{n}")
        self.client = redis.Redis(port=port, socket_timeout=30, retry=None)
        self.violations: list[str] = []
        self.acked = 0
        self.tokens = 0
        self.in_flight: str | None = None

    @staticmethod
    def keys(n: int) -> list[str]:
        return ([f"c{n}:s{i}" for i in range(8)] + [f"c{n}:n{i}" for i in range(3)]
                + [f"c{n}:x{i}" for i in range(3)])

    def run(self) -> None:
        for key in self.keys(self.n):
            self.ledger.setdefault(key, [GONE])
        try:
            while not self.stop.is_set():
                self.step()
        except FAILED:
            pass  # the server was killed; the command in flight left two candidates
        finally:
            self.client.close()

    # --- one command -------------------------------------------------------------------------

    def step(self) -> None:
        key = self.rng.choice(self.keys(self.n))
        (state,) = self.ledger[key]  # between kills every key's state is known
        state = state.settled(now_ms())
        self.ledger[key] = [state]
        op = {"s": self.on_string, "n": self.on_counter, "x": self.on_stream}
        op[key.split(":")[-1][0]](key, state)
        self.acked += 1

    def ttl_ms(self) -> int:
        return self.rng.randint(*SHORT_MS) if self.rng.random() < 0.6 else LONG_MS

    def token(self) -> bytes:
        self.tokens += 1
        return f"{self.n}.{self.rng.random():.6f}.{self.tokens}".encode()

    def call(self, key: str, state: KeyState, guess: KeyState, *argv: Any,
             ttl: int | None = None) -> tuple[Any, int, int]:
        """Send argv: `(reply, send, ack)` wall times. On a lost connection the key may be in
        `state` or in `guess` (with a relative `ttl`, its expiry anywhere from the send to
        now plus ttl: the command may have run any time until the kill), and it raises."""
        send = now_ms()
        try:
            reply = self.client.execute_command(*argv)
        except FAILED:
            if ttl is not None:
                guess = replace(guess, expire=(send + ttl, now_ms() + ttl))
            self.ledger[key] = [state, guess]
            self.in_flight = " ".join(map(str, argv))
            raise
        return reply, send, now_ms()

    @staticmethod
    def certain(state: KeyState) -> bool:
        """Whether the key surely exists or surely not for the next 2 s: a command whose
        effect depends on that (XADD appends or creates, INCR adds or starts at 1) is sent
        only then, so its effect is known even when its reply is lost."""
        t = now_ms()
        alive = state.alive_at(t)
        return alive is not None and alive == state.alive_at(t + 2000)

    def narrow(self, key: str, state: KeyState) -> None:
        """PEXPIRETIME right after a write with a relative TTL: the exact absolute expiry."""
        self.ledger[key] = [state]
        if state.expire is None:
            return
        pet = self.client.execute_command("PEXPIRETIME", key)
        if pet == -2:
            self.expect(state.alive_at(now_ms()) is not True, key, "gone before its TTL")
            self.ledger[key] = [GONE]
        else:
            self.expect(state.expire[0] <= pet <= state.expire[1], key,
                        f"PEXPIRETIME {pet} outside {state.expire}")
            self.ledger[key] = [replace(state, expire=(pet, pet))]

    def expect(self, ok: bool, key: str, what: str) -> None:
        if not ok:
            self.violations.append(f"{key}: {what} (ledger {self.ledger[key]})")

    def check_read(self, key: str, state: KeyState, reply: Any, send: int, ack: int) -> None:
        """A reply that shows the key (or its absence) must agree with the ledger: the server
        ran the command at some time in [send, ack]."""
        if reply is None:
            self.expect(state.alive_at(ack) is not True, key, "missing")
        else:
            self.expect(state.value == reply and state.alive_at(send) is not False, key,
                        f"read {reply!r}")

    def on_string(self, key: str, state: KeyState) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            value = self.token()
            ms = self.ttl_ms()
            form = self.rng.choice(["PX", "PXAT", "EX", "SETEX", "none"])
            if form == "none":
                self.call(key, state, KeyState(value), "SET", key, value)
                self.ledger[key] = [KeyState(value)]
                return
            at = now_ms() + ms
            argv: tuple[Any, ...] = {
                "PX": ("SET", key, value, "PX", ms), "PXAT": ("SET", key, value, "PXAT", at),
                "EX": ("SET", key, value, "EX", LONG_MS // 1000),
                "SETEX": ("SETEX", key, 1 if ms < LONG_MS else LONG_MS // 1000, value),
            }[form]
            unit = {"PX": ms, "EX": LONG_MS, "SETEX": 1000 if ms < LONG_MS else LONG_MS}
            relative = None if form == "PXAT" else unit[form]
            _r, send, ack = self.call(key, state, KeyState(value, (at, at)), *argv,
                                      ttl=relative)
            expire = (at, at) if form == "PXAT" else (send + unit[form], ack + unit[form])
            self.narrow(key, KeyState(value, expire))
        elif roll < 0.60:
            persist = self.rng.random() < 0.4
            ms = self.ttl_ms()
            option = ("PERSIST",) if persist else ("PX", ms)
            guess = replace(state, expire=None) if persist else state
            reply, send, ack = self.call(key, state, guess, "GETEX", key, *option,
                                         ttl=None if persist else ms)
            self.check_read(key, state, reply, send, ack)
            if reply is None:
                self.ledger[key] = [GONE]
            else:
                self.narrow(key, replace(state, expire=None if persist else (send + ms,
                                                                              ack + ms)))
        elif roll < 0.75:
            self.persist(key, state)
        else:
            reply, send, ack = self.call(key, state, state, "GET", key)
            self.check_read(key, state, reply, send, ack)
            if reply is None:
                self.ledger[key] = [GONE]

    def persist(self, key: str, state: KeyState) -> None:
        reply, _send, ack = self.call(key, state, replace(state, expire=None), "PERSIST", key)
        if reply == 1:
            self.expect(state.value is not None and state.expire is not None, key, "PERSIST 1")
            self.ledger[key] = [replace(state, expire=None)]
        elif state.expire is not None:  # a TTL PERSIST did not find: the key had expired
            self.expect(state.alive_at(ack) is not True, key, "PERSIST 0")
            self.ledger[key] = [GONE]

    def pexpire(self, key: str, state: KeyState) -> None:
        ms = self.ttl_ms()
        reply, send, ack = self.call(key, state, state, "PEXPIRE", key, ms, ttl=ms)
        if reply == 1:
            self.narrow(key, replace(state, expire=(send + ms, ack + ms)))
        else:
            self.expect(state.alive_at(ack) is not True, key, "PEXPIRE 0")
            self.ledger[key] = [GONE]

    def ttl_command(self, key: str, state: KeyState, pexpire: float, persist: float) -> bool:
        """PEXPIRE (with probability `pexpire`) or PERSIST (`persist`): True if one ran, or if
        the key's existence is not certain (then the caller's write waits for another turn)."""
        roll = self.rng.random()
        if roll < pexpire:
            self.pexpire(key, state)
        elif roll < pexpire + persist:
            self.persist(key, state)
        else:
            return not self.certain(state)
        return True

    def on_counter(self, key: str, state: KeyState) -> None:
        if not self.ttl_command(key, state, 0.2, 0.1):
            old = int(state.value) if isinstance(state.value, bytes) else 0
            guess = KeyState(str(old + 1).encode(), state.expire)
            reply, _send, ack = self.call(key, state, guess, "INCR", key)
            if reply == 1:  # created: it was missing (or had expired), no TTL
                self.expect(state.alive_at(ack) is not True, key, "INCR 1")
                self.ledger[key] = [KeyState(b"1")]
            else:
                self.expect(reply == old + 1, key, f"INCR {reply}")
                self.ledger[key] = [KeyState(str(reply).encode(), state.expire)]

    def on_stream(self, key: str, state: KeyState) -> None:
        if not self.ttl_command(key, state, 0.15, 0.1):
            token = self.token()
            old = state.value if isinstance(state.value, tuple) else ()
            new = KeyState((*old, token), state.expire if state.value is not None else None)
            self.call(key, state, new, "XADD", key, "*", "t", token)
            self.ledger[key] = [new]
