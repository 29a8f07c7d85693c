"""`streamkeep aof dump PATH`: each record's LSN, time, database and effects, streamed.

Owns the dump's filters and its three formats: `text` (one line per effect, MONITOR-like, each
argument quoted as redis-cli quotes it), `json` (one JSON object per record; arguments are
strings when they are valid UTF-8, else `{"b64": ...}`) and `resp` (RESP arrays for
`redis-cli --pipe`, SELECT where the database changes, streamkeep-only effects translated or
left out). Output goes to stdout's buffer in chunks, batch by batch: memory does not grow with
the input. Must not touch: the files read, the record format (aof.codec, aof.segment_reader).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any

from streamkeep.engine.model.effects import with_dbs
from streamkeep.tools.inspect.aof_records import (
    EXIT_DAMAGED,
    EXIT_OK,
    EXIT_USAGE,
    InspectError,
    command_name,
    effect_keys,
    fail,
    parse_time,
    selected_db,
)

PROG = "streamkeep aof dump"

EPILOG = """\
formats:
  text   one line per effect: LSN, UTC time, [db], then the effect's arguments
         quoted as redis-cli quotes them ("..." with \\n, \\r, \\t, \\a, \\b, \\",
         \\\\ and \\xHH escapes)
  json   one object per record (JSON lines):
         {"lsn":5,"time_ms":1795432636213,"time":"2026-11-23T11:17:16.213Z",
          "db":0,"effects":[["XADD","orders","1795432636213-0","item",
          {"b64":"AP8="}]]}
         (one line each)
         an argument is a string when it is valid UTF-8, else
         {"b64": <base64 of its bytes>}
  resp   RESP arrays for `redis-cli --pipe`: SELECT wherever the database
         changes, SK.XCONSUMER -> XGROUP CREATECONSUMER, SK.XTRIMIDS -> XDEL,
         SK.XIDMPDUP left out

filters (all combinable; an effect is printed when it passes every one, a
record when one of its effects does; SELECT effects only go with what they
select for):
  --key GLOB             a key matches the glob (fnmatch on the key's bytes;
                         repeatable)
  --command NAME         the effect's command (XGROUP matches every XGROUP
                         subcommand, "XGROUP SETID" only that one; repeatable)
  --db N                 the database the effect applies to
  --from-lsn/--to-lsn N  LSN range, both inclusive
  --since/--until T      record time range, both inclusive: ms since the
                         epoch or ISO 8601 (UTC unless an offset is given)

examples:
  streamkeep aof dump ./data | less
  streamkeep aof dump --format json --key 'orders:*' \\
      --since 2026-11-23T10:00 ./data
  streamkeep aof dump --format json --command XACK --from-lsn 51003 \\
      data/segment-000005.aof
  streamkeep aof dump --format resp ./data | redis-cli --pipe

exit status:
  0    every record was read (also when the reader closes the pipe: `| head`)
  2    damaged input: the dump stops at the first bad record and says where
       on stderr (file and byte offset); the records before it were printed
  3    usage or I/O error (missing or unreadable path, not a data directory)
  130  interrupted (Ctrl-C)
"""

FORMATS = ("text", "json", "resp")
FLUSH_BYTES = 1 << 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print an AOF's records (a data directory's segments in order, or one\n"
                          "segment file): LSN, time, database and effect commands.")
    parser.epilog = EPILOG
    parser.add_argument("path", metavar="PATH", help="a data directory or a segment file")
    parser.add_argument("--format", choices=FORMATS, default="text",
                        help="output format (default: text)")
    parser.add_argument("--key", action="append", metavar="GLOB",
                        help="only effects on a key matching GLOB (repeatable)")
    parser.add_argument("--command", action="append", metavar="NAME",
                        help="only effects of this command (repeatable)")
    parser.add_argument("--db", type=int, metavar="N", help="only effects in database N")
    parser.add_argument("--from-lsn", type=int, metavar="N", help="first LSN to print")
    parser.add_argument("--to-lsn", type=int, metavar="N", help="last LSN to print")
    parser.add_argument("--since", metavar="TIME", help="only records at or after TIME")
    parser.add_argument("--until", metavar="TIME", help="only records at or before TIME")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar (shown on stderr when it is a terminal and "
                             "stdout is not)")


# --- argument quoting ---------------------------------------------------------------------------

_REPR = {i: f"\\x{i:02x}" for i in range(256)}
_REPR.update({i: chr(i) for i in range(0x20, 0x7F)})
_REPR.update({ord("\\"): "\\\\", ord('"'): '\\"', ord("\n"): "\\n", ord("\r"): "\\r",
              ord("\t"): "\\t", 7: "\\a", 8: "\\b"})
_PLAIN = bytes(range(0x20, 0x7F)).replace(b"\\", b"").replace(b'"', b"")


def quote(arg: bytes) -> str:
    """redis-cli's quoting (sdscatrepr): `"..."`, binary-safe and ASCII-only."""
    if not arg.translate(None, _PLAIN):
        return '"' + arg.decode("ascii") + '"'
    return '"' + "".join([_REPR[b] for b in arg]) + '"'


