"""The bench's sections, declared by what they measure: each section's rows, their targets and
the figures derived from them, side by side. The registry (:mod:`..registry`) puts them in run
order.

    speed        the command path: embedded, redis-py, server, strings, types, lists, queue,
                 asyncio, nodes, consume
    durability   the append-only file (aof) and the crash bench's speed (crashbench)
    storage      snapshots and compaction (snapshot), memory per entry (memory), backlogs
                 bigger than memory (backlog)
    replication  replicas (replication), one directory shared by processes (shared), Redis's
                 formats and protocol (interop)
    offline      the tools run on a data directory: AOF inspection (inspect), Spark (export)
    hardening    what one client can cost the others (hardening)
    security     what TLS costs a served client (security)

A section module imports the workload modules it declares rows for and
:mod:`..declarations`, never the registry nor another section module.
"""
