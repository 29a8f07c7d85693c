"""Services layer (with snapshot.services and replication): what composes the runtime core
with storage and other processes. The data directory (datadir), the public Engine (engine),
the embedded expiry timer, the work queue (queue) and shared mode's client side (shared,
shared_client). Above it: engine.server and the tools.
"""
