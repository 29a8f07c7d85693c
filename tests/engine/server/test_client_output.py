"""engine.server.client_output: the output limit is looked up at the first check only, kept
until cleared, and a reply past it is refused with OutputLimitReached."""

from __future__ import annotations

import pytest

from streamkeep.engine.server.client_output import ClientOutput
from streamkeep.engine.wire.reply_encoder import OutputLimitReached, write_reply


def test_the_limit_is_looked_up_once_until_cleared() -> None:
    asked: list[int] = []

    def budget() -> int:
        asked.append(1)
        return 1000

    out = ClientOutput(budget)
    assert not asked  # nothing looked up before a check
    out.check()
    out.check()
    assert len(asked) == 1 and out.limit == 1000
    out.limit = 0  # (a flush clears it)
    out.check()
    assert len(asked) == 2


def test_a_reply_past_the_limit_is_refused() -> None:
    out = ClientOutput(lambda: 150_000)
    write_reply(out, [[b"%d-0" % i, [b"f", b"v"]] for i in range(2500)], 2)  # ~87 kB
    with pytest.raises(OutputLimitReached, match="over the output limit of 150000 bytes"):
        write_reply(out, [[b"%d-0" % i, [b"f", b"v"]] for i in range(2500)], 2)
