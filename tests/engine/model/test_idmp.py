"""engine.model.idmp: lookup/record, expiry by command time, per-producer MAXSIZE eviction,
XCFGSET's clearing rule, live counts, entries/restore round trip, IDMPAUTO's content hash."""

from __future__ import annotations

from streamkeep.engine.model.idmp import DEFAULT_DURATION, DEFAULT_MAXSIZE, Idmp, auto_iid


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
