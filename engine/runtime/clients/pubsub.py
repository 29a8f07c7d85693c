"""The facade's Pub/Sub methods (Redis's "pubsub" group): redis-py 8.1's PubSubCommands.

Owns `PubSubCommands`: PUBLISH, SPUBLISH and PUBSUB's introspection. Subscribing is not here: a
facade has no connection to receive on (Engine.subscribe, and AsyncRedis.pubsub). Must not
touch: anything but argv.
"""

from __future__ import annotations

from typing import Any

from streamkeep.engine.runtime.clients.base import ClientBase, sends


class PubSubCommands(ClientBase):
    """redis-py 8.1's publishing and PUBSUB methods."""

    __slots__ = ()

    @sends("publish")
    def publish(self, channel: Any, message: Any, **kwargs: Any) -> int:
        return self.execute_command("PUBLISH", channel, message, **kwargs)

    @sends("spublish")
    def spublish(self, shard_channel: Any, message: Any) -> int:
        return self.execute_command("SPUBLISH", shard_channel, message)

    @sends("pubsub|channels")
    def pubsub_channels(self, pattern: Any = "*", **kwargs: Any) -> list:
        return self.execute_command("PUBSUB CHANNELS", pattern, **kwargs)

    @sends("pubsub|shardchannels")
    def pubsub_shardchannels(self, pattern: Any = "*", **kwargs: Any) -> list:
        return self.execute_command("PUBSUB SHARDCHANNELS", pattern, **kwargs)

    @sends("pubsub|numsub")
    def pubsub_numsub(self, *args: Any, **kwargs: Any) -> list[tuple[Any, int]]:
        return self.execute_command("PUBSUB NUMSUB", *args, **kwargs)

    @sends("pubsub|shardnumsub")
    def pubsub_shardnumsub(self, *args: Any, **kwargs: Any) -> list[tuple[Any, int]]:
        return self.execute_command("PUBSUB SHARDNUMSUB", *args, **kwargs)

    @sends("pubsub|numpat")
    def pubsub_numpat(self, **kwargs: Any) -> int:
        return self.execute_command("PUBSUB NUMPAT", **kwargs)
