"""`streamkeep url DIR`: the `unix://` URL a Redis client takes for a shared data directory.

Owns the command's arguments and output: the URL of the directory's shared-mode socket
(`DIR/shared.sock`, the only address its server listens on) in the form redis-py's
`from_url` parses (`unix://PATH?db=N`; the directory's `requirepass`, when its shared.conf
sets one, as `unix://:PASSWORD@PATH?db=N`), as a line or as JSON, and with
`--start` the directory's server started when none answers, as `Engine.open(DIR,
shared=True)` starts it (engine.services.shared). The frameworks built on redis-py or coredis
(arq, pydocket, streaq, taskiq-redis) hand such a URL to their client unchanged.
Must not touch: the directory's data files and settings (it reads shared.conf, never writes
it), the server's life once started (its own idle rule ends it).

Exit status: 0 ok; 3 usage error, or a directory that is missing, not a streamkeep data
directory, not accessible, or whose server cannot start.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any
from urllib.parse import quote

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools.exits import EXIT_USAGE

HELP = "print the unix:// URL (redis-py, arq, pydocket, streaq, taskiq) of a shared data " \
       "directory"
DATABASES = 16  # (every streamkeep server's: its `databases` setting cannot be changed)
EPILOG = """examples:
  streamkeep url ./jobs              unix:///srv/app/jobs/shared.sock?db=0
  streamkeep url ./jobs --db 2       the same, database 2
  streamkeep url ./jobs --start      the directory's server started if none
                                     runs, then its URL
  streamkeep url ./jobs --json       url, socket, db, the server's pid
  arq tasks.WorkerSettings           with WorkerSettings.redis_settings =
                                     RedisSettings.from_dsn(URL)
  docket worker --docket images --tasks tasks:tasks \\
      --url "$(streamkeep url --start ./jobs)"

The URL names DIR/shared.sock, the Unix socket the directory's shared server
listens on (Engine.open(DIR, shared=True) or `streamkeep serve --shared`
starts it). Without --start the URL is printed whether or not a server runs
(stderr says when none does). --start starts one as Engine.open(DIR,
shared=True) does (DIR made if missing), detached: it keeps running until
SHUTDOWN, or until no client has been connected for idle-shutdown seconds (30
by default; CONFIG SET idle-shutdown 0, then CONFIG REWRITE, keeps it for
good). A directory whose shared.conf sets requirepass gets it in the URL:
unix://:PASSWORD@/srv/app/jobs/shared.sock?db=0.

exit status: 0 ok; 3 usage error, or DIR missing, not a streamkeep data
directory, not accessible, or its server cannot start; 130 interrupted."""


class _Refused(StreamkeepError):
    """A directory the command cannot give a URL for (said to the user, exit 3)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", metavar="DIR", help="the shared data directory")
    parser.add_argument("--db", type=_database, default=0, metavar="N",
                        help="the database the URL selects (default 0)")
    parser.add_argument("--start", action="store_true",
                        help="start the directory's server if none runs (it keeps running "
                             "until SHUTDOWN or its idle-shutdown)")
    parser.add_argument("--json", action="store_true",
                        help="print JSON: url, dir, socket, db, running, pid, started")


def _database(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value}: a database number is 0 or more")
    return value


