"""A keyspace of every kind for the offline tools' tests (export, snapshot dump): streams,
strings and sorted sets over three databases, and what the engine says they hold."""

from __future__ import annotations

import math
from typing import Any

from streamkeep import Engine


def on_db(engine: Engine, db: int, *argv: object) -> Any:
    saved = engine.session.db
    engine.execute("SELECT", str(db))
    try:
        return engine.execute(*argv)
    finally:
        engine.execute("SELECT", str(saved))


FAR = 4_102_444_800_000  # 2100-01-01: a TTL that stays in the future


def typed_engine() -> Engine:
    """Streams, strings and sorted sets over three databases: binary names and values, TTLs
    on a string, a sorted set and a stream, a sorted set large enough for its skiplist."""
    from streamkeep.engine.model.value_types import ZSET
    from streamkeep.engine.model.zset import ZSet

    engine = Engine()
    engine.execute("XADD", "events", "1-1", "a", "b")
    engine.execute("PEXPIREAT", "events", str(FAR))
    engine.execute("SET", "plain", "v")
    engine.execute("SET", b"bin\xff", b"\x00\xff", "PXAT", str(FAR + 1))
    on_db(engine, 2, "SET", "counter", "41")
    on_db(engine, 2, "XADD", "s2", "5-5", "x", "y")
    zsets = engine.keyspaces[ZSET.slot]  # no ZADD needed: the keyspace is the state written
    zsets[0][b"board"] = ZSet.from_items([(b"alice", 1.5), (b"bob", -math.inf),
                                          (b"\xffcarol", 1e300)])
    zsets[1][b"big"] = ZSet.from_items([(b"m%03d" % i, i / 4) for i in range(300)])
    zsets[2][b"z\x00"] = ZSet.from_items([(b"only", 0.0)])
    engine.expires[0][b"board"] = FAR + 2
    return engine


def engine_keys(engine: Engine) -> list[tuple]:
    """(db, key, type, expire_ms) of every key, from the engine's keyspaces."""
    from streamkeep.engine.model.value_types import TYPES

    return sorted((db, key, vt.name, engine.expires[db].get(key))
                  for vt in TYPES for db, space in enumerate(engine.keyspaces[vt.slot])
                  for key in space)


def write_typed_snapshot(engine: Engine, path: str, lsn: int = 9) -> str:
    """The engine's whole state (every type's keyspace, the TTLs) as a snapshot file."""
    from streamkeep.snapshot.writer import write_snapshot

    write_snapshot(engine.dbs, path, lsn, 1_700_000_000_000, "r" * 40,
                   values=engine.keyspaces, expires=engine.expires)
    return path