def quote_all(effect: Any) -> str:
    """An effect's arguments quoted, separated by spaces (one check when all are plain)."""
    if not b"".join(effect).translate(None, _PLAIN):
        return '"' + b'" "'.join(effect).decode("ascii") + '"'
    return " ".join(map(quote, effect))


_UNQUOTE = {"n": 10, "r": 13, "t": 9, "a": 7, "b": 8, '"': 34, "\\": 92}


def parse_text_line(line: str) -> tuple[int, str, int, list[bytes]]:
    """A text-format line back into (lsn, time, db, effect): the inverse of the text format
    (tests use it; redis-cli's own splitting follows the same rules)."""
    lsn, when, rest = line.rstrip("\n").split(" ", 2)
    db_text, rest = rest.split(" ", 1)
    args: list[bytes] = []
    i, n = 0, len(rest)
    while i < n:
        if rest[i] == " ":
            i += 1
            continue
        if rest[i] != '"':
            raise ValueError(f"expected a quoted argument at {i}")
        out = bytearray()
        i += 1
        while rest[i] != '"':
            ch = rest[i]
            if ch == "\\":
                nxt = rest[i + 1]
                if nxt == "x":
                    out.append(int(rest[i + 2:i + 4], 16))
                    i += 4
                else:
                    out.append(_UNQUOTE[nxt])
                    i += 2
            else:
                out += ch.encode("ascii")
                i += 1
        args.append(bytes(out))
        i += 1
    return int(lsn), when, int(db_text.strip("[]")), args


# --- filters ------------------------------------------------------------------------------------


class Filters:
    """The effect-level filters (key, command, db); None when there are none."""

    def __init__(self, keys: list[bytes] | None, commands: list[str] | None,
                 db: int | None) -> None:
        self.keys = keys
        self.commands = [" ".join(c.split()).upper() for c in commands] if commands else None
        self.db = db

    def passes(self, db: int, effect: Any) -> bool:
        if self.db is not None and db != self.db:
            return False
        if self.commands is not None:
            name = command_name(effect)
            if not any(name == c or name.split(" ", 1)[0] == c for c in self.commands):
                return False
        if self.keys is not None:
            keys = effect_keys(effect)
            if not any(fnmatchcase(k, g) for k in keys for g in self.keys):
                return False
        return True


def select_effects(db: int, effects: Any, filters: Filters | None) -> Any:
    """A record's effects that pass the filters (all of them, as they are, without filters);
    a SELECT effect is kept only when an effect it selects the database for is kept."""
    if filters is None:
        return effects
    out: list[Any] = []
    pending_select: Any = None
    keep_selects = filters.commands is not None and "SELECT" in filters.commands
    for effect in effects:
        if effect and bytes(effect[0]).upper() == b"SELECT":
            db = selected_db(effect, db)
            if keep_selects:
                out.append(effect)
            else:
                pending_select = effect
            continue
        if filters.passes(db, effect):
            if pending_select is not None:
                out.append(pending_select)
                pending_select = None
            out.append(effect)
    return out


# --- formats: each writer takes a list of (lsn, time_ms, db, effects) and writes bytes ----------


