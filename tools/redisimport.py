"""`streamkeep import SOURCE --out DIR`: a Redis's keys of every type streamkeep stores
(streams, strings, sorted sets, hashes, sets, lists) and its functions into a new data
directory.

SOURCE is a dump.rdb (RDB versions 1 to 15, Redis 8.10's, and Valkey 9's 80), an appendonly.aof (RESP commands, with or without
an RDB preamble) or a Redis 7+ appendonlydir (its manifest's base file, then its incr files in
order). Owns the command's arguments, finding the pieces of SOURCE and identifying each by its
content before anything is written (tools.sniff: anything else is refused, saying what it
is), the report and the exit status. DIR is built beside its final name and renamed into place
once complete (tools.safe_output), so a refusal or an error leaves no DIR behind. What comes in, and how, is replication.redis_commands' (the same as a replica of a
redis-server gets): every stream and string key exactly, RESTOREd from its stored bytes with its
TTL; the AOF's commands applied through the engine; keys of other types counted by type and
their commands by name, never silently; databases kept. The function libraries an RDB carries
are loaded as FUNCTION LOAD loads them (a file that carries one twice, or one that does not
load, is refused, as Redis's loader refuses it), and kept in DIR's snapshot with the keys. As Redis loads its files at startup: a
dump.rdb's keys already expired are skipped, an AOF's RDB preamble (or an appendonlydir's base)
loads them all (its commands assume that exact keyspace), and nothing expires while loading
(the staging engine is read-only to clients, the commands are the primary's); what is expired
is deleted once DIR is served, its DEL logged then. The state is built in memory, then written
as DIR's snapshot with its first segment and manifest.
Must not touch: the RDB format (snapshot.rdb), RESP (engine.wire.request_parser), what a
command does.

Exit status: 0 imported; 2 SOURCE is not a readable RDB, AOF or appendonlydir (another kind of
file, damaged, unknown version or type); 3 usage or I/O error (DIR exists and is not empty, or
is inside a data directory; SOURCE cannot be read).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamkeep.engine.wire.errors import StreamkeepError  # stdlib only behind it
from streamkeep.tools.progress import Steps

if TYPE_CHECKING:
    from streamkeep.replication.redis_commands import RedisApplier
    from streamkeep.tools.sniff import Kind

HELP = ("import the keys (of every type streamkeep stores) and functions of a Redis dump.rdb, "
        "appendonly.aof or appendonlydir")
EXIT_BAD_SOURCE, EXIT_USAGE = 2, 3
CHUNK = 1 << 20  # AOF bytes parsed at a time
EPILOG = """examples:
  streamkeep import /var/lib/redis/dump.rdb --out ./data
  streamkeep import /var/lib/redis/appendonlydir --out ./data
                                      Redis 7+: its manifest, base, incr files
  streamkeep import appendonly.aof --out ./data --json   the report for scripts

Stream, string, sorted set, hash, set and list keys are imported exactly, with their expiry;
keys of other types are skipped and reported by type, and the AOF's commands on them by command
name.
Function libraries (an RDB's function records, an AOF's FUNCTION LOAD) come too. As Redis loads
the same files: keys of a dump.rdb already expired are skipped (counted in the report); an
AOF's RDB preamble loads every key (its commands follow from that exact keyspace), and a key
expired there is deleted once DIR is served. An AOF cut short (a crash while Redis wrote it) is imported up to its
last whole command, as Redis loads it, and the report says how many bytes were left out.

