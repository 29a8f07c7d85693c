"""Runtime layer: the Engine (core), its redis-py-compatible methods (redis_api) and the
asyncio network server (server).

core sits above the commands; server sits above the persistence services, on top.
"""
