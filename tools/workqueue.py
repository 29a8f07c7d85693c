"""`streamkeep queue stats DIR|--url URL NAME`: a work queue's figures from the command line.

Owns the command's arguments and output: the figures of `StreamQueue.stats()` (length,
pending, lag, oldest pending age, consumers and their idle times, dead letters) for a queue in
a data directory (opened while no server holds it, or through its shared server: the one
running, or with --shared one started) or on a server (`--url`, a streamkeep serve or a Redis
8.8+), as a table or as JSON. Never creates or changes a queue.
Must not touch: the queue's semantics (engine.services.queue), the data directory's files.

Exit status: 0 ok; 2 no such queue or group; 3 usage or I/O error (a data directory in use,
a server that cannot be reached).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError

HELP = "a durable work queue's figures: length, pending, lag, consumers, dead letters"
EXIT_NO_QUEUE, EXIT_USAGE = 2, 3
READ_ATTEMPTS = 5  # reads of a shared directory whose server is killed meanwhile: asked again
EPILOG = """examples:
  streamkeep queue stats ./data jobs         a queue in a data directory
  streamkeep queue stats --url redis://localhost:6379 jobs --group workers
  streamkeep queue stats ./data jobs --json  for scripts
  streamkeep queue stats ./data jobs --shared
                                             through the directory's shared
                                             server (started if none runs)

A data directory is opened in this process (its snapshot loaded, its AOF replayed) while no
server holds it; while its shared server runs (Engine.open(path, shared=True)) the figures
come from that server; for another server use --url. Idle times are in milliseconds.