SOURCE is identified by its content first: an RDB by its REDIS magic and version (1 to 15,
as Redis 5.0 to 8.10 write it; Valkey 9's VALKEY080 too), an AOF by
its RESP framing from the first byte, an appendonlydir by its manifest. Anything else (an
empty or compressed file, text, a directory without a manifest) is refused, saying what it
is; damage is reported with the file and byte offset. DIR must be new (or an empty
directory) and outside every data directory; it is built beside its final name and renamed
into place once complete, so nothing is left behind on a refusal, an error or Ctrl-C.

Progress goes to stderr when it is a terminal.

exit status: 0 imported; 2 not a readable RDB, AOF or appendonlydir; 3 usage or I/O error
(DIR not empty or inside a data directory, SOURCE unreadable); 130 interrupted (Ctrl-C: no DIR
is left)."""


class BadSource(StreamkeepError):
    """SOURCE (or a file it names) is not what it should be: the message names file and
    offset."""


@dataclass
class Piece:
    path: str
    data: bytes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE",
                        help="a Redis RDB file, AOF file, or appendonlydir")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="the data directory to create (must not exist, or be empty)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


# The command's steps on stderr: each as it starts on a terminal, else a line every few seconds.
_STEPS = Steps("streamkeep import", "importing")


def main(args: argparse.Namespace) -> int:
    with _STEPS:
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    from streamkeep import Engine
    from streamkeep.replication.redis_commands import RedisApplier
    from streamkeep.tools.safe_output import OutputRefused, check_output, staged_directory

    try:  # DIR: a new data directory, nowhere near another or SOURCE
        check_output(args.out, directory=True, force=None, sources=[args.source])
    except OutputRefused as err:
        print(f"streamkeep import: {err}", file=sys.stderr)
        return EXIT_USAGE
    began = time.perf_counter()
    try:
        files = _files(args.source)  # every file identified by its content, before anything
    except OSError as err:
        print(f"streamkeep import: {err.filename or args.source}: {err.strerror}",
              file=sys.stderr)
        return EXIT_USAGE
    except BadSource as err:
        print(f"streamkeep import: {err}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    report: dict[str, Any] = {"source": args.source, "out": args.out, "rdb_version": None,
                              "truncated_bytes": 0, "incomplete_transaction": False,
                              "functions_from_rdb": 0}
    # The applier logs each failed command for a replica's operator; the import's own report
    # (or its one refusal line) says it here instead.
    applier_log = logging.getLogger("streamkeep.replication")
    level = applier_log.level
    applier_log.setLevel(logging.CRITICAL)
    try:
        # The state is built in memory first (no record per key or command: nothing to replay
        # or compact), then written as DIR's snapshot in one step, as a replica's full sync.
        with Engine() as staging:
            # Nothing expires while loading, as in Redis (keyIsExpired is false while loading):
            # the applier's session is the primary's, and a read-only engine neither expires a
            # key it names nor runs the active cycle.
            staging.read_only = "READONLY streamkeep import is loading"
            applier = RedisApplier(staging)
            streams = entries = strings = 0
            for path, kind in files:  # one file in memory at a time
                piece = _read(path)
                _STEPS.start(f"reading {piece.path} ({len(piece.data):,} bytes)")
                start = 0
                if kind == "rdb":
                    s, e, n, start = _rdb(applier, piece, report,
                                          in_aof=os.path.isdir(args.source))
                    streams, entries, strings = streams + s, entries + e, strings + n
                _aof(applier, piece, start, report)
            report["incomplete_transaction"] = applier.multi is not None
            applier.abandon()
            report.update(_counts(staging, applier, streams, entries, strings))
            _STEPS.start(f"writing {report['streams']:,} stream(s) as the snapshot of "
                         f"{args.out}")
            # built beside DIR and renamed into place whole: a failure leaves no DIR behind
            with staged_directory(args.out) as stage:
                _install(staging, stage)
    except BadSource as err:
        print(f"streamkeep import: {err}", file=sys.stderr)
        return EXIT_BAD_SOURCE
    except OutputRefused as err:  # DIR made by someone else meanwhile
        print(f"streamkeep import: {err}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as err:
        print(f"streamkeep import: {err.filename or args.source}: {err.strerror or err}",
              file=sys.stderr)
        return EXIT_USAGE
    finally:
        applier_log.setLevel(level)
    report["seconds"] = round(time.perf_counter() - began, 3)
    _print(report, args.json)
    return 0


# --- SOURCE ----------------------------------------------------------------------------------


def _read(path: str) -> Piece:
    with open(path, "rb") as f:
        return Piece(path, f.read())


def _files(source: str) -> list[tuple[str, Kind]]:
    """The files to import, in order, each with its kind as its first bytes show it: SOURCE
    itself, or an appendonlydir's base and incrs (an empty one there holds nothing)."""
    if not os.path.isdir(source):
        kind = _identify(source)
        if kind is None:
            raise BadSource(f"{source}: an empty file")
        return [(source, kind)]
    from streamkeep.tools.safe_output import is_data_directory

    if is_data_directory(source):
        raise BadSource(f"{source}: a streamkeep data directory, not a Redis file (serve, "
                        "restore or export it instead)")
    manifests = sorted(n for n in os.listdir(source) if n.endswith(".manifest"))
    if len(manifests) != 1:
        found = f"{len(manifests)}: {', '.join(manifests)}" if manifests else "none"
        raise BadSource(f"{source}: a directory, but not a Redis appendonlydir (it should "
                        f"hold one *.manifest file; found {found})")
    path = os.path.join(source, manifests[0])
    with open(path, "rb") as f:
        names = _manifest(path, f.read().decode("utf-8", "replace"))
    files = []
    for name in names:
        file = os.path.join(source, name)
        kind = _identify(file)
        if kind is not None:
            files.append((file, kind))
    return files


def _identify(path: str) -> Kind | None:
    """What the file at `path` is by its first bytes (None: empty); BadSource naming it and
    what it holds if it is neither an RDB nor an AOF."""
    from streamkeep.tools.sniff import HEAD, NotRedisFile, sniff

    with open(path, "rb") as f:
        head = f.read(HEAD)
    if not head:
        return None
    try:
        return sniff(head)
    except NotRedisFile as err:
        raise BadSource(f"{path}: {err}") from None


def _manifest(path: str, text: str) -> list[str]:
    """A Redis 7 AOF manifest's base file then its incr files by sequence (history files are
    not part of the data)."""
    base: list[str] = []
    incr: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
            fields = dict(zip(words[::2], words[1::2], strict=True))
            name, kind, seq = fields["file"], fields["type"], int(fields["seq"])
        except (ValueError, KeyError):
            raise BadSource(f"{path}: line {number} is not a manifest entry: {line[:80]!r}") \
                from None
        if os.path.basename(name) != name:
            raise BadSource(f"{path}: line {number} names a file outside the directory")
        if kind == "b":
            base.append(name)
        elif kind == "i":
            incr.append((seq, name))
    if len(base) > 1:
        raise BadSource(f"{path}: more than one base file")
    return base + [name for _seq, name in sorted(incr)]


def _rdb(applier: RedisApplier, piece: Piece, report: dict[str, Any],
         in_aof: bool) -> tuple[int, int, int, int]:
    """An RDB's keys loaded: as a primary loads a dump.rdb (its keys already expired skipped),
    or, for an appendonlydir's base or an RDB followed by AOF commands, as an AOF preamble
    (every key: the commands after it assume that exact keyspace)."""
    from streamkeep.snapshot import rdb_types  # noqa: F401  (every type's codec registered)
    from streamkeep.snapshot.rdb import TYPE_NAMES, RdbError, key_text, read_rdb_contents

    try:
        version, _aux, keys, libraries, end = read_rdb_contents(piece.data)
    except RdbError as err:
        raise BadSource(f"{piece.path}: {err}") from None
    report["rdb_version"] = version
    _load_libraries(applier, piece, libraries)  # (as Redis: read before the keys)
    report["functions_from_rdb"] += len(libraries)
    failed = applier.errors
    preamble = in_aof or end < len(piece.data)
    streams, entries, strings = applier.load(keys, version, replace_all=False,
                                             skip_expired=not preamble)
    if applier.errors > failed:  # a value RESTORE found damaged: which one, where
        argv = applier.last_failed or ()
        key = next((k for k in keys if argv[1:2] == (k.key,)), None)
        where = "" if key is None else (f"the value of {TYPE_NAMES[key.rdb_type]} key "
                                        f"{key_text(key.key)} (db {key.db}) at byte "
                                        f"{key.offset} is damaged: ")
        raise BadSource(f"{piece.path}: {where}{applier.last_error}")
    return streams, entries, strings, end


def _load_libraries(applier: RedisApplier, piece: Piece, libraries: list[Any]) -> None:
    """The RDB's function libraries loaded as FUNCTION LOAD loads them (without REPLACE: Redis's
    loader refuses a file that carries a library twice, or one that names an engine other than
    Lua, or fails to load); through the engine, so that they are in DIR's snapshot with the
    keys. BadSource naming the library that fails, with Redis's error line."""
    from streamkeep.engine.exec.functions import library_metadata
    from streamkeep.engine.wire.errors import ReplyError
    from streamkeep.snapshot.rdb import key_text

    for library in libraries:
        try:
            applier.engine.submit(applier.session, (b"FUNCTION", b"LOAD", library.code))
        except ReplyError as err:
            try:
                name = f" {key_text(library_metadata(library.code)[1])}"
            except ReplyError:
                name = ""  # (no name to give: the metadata line is what is wrong)
            raise BadSource(f"{piece.path}: the function library{name} at byte "
                            f"{library.offset} cannot be loaded: {err.line}") from None


def _aof(applier: RedisApplier, piece: Piece, start: int, report: dict[str, Any]) -> None:
    """The RESP commands of an AOF (or of what follows its RDB preamble), applied in order;
    a tail cut short is left out, as Redis loads it."""
    from streamkeep.engine.wire.request_parser import ProtocolError, RequestParser
    from streamkeep.replication.redis_link import command_size

    data = piece.data
    parser = RequestParser()
    whole = 0  # the bytes of the commands taken (Redis writes every command the same way)
    what = "an AOF" if start == 0 else "AOF commands after the RDB preamble"
    for pos in range(start, len(data), CHUNK):
        parser.feed(data[pos:pos + CHUNK])
        while True:
            at = start + whole  # where the next command starts
            try:
                argv = parser.next()
            except ProtocolError as err:
                raise BadSource(f"{piece.path}: not {what}: {err}, in the command at byte "
                                f"{at}") from None
            if argv is None:
                break
            _command_at(piece, at, what)  # as Redis loads an AOF: no inline form
            if len(argv) == 1 and argv[0][:1] == b"#":
                whole += len(argv[0]) + 2
                continue  # an annotation (#TS:<unix time>), not a command
            whole += command_size(argv)
            applier.apply(argv, 0)
    at = start + whole
    if at < len(data):  # what is left must be a command cut short, not anything else
        _command_at(piece, at, what)
    report["truncated_bytes"] += max(len(data) - at, 0)


def _command_at(piece: Piece, at: int, what: str) -> None:
    """BadSource unless a command (`*`) or an annotation (`#`) starts at byte `at`."""
    from streamkeep.tools.sniff import shown

    if piece.data[at:at + 1] not in (b"*", b"#"):
        raise BadSource(f"{piece.path}: not {what}: byte {at} starts {shown(piece.data[at:])}, "
                        "where a command (*) was expected")


def _counts(engine: Any, applier: RedisApplier, streams: int, entries: int,
            strings: int) -> dict[str, Any]:
    """What is in DIR now (an AOF's commands make keys too), and what was left out."""
    with engine.lock:
        total_streams = sum(len(db) for db in engine.dbs)
        total_entries = sum(s.length for db in engine.dbs for s in db.values())
        total_strings = sum(len(db) for db in engine.strings)
        with_ttl = sum(len(db) for db in engine.expires)
        others = _other_keys(engine)
        scripting = engine.scripting
        functions = scripting.functions if scripting is not None else None
        libraries = 0 if functions is None else len(functions.libraries)
    return {"streams": total_streams, "entries": total_entries, "strings": total_strings,
            "other_keys": others, "expiries": with_ttl, "functions": libraries,
            "streams_from_rdb": streams,
            "entries_from_rdb": entries, "strings_from_rdb": strings,
            "other_keys_from_rdb": dict(applier.loaded_keys),
            "skipped": dict(applier.skipped_keys),
            "skipped_commands": dict(applier.skipped_commands),
            "failed_commands": applier.errors, "last_failure": applier.last_error,
            "expired_skipped": applier.expired_keys}


def _other_keys(engine: Any) -> dict[str, int]:
    """The keys of each type other than streams and strings (by TYPE's word), those it has."""
    from streamkeep.engine.model.value_types import STREAM, STRING, TYPES

    counts = {vt.name: sum(map(len, engine.keyspaces[vt.slot])) for vt in TYPES
              if vt not in (STREAM, STRING)}
    return {name: n for name, n in counts.items() if n}


def _install(staging: Any, directory: str) -> None:
    """The staging engine's state written as the snapshot of the new data directory at LSN 1
    (the manifest counts a snapshot as covering at least one record), with the first segment
    and the manifest around it. Nothing is synced here: `staged_directory` syncs the whole
    directory before publishing it."""
    from streamkeep.aof.fs import RealFS
    from streamkeep.aof.manifest import SnapshotEntry, new_repl_id, snapshot_file
    from streamkeep.aof.recovery import initialise_with_snapshot
    from streamkeep.engine.exec.functions import functions_payload
    from streamkeep.snapshot.layout import file_checksum
    from streamkeep.snapshot.reader import file_chunks
    from streamkeep.snapshot.writer import put_functions, write_snapshot

    name = snapshot_file(1)
    file = os.path.join(directory, name)
    repl_id = new_repl_id()
    created = int(time.time() * 1000)
    write_snapshot(staging.dbs, file, 1, created, repl_id, checksum=False,
                   values=staging.keyspaces, expires=staging.expires)
    payload = functions_payload(staging)  # the function libraries, as a compaction keeps them
    if payload is not None:
        put_functions(file, payload)
    crc32 = file_checksum(file_chunks(file))  # (of the whole file, libraries included)
    snapshot = SnapshotEntry(name, 1, os.path.getsize(file), created, crc32)
    initialise_with_snapshot(RealFS(), directory, snapshot, repl_id)


def _print(report: dict[str, Any], as_json: bool) -> None:
    from streamkeep.snapshot.rdb_types import stored_text

    if as_json:
        print(json.dumps(report, sort_keys=True))
        return
    version = f" (RDB {report['rdb_version']})" if report["rdb_version"] else ""
    others = "".join(f", {n:,} {name} key(s)" for name, n in report["other_keys"].items())
    if report["functions"]:
        n = report["functions"]
        others += f", {n:,} function {'library' if n == 1 else 'libraries'}"
    print(f"imported {report['streams']:,} stream(s), {report['entries']:,} entries, "
          f"{report['strings']:,} string(s){others} ({report['expiries']:,} key(s) with a TTL) "
          f"from {report['source']}{version} into {report['out']} in "
          f"{report['seconds']:.2f} s")
    for name, count in sorted(report["skipped"].items()):
        why = f"streamkeep stores {stored_text()} only"
        if name == "templated hash":  # (a hash, in an encoding not read here)
            why = "Redis 8.10's template encoding of hashes is not read"
        print(f"skipped {count:,} {name} key(s): {why}")
    for name, count in sorted(report["skipped_commands"].items()):
        print(f"skipped {count:,} {name.upper()} command(s): not a command streamkeep applies")
    if report["failed_commands"]:
        print(f"{report['failed_commands']:,} command(s) failed here; the last: "
              f"{report['last_failure']}")
    if report["expired_skipped"]:
        print(f"skipped {report['expired_skipped']:,} key(s) already expired")
    if report["truncated_bytes"]:
        print(f"left out the last {report['truncated_bytes']:,} byte(s): the AOF ends inside "
              f"a command (cut short)")
    if report["incomplete_transaction"]:
        print("left out a transaction without its EXEC at the end of the AOF")
