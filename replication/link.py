"""The replication link's protocol, as pure functions and a decoder over bytes (sans-IO).

Owns the shape of the conversation between a replica and its primary; the sockets are the
follower's (replica side) and the server's (primary side). The offset is the LSN.

    replica                                     primary
    AUTH <masterauth>                  (if set) +OK
    REPLCONF listening-port <port>              +OK
    REPLCONF ip-address <ip>                    +OK    (if replica-announce-ip is set)
    REPLCONF capa sk-records capa eof capa psync2 capa sk-publish  +OK
    REPLCONF sk-runid <40 hex>                  +OK    (-ERR if it is the primary's own: itself;
                                                 a redis-server does not know it: the follower
                                                 continues as replication.redis_follower)
    REPLCONF sk-have <name>:<size>:<crc>,...    +OK    (the part files the replica holds; only
                                                 if it holds any: a full sync then sends those
                                                 of the snapshot's as names, not bytes)
    PSYNC <replid> <lsn> [<crc>]                +CONTINUE <replid>
                                             or +FULLRESYNC <replid> <lsn>
                                                "\\n"...  (keep-alives while a snapshot is made)
                                                $<size>\\r\\n<the snapshot file's bytes>
                                                +CRC32C <8 hex digits>\\r\\n
                                             or -ERR ...
    ... then the record stream, forever:        AOF frames (u32 length, u32 CRC-32C, msgpack
                                                payload): the segments' bytes as they are, from
                                                the LSN after the replica's (CONTINUE) or the
                                                snapshot's (FULLRESYNC). A zero-length frame is
                                                GETACK: "acknowledge now"; one whose CRC field
                                                is PUBLISH_MARK is followed by a RESP array,
                                                PUBLISH or SPUBLISH channel message (only to a
                                                replica that announced `capa sk-publish`).
    REPLCONF ACK <lsn> FACK <fsynced lsn>       (every second, and after each GETACK; no reply)
    REPLCONF listening-port <port>              (before an ACK, when the replica's server
                                                 started listening after the handshake; no reply)

`<lsn>` in PSYNC is the last record the replica holds (0: none); `<crc>` the CRC field of that
record's frame, so that a primary whose history diverged at that very LSN (it lost a tail the
replica had, then wrote others) is caught and answered with a full sync. A replica that does not
announce `capa sk-records` (a redis-server pointed at streamkeep) gets an error, not bytes it
cannot parse.

Published messages (PUBLISH, SPUBLISH on the primary) reach the replica's subscribers as Redis's
replicas' do, but they are not records: never in an AOF, no LSN, so offsets, partial syncs and
a replica's own log are the same with or without them. The primary writes one where the stream
is at a record boundary, after every record written before the message was published; a
replica that is behind gets it when it has caught up, and one whose link is lost misses what
was published meanwhile (Pub/Sub delivers at most once). Must not touch: sockets, files, the
engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from streamkeep.aof.codec import FRAME, FRAME_SIZE, GETACK_FRAME, crc32c, decode_stream
from streamkeep.engine.wire.errors import StorageError
from streamkeep.engine.wire.reply_parser import encode_command

CAPA = b"sk-records"
PUBLISH_CAPA = b"sk-publish"
PUBLISH_MARK = 0x50554231  # the CRC field of a zero-length frame carrying a message ("PUB1")
MAX_MESSAGE = 512 << 20  # a channel's or message's length past this is not one (Redis's bulk max)
NOT_STREAMKEEP = ("ERR this primary is streamkeep: it replicates its AOF record stream, which "
                  "the replica did not announce it understands (REPLCONF capa sk-records)")
KEEPALIVE = b"\n"
MAX_LINE = 1 << 16  # a handshake reply longer than this is not one
BATCH = 256  # records per Records event: decoded, then applied, before the next ones


class LinkError(StorageError):
    """The primary sent something that is not the protocol above (or a damaged record)."""


def handshake(masterauth: str, listening_port: int, runid: str,
              announce_ip: str = "", masteruser: str = "") -> list[bytes]:
    """The commands a replica sends before PSYNC, in order; each expects +OK. With
    `masteruser`, AUTH names that user (Redis 6+'s ACL users), else the default one."""
    commands = []
    if masterauth:
        user = [masteruser.encode()] if masteruser else []
        commands.append(encode_command([b"AUTH", *user, masterauth.encode()]))
    commands.append(encode_command([b"REPLCONF", b"listening-port", str(listening_port)]))
    if announce_ip:  # replica-announce-ip: the address the primary lists this replica under
        commands.append(encode_command([b"REPLCONF", b"ip-address", announce_ip.encode()]))
    # `eof`: a redis-server primary may send its RDB diskless (replication.redis_link).
    commands.append(encode_command([b"REPLCONF", b"capa", CAPA, b"capa", b"eof", b"capa",
                                    b"psync2", b"capa", PUBLISH_CAPA]))
    commands.append(encode_command([b"REPLCONF", b"sk-runid", runid.encode()]))
    return commands


MAX_HAVE = 64  # part files a replica may announce (a snapshot has at most a handful)


def have(files: list[tuple[str, int, int]]) -> bytes:
    """REPLCONF sk-have: the part files (name, size, CRC-32) the replica holds, which a full
    sync of a segmented snapshot need not send again."""
    return encode_command([b"REPLCONF", b"sk-have", ",".join(
        f"{name}:{size}:{crc:08x}" for name, size, crc in files[:MAX_HAVE])])


def parse_have(value: bytes) -> frozenset[tuple[str, int, int]]:
    """sk-have's value; LinkError if it is not one (at most MAX_HAVE part file names)."""
    from streamkeep.aof.manifest import is_snapshot_file

    found = set()
    items = value.decode("ascii", "replace").split(",") if value else []
    if len(items) > MAX_HAVE:
        raise LinkError(f"sk-have names more than {MAX_HAVE} files")
    for item in items:
        name, _, rest = item.partition(":")
        size, _, crc = rest.partition(":")
        if not (name.startswith("part-") and is_snapshot_file(name) and not name.endswith(".tmp")
                and size.isdigit() and len(crc) == 8):
            raise LinkError(f"sk-have: not a part file entry: {item[:100]!r}")
        try:
            found.add((name, int(size), int(crc, 16)))
        except ValueError:
            raise LinkError(f"sk-have: not a part file entry: {item[:100]!r}") from None
    return frozenset(found)


def psync(replid: str, lsn: int, crc: int | None) -> bytes:
    argv: list[bytes | str] = [b"PSYNC", replid.encode(), str(lsn)]
    if crc is not None:
        argv.append(f"{crc:08x}")
    return encode_command(argv)


def ack(lsn: int, fsynced: int) -> bytes:
    return encode_command([b"REPLCONF", b"ACK", str(lsn), b"FACK", str(fsynced)])


def announce_port(port: int) -> bytes:
    """A replica's listening port told on a live link (no reply: the stream is the primary's),
    when its server started listening after the handshake."""
    return encode_command([b"REPLCONF", b"listening-port", str(port)])


def fullresync_line(replid: str, lsn: int) -> bytes:
    return f"+FULLRESYNC {replid} {lsn}\r\n".encode()


def continue_line(replid: str) -> bytes:
    return f"+CONTINUE {replid}\r\n".encode()


def snapshot_header(size: int) -> bytes:
    return f"${size}\r\n".encode()


def snapshot_trailer(crc: int) -> bytes:
    return f"+CRC32C {crc:08x}\r\n".encode()


GETACK = GETACK_FRAME


def publish_frame(command: bytes, channel: bytes, message: bytes) -> bytes:
    """A published message on the record stream: a zero-length frame marked PUBLISH_MARK, then
    `command channel message` as a RESP array (command: PUBLISH or SPUBLISH)."""
    return FRAME.pack(0, PUBLISH_MARK) + encode_command([command, channel, message])


# --- what the replica receives ---------------------------------------------------------------


@dataclass(slots=True)
class FullResync:
    replid: str
    lsn: int


@dataclass(slots=True)
class Continue:
    replid: str


@dataclass(slots=True)
class SnapshotData:
    data: bytes  # the next piece of the snapshot file


@dataclass(slots=True)
class SnapshotEnd:
    ok: bool  # the CRC-32C of the whole file matched


@dataclass(slots=True)
class Records:
    """Whole, checked records: the frames' bytes as received (`raw`, what the replica's own
    AOF gets) and decoded (`records`, what it applies), from LSN `first_lsn`."""

    first_lsn: int
    raw: bytes
    records: list[tuple]


@dataclass(slots=True)
class GetAck:
    pass


@dataclass(slots=True)
class Published:
    """A message the primary published: delivered to this node's subscribers, not applied."""

    command: bytes  # PUBLISH or SPUBLISH
    channel: bytes
    message: bytes


Event = FullResync | Continue | SnapshotData | SnapshotEnd | Records | GetAck | Published


class LinkDecoder:
    """The replica's side of the stream after it sent PSYNC: feed bytes, take events.

    States: `reply` (the PSYNC reply line), `bulk` (the snapshot's $<size> line, after
    keep-alives), `snapshot` (its bytes), `trailer` (its CRC line), `records`. Every record is
    CRC-checked and must carry the next LSN (aof.codec.decode_stream); anything else raises
    LinkError and the link must be dropped: nothing after a bad byte is applied."""

    def __init__(self, last_lsn: int) -> None:
        self.buf = b""  # bytes, not a bytearray: records decode from slices of it, uncopied
        self.pos = 0  # where the unread bytes start (consumed bytes go at the next push)
        self.state = "reply"
        self.next_lsn = last_lsn + 1
        self.remaining = 0
        self.crc = 0
        self.snapshot_size = 0
        self.snapshot_read = 0
        self.error: LinkError | None = None

    def feed(self, data: bytes) -> list[Event]:
        """The events the bytes so far complete. Bad bytes after good events: the good ones
        are returned and the error is raised by `check()` (and by the next feed)."""
        self.push(data)
        events: list[Event] = []
        try:
            for event in self.events():
                events.append(event)
        except LinkError as err:
            if not events:
                raise
            self.error = err
        return events

    def push(self, data: bytes) -> None:
        self.check()
        # One copy per push (the unread rest and the new bytes), none per event.
        self.buf = self.buf[self.pos:] + data if self.pos < len(self.buf) else bytes(data)
        self.pos = 0

    def events(self) -> Iterator[Event]:
        """The events the bytes pushed so far complete, decoded one at a time as they are
        taken (records in batches of BATCH): a replica applies each batch before the next is
        decoded, so a megabyte received is never a megabyte of live decoded records. Raises
        LinkError where the bytes stop making sense, after the events before it."""
        while True:
            event = self._next()
            if event is None:
                return
            yield event

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def _line(self) -> bytes | None:
        end = self.buf.find(b"\r\n", self.pos)
        if end < 0:
            if len(self.buf) - self.pos > MAX_LINE:
                raise LinkError("the primary sent an overlong line")
            return None
        line = bytes(self.buf[self.pos:end])
        self.pos = end + 2
        return line

    def _next(self) -> Event | None:
        state = self.state
        if state == "records":
            return self._records()
        if state == "snapshot":
            if self.pos == len(self.buf):
                return None
            take = min(self.remaining, len(self.buf) - self.pos)
            data = bytes(self.buf[self.pos:self.pos + take])
            self.pos += take
            self.remaining -= take
            self.snapshot_read += take
            self.crc = _crc_update(self.crc, data)
            if not self.remaining:
                self.state = "trailer"
            return SnapshotData(data)
        if state in ("bulk", "reply"):  # keep-alives while the primary prepares
            while self.buf[self.pos:self.pos + 1] == KEEPALIVE:
                self.pos += 1
        line = self._line()
        if line is None:
            return None
        if state == "reply":
            return self._reply(line)
        if state == "bulk":
            if not line.startswith(b"$") or not line[1:].isdigit():
                raise LinkError(f"expected the snapshot's size, got {line[:80]!r}")
            self.snapshot_size = self.remaining = int(line[1:])
            self.state = "snapshot" if self.remaining else "trailer"
            return self._next()
        # trailer
        parts = line.split()
        if len(parts) != 2 or parts[0] != b"+CRC32C":
            raise LinkError(f"expected the snapshot's CRC, got {line[:80]!r}")
        self.state = "records"
        return SnapshotEnd(parts[1].decode(errors="replace") == f"{self.crc:08x}")

    def _reply(self, line: bytes) -> Event:
        parts = line.decode(errors="replace").split()
        if parts and parts[0] == "+FULLRESYNC" and len(parts) == 3 and parts[2].isdigit():
            self.state = "bulk"
            self.next_lsn = int(parts[2]) + 1
            return FullResync(parts[1], int(parts[2]))
        if parts and parts[0] == "+CONTINUE" and len(parts) == 2:
            self.state = "records"
            return Continue(parts[1])
        raise LinkError(f"unexpected reply to PSYNC: {line[:200].decode(errors='replace')}")

    def _records(self) -> Event | None:
        if len(self.buf) - self.pos < FRAME_SIZE:
            return None
        try:
            chunk = decode_stream(self.buf, self.pos, self.next_lsn, limit=BATCH)
        except StorageError as err:
            raise LinkError(str(err)) from None
        if chunk.records:
            raw = bytes(self.buf[self.pos:chunk.end])
            self.pos = chunk.end
            first = self.next_lsn
            self.next_lsn += len(chunk.records)
            return Records(first, raw, chunk.records)
        if chunk.getack:
            if FRAME.unpack_from(self.buf, self.pos)[1] == PUBLISH_MARK:
                return self._published()
            self.pos += FRAME_SIZE
            return GetAck()
        return None

    def _published(self) -> Published | None:
        """A published message after its marked frame (None: not all here yet)."""
        parsed = parse_message(self.buf, self.pos + FRAME_SIZE)
        if parsed is None:
            return None
        event, self.pos = parsed
        return event


def parse_message(buf: bytes, pos: int) -> tuple[Published, int] | None:
    """`*3 $len command $len channel $len message` at `pos`: the message and where it ends;
    None if it is not all in `buf` yet; LinkError if it is not that shape."""
    parts: list[bytes] = []
    end = buf.find(b"\r\n", pos, pos + 24)
    if end < 0:
        if len(buf) - pos >= 24:
            raise LinkError("a published message without its array header")
        return None
    if buf[pos:end] != b"*3":
        raise LinkError(f"a published message is not a 3-element array: {buf[pos:end]!r}")
    pos = end + 2
    for _ in range(3):
        end = buf.find(b"\r\n", pos, pos + 24)
        if end < 0:
            if len(buf) - pos >= 24:
                raise LinkError("a published message's bulk length is too long")
            return None
        digits = buf[pos + 1:end]
        if buf[pos:pos + 1] != b"$" or not digits.isdigit() or int(digits) > MAX_MESSAGE:
            raise LinkError(f"a published message's bulk header is {buf[pos:end]!r}")
        start, size = end + 2, int(digits)
        if len(buf) < start + size + 2:
            return None
        if buf[start + size:start + size + 2] != b"\r\n":
            raise LinkError("a published message's bulk string is not terminated")
        parts.append(bytes(buf[start:start + size]))
        pos = start + size + 2
    command = parts[0].upper()
    if command not in (b"PUBLISH", b"SPUBLISH"):
        raise LinkError(f"a published message's command is {parts[0][:40]!r}")
    return Published(command, parts[1], parts[2]), pos


def _crc_update(crc: int, data: bytes) -> int:
    """CRC-32C of the bytes so far, continued over `data` (crcmod's C function takes the
    running value)."""
    return crc32c(data, crc)
