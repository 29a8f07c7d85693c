"""`streamkeep export-rdb DIR --out dump.rdb`: a data directory's keys (streams, strings and
every other type streamkeep stores: sorted sets, ...), with their TTLs, and its function
libraries (FUNCTION LOAD's, as function records), as an RDB file that redis-server loads, for
moving back to Redis.

Owns the command's arguments, the report and the exit status. The state exported is DIR's
latest: its snapshot and every record after it, read through a point-in-time copy
(tools.inspect.restore.current_state, made in a scratch directory beside --out) so that DIR is
never locked or changed and a server may be running on it. Where the file may go and how it is
written are tools.safe_output' rules: never inside a data directory, never over an existing file
without --force, written beside --out and renamed into place once whole and fsynced. Every
database is kept; every TTL is written as Redis writes it (EXPIRETIME_MS before the key), a key
already expired included (redis-server skips it when it loads the file, as it does its own).
The RDB version is by default the oldest that holds the data exactly (snapshot.rdb's
`version_needed` of each stream, and what each other value's codec says it needs, its `needs`:
so that the oldest redis-server possible loads it), or the one asked (a warning says what an
older one loses of a stream; a value whose codec needs a newer version is refused); which it
is, why, and which Redis versions load it goes to stderr and the JSON report.
Must not touch: the RDB format (snapshot.rdb writes it), the directory's files.

Exit status: 0 written; 2 DIR cannot be read (not a data directory, damaged); 3 usage or I/O
error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from itertools import chain
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError  # stdlib only behind it
from streamkeep.tools.progress import Steps

HELP = ("write a data directory's keys (every type) and functions as a dump.rdb that "
        "redis-server loads")
EXIT_UNREADABLE, EXIT_USAGE = 2, 3
REDIS_VERSIONS = ("9: Redis 5.0 and later; 10: 7.0; 11: 7.2 (and Valkey 8 and 9);\n"
                  "  12: 7.4 and 8.0-8.4; 13: 8.6; 14: 8.8; 15: 8.10 and later")
VERSIONS = range(9, 16)  # the RDB versions written (15: what Redis 8.10 writes)
EPILOG = f"""examples:
  streamkeep export-rdb ./data --out dump.rdb          the oldest that holds it
  streamkeep export-rdb ./data --out dump.rdb --rdb-version 10    for Redis 7.0
  streamkeep export-rdb ./data --out dump.rdb --json   the report for scripts
  streamkeep export-rdb ./data --out dump.rdb --force  replace an existing file

Then stop redis-server, put dump.rdb in its `dir` (as its `dbfilename`; with
appendonly off, or it loads its AOF instead) and start it. DIR may be in use by
a running server: its state is read from a copy, never changed.

