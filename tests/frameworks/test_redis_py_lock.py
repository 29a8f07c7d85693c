"""redis-py's `Lock` (SET NX PX to take it, Lua scripts through EVALSHA to extend, re-acquire and
release it) against `streamkeep serve` and redis-server: the same outcomes from both, including a
lock whose holder, a child process, is SIGKILLed and whose TTL hands it to the next process."""

from __future__ import annotations

import pytest
from redis.exceptions import LockError, LockNotOwnedError

from tests.support.frameworks import Children, Target
from tests.support.replication_util import wait_for

pytestmark = pytest.mark.timeout(120)

KEY = "fw:lock"
LONG = 300.0  # seconds: a TTL no step of the test outlives
WAIT = 60.0  # the most a step waits for its condition


def test_acquire_refuse_extend_reacquire_release(target: Target) -> None:
    with target.client() as client:
        first = client.lock(KEY, timeout=LONG)
        second = client.lock(KEY, timeout=LONG, sleep=0.01)
        assert first.acquire(blocking=False)
        assert first.owned() and first.locked()
        assert not second.acquire(blocking=False)
        assert not second.acquire(blocking=True, blocking_timeout=0.1)
        assert not second.owned()

        assert first.extend(LONG)  # adds to the TTL left
        assert client.pttl(KEY) > LONG * 1000
        assert first.extend(LONG / 2, replace_ttl=True)
        assert 0 < client.pttl(KEY) <= LONG / 2 * 1000
        assert first.reacquire()  # back to the lock's own timeout
        assert LONG / 2 * 1000 < client.pttl(KEY) <= LONG * 1000

        first.release()
        assert not first.locked() and client.exists(KEY) == 0
        with pytest.raises(LockError):  # released already: nothing left to release
            first.release()
        assert second.acquire(blocking=True, blocking_timeout=WAIT)
        assert second.owned() and not first.owned()
        second.release()


def test_blocking_acquire_waits_for_expiry(target: Target) -> None:
    with target.client() as client:
        brief = client.lock(KEY, timeout=0.2)
        assert brief.acquire(blocking=False)
        patient = client.lock(KEY, timeout=LONG, sleep=0.01)
        assert patient.acquire(blocking=True, blocking_timeout=WAIT)
        assert patient.owned() and not brief.owned()
        patient.release()


def test_lock_lost_to_expiry_is_no_longer_owned(target: Target) -> None:
    with target.client() as client:
        lapsed = client.lock(KEY, timeout=0.1)
        assert lapsed.acquire(blocking=False)
        wait_for(lambda: client.exists(KEY) == 0, WAIT, "the lock's TTL")
        taker = client.lock(KEY, timeout=LONG)
        assert taker.acquire(blocking=False)
        with pytest.raises(LockNotOwnedError):
            lapsed.extend(1)
        with pytest.raises(LockNotOwnedError):
            lapsed.reacquire()
        with pytest.raises(LockNotOwnedError):
            lapsed.release()
        assert taker.owned()  # the failed calls left the new holder's lock alone
        assert client.pttl(KEY) > 0
        taker.release()


def test_expiry_hands_the_lock_to_the_next_process(target: Target, children: Children) -> None:
    ttl = 3.0  # seconds; the holder re-acquires it every 0.1 s
    holder = children.start("tests.support.frameworks", target.url, KEY, str(ttl), read=True)
    assert holder.stdout is not None
    token = holder.stdout.readline().strip().encode()
    assert token, "the holder exited before taking the lock"
    with target.client() as client:
        assert client.get(KEY) == token
        waiting = client.lock(KEY, timeout=LONG, sleep=0.02)
        # The holder's heartbeat keeps it: nobody else gets it while it lives.
        assert not waiting.acquire(blocking=False)
        assert client.get(KEY) == token

        Children.sigkill(holder)
        assert waiting.acquire(blocking=True, blocking_timeout=WAIT)
        assert waiting.owned()
        assert client.get(KEY) == waiting.local.token
        waiting.release()
        assert client.exists(KEY) == 0


def test_a_lock_works_inside_a_transaction_pipeline(target: Target) -> None:
    """taskiq-redis's form: SET NX PX, a command and the release's EVALSHA in one MULTI/EXEC."""
    with target.client() as client:
        client.set("fw:counter", 0)
        pipe = client.pipeline()
        lock = pipe.lock(KEY, timeout=LONG)
        assert lock.acquire()
        pipe.incr("fw:counter")
        lock.release()
        assert pipe.execute() == [True, 1, 1]
        assert client.exists(KEY) == 0
        assert client.get("fw:counter") == b"1"
