"""engine.model.idmp_maps: lookup/record, expiry by command time, per-producer MAXSIZE eviction,
XCFGSET's clearing rule, live counts, entries/restore round trip, IDMPAUTO's content hash."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.engine.model.idmp_maps import (
    DEFAULT_DURATION,
    DEFAULT_MAXSIZE,
    PRODUCER_CHECKS,
    Idmp,
    auto_iid,
)


def test_defaults() -> None:
    state = Idmp()
    assert (state.duration, state.maxsize) == (DEFAULT_DURATION, DEFAULT_MAXSIZE) == (100, 100)


def test_lookup_finds_recorded_until_expiry() -> None:
    state = Idmp(duration=2, maxsize=10)
    assert state.lookup(b"p", b"i", 0) is None
    state.record(b"p", b"i", 42, 1000)
    assert state.lookup(b"p", b"i", 2999) == 42
    assert state.lookup(b"p", b"i", 3000) is None  # recorded + duration: expired
    assert state.lookup(b"q", b"i", 1000) is None  # other producer


def test_record_drops_expired_front_and_evicts_oldest() -> None:
    state = Idmp(duration=1, maxsize=2)
    state.record(b"p", b"a", 1, 0)
    state.record(b"p", b"b", 2, 500)
    state.record(b"p", b"c", 3, 600)  # maxsize 2: a evicted
    assert [iid for iid, _sid, _at in dict(state.entries())[b"p"]] == [b"b", b"c"]
    state.record(b"p", b"d", 4, 1550)  # b expired (500 + 1000 <= 1550), dropped first
    assert [iid for iid, _sid, _at in dict(state.entries())[b"p"]] == [b"c", b"d"]
    assert state.added == 4


def test_maxsize_is_per_producer() -> None:
    state = Idmp(duration=100, maxsize=1)
    state.record(b"p", b"a", 1, 0)
    state.record(b"q", b"a", 2, 0)
    assert (state.lookup(b"p", b"a", 1), state.lookup(b"q", b"a", 1)) == (1, 2)


def test_configure_clears_only_on_change() -> None:
    state = Idmp(duration=100, maxsize=100)
    state.record(b"p", b"a", 1, 0)
    state.configure(100, 100)
    assert state.lookup(b"p", b"a", 1) == 1
    state.configure(50, 100)
    assert state.lookup(b"p", b"a", 1) is None
    assert state.added == 1  # lifetime counters survive


def test_live_counts_leave_expired_out() -> None:
    state = Idmp(duration=1, maxsize=10)
    state.record(b"p", b"a", 1, 0)
    state.record(b"q", b"a", 2, 900)
    state.record(b"q", b"b", 3, 950)
    assert state.live_counts(500) == (2, 3)
    assert state.live_counts(1000) == (1, 2)
    assert state.live_counts(5000) == (0, 0)


def test_entries_restore_round_trip() -> None:
    state = Idmp()
    state.record(b"p", b"a", 1, 10)
    state.record(b"p", b"b", 2, 20)
    copy = Idmp()
    for pid, recorded in state.entries():
        copy.restore(pid, recorded)
    assert list(copy.entries()) == list(state.entries())


def test_auto_iid_ignores_field_order_and_separates_contents() -> None:
    assert auto_iid([b"a", b"1", b"b", b"2"]) == auto_iid([b"b", b"2", b"a", b"1"])
    assert auto_iid([b"a", b"1"]) != auto_iid([b"a1", b""])
    assert auto_iid([b"ab", b"c"]) != auto_iid([b"a", b"bc"])
    assert len(auto_iid([b"f", b"v"])) == 16


def test_an_expired_iid_not_at_the_front_is_recorded_again() -> None:
    """The clock went back: an expired iid behind a newer one is re-recorded, not kept twice."""
    state = Idmp(duration=1, maxsize=10)
    state.record(b"p", b"a", 1, now=5000)
    state.record(b"p", b"b", 2, now=100)  # an earlier time, later in order
    assert state.lookup(b"p", b"b", 5000) is None
    state.record(b"p", b"b", 3, now=5000)
    assert state.lookup(b"p", b"b", 5000) == 3
    assert [iid for iid, _sid, _at in next(state.entries())[1]] == [b"a", b"b"]


def test_producers_whose_iids_all_expired_are_forgotten() -> None:
    """Each new producer checks the next two of the rotation: those whose newest iid has
    expired go (a client restarted under a new UUID must not stay forever), live ones stay."""
    state = Idmp(duration=1, maxsize=5)
    for n in range(63):
        state.record(b"old-%d" % n, b"i", n, now=0)
    state.record(b"live", b"i", 99, now=500)  # two checked, nothing has expired
    assert len(state.producers) == 64
    state.record(b"new", b"i", 100, now=1600)  # two checked: two expired old ones go
    state.record(b"live", b"j", 101, now=1650)  # an existing producer: nothing checked
    assert len(state.producers) == 63
    for n in range(63):
        state.record(b"more-%d" % n, b"i", n, now=1700)
    assert len(state.producers) == 65  # the rest of the 63 expired old ones went meanwhile
    assert not any(pid.startswith(b"old-") for pid in state.producers)
    assert state.lookup(b"live", b"j", 1700) == 101 and state.lookup(b"new", b"i", 1700) == 100


def test_new_producers_cost_the_same_however_many_there_are() -> None:
    """A new producer checks PRODUCER_CHECKS others, never all: of 100,000 expired producers
    (a client may create as many) the next one forgets the two it checked, not all of them."""
    state = Idmp(duration=100, maxsize=1)
    for n in range(100_000):
        state.record(b"p%d" % n, b"i", n, now=n)
    # Every producer has expired by now: a scan of them all would drop them all.
    state.record(b"one-more", b"i", 1, now=300_000)
    assert len(state.producers) == len(state.rotation) == 100_000 - PRODUCER_CHECKS + 1
    assert list(state.rotation)[-1] == b"one-more"


class Reference:
    """The rules spelled out plainly: per producer a list of (iid, sid, at), oldest first."""

    def __init__(self, duration: int, maxsize: int) -> None:
        self.duration, self.maxsize = duration, maxsize
        self.maps: dict[bytes, list[tuple[bytes, int, int]]] = {}

    def lookup(self, pid: bytes, iid: bytes, now: int) -> int | None:
        for i, sid, at in self.maps.get(pid, []):
            if i == iid and now < at + self.duration * 1000:
                return sid
        return None

    def record(self, pid: bytes, iid: bytes, sid: int, now: int) -> None:
        kept = self.maps.setdefault(pid, [])
        while kept and kept[0][2] + self.duration * 1000 <= now:
            kept.pop(0)
        kept[:] = [r for r in kept if r[0] != iid]
        kept.append((iid, sid, now))
        del kept[:-self.maxsize]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4),
       st.lists(st.tuples(st.sampled_from([b"p", b"q"]), st.sampled_from([b"a", b"b", b"c"]),
                          st.integers(0, 1500)), max_size=60))
def test_matches_a_plain_reference(duration: int, maxsize: int, ops: list) -> None:
    state, ref = Idmp(duration, maxsize), Reference(duration, maxsize)
    now = 0
    for sid, (pid, iid, step) in enumerate(ops):
        now += step  # command times only move forward here
        found = state.lookup(pid, iid, now)
        assert found == ref.lookup(pid, iid, now)
        if found is None:
            state.record(pid, iid, sid, now)
            ref.record(pid, iid, sid, now)
        kept = dict(state.entries())
        assert kept == {p: r for p, r in ref.maps.items() if p in kept}
        # A producer forgotten had nothing live left (the reference keeps it).
        assert all(r[-1][2] + duration * 1000 <= now for p, r in ref.maps.items()
                   if p not in kept)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4),
       st.lists(st.tuples(st.sampled_from([b"p", b"q", b"r"]),
                          st.sampled_from([b"a", b"b", b"c"]), st.integers(-300, 1500)),
                max_size=60))
def test_lookup_or_record_is_lookup_then_record(duration: int, maxsize: int,
                                                ops: list) -> None:
    """XADD IDMP's one pass gives what lookup, then record when nothing live was found, give,
    and leaves the same maps (the clock may go back too)."""
    one, two = Idmp(duration, maxsize), Idmp(duration, maxsize)
    now = 10_000
    for sid, (pid, iid, step) in enumerate(ops):
        now += step
        found = one.lookup(pid, iid, now)
        if found is None:
            one.record(pid, iid, sid, now)
        assert two.lookup_or_record(pid, iid, sid, now) == found
        assert list(one.entries()) == list(two.entries())
        assert (one.added, list(one.rotation)) == (two.added, list(two.rotation))
