"""Cold nodes change nothing: random command sequences on a resident engine and on one whose
every node is read back from a snapshot give the same replies, errors and digests.

The cold engine is settled after every command (tests.support.cold_nodes: a budget of one byte,
a fresh snapshot when something changed since the last one), so nearly every command reads its
entries back from an LMDB file, and changes land on nodes that were cold a moment before. Two
node sizes: the default (one node per stream: the tail goes cold) and two entries per node
(many nodes: trimming, deletion and ranges across cold and resident ones).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkeep import Engine, ReplyError
from tests.support.cold_nodes import settle
from tests.support.command_strategies import SETUP, Clock, commands_with_tx


def _plain(value: object) -> object:
    """Errors as their lines (EXEC replies hold ReplyError objects, equal only to themselves)."""
    if isinstance(value, ReplyError):
        return ("error", value.line)
    if isinstance(value, list):
        return [_plain(x) for x in value]
    return value


def _outcome(engine: Engine, argv: list[bytes]) -> object:
    try:
        return _plain(engine.execute(*argv))
    except ReplyError as err:
        return ("error", err.line)


@pytest.mark.parametrize("node_entries", [100, 2])
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(script=st.lists(st.tuples(commands_with_tx, st.integers(0, 3)), min_size=1,
                       max_size=50))
def test_cold_engine_answers_as_the_resident_one(node_entries: int,
                                                 script: list[tuple[list[bytes], int]]) -> None:
    clock = Clock()
    resident = Engine(clock=clock, stream_node_max_entries=node_entries)
    cold = Engine(clock=clock, stream_node_max_entries=node_entries)
    for argv, delta in [(argv, 0) for argv in SETUP] + script:
        clock.now += delta
        expected = _outcome(resident, argv)
        got = _outcome(cold, argv)
        assert got == expected, f"{argv!r}"
        settle(cold)
        assert cold.digest() == resident.digest(), f"after {argv!r}"
    settle(cold)
    assert cold.residency.loads > 0 or not any(cold.dbs), "nothing was ever read back"