def main(args: argparse.Namespace) -> int:
    try:
        doc = describe(args.dir, args.db, args.start)
    except _Refused as err:
        print(f"streamkeep url: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(doc["url"])
    if doc["pid"] is None:
        print(f"streamkeep url: {_not_running(doc['dir'])}", file=sys.stderr)
    return 0


def describe(path: str, db: int = 0, start: bool = False) -> dict[str, Any]:
    """The URL of the directory `path` and what stands behind it: {"url", "dir", "socket",
    "db", "running", "pid", "started"}. _Refused for a directory that has none."""
    from streamkeep.aof.manifest import SHARED_SOCKET
    from streamkeep.engine.services.shared import MAX_SOCKET_PATH, serving

    where = os.path.abspath(path)
    settings = _checked(where, start)
    socket_file = os.path.join(where, SHARED_SOCKET)
    # (a client given a socket path longer than an address may be cannot connect by it:
    # shared mode's own client reaches such a socket another way)
    if len(os.fsencode(socket_file)) > MAX_SOCKET_PATH:
        raise _Refused(f"{where}: its socket's path ({socket_file}) is longer than a Unix "
                       f"socket address may be ({MAX_SOCKET_PATH} bytes): no client can "
                       "connect to it by that path; give the directory a shorter path (a "
                       "symbolic link to it works)")
    if db >= DATABASES:
        raise _Refused(f"--db {db}: a data directory has {DATABASES} databases "
                       f"(0 to {DATABASES - 1})")
    pid = serving(where)
    started = False
    if pid is None and start:
        pid = _start(where)
        started = True
    return {"url": unix_url(socket_file, db, settings.get("requirepass") or None),
            "dir": where, "socket": socket_file, "db": db, "running": pid is not None,
            "pid": pid, "started": started}


def unix_url(socket_file: str, db: int = 0, password: str | None = None) -> str:
    """`unix://` + the socket's absolute path + `?db=N`, and the password (`unix://:PASSWORD@`)
    when the server asks for one. Only the characters that would end the path or the
    password early are percent-quoted (redis-py unquotes them; arq and coredis take the path
    as it is written, so a plain path is left plain)."""
    auth = f":{quote(password, safe='')}@" if password else ""
    path = "".join(_QUOTED.get(c, c) for c in socket_file)
    return f"unix://{auth}{path}?db={db}"


_QUOTED = {c: quote(c, safe="") for c in "%?#"}


def _checked(where: str, start: bool) -> dict[str, Any]:
    """The directory's shared-mode settings (shared.conf's; {} without one) once it is known
    to be a streamkeep data directory this process can reach; _Refused otherwise. With
    `start`, a missing directory is one Engine.open(shared=True) would make, as is an empty
    one."""
    from streamkeep.aof.manifest import MANIFEST, SHARED_CONF

    try:
        names = os.listdir(where)
    except FileNotFoundError:
        if start and os.path.isdir(os.path.dirname(where)):
            return {}
        raise _Refused(f"{where}: no such directory") from None
    except NotADirectoryError:
        raise _Refused(f"{where}: not a directory") from None
    except PermissionError:
        raise _Refused(f"{where}: not accessible (permission denied)") from None
    if not os.access(where, os.R_OK | os.W_OK | os.X_OK):
        raise _Refused(f"{where}: not accessible (this user may not read and write it)")
    if MANIFEST not in names and SHARED_CONF not in names and not (start and not names):
        raise _Refused(f"{where}: not a streamkeep data directory (no {MANIFEST} or "
                       f"{SHARED_CONF})")
    if SHARED_CONF not in names:
        return {}
    from streamkeep.engine.exec.settings import read_config_file

    try:
        return read_config_file(os.path.join(where, SHARED_CONF))
    except OSError as err:
        raise _Refused(f"{where}: {SHARED_CONF}: {err.strerror or err}") from None
    except StreamkeepError as err:
        raise _Refused(f"{where}: {SHARED_CONF}: {err}") from None


def _start(where: str) -> int:
    """Start the directory's server as Engine.open(where, shared=True) does (one connection,
    closed at once: the server stays until its idle rule ends it); its pid."""
    from streamkeep.aof.fs import LockedError
    from streamkeep.engine.services.shared import SharedDirectory, serving

    try:
        directory = SharedDirectory(where, {})
        try:
            directory.connect().close()
        except StreamkeepError:
            # A server that asks for a password (requirepass) refuses the starter's PING, yet
            # it is up: the URL carries the password.
            if serving(where) is None:
                raise
    except LockedError as err:
        raise _Refused(str(err)) from None
    except (StreamkeepError, OSError) as err:
        raise _Refused(f"{where}: {err}") from None
    pid = serving(where)
    if pid is None:  # (it answered, then left at once: shut down meanwhile)
        raise _Refused(f"{where}: its shared server started, then went away")
    return pid


def _not_running(where: str) -> str:
    """The stderr note for a URL nothing answers on yet: how to start its server, or who
    holds the directory instead."""
    from streamkeep.engine.services.shared import held_by

    holder = held_by(where)
    if holder is None:
        return (f"no server runs on {where} now: start it with `streamkeep url --start` or "
                "`streamkeep serve --shared --dir DIR --daemonize` (or open it with "
                "Engine.open(DIR, shared=True))")
    if holder.serve and holder.url is not None:
        return (f"{where} is held by {holder.describe()}, not a shared server: nothing "
                f"answers on its socket; connect to {holder.url} instead")
    return (f"{where} is open in {holder.describe()} without shared mode: nothing answers on "
            "its socket until that process closes it")
