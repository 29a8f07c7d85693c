"""The command layer: every command handler, each module registering its commands in the
command table (streamkeep.engine.exec.table) on import.

Importing this package imports them all, so the table is complete. Must not hold any command
itself, and nothing below this layer (wire, model, exec) may import it.
"""

from streamkeep.engine.commands import (  # noqa: F401
    client,
    command,
    config,
    connection,
    expiry,
    groups,
    idmp,
    increx,
    info,
    keyspace,
    latency,
    pubsub,
    read,
    replication,
    scripting,
    slowlog,
    streams,
    string_ranges,
    strings,
    trimming,
    xinfo,
)
from streamkeep.engine.exec import transactions  # noqa: F401  (MULTI/EXEC/WATCH)