The RDB version is by default the oldest that holds the data exactly, so that
the oldest redis-server possible loads it: 9 for streams without deletions,
trims or consumer groups that are behind, 10 for those and for function
libraries (FUNCTION LOAD's, written as function records that redis-server
loads with the keys), 11 for a consumer whose active time is apart from its
seen time, 13 for idempotent producers (IDMP), 14 for entries XNACK released
(Redis 8.8's NACK zone). Which version was written, why, and which Redis
versions load it is printed on stderr (and in --json). --rdb-version N writes
version N whatever the data; a warning then says what it loses. redis-server
refuses an RDB version newer than its own:
  {REDIS_VERSIONS}

The file is written beside FILE and renamed into place once complete: an error
or Ctrl-C leaves no partial file. An existing FILE is replaced only with
--force; FILE is never written inside a data directory. Progress goes to stderr
when it is a terminal.

exit status: 0 written; 2 DIR cannot be read; 3 usage or I/O error (FILE exists
without --force, is not a regular file, or is inside a data directory); 130
interrupted (Ctrl-C: FILE is left as it was, and nothing beside it)."""
# What each version's file says wrote it (the AUX field redis-ver): a Redis that writes it.
REDIS_VER = {9: b"6.2.0", 10: b"7.0.0", 11: b"7.2.0", 12: b"7.4.0", 13: b"8.6.0", 14: b"8.8.0",
             15: b"8.10.0"}


def rdb_version_arg(text: str) -> int:
    """--rdb-version's value: a version streamkeep writes (argparse's error names them)."""
    try:
        version = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if version not in VERSIONS:
        raise argparse.ArgumentTypeError(
            f"RDB version {version} is not one streamkeep writes: {VERSIONS[0]} to "
            f"{VERSIONS[-1]} ({REDIS_VERSIONS.replace(chr(10) + '  ', ' ')})")
    return version


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="DIR", help="a streamkeep data directory")
    parser.add_argument("--out", required=True, metavar="FILE", help="the RDB file to write")
    parser.add_argument("--rdb-version", type=rdb_version_arg, default=None, metavar="N",
                        help="RDB version to write, 9 to 15 (default: the oldest that holds "
                             "the data exactly)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists")


# The command's steps on stderr: each as it starts on a terminal, else a line every few seconds.
_STEPS = Steps("streamkeep export-rdb", "exporting")


def main(args: argparse.Namespace) -> int:
    with _STEPS:
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    from streamkeep.tools.inspect.restore import Impossible, Usage, current_state
    from streamkeep.tools.safe_output import OutputRefused, check_output, scratch_directory

    began = time.perf_counter()
    works: list[str] = []

    def fail(message: str, status: int) -> int:
        # The work goes through a copy of DIR beside --out: the user's names only.
        for work in works:
            message = message.replace(os.path.join(work, "state"),
                                      os.path.abspath(args.path).rstrip("/"))
        print(f"streamkeep export-rdb: {message}", file=sys.stderr)
        return status

    try:
        check_output(args.out, directory=False, force=args.force, sources=[args.path])
        with scratch_directory(args.out, "export-rdb") as work:
            works.append(work)
            _STEPS.start(f"copying the state of {args.path}")
            with current_state(args.path, work) as (engine, lsn):
                _STEPS.start("loading it and writing the RDB file")
                report = _write(engine, args.out, args.rdb_version, args.force)
    except (OutputRefused, Unwritable) as err:
        return fail(str(err), EXIT_USAGE)
    except Usage as err:
        return fail(str(err), EXIT_UNREADABLE if os.path.isdir(args.path) else EXIT_USAGE)
    except Impossible as err:
        return fail(f"{args.path}: {err}", EXIT_UNREADABLE)
    except StreamkeepError as err:  # damage the copy's load found, or records that fail
        return fail(f"{args.path}: cannot be read: {err}", EXIT_UNREADABLE)
    except OSError as err:
        return fail(f"{err.filename or args.out}: {err.strerror or err}", EXIT_USAGE)
    report.update(source=args.path, out=args.out, lsn=lsn,
                  seconds=round(time.perf_counter() - began, 3))
    _say_version(report)
    _print(report, args.json)
    return 0


def _write(engine: Any, out: str, asked: int | None, force: bool) -> dict[str, Any]:
    from streamkeep.snapshot import rdb_types  # noqa: F401  (every type's codec registered)
    from streamkeep.snapshot.rdb import REDIS_LOADING, key_text, write_rdb
    from streamkeep.snapshot.rdb_functions import FUNCTIONS_VERSION
    from streamkeep.tools.safe_output import write_file

    with engine.lock:
        streams = sum(len(keyspace) for keyspace in engine.dbs)
        entries = sum(s.length for keyspace in engine.dbs for s in keyspace.values())
        strings = sum(len(values) for values in engine.strings)
        with_ttl = sum(len(expires) for expires in engine.expires)
        others = _other_keys(engine)
        needs = _value_needs(engine)
        needed, why = _needed(engine, needs)
    version = needed if asked is None else asked
    with engine.lock:
        libraries = _libraries(engine)
    refused = [need for need in needs if need[0] > version]
    if refused:
        at_least, what, name, db, key = refused[0]
        since = REDIS_VER[at_least].decode().rsplit(".", 1)[0]
        raise Unwritable(f"RDB {version} cannot hold the {what} of {name} {key_text(key)} "
                         f"(db {db}): no Redis before {since} has {what} (RDB {at_least} or "
                         f"later holds it)")
    if libraries and version < FUNCTIONS_VERSION:
        raise Unwritable(f"RDB {version} cannot hold the {len(libraries)} function "
                         f"librar{'y' if len(libraries) == 1 else 'ies'} of this data (FUNCTION "
                         f"LOAD): no Redis before 7.0 has functions (RDB {FUNCTIONS_VERSION} "
                         f"or later holds them)")
    aux = [(b"redis-ver", REDIS_VER[version]), (b"redis-bits", b"64"),
           (b"ctime", str(int(time.time())).encode()), (b"aof-base", b"0"),
           (b"streamkeep", b"export-rdb")]
    with engine.lock:
        size = write_file(out, write_rdb(version, aux, _databases(engine), libraries),
                          force=force)
    return {"streams": streams, "entries": entries, "strings": strings, "expiries": with_ttl,
            "other_keys": others, "functions": len(libraries), "bytes": size, "rdb_version": version, "rdb_version_asked": asked,
            "rdb_version_needed": needed, "rdb_version_why": why,
            "redis_versions": REDIS_LOADING[version]}


def _needed(engine: Any, needs: list[Need]) -> tuple[int, str]:
    """The oldest RDB version that holds every stream exactly (and every other value, `needs`:
    a hash's field expiry needs RDB 12; the function libraries: RDB 10), and what needs it:
    the first stream or value (by type, database and name) that does, and how many do (""
    when none needs more than the oldest)."""
    from streamkeep.snapshot.rdb import MIN_VERSION, key_text, version_needed
    from streamkeep.snapshot.rdb_functions import FUNCTIONS_VERSION
    from streamkeep.snapshot.rdb_types import formats_of

    needed, why, count = MIN_VERSION, "", 0
    for db, keyspace in enumerate(engine.dbs):
        for key in sorted(keyspace):
            version, what = version_needed(keyspace[key])
            if version > needed:
                needed, count = version, 0
                why = f"{what} of stream {key_text(key)} (db {db})"
            count += version == needed and version > MIN_VERSION
    if count > 1:
        why += f", and {count - 1} more stream(s)"
    top = max((need[0] for need in needs), default=MIN_VERSION)
    if top > needed:
        those = [need for need in needs if need[0] == top]
        needed, what, name, db, key = those[0]
        why = f"{what} of {name} {key_text(key)} (db {db})"
        if len(those) > 1:
            formats = formats_of(name)
            more = name if len(those) == 2 or formats is None else formats.plural
            why += f", and {len(those) - 1} more {more}"
    libraries = len(_libraries(engine))
    if libraries and needed < FUNCTIONS_VERSION:
        needed = FUNCTIONS_VERSION
        why = f"the function librar{'y' if libraries == 1 else 'ies'} ({libraries})"
    return needed, why


def _libraries(engine: Any) -> list[bytes]:
    """The code of each function library the engine holds (FUNCTION LOAD's argument), in the
    order FUNCTION DUMP writes them; none if nothing ever loaded one."""
    scripting = engine.scripting
    functions = scripting.functions if scripting is not None else None
    return [] if functions is None else list(functions.codes())


# A value that needs more than the oldest RDB version: (that version, what of it needs it, its
# type's name, db, key).
Need = tuple[int, str, str, int, bytes]


def _value_needs(engine: Any) -> list[Need]:
    """Every value whose codec says it needs more than the oldest RDB version (snapshot.rdb's
    ValueCodec.needs: a hash's field expiry), by type (the registry's order), database and
    name. (A stream's codec says none: what an older version loses of it is
    `version_needed`'s.)"""
    from streamkeep.engine.model.value_types import TYPES
    from streamkeep.snapshot.rdb import MIN_VERSION, class_codec

    found: list[Need] = []
    for vt in TYPES:
        codec = class_codec(vt.value_class)
        needs = None if codec is None else codec.needs
        if needs is None:
            continue
        for db, space in enumerate(engine.keyspaces[vt.slot]):
            for key in sorted(space):
                version, what = needs(space[key])
                if version > MIN_VERSION:
                    found.append((version, what, vt.name, db, key))
    return found


class Unwritable(StreamkeepError):
    """The data cannot be written in the RDB version asked (no such version holds it)."""


def _say_version(report: dict[str, Any]) -> None:
    """Which RDB version was written, why, and which Redis versions load it (stderr)."""
    version, needed, why = (report["rdb_version"], report["rdb_version_needed"],
                            report["rdb_version_why"])
    loads = f"RDB version {version}, which {report['redis_versions']} load"
    if report["rdb_version_asked"] is None:
        because = f"needed for {why}" if why else "no stream needs a newer one"
        print(f"streamkeep export-rdb: wrote {loads} (the oldest that holds this data: "
              f"{because})", file=sys.stderr)
        return
    print(f"streamkeep export-rdb: wrote {loads} (as asked)", file=sys.stderr)
    if version < needed:
        print(f"streamkeep export-rdb: warning: RDB {version} does not hold all of this data: "
              f"{why} needs RDB {needed}, and is lost (redis-server fills in what its loader "
              f"would)", file=sys.stderr)


def _databases(engine: Any) -> Iterator[tuple]:
    """Each database that holds a key, as write_rdb takes it: (db, keys, keys with a TTL,
    (key, value, expiry or None) for each key), its streams first, then its strings, then the
    keys of each other type (engine.model.value_types' order; snapshot.rdb's codec of the
    value's class writes it)."""
    for db in range(len(engine.dbs)):
        spaces = [keyspace[db] for keyspace in engine.keyspaces]
        expires = engine.expires[db]
        count = sum(map(len, spaces))
        if not count:
            continue
        items = chain.from_iterable(((key, v, expires.get(key)) for key, v in space.items())
                                    for space in spaces)
        yield db, count, len(expires), items


def _other_keys(engine: Any) -> dict[str, int]:
    """The keys of each type other than streams and strings (by TYPE's word), those it has."""
    from streamkeep.engine.model.value_types import STREAM, STRING, TYPES

    counts = {vt.name: sum(map(len, engine.keyspaces[vt.slot])) for vt in TYPES
              if vt not in (STREAM, STRING)}
    return {name: n for name, n in counts.items() if n}


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, sort_keys=True))
        return
    others = "".join(f", {n:,} {name} key(s)" for name, n in report["other_keys"].items())
    if report["functions"]:
        n = report["functions"]
        others += f", {n:,} function {'library' if n == 1 else 'libraries'}"
    print(f"wrote {report['streams']:,} stream(s), {report['entries']:,} entries, "
          f"{report['strings']:,} string(s){others} ({report['expiries']:,} key(s) with a TTL; "
          f"{report['bytes']:,} bytes, RDB {report['rdb_version']}) from {report['source']} "
          f"at LSN {report['lsn']} to {report['out']} in {report['seconds']:.2f} s")
