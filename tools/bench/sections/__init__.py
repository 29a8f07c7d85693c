"""The bench's sections, declared by what they measure: each section's rows, their targets and
the figures derived from them, side by side. The registry (:mod:`..registry`) puts them in run
order. speed: the command path (embedded, redis-py, server, strings, types, lists, queue,
asyncio, nodes, consume); durability: the AOF and the crash bench's speed; storage: snapshot,
memory, eviction, backlog; replication: replication, shared, interop; offline: inspect, export;
hardening; security. A section module imports the workload modules it declares rows for and
:mod:`..declarations`, never the registry nor another section module.
"""
