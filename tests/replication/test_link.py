"""The link's protocol without sockets: the decoder turns any chunking of a primary's bytes into
the same events, checks every record's CRC and LSN, and refuses anything else with LinkError."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamkeep.aof.codec import crc32c, encode
from streamkeep.replication import link
from streamkeep.replication.link import (
    Continue,
    FullResync,
    GetAck,
    LinkDecoder,
    LinkError,
    Records,
    SnapshotData,
    SnapshotEnd,
)

REPLID = "ab" * 20


def records(first: int, count: int) -> bytes:
    return b"".join(encode(lsn, 1000 + lsn, 0, [[b"XADD", b"s", b"%d-1" % lsn, b"f", b"v"]])
                    for lsn in range(first, first + count))


def full_sync_bytes(snapshot: bytes, lsn: int, after: bytes) -> bytes:
    return (link.fullresync_line(REPLID, lsn) + link.KEEPALIVE * 3
            + link.snapshot_header(len(snapshot)) + snapshot
            + link.snapshot_trailer(crc32c(snapshot)) + after)


def decode_all(data: bytes, last_lsn: int, step: int) -> list:
    decoder = LinkDecoder(last_lsn)
    events = []
    for i in range(0, len(data), step):
        events += decoder.feed(data[i:i + step])
    return events


def summarize(events: list) -> tuple:
    """Events with records and snapshot pieces merged (chunking may split them)."""
    lsns, snapshot, others = [], b"", []
    for e in events:
        if isinstance(e, Records):
            lsns += [r[0] for r in e.records]
            assert e.first_lsn == e.records[0][0]
            assert b"".join(encode(*r) for r in e.records) == e.raw
        elif isinstance(e, SnapshotData):
            snapshot += e.data
        else:
            others.append(e)
    return lsns, snapshot, others


@pytest.mark.parametrize("step", [1, 7, 64, 1 << 20])
def test_a_full_sync_decodes_the_same_whatever_the_chunking(step: int) -> None:
    snapshot = bytes(range(256)) * 40
    data = full_sync_bytes(snapshot, 9, records(10, 5) + link.GETACK + records(15, 3))
    lsns, got, others = summarize(decode_all(data, 0, step))
    assert lsns == list(range(10, 18))
    assert got == snapshot
    assert others == [FullResync(REPLID, 9), SnapshotEnd(True), GetAck()]


def test_an_empty_snapshot_and_a_continue() -> None:
    lsns, got, others = summarize(decode_all(full_sync_bytes(b"", 0, records(1, 2)), 5, 3))
    assert (lsns, got, others) == ([1, 2], b"", [FullResync(REPLID, 0), SnapshotEnd(True)])
    data = link.continue_line(REPLID) + records(6, 4)
    assert summarize(decode_all(data, 5, 5)) == ([6, 7, 8, 9], b"", [Continue(REPLID)])


def test_a_damaged_snapshot_is_reported() -> None:
    data = bytearray(full_sync_bytes(b"snapshot bytes", 3, b""))
    data[data.index(b"snapshot bytes")] ^= 1
    assert summarize(decode_all(bytes(data), 0, 1000))[2][-1] == SnapshotEnd(False)


def test_a_record_with_a_bad_crc_is_refused_and_nothing_after_it_applied() -> None:
    good, bad = records(6, 2), bytearray(records(8, 1))
    bad[-1] ^= 0x40
    decoder = LinkDecoder(5)
    events = decoder.feed(link.continue_line(REPLID) + good)
    assert summarize(events)[0] == [6, 7]
    with pytest.raises(LinkError, match="CRC mismatch"):
        decoder.feed(bytes(bad) + records(9, 1))


def test_a_gap_or_a_repeat_in_the_lsns_is_refused() -> None:
    for wrong in (records(7, 1), records(5, 1)):
        decoder = LinkDecoder(5)
        with pytest.raises(LinkError, match="where 6 was expected"):
            assert decoder.feed(link.continue_line(REPLID) + wrong) == [Continue(REPLID)]
            decoder.check()


@pytest.mark.parametrize("reply", [b"-ERR no\r\n", b"+OK\r\n", b"+FULLRESYNC x\r\n",
                                   b"$5\r\nhello"])
def test_a_reply_that_is_not_the_protocol_is_refused(reply: bytes) -> None:
    with pytest.raises(LinkError):
        LinkDecoder(0).feed(reply)


def test_an_endless_line_is_refused_not_buffered() -> None:
    with pytest.raises(LinkError, match="overlong"):
        LinkDecoder(0).feed(b"+" + b"x" * (link.MAX_LINE + 10))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([b"", b"+CONTINUE " + REPLID.encode() + b"\r\n",
                                                  link.fullresync_line(REPLID, 0)]))
def test_garbage_raises_link_error_or_waits_never_anything_else(prefix_garbage: bytes,
                                                                 head: bytes) -> None:
    decoder = LinkDecoder(0)
    with contextlib.suppress(LinkError):  # LinkError or events: nothing else may escape
        decoder.feed(head + prefix_garbage)
        decoder.check()


def test_the_handshake_and_acks_are_resp_commands() -> None:
    commands = link.handshake("pw", 6391, "cd" * 20)
    assert commands[0] == b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n"
    assert b"listening-port" in commands[1] and link.CAPA in commands[2]
    assert link.handshake("", 1, "x")[0].startswith(b"*3\r\n$8\r\nREPLCONF")
    assert not any(b"ip-address" in c for c in link.handshake("", 1, "x"))
    # replica-announce-ip: right after the port, as Redis's replicas send it
    assert link.handshake("", 1, "x", "10.1.2.3")[1] == \
        b"*3\r\n$8\r\nREPLCONF\r\n$10\r\nip-address\r\n$8\r\n10.1.2.3\r\n"
    assert link.psync("?", -1, None) == b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n"
    assert link.psync(REPLID, 7, 0xAB).endswith(b"$8\r\n000000ab\r\n")
    assert link.ack(5, 4) == b"*5\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$1\r\n5\r\n$4\r\nFACK\r\n$1\r\n4\r\n"


def test_a_late_port_announcement_is_one_replconf() -> None:
    assert link.announce_port(6391) == b"*3\r\n$8\r\nREPLCONF\r\n$14\r\nlistening-port\r\n$4\r\n6391\r\n"


# --- published messages ----------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 5, 1 << 20])
def test_published_messages_between_records_take_no_lsn(step: int) -> None:
    stream = (link.continue_line(REPLID) + records(1, 2)
              + link.publish_frame(b"PUBLISH", b"news", b"m\r\n1")
              + link.GETACK + link.publish_frame(b"SPUBLISH", b"orders", b"")
              + records(3, 1))
    lsns, _snapshot, others = summarize(decode_all(stream, 0, step))
    assert lsns == [1, 2, 3]  # the messages count for nothing in the offsets
    assert others == [Continue(REPLID), link.Published(b"PUBLISH", b"news", b"m\r\n1"),
                      GetAck(), link.Published(b"SPUBLISH", b"orders", b"")]
    assert link.PUBLISH_CAPA in link.handshake("", 1, "x")[1]


@pytest.mark.parametrize("body, said", [
    (b"*2\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n", "not a 3-element array"),
    (b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", "command is b'SET'"),
    (b"*3\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n$99999999999\r\n", "bulk header"),
    (b"*3\r\n$7\r\nPUBLISH\r\n$1\r\nc\r\n$-1\r\n", "bulk header"),
    (b"*3\r\n$7\r\nPUBLISH\r\n$1\r\ncXX", "not terminated"),
    (b"*3\r\n" + b"$" + b"9" * 30, "bulk length is too long"),
    (b"*" + b"3" * 30, "without its array header"),
])
def test_a_published_message_of_another_shape_is_refused(body: bytes, said: str) -> None:
    from streamkeep.aof.codec import FRAME

    decoder = LinkDecoder(0)
    decoder.feed(link.continue_line(REPLID))
    with pytest.raises(LinkError, match=said):
        decoder.feed(FRAME.pack(0, link.PUBLISH_MARK) + body)
        decoder.check()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_after_a_publish_mark_raises_link_error_or_waits(garbage: bytes) -> None:
    from streamkeep.aof.codec import FRAME

    decoder = LinkDecoder(0)
    with contextlib.suppress(LinkError):
        decoder.feed(link.continue_line(REPLID) + FRAME.pack(0, link.PUBLISH_MARK) + garbage)
        decoder.check()


def test_sk_have_round_trips_and_refuses_what_is_not_a_part_file() -> None:
    files = [("part-000000000030.mdb", 4096, 0xDEADBEEF), ("part-000000000042.mdb", 1, 0)]
    command = link.have(files)
    value = command.split(b"\r\n")[-2]
    assert link.parse_have(value) == frozenset(files)
    assert link.parse_have(b"") == frozenset()
    for bad in (b"snapshot-000000000001.mdb:1:00000000", b"part-000000000001.mdb:x:00000000",
                b"part-000000000001.mdb:1:zz", b"../part-000000000001.mdb:1:00000000",
                b",".join([b"part-000000000001.mdb:1:00000000"] * (link.MAX_HAVE + 1))):
        with pytest.raises(link.LinkError):
            link.parse_have(bad)
