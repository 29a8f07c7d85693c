"""The redis-py facade's parts, as redis-py splits its client: one mixin per command group
(streams, strings, hashes, sets, sorted_sets, lists, keyspace, server, connection, pubsub,
scripting), each method tied to the commands it sends (`sends`), over what they share (base:
the executor, the encoding check, `execute_command` and redis-py's response callbacks).
engine.runtime.redis_api composes them into `RedisAPI`. Imports nothing itself.
"""
