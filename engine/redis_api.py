"""redis-py-compatible stream methods for the Engine (placeholder until implemented)."""


class RedisStreamAPI:
    pass
