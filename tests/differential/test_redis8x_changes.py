"""Redis 8.6-8.10 behaviour changes of existing stream commands (the release notes' stream items
that are not new commands or options), each asserted against the engine with its source:
https://redis.io/docs/latest/operate/oss_and_stack/stack-with-enterprise/release-notes/redisce/redisos-8.6-release-notes/
(8.6.0 and 8.6.4). The new commands and options have their own suites (test_redis88_xnack.py,
test_redis810_read_caps.py; IDMP elsewhere).
"""

from __future__ import annotations

from streamkeep import Engine


def test_xdelex_acked_after_xgroup_destroy_deletes() -> None:
    """8.6.0, https://github.com/redis/redis/pull/14552 ("Incorrect behavior when using
    XDELEX...ACKED after XGROUP DESTROY"): once the only group holding a reference is destroyed,
    ACKED deletes the entry (1) instead of keeping it as still referenced (2)."""
    e = Engine()
    e.execute("XADD", "s", "1-0", "f", "v")
    e.execute("XGROUP", "CREATE", "s", "g", "0")
    e.execute("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert e.execute("XDELEX", "s", "ACKED", "IDS", "1", "1-0") == [2]
    e.execute("XGROUP", "DESTROY", "s", "g")
    assert e.execute("XDELEX", "s", "ACKED", "IDS", "1", "1-0") == [1]
    assert e.execute("XLEN", "s") == 0


def test_trim_approx_with_delref_and_acked_deletes() -> None:
    """8.6.0, https://github.com/redis/redis/pull/14623 ("XTRIM/XADD with approx mode (~) don't
    delete entries for DELREF/ACKED strategies"): `~` with DELREF still trims."""
    e = Engine()
    for i in range(1, 301):
        e.execute("XADD", "s", f"{i}-0", "f", "v")
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "100", "DELREF") == 200
    assert e.execute("XTRIM", "s", "MAXLEN", "~", "0", "ACKED") == 100


def test_empty_xreadgroup_still_records_the_new_consumer() -> None:
    """8.6.4, https://github.com/redis/redis/pull/14963 ("XREADGROUP: consumer replication
    inconsistency": a new consumer whose read served nothing was lost on replicas): the read's
    effects create the consumer, so a replica or a restart has it."""
    e = Engine(clock=lambda: 1000)
    e.execute("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    reply, effects = e.execute_with_effects("XREADGROUP", "GROUP", "g", "newc", "STREAMS", "s",
                                            ">")
    assert reply is None
    assert [b"SK.XCONSUMER", b"s", b"g", b"newc", b"1000", b"-1"] in [list(x) for x in effects]
