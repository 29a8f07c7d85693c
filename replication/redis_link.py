"""The replication link with a redis-server primary, replica side, as pure functions and a
decoder over bytes (sans-IO).

The handshake is replication.link's (AUTH, REPLCONF listening-port, REPLCONF capa eof capa
psync2 ...); a redis-server refuses its `REPLCONF sk-runid`, and that is how a follower knows it
talks to Redis. Then:

    replica                                     redis-server
    PSYNC ? -1                   (nothing yet)  +FULLRESYNC <replid> <offset>
    PSYNC <replid> <offset + 1>                 +CONTINUE [<new replid>]  or  +FULLRESYNC ...
                                                "\\n"...  (keep-alives while the RDB is made)
                                                $<size>\\r\\n<the RDB>                 (disk)
                                             or $EOF:<40 bytes>\\r\\n<the RDB><the 40 bytes>
                                                                                  (diskless)
    ... then the command stream, forever:       RESP multibulk commands; each advances the
                                                replication offset by its size in bytes
    REPLCONF ACK <offset>                       (every second, and on REPLCONF GETACK; no
                                                 reply. Diskless: the stream starts after the
                                                 first one)

Must not touch: sockets, files, the engine (replication.redis_follower has those), what the
commands do (replication.redis_commands).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from streamkeep.engine.wire.errors import StorageError
from streamkeep.engine.wire.reply_parser import encode_command
from streamkeep.engine.wire.request_parser import RequestParser

MAX_LINE = 1 << 16
EOF_MARK_SIZE = 40
COMMANDS_BATCH = 512  # commands per Commands event: applied before the next ones are parsed


class RedisLinkError(StorageError):
    """The redis-server sent something that is not the protocol above, or refused PSYNC."""


def psync(replid: str | None, offset: int) -> bytes:
    """PSYNC for a replica at `offset` of history `replid` (None: nothing, a full sync)."""
    if replid is None:
        return encode_command([b"PSYNC", b"?", b"-1"])
    return encode_command([b"PSYNC", replid.encode(), str(offset + 1)])


def ack(offset: int) -> bytes:
    return encode_command([b"REPLCONF", b"ACK", str(offset)])


_DIGITS = bytes(len(str(n)) for n in range(1 << 12))  # decimal digits of small lengths


def command_size(argv: list[bytes]) -> int:
    """The bytes a command takes in the stream (a multibulk, as Redis writes it): what it
    advances the replication offset by. (*<n>\r\n, then $<len>\r\n<arg>\r\n each.)"""
    lens = list(map(len, argv))
    try:
        digits = sum(map(_DIGITS.__getitem__, lens))
    except IndexError:  # an argument of 4 KiB or more
        digits = sum(len(str(n)) for n in lens)
    return len(str(len(lens))) + 3 + sum(lens) + digits + 5 * len(lens)


def is_getack(argv: list[bytes]) -> bool:
    return len(argv) >= 2 and argv[0].lower() == b"replconf" and argv[1].lower() == b"getack"


@dataclass(slots=True)
class FullResync:
    replid: str
    offset: int


@dataclass(slots=True)
class Continue:
    replid: str | None  # a new history id (the primary was promoted), or None: the same


@dataclass(slots=True)
class RdbStart:
    size: int  # -1: diskless, its end is the EOF mark


@dataclass(slots=True)
class RdbData:
    data: bytes


@dataclass(slots=True)
class RdbEnd:
    pass


@dataclass(slots=True)
class Commands:
    commands: list[list[bytes]]


Event = FullResync | Continue | RdbStart | RdbData | RdbEnd | Commands


class RedisLinkDecoder:
    """The replica's side after PSYNC: push bytes, take events. States: `reply`, `bulk` (the
    RDB's header, after keep-alives), `rdb`, `rdb_end`, `commands`. Malformed bytes raise RedisLinkError
    (or the RESP parser's ProtocolError): the link must be dropped."""

    def __init__(self) -> None:
        self.buf = b""
        self.state = "reply"
        self.remaining = 0  # of a disk transfer's RDB
        self.mark = b""  # a diskless transfer's end mark
        self.rdb_size = 0  # -1: diskless
        self.parser = RequestParser()

    def push(self, data: bytes) -> None:
        if self.state == "commands":
            self.parser.feed(data)
        else:
            self.buf += data

    def events(self) -> Iterator[Event]:
        while True:
            if self.state == "commands":
                batch: list[list[bytes]] = []
                parser = self.parser
                while len(batch) < COMMANDS_BATCH and (argv := parser.next()) is not None:
                    batch.append(argv)
                if not batch:
                    return
                yield Commands(batch)
                continue
            event = self._next()
            if event is None:
                return
            yield event

    def _line(self) -> str | None:
        buf = self.buf.lstrip(b"\n")  # keep-alives
        end = buf.find(b"\r\n")
        if end < 0:
            self.buf = buf
            if len(buf) > MAX_LINE:
                raise RedisLinkError("the primary's reply line is too long")
            return None
        self.buf = buf[end + 2:]
        return buf[:end].decode("utf-8", "replace")

    def _next(self) -> Event | None:
        if self.state == "reply":
            line = self._line()
            return None if line is None else self._reply(line)
        if self.state == "bulk":
            line = self._line()
            return None if line is None else self._bulk(line)
        return self._rdb()

    def _reply(self, line: str) -> Event:
        words = line.split()
        if words and words[0] == "+FULLRESYNC" and len(words) == 3 and words[2].isdigit():
            self.state = "bulk"
            return FullResync(words[1], int(words[2]))
        if words and words[0] == "+CONTINUE" and len(words) <= 2:
            self._commands(self.buf)
            return Continue(words[1] if len(words) == 2 else None)
        if line.startswith("-"):
            raise RedisLinkError(f"the primary refused PSYNC: {line[1:]}")
        raise RedisLinkError(f"unexpected reply to PSYNC: {line[:100]!r}")

    def _bulk(self, line: str) -> Event:
        if line.startswith("$EOF:") and len(line) == 5 + EOF_MARK_SIZE:
            self.mark = line[5:].encode()
            self.rdb_size = -1
        elif line.startswith("$") and line[1:].isdigit():
            self.remaining = self.rdb_size = int(line[1:])
        else:
            raise RedisLinkError(f"expected the RDB's length, got {line[:100]!r}")
        self.state = "rdb"
        return RdbStart(self.rdb_size)

    def _rdb(self) -> Event | None:
        if self.state == "rdb_end":
            self._commands(self.buf)
            return RdbEnd()
        buf = self.buf
        if self.mark:
            end = buf.find(self.mark)
            if end >= 0:
                self.buf = buf[end + EOF_MARK_SIZE:]
                self.state, self.mark = "rdb_end", b""
                return RdbData(buf[:end])
            keep = EOF_MARK_SIZE - 1  # the mark may straddle this push and the next
            if len(buf) <= keep:
                return None
            self.buf = buf[-keep:]
            return RdbData(buf[:-keep])
        if not buf and self.remaining:
            return None
        piece = buf[:self.remaining]
        self.buf = buf[len(piece):]
        self.remaining -= len(piece)
        if self.remaining == 0:
            self.state = "rdb_end"
        return RdbData(piece)

    def _commands(self, rest: bytes) -> None:
        self.state = "commands"
        self.buf = b""
        if rest:
            self.parser.feed(rest)
