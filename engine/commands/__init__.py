"""The command layer: every command handler, each module registering its commands in the
command table (streamkeep.engine.exec.table) on import.

Importing this package imports them all, so the table is complete. Must not hold any command
itself, and nothing below this layer (wire, model, exec) may import it.
"""

from streamkeep.engine.commands import (  # noqa: F401
    acl,
    client,
    command,
    config,
    connection,
    expiry,
    functions,
    groups,
    hash_expiry,
    hashes,
    idmp,
    increx,
    info,
    keyspace,
    latency,
    lists,
    objects,
    pubsub,
    read,
    replication,
    scripting,
    sets,
    slowlog,
    streams,
    string_ranges,
    strings,
    trimming,
    xinfo,
    zset_algebra,
    zset_ranges,
    zsets,
)
from streamkeep.engine.exec import transactions  # noqa: F401  (MULTI/EXEC/WATCH)