class TimeCache:
    """ISO times, computed once per distinct millisecond in a row."""

    def __init__(self) -> None:
        from streamkeep.tools.inspect.aof_records import format_time

        self._format = format_time
        self._ms = -1
        self._text = ""

    def __call__(self, ms: int) -> str:
        if ms != self._ms:
            self._ms, self._text = ms, self._format(ms)
        return self._text


Writer = Callable[[list[tuple]], None]


def text_writer(write: Callable[[bytes], Any]) -> Writer:
    when = TimeCache()

    def emit(records: list[tuple]) -> None:
        lines: list[str] = []
        for lsn, time_ms, db, effects in records:
            head = f"{lsn} {when(time_ms)} "
            lines += [f"{head}[{edb}] " + quote_all(effect) + "\n"
                      for edb, effect in with_dbs(db, effects)]
        write("".join(lines).encode("ascii"))

    return emit


def json_arg(arg: bytes) -> Any:
    """An argument as JSON has it: its text when it is valid UTF-8, else {"b64": ...}."""
    try:
        return arg.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return {"b64": base64.b64encode(arg).decode("ascii")}


def json_writer(write: Callable[[bytes], Any]) -> Writer:
    import json
    from json.encoder import encode_basestring  # C: a str as a JSON string, non-ASCII as is

    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    decode = bytes.decode
    when = TimeCache()

    def slow(arg: bytes) -> str:
        return dumps(json_arg(arg))

    def effect_json(effect: Any) -> bytes:
        """The effect's arguments as JSON values separated by commas (UTF-8)."""
        # Fastest: printable ASCII without quotes or backslashes is its own JSON text.
        if not b"".join(effect).translate(None, _PLAIN):
            return b'"' + b'","'.join(effect) + b'"'
        # Then: one decode and one escape for all arguments, joined by NUL, whose escape
        # becomes the separator. Only when no argument holds a NUL or a backslash (so every
        # "\\u0000" in the escaped text is a separator) and all are valid UTF-8.
        joined = b"\0".join(effect)
        if joined.count(b"\0") == len(effect) - 1 and b"\\" not in joined:
            try:
                return encode_basestring(decode(joined)).replace("\\u0000", '","').encode()
            except UnicodeDecodeError:
                pass
        return ",".join(map(slow, effect)).encode()

    def emit(records: list[tuple]) -> None:
        lines: list[bytes] = []
        append = lines.append
        last_ms, last_time = -1, b""
        for lsn, time_ms, db, effects in records:
            if time_ms != last_ms:
                last_ms, last_time = time_ms, when(time_ms).encode()
            if len(effects) == 1:
                args = effect_json(effects[0])
            else:
                args = b"],[".join(map(effect_json, effects))
            append(b'{"lsn":%d,"time_ms":%d,"time":"%s","db":%d,"effects":[[%s]]}\n'
                   % (lsn, time_ms, last_time, db, args))
        write(b"".join(lines))

    return emit


def resp_translate(effect: Any) -> list[bytes] | None:
    """The Redis command an effect is written as in RESP (None: left out)."""
    name = bytes(effect[0]).upper()
    if name == b"SK.XCONSUMER":  # key group consumer seen active: the consumer exists
        return [b"XGROUP", b"CREATECONSUMER", *effect[1:4]]
    if name == b"SK.XTRIMIDS":  # exact IDs a trim removed; XDEL also moves max-deleted-id
        return [b"XDEL", *effect[1:]]
    if name == b"SK.XIDMPDUP":  # a counter Redis has no command to set
        return None
    return list(effect)


def resp_command(argv: Iterable[bytes]) -> bytes:
    argv = list(argv)
    return b"*%d\r\n" % len(argv) + b"".join(
        [b"$%d\r\n%s\r\n" % (len(a), a) for a in argv])


