"""Runtime layer: the in-memory engine (core) and its redis-py facade (redis_api); the data
directory (datadir) and the public Engine composing them with replication (engine); the work
queue (queue); the asyncio network server (server).

core sits above the commands; datadir, engine and queue are services; server is on top.
"""