exit status: 0 ok; 2 no such queue or group; 3 usage or I/O error; 130 interrupted."""


def add_commands(sub: Any) -> None:
    p_queue = sub.add_parser("queue", help=HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    queue_sub = p_queue.add_subparsers(dest="queue_command", metavar="COMMAND")
    queue_sub.required = True
    p_stats = queue_sub.add_parser("stats", help=HELP, description=HELP, epilog=EPILOG,
                                   usage="streamkeep queue stats (DIR | --url URL) NAME\n"
                                         "       [--group G] [--dead-letter D] [--json]",
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p_stats.add_argument("where", nargs="+", metavar="[DIR] NAME",
                         help="a data directory and the queue's name (its stream), or only "
                              "the name with --url")
    p_stats.add_argument("--url", help="a server: redis://host:port[/db] (streamkeep serve or "
                                       "Redis 8.8+)")
    p_stats.add_argument("--group", default="workers", help="the consumer group (default "
                                                            "workers)")
    p_stats.add_argument("--dead-letter", help="the dead-letter stream (default NAME:dead)")
    p_stats.add_argument("--shared", action="store_true",
                         help="open DIR in shared mode: through its server, started if none "
                              "runs (as Engine.open(DIR, shared=True))")
    p_stats.add_argument("--json", action="store_true", help="print JSON")
    p_stats.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    where = list(args.where)
    if len(where) != (1 if args.url else 2):
        print("streamkeep queue stats: give DIR NAME, or --url URL NAME", file=sys.stderr)
        return EXIT_USAGE
    name = where[-1]
    try:
        client, redis_api, close = _connect(args.url, None if args.url else where[0],
                                            args.shared)
    except _Unavailable as err:
        print(f"streamkeep queue stats: {err}", file=sys.stderr)
        return EXIT_USAGE
    from streamkeep.engine.services.queue import QueueError
    from streamkeep.engine.wire.errors import ReplyError

    errors: tuple[type[Exception], ...] = (QueueError, ReplyError)
    if args.url:
        import redis

        errors += (redis.ResponseError,)
    try:
        missing, stats = figures(client, redis_api, name, args.group, args.dead_letter, errors)
        if missing:
            print(f"streamkeep queue stats: {missing}", file=sys.stderr)
            return EXIT_NO_QUEUE
    except errors as err:
        print(f"streamkeep queue stats: {name}: {err}", file=sys.stderr)
        return EXIT_NO_QUEUE
    finally:
        close()
    doc = to_json(name, args.group, stats)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        render(doc, sys.stdout)
    return 0


def figures(client: Any, redis_api: Any, name: str, group: str, dead_letter: str | None,
            errors: tuple[type[Exception], ...]) -> tuple[str | None, dict[str, Any]]:
    """(what is missing, in words, or None; the queue's figures): read through `client` (an
    Engine, a shared directory's or a redis-py client) and `redis_api` (its redis-py methods).
    A shared server killed while it read is asked again: the reads change nothing, and the
    shared client's next call starts the directory's new server."""
    from streamkeep.engine.services.shared_client import ServerLost

    for _attempt in range(READ_ATTEMPTS - 1):
        with contextlib.suppress(ServerLost):
            return _read_figures(client, redis_api, name, group, dead_letter, errors)
    return _read_figures(client, redis_api, name, group, dead_letter, errors)


def _read_figures(client: Any, redis_api: Any, name: str, group: str, dead_letter: str | None,
                  errors: tuple[type[Exception], ...]) -> tuple[str | None, dict[str, Any]]:
    from streamkeep.engine.services.queue import StreamQueue

    missing = _missing(redis_api, name, group, errors)
    if missing:
        return missing, {}
    queue = StreamQueue(client, name, group=group, dead_letter=dead_letter, create=False)
    return None, queue.stats()


def _missing(redis_api: Any, name: str, group: str,
             errors: tuple[type[Exception], ...]) -> str | None:
    """What the command line names that does not exist (the stream, or its group), in words;
    None when both do. (The queue's own error says a group "is gone": right for a worker whose
    group was destroyed under it, not for a name mistyped here.) `redis_api`: redis-py's
    methods, a client's or an Engine's (`Engine.redis()`)."""
    try:
        groups = redis_api.xinfo_groups(name)
    except errors as err:
        if "no such key" in str(err):
            return f"no queue {name}: no such stream"
        raise
    names = [g["name"] if isinstance(g["name"], bytes) else str(g["name"]).encode()
             for g in groups]
    if group.encode() in names:
        return None
    have = ", ".join(n.decode(errors="replace") for n in names) or "none"
    return f"queue {name} has no group {group} (its groups: {have}; --group names one)"


class _Unavailable(StreamkeepError):
    """A data directory or server the command cannot use (said to the user, exit 3)."""


def _connect(url: str | None, path: str | None, shared: bool = False
             ) -> tuple[Any, Any, Any]:
    """(client, its redis-py methods, close): an Engine on the data directory (in process, or
    through its shared server), or a redis-py client of the URL."""
    if url is not None:
        import redis

        try:
            client = redis.Redis.from_url(url)
            client.ping()
        except (ValueError, redis.RedisError) as err:
            raise _Unavailable(f"{url}: {err}") from None
        return client, client, client.close
    import os

    from streamkeep import Engine
    from streamkeep.aof.fs import LockedError

    assert path is not None
    from streamkeep.aof.manifest import MANIFEST

    if not os.path.isfile(os.path.join(path, MANIFEST)):  # (opening would make one)
        raise _Unavailable(f"{path}: not a data directory (no {MANIFEST})")
    from streamkeep.engine.services.shared import held_by, serving

    try:
        try:
            engine = Engine.open(path, shared=True) if shared or serving(path) is not None \
                else Engine.open(path, auto_aof_rewrite_percentage=0)
        except LockedError:
            holder = held_by(path)
            if holder is None or not holder.shared:
                raise
            # The directory's shared server holds it but did not answer yet (one starting,
            # another process's replacement of a server that was killed): reached through it.
            engine = Engine.open(path, shared=True)
    except LockedError as err:
        raise _Unavailable(_held(path, err)) from None
    except (StreamkeepError, OSError, ValueError) as err:
        raise _Unavailable(f"{path}: {err}") from None
    return engine, engine.redis(), engine.close


def _held(path: str, err: Exception) -> str:
    """The refusal of a data directory another process holds, in words saying how to get at
    its queues instead: through that server (`--url`, its address) when it is a `streamkeep
    serve`; else close it there. (--shared cannot help: the holder did not open it shared, or
    its server would have answered.)"""
    from streamkeep.engine.services.shared import held_by

    holder = held_by(path)
    if holder is None:  # (let go since: another try may work)
        return f"{path}: {err}"
    if holder.serve:
        reach = (f": connect to that server, --url {holder.url}" if holder.url is not None
                 else ": connect to that server with --url")
        return f"data directory is in use: {path} is held by {holder.describe()}{reach}"
    return (f"data directory is in use: {path} is open in {holder.describe()}: close it there, "
            "or if that process serves it, connect to its server with --url")


def to_json(name: str, group: str, stats: dict[str, Any]) -> dict[str, Any]:
    return {"queue": name, "group": group,
            **{k: v for k, v in stats.items() if k != "consumers"},
            "consumers": {c.decode(errors="replace"): idle
                          for c, idle in sorted(stats["consumers"].items())}}


def render(doc: dict[str, Any], stream: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from streamkeep.tools.text_width import print_table, width

    columns = width(stream)  # COLUMNS, the terminal's, or 80 when piped
    console = Console(file=stream, highlight=False, soft_wrap=False, width=columns)

    def n(v: Any) -> str:
        return "-" if v is None else f"{v:,}"

    summary = Table(title=f"queue {doc['queue']} (group {doc['group']})", title_justify="left",
                    title_style="bold", show_header=False)
    summary.add_column("")
    summary.add_column("", justify="right")
    for label, key in (("length (entries in the stream)", "length"),
                       ("pending (delivered, not acknowledged)", "pending"),
                       ("lag (not yet delivered)", "lag"),
                       ("oldest pending, ms idle", "oldest_pending_ms"),
                       ("dead letters", "dead")):
        summary.add_row(label, n(doc[key]))
    print_table(console, summary, columns)
    consumers = Table(title="consumers", title_justify="left", title_style="bold")
    consumers.add_column("consumer")
    consumers.add_column("idle ms", justify="right")
    for consumer, idle in doc["consumers"].items():
        consumers.add_row(consumer, n(idle))
    print_table(console, consumers, columns)
