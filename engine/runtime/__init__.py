"""Runtime layer: the in-memory engine core (`EngineCore`, the one path every command runs on)
and its parts (waiting readers, batches, replay, refusals, the expiry cycle), and the redis-py
facade over it (redis_api). Below it: the command handlers; above it: engine.services.
"""
