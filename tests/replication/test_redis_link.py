"""The redis-server link's decoder, over bytes only: PSYNC replies, keep-alives, disk and diskless
RDB transfers, the command stream, fed whole and one byte at a time (every split point), and
what it refuses."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamkeep.engine.wire.reply_parser import ProtocolError, encode_command
from streamkeep.replication import redis_link as rl

MARK = b"0123456789abcdef0123456789abcdef01234567"
RDB = b"REDIS0010\xfa" + bytes(range(256)) * 3 + MARK[:39]  # a near-mark inside the RDB
COMMANDS = [[b"SELECT", b"0"], [b"XADD", b"s", b"1-1", b"f", b"v\r\n"],
            [b"REPLCONF", b"GETACK", b"*"], [b"PING"]]
STREAM = b"".join(encode_command(c) for c in COMMANDS)


def decode(data: bytes, step: int = 0) -> list:
    d = rl.RedisLinkDecoder()
    events: list = []
    pieces = [data] if not step else [data[i:i + step] for i in range(0, len(data), step)]
    for piece in pieces:
        d.push(piece)
        events += d.events()
    return events


def summary(events: list) -> tuple:
    rdb = b"".join(e.data for e in events if type(e) is rl.RdbData)
    commands = [c for e in events if type(e) is rl.Commands for c in e.commands]
    kinds = [type(e).__name__ for e in events if type(e) not in (rl.RdbData, rl.Commands)]
    return kinds, rdb, commands


@pytest.mark.parametrize("step", [0, 1, 7, 40])
@pytest.mark.parametrize("diskless", [False, True], ids=["disk", "diskless"])
def test_a_full_sync_then_commands(step: int, diskless: bool) -> None:
    header = b"$EOF:" + MARK if diskless else b"$%d" % len(RDB)
    transfer = header + b"\r\n" + RDB + (MARK if diskless else b"")
    data = b"\n\n+FULLRESYNC " + b"a" * 40 + b" 1234\r\n\n\n" + transfer + STREAM
    events = decode(data, step)
    kinds, rdb, commands = summary(events)
    assert kinds == ["FullResync", "RdbStart", "RdbEnd"]
    assert events[0] == rl.FullResync("a" * 40, 1234)
    assert events[1] == rl.RdbStart(-1 if diskless else len(RDB))
    assert rdb == RDB and commands == COMMANDS


@pytest.mark.parametrize("reply,replid", [(b"+CONTINUE\r\n", None),
                                          (b"+CONTINUE " + b"b" * 40 + b"\r\n", "b" * 40)])
def test_a_partial_sync_goes_straight_to_commands(reply: bytes, replid: str | None) -> None:
    kinds, rdb, commands = summary(events := decode(reply + STREAM, 3))
    assert kinds == ["Continue"] and events[0].replid == replid
    assert rdb == b"" and commands == COMMANDS


def test_offsets_count_commands_as_redis_writes_them() -> None:
    assert sum(rl.command_size(c) for c in COMMANDS) == len(STREAM)
    for big in ([b"x" * 4095], [b"XADD", b"y" * 4096, b"z" * 123456]):
        assert rl.command_size(big) == len(encode_command(big))
    assert rl.psync(None, 0) == encode_command([b"PSYNC", b"?", b"-1"])
    assert rl.psync("x" * 40, 99) == encode_command([b"PSYNC", b"x" * 40, b"100"])
    assert rl.ack(7) == encode_command([b"REPLCONF", b"ACK", b"7"])
    assert rl.is_getack([b"replconf", b"getack", b"*"]) and not rl.is_getack([b"PING"])


@pytest.mark.parametrize("data,message", [
    (b"-NOMASTERLINK Can't SYNC while not connected with my master\r\n", "refused PSYNC"),
    (b"+OK\r\n", "unexpected reply"),
    (b"+FULLRESYNC id notanumber\r\n", "unexpected reply"),
    (b"+FULLRESYNC id 1\r\n*1\r\n", "expected the RDB's length"),
    (b"+FULLRESYNC id 1\r\n$EOF:short\r\n", "expected the RDB's length"),
    (b"x" * (rl.MAX_LINE + 2), "too long"),
])
def test_what_is_not_the_protocol_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(rl.RedisLinkError, match=message):
        decode(data)


@given(st.binary(max_size=300), st.integers(1, 50))
def test_any_bytes_decode_or_raise_a_link_error(data: bytes, step: int) -> None:
    with contextlib.suppress(rl.RedisLinkError, ProtocolError):
        decode(b"+FULLRESYNC " + b"c" * 40 + b" 0\r\n" + data, step)