def resp_writer(write: Callable[[bytes], Any]) -> Writer:
    state = {"db": 0}  # redis-cli --pipe starts in database 0

    def emit(records: list[tuple]) -> None:
        out: list[bytes] = []
        current = state["db"]
        for _lsn, _time_ms, db, effects in records:
            for edb, effect in with_dbs(db, effects):
                if bytes(effect[0]).upper() == b"SELECT":
                    continue  # the db each effect applies in is selected below
                argv = resp_translate(effect)
                if argv is None:
                    continue
                if edb != current:
                    out.append(resp_command([b"SELECT", b"%d" % edb]))
                    current = edb
                out.append(resp_command(argv))
        state["db"] = current
        if out:
            write(b"".join(out))

    return emit


WRITERS = {"text": text_writer, "json": json_writer, "resp": resp_writer}


# --- the command --------------------------------------------------------------------------------


class ChunkedOut:
    """Writes to a binary stream in chunks of about FLUSH_BYTES."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.parts: list[bytes] = []
        self.size = 0

    def write(self, data: bytes) -> None:
        self.parts.append(data)
        self.size += len(data)
        if self.size >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.stream.write(b"".join(self.parts))
            self.parts.clear()
            self.size = 0
        self.stream.flush()


def dump_records(batches: Iterable[list[tuple]], emit: Writer, filters: Filters | None,
                 from_lsn: int, to_lsn: int | None, since: int | None,
                 until: int | None) -> None:
    """Pass the records that pass the filters to `emit`, batch by batch."""
    plain = filters is None and since is None and until is None
    for batch in batches:
        if plain and batch[0][0] >= from_lsn and (to_lsn is None or batch[-1][0] <= to_lsn):
            emit(batch)  # the common case: every record, as it is
            continue
        kept: list[tuple] = []
        stop = False
        for lsn, time_ms, db, effects in batch:
            if lsn < from_lsn or (since is not None and time_ms < since) \
                    or (until is not None and time_ms > until):
                continue
            if to_lsn is not None and lsn > to_lsn:
                stop = True
                break
            chosen = select_effects(db, effects, filters)
            if chosen:
                kept.append((lsn, time_ms, db, chosen))
        if kept:
            emit(kept)
        if stop:
            return


def main(args: argparse.Namespace) -> int:
    from streamkeep.tools.inspect.aof_records import (
        ByteProgress,
        SegmentInfo,
        iter_batches,
        open_source,
    )

    try:
        since = None if args.since is None else parse_time(args.since)
        until = None if args.until is None else parse_time(args.until)
    except ValueError as err:
        print(f"{PROG}: --since/--until: {err} (expected ms since the epoch or ISO 8601)",
              file=sys.stderr)
        return EXIT_USAGE
    if args.db is not None and not 0 <= args.db < 16:
        print(f"{PROG}: --db must be 0..15", file=sys.stderr)
        return EXIT_USAGE
    keys = [os.fsencode(k) for k in args.key] if args.key else None
    filters = None
    if keys or args.command or args.db is not None:
        filters = Filters(keys, args.command, args.db)
    from_lsn = args.from_lsn or 0
    to_lsn = args.to_lsn
    try:
        source = open_source(args.path)
    except InspectError as err:
        return fail(err, PROG)
    if args.format == "resp" and source.snapshot_lsn is not None:
        print(f"{PROG}: warning: {args.path} has a snapshot covering LSNs up to "
              f"{source.snapshot_lsn}; the dump has only the records after it", file=sys.stderr)

    out = ChunkedOut(sys.stdout.buffer)
    emit = WRITERS[args.format](out.write)
    infos: list[SegmentInfo] = []
    try:
        try:
            show = not args.quiet and not sys.stdout.isatty()
            with ByteProgress(source, "dump", show) as progress:
                dump_records(iter_batches(source, infos, from_lsn, progress=progress), emit,
                             filters, from_lsn, to_lsn, since, until)
        except InspectError as err:
            out.flush()
            return fail(err, PROG)
        out.flush()
    except BrokenPipeError:
        # The reader went away (`| head`): not an error of ours; keep Python's exit quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    damaged = next((i for i in infos if i.damage), None)
    if damaged is not None:
        read = (f"its records up to LSN {damaged.last_lsn} were read"
                if damaged.last_lsn is not None else "none of its records could be read")
        print(f"{PROG}: {damaged.damage}; stopped there ({read})", file=sys.stderr)
        return EXIT_DAMAGED
    return EXIT_OK
