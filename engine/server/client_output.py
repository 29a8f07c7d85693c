"""A server connection's output buffer (engine.server.network's Client writes its replies into
one). Owns when its output limit is looked up; must not touch the encoding (engine.wire's
reply_encoder) or the connection.

Its own module, not compiled with the server: it subclasses the compiled encoder's buffer type,
which a class compiled by mypyc cannot do."""

from __future__ import annotations

from collections.abc import Callable

from streamkeep.engine.wire.reply_encoder import OutputLimitReached, ReplyBuffer


class ClientOutput(ReplyBuffer):
    """A connection's output buffer whose limit is found when the encoder first checks it: a
    reply too small to be checked (short bulks, short arrays) costs no look at the limits and
    the transport's pending bytes. The limit (`budget()`, the client's `_reply_budget`) is
    kept until the next flush clears it."""

    __slots__ = ("budget",)

    def __init__(self, budget: Callable[[], int]) -> None:
        super().__init__()
        self.budget = budget

    def check(self) -> None:
        limit = self.limit or self._find_limit()
        if len(self) + self.big_size > limit:
            raise OutputLimitReached(f"reply over the output limit of {limit} bytes")

    def _find_limit(self) -> int:
        self.limit = self.budget()
        return self.limit
