"""`streamkeep serve`: run the network server on a data directory.

Owns turning the command line and an optional redis.conf-style file into an opened Engine and a
running Server (command-line options win over the file), and the start-up/shut-down messages.
Must not touch: command semantics, the server's connection handling.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from typing import Any

EPILOG = """examples:
  streamkeep serve                                   ./data on 127.0.0.1:6390
  streamkeep serve --dir /var/lib/sk --appendfsync always --requirepass s3cret
  streamkeep serve --dir ./replica --port 6391 --replicaof 127.0.0.1 6390
                                                     a read-only replica of :6390
  streamkeep serve --dir ./copy --port 6391 --replicaof redis.internal 6379
                                                     a durable copy of a redis-server's streams
  streamkeep serve --config streamkeep.conf          redis.conf syntax (replicaof, ...)

exit status: 0 after a clean shutdown (SHUTDOWN, SIGTERM, SIGINT); 1 if the data directory
cannot be opened or the port cannot be listened on; 2 for a bad config file or option."""
DEFAULT_DIR = "./data"
DEFAULT_PORT = 6390
DEFAULT_BIND = "127.0.0.1"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help=f"data directory (default {DEFAULT_DIR})")
    parser.add_argument("--port", type=int, help=f"TCP port (default {DEFAULT_PORT}; 0: any)")
    parser.add_argument("--bind", help=f"addresses to listen on, space-separated "
                                       f"(default {DEFAULT_BIND})")
    parser.add_argument("--appendfsync", choices=("always", "everysec", "no"),
                        help="AOF fsync policy (default everysec)")
    parser.add_argument("--requirepass", help="password clients must AUTH with")
    parser.add_argument("--replicaof", nargs=2, metavar=("HOST", "PORT"),
                        help="follow this primary (streamkeep or redis-server) as a read-only replica")
    parser.add_argument("--masterauth", help="password to give the primary (--replicaof)")
    parser.add_argument("--config", metavar="FILE",
                        help="config file in redis.conf syntax (options below override it)")
    parser.add_argument("--loglevel", choices=("debug", "verbose", "notice", "warning"),
                        help="log verbosity (default notice)")
    # Not a Redis setting, so not in the config file: the crash bench rotates segments every
    # few commands with it.
    parser.add_argument("--aof-segment-max-bytes", type=int, metavar="BYTES",
                        help="AOF segment rotation size (default 64 MiB)")


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    """The config file's settings, then the command line's on top (Redis's precedence)."""
    settings: dict[str, Any] = {}
    if args.config:
        from streamkeep.engine.exec.config import read_config_file

        settings.update(read_config_file(args.config))
    for name in ("dir", "port", "bind", "appendfsync", "requirepass", "loglevel", "replicaof",
                 "masterauth", "aof_segment_max_bytes"):
        value = getattr(args, name)
        if value is not None:
            settings[name] = value
    settings.setdefault("dir", DEFAULT_DIR)
    settings.setdefault("port", DEFAULT_PORT)
    settings.setdefault("bind", DEFAULT_BIND)
    return settings


def main(args: argparse.Namespace) -> int:
    from streamkeep import Engine
    from streamkeep.engine.runtime.limits import DescriptorLimitError
    from streamkeep.engine.runtime.server import Server, install_loop_policy, run_server

    try:
        settings = settings_from(args)
    except (OSError, ValueError) as err:
        print(f"streamkeep: {err}", file=sys.stderr)
        return 2
    # Messages go to stderr; the loglevel setting (CONFIG SET loglevel too) filters them.
    logging.basicConfig(level=logging.DEBUG,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    path = os.path.abspath(str(settings.pop("dir")))
    port = int(settings.pop("port"))
    bind = str(settings.pop("bind"))
    loop_name = install_loop_policy()
    try:
        engine = Engine.open(path, config_file=os.path.abspath(args.config) if args.config
                             else None, **settings)
    except Exception as err:  # noqa: BLE001 - refuse to start, say why
        print(f"streamkeep: cannot open {path}: {err}", file=sys.stderr)
        return 1
    server = Server(engine, bind, port)
    # Everything alive now (modules, the replayed data set) stays alive: move it out of the
    # collector's generations, or each full collection walks all of it while every client
    # waits (pauses of 10+ ms, the delivery latency's tail, once the data set has grown).
    gc.collect()
    gc.freeze()

    def ready(srv: Server) -> None:
        print(f"streamkeep {srv.engine_version()} listening on {bind} port {srv.port} "
              f"({loop_name}); data in {path} (appendfsync "
              f"{engine.journal.policy if engine.journal else 'no'})", flush=True)

    try:
        run_server(server, ready)
    except DescriptorLimitError as err:
        engine.close()
        print(f"streamkeep: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        engine.close()
        print(f"streamkeep: cannot listen on {bind}:{port}: {err}", file=sys.stderr)
        return 1
    print("streamkeep: shut down cleanly", flush=True)
    return 0
