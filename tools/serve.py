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
import socket
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamkeep.engine.server.listeners import DEFAULT_BIND
from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools.memory_defaults import apply_memory_defaults

if TYPE_CHECKING:
    from streamkeep.engine.server.shared_mode import Daemon, Identity

EPILOG = """examples:
  streamkeep serve                           ./data on 127.0.0.1:6390
  streamkeep serve --dir /var/lib/sk --appendfsync always --requirepass s3cret
  streamkeep serve --dir ./replica --port 6391 --replicaof 127.0.0.1 6390
                                             a read-only replica of :6390
  streamkeep serve --dir ./copy --port 6391 --replicaof redis.internal 6379
                                             a durable copy of a redis-server's
                                             streams
  streamkeep serve --cluster-enabled yes     a cluster of one node: every hash
                                             slot, for cluster clients
  streamkeep serve --config streamkeep.conf  redis.conf syntax (replicaof, ...)
  streamkeep serve --unixsocket /run/sk.sock --unixsocketperm 700
                                             a Unix socket as well as the port
  streamkeep serve --shared --dir ./jobs     the directory's shared server:
                                             ./jobs/shared.sock only, the
                                             settings in ./jobs/shared.conf

The port is bound first, then the data directory is opened (made if missing)
and replayed: a busy port leaves no directory behind.

--shared serves the directory as Engine.open(path, shared=True) does (that
call starts it itself, with --daemonize): on DIR/shared.sock, mode 700, and no
TCP port; DIR/shared.conf's settings (before the command line's); it shuts down
once no client has been connected for idle-shutdown seconds (0: never). It
refuses to start while another server answers on that socket.

exit status: 0 after a clean shutdown (SHUTDOWN, SIGTERM, SIGINT, SIGHUP: a
compaction under way is abandoned, its child stopped and its files removed), or
with --daemonize once the detached server serves; 1 if the port or socket
cannot be listened on or the data directory cannot be opened; 3 for
a bad option or config file (a port outside 0-65535, an address that does not
parse); 4 if the data directory is open in another process (its LOCK is
held); 130 (SIGTERM: 143, SIGHUP: 129) if interrupted while the data directory
is replayed at start-up (its lock released, the directory as it was)."""
DEFAULT_DIR = "./data"
DEFAULT_PORT = 6390
EXIT_UNAVAILABLE, EXIT_USAGE = 1, 3
SHARED_SOCKET_PERM = 0o700  # a shared directory's socket: its owner's only


class _Refused(StreamkeepError):
    """serve cannot start: the one line to print, and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help=f"data directory (default {DEFAULT_DIR})")
    parser.add_argument("--port", type=int, help=f"TCP port, 0-65535 (default {DEFAULT_PORT}; "
                                                 f"0: any free one)")
    parser.add_argument("--bind", help=f"addresses to listen on, space-separated "
                                       f"(default {DEFAULT_BIND})")
    parser.add_argument("--appendfsync", choices=("always", "everysec", "no"),
                        help="AOF fsync policy (default everysec)")
    parser.add_argument("--requirepass", help="password clients must AUTH with")
    parser.add_argument("--replicaof", nargs=2, metavar=("HOST", "PORT"),
                        help="follow this primary (streamkeep or redis-server) as a read-only replica")
    parser.add_argument("--masterauth", help="password to give the primary (--replicaof)")
    parser.add_argument("--masteruser", help="the user to authenticate as with the primary "
                                             "(--replicaof; with --masterauth)")
    parser.add_argument("--tls-port", type=int, metavar="PORT",
                        help="also accept TLS connections on this port (with --port 0: TLS "
                             "only); needs --tls-cert-file and --tls-key-file")
    parser.add_argument("--tls-cert-file", metavar="FILE", help="the server's certificate (PEM)")
    parser.add_argument("--tls-key-file", metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--tls-ca-cert-file", metavar="FILE",
                        help="CA certificates clients' (and a primary's) are checked against")
    parser.add_argument("--tls-auth-clients", choices=("yes", "no", "optional"),
                        help="whether TLS clients must present a certificate (default yes)")
    parser.add_argument("--tls-replication", choices=("yes", "no"),
                        help="connect to the primary (--replicaof) over TLS")
    parser.add_argument("--cluster-enabled", choices=("yes", "no"),
                        help="serve as a Redis Cluster node (alone: every hash slot, so a "
                             "cluster client works against this one process)")
    parser.add_argument("--cluster-config-file", metavar="FILE",
                        help="the node's id and topology, in the data directory (default "
                             "nodes.conf)")
    parser.add_argument("--cluster-node-timeout", metavar="MS",
                        help="milliseconds without an answer after which a controller fails a "
                             "node over (default 15000)")
    parser.add_argument("--config", metavar="FILE",
                        help="config file in redis.conf syntax (options below override it)")
    parser.add_argument("--loglevel", choices=("debug", "verbose", "notice", "warning"),
                        help="log verbosity (default notice)")
    # Not a Redis setting, so not in the config file: the crash bench rotates segments every
    # few commands with it.
    parser.add_argument("--aof-segment-max-bytes", type=int, metavar="BYTES",
                        help="AOF segment rotation size (default 64 MiB)")
    parser.add_argument("--unixsocket", metavar="PATH",
                        help="listen on this Unix socket as well (a stale one is replaced)")
    parser.add_argument("--unixsocketperm", metavar="MODE",
                        help="the Unix socket's permissions, octal (e.g. 700)")
    parser.add_argument("--shared", action="store_true",
                        help="serve the directory in shared mode: DIR/shared.sock only, "
                             "DIR/shared.conf's settings, exit when idle (see below)")
    parser.add_argument("--daemonize", action="store_true",
                        help="detach once serving: exit 0 then (1 and why, if it cannot); "
                             "its output goes to DIR/shared.log with --shared, else nowhere")
    # The start lock's descriptor, already held by the process that starts a shared server
    # (engine.services.shared): the socket is bound under it.
    parser.add_argument("--start-lock-fd", type=int, help=argparse.SUPPRESS)


def settings_from(args: argparse.Namespace) -> dict[str, Any]:
    """The config file's settings, then the command line's on top (Redis's precedence)."""
    settings: dict[str, Any] = {}
    if args.config:
        from streamkeep.engine.exec.settings import read_config_file

        settings.update(read_config_file(args.config))
    if getattr(args, "shared", False) and not args.config:
        # The directory's own settings (engine.services.shared records them).
        from streamkeep.aof.manifest import SHARED_CONF
        from streamkeep.engine.exec.settings import read_config_file

        conf = os.path.join(args.dir or DEFAULT_DIR, SHARED_CONF)
        if os.path.exists(conf):
            settings.update(read_config_file(conf))
    for name in ("dir", "port", "bind", "appendfsync", "requirepass", "loglevel", "replicaof",
                 "masterauth", "aof_segment_max_bytes", "unixsocket", "unixsocketperm",
                 "masteruser", "tls_port", "tls_cert_file", "tls_key_file", "tls_ca_cert_file",
                 "tls_auth_clients", "tls_replication", "cluster_enabled",
                 "cluster_config_file", "cluster_node_timeout"):
        value = getattr(args, name, None)
        if value is not None:
            settings[name.replace("_", "-") if name.startswith(("tls_", "master", "cluster_"))
                     else name] = value
    settings.setdefault("dir", DEFAULT_DIR)
    settings.setdefault("port", DEFAULT_PORT)
    settings.setdefault("bind", DEFAULT_BIND)
    return settings


def checked_settings(args: argparse.Namespace) -> dict[str, Any]:
    """settings_from, every value checked before anything is bound or made (_Refused, exit 3,
    naming the file and line, or the option, and the value)."""
    from streamkeep.aof.codec import HEADER_SIZE
    from streamkeep.engine.exec.settings import ConfigFileError, normalize_settings

    if args.shared and (args.port is not None or args.bind is not None
                        or args.unixsocket is not None):
        raise _Refused("--shared listens on DIR/shared.sock only: no --port, --bind or "
                       "--unixsocket", EXIT_USAGE)
    try:
        settings = settings_from(args)
    except ConfigFileError as err:
        raise _Refused(err.one_line(), EXIT_USAGE) from None
    except OSError as err:
        raise _Refused(f"--config {args.config}: {err.strerror or err}", EXIT_USAGE) from None
    problem = not_a_directory(str(settings["dir"]),
                              "--dir" if args.dir is not None or not args.config else "dir")
    if problem is not None:
        raise _Refused(problem, EXIT_UNAVAILABLE)
    port = settings["port"]
    if not 0 <= int(port) <= 65535:
        raise _Refused(f"port {port}: not a TCP port (0-65535)", EXIT_USAGE)
    segment_max = settings.get("aof_segment_max_bytes")
    if segment_max is not None and segment_max <= HEADER_SIZE:
        raise _Refused(f"--aof-segment-max-bytes {segment_max}: must exceed {HEADER_SIZE}",
                       EXIT_USAGE)
    # The Redis settings, as Engine.open will check them: refused now, not after a directory
    # was made for them.
    check = {k: v for k, v in settings.items() if k not in ("dir", "aof_segment_max_bytes")}
    try:
        normalize_settings(check)
    except ValueError as err:
        raise _Refused(str(err), EXIT_USAGE) from None
    return settings


def not_a_directory(path: str, option: str = "--dir") -> str | None:
    """Why the data directory `path` (given as `option`) can be neither opened nor made, when
    what is there is not a directory (it, or the nearest of its parents that exists: a regular
    file, a pipe...), in words naming it; None otherwise (a directory, or nothing yet: made
    when opened)."""
    from streamkeep.aof import fs

    found = fs.not_a_directory(path)
    if found is None:
        return None
    here, what = found
    if here == os.path.abspath(path):
        return f"{option} {path}: {what}"
    return f"{option} {path}: {here} is {what}"


def listen(bind: str, port: int) -> list[socket.socket]:
    """Sockets bound on every address of each of `bind`'s hosts (engine.server.listeners):
    a port in use is found before the data directory is opened. They listen once the server
    starts (asyncio's create_server calls listen): until the directory is open (a long
    replay) a client's connection is refused, as it was before, not left waiting. _Refused:
    an address that does not parse (exit 3), or one that cannot be bound (exit 1)."""
    from streamkeep.engine.server.listeners import BindError, bind_all

    try:
        return bind_all(bind, port)
    except BindError as err:
        raise _Refused(str(err), EXIT_USAGE if err.usage else EXIT_UNAVAILABLE) from None


def main(args: argparse.Namespace) -> int:
    try:
        settings = checked_settings(args)
        return _serve(args, settings)
    except _Refused as err:
        print(f"streamkeep serve: {err}", file=sys.stderr)
        return err.status


@dataclass
class _Listening:
    """What the server listens on (TCP sockets, then a Unix socket), in words for the ready
    line, and around it a shared or daemonized server's life (engine.server.shared_mode)."""

    sockets: list[socket.socket] = field(default_factory=list)
    tls_sockets: list[socket.socket] = field(default_factory=list)
    where: list[str] = field(default_factory=list)
    unix: tuple[str, Identity] | None = None  # the socket file and its identity
    daemon: Daemon | None = None
    shared: bool = False

    def close(self) -> None:
        for sock in [*self.sockets, *self.tls_sockets]:
            sock.close()
        if self.unix is not None:
            from streamkeep.engine.server.shared_mode import remove_unix

            remove_unix(*self.unix)


def _serve(args: argparse.Namespace, settings: dict[str, Any]) -> int:
    from streamkeep.engine.exec.settings import set_log_level

    # Messages go to stderr at the loglevel setting's level (CONFIG SET loglevel changes it),
    # from the first one on (the data directory's replay logs); other libraries' at WARNING.
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    set_log_level(str(settings.get("loglevel", "notice")))
    path = os.path.abspath(str(settings.pop("dir")))
    port = int(settings.pop("port"))
    bind = str(settings.pop("bind"))
    listening = _Listening(shared=args.shared)
    try:
        if args.shared:
            path = _shared_directory(path, settings)
        if args.daemonize:
            status = _detach(listening, path)
            if status is not None:
                return status  # the parent: the server serves, or said why it cannot
        if args.shared:
            _listen_shared(listening, path, args.start_lock_fd)
        else:
            # The ports first: a busy one is found before the data directory is made or
            # replayed. With a TLS port, port 0 means TLS only (Redis's way).
            tls_port = int(settings.get("tls-port") or 0)
            if port or not tls_port:
                listening.sockets += listen(bind, port)
                listening.where.append(f"{bind} port {listening.sockets[0].getsockname()[1]}")
            if tls_port:
                _check_tls(settings)  # (a missing certificate is found before the replay too)
                listening.tls_sockets += listen(bind, tls_port)
                listening.where.append(f"{bind} TLS port {tls_port}")
        unixsocket = settings.get("unixsocket")
        if unixsocket and not args.shared:
            from streamkeep.engine.exec.settings import parse_setting

            _listen_unix(listening, os.path.abspath(str(unixsocket)),
                         parse_setting("unixsocketperm", settings.get("unixsocketperm", 0)))
        # (a shared directory's settings are its first opener's, recorded: none added here)
        bounds = None if args.shared else apply_memory_defaults(settings)
        return _run(args, settings, path, bind, listening, bounds)
    except _Refused as err:
        listening.close()  # (before the word: the starter may try again at once)
        if listening.daemon is not None:
            listening.daemon.failed(f"streamkeep serve: {err}", err.status)
        raise
    finally:
        listening.close()


def _check_tls(settings: dict[str, Any]) -> None:
    """The TLS port's context can be made from these settings, or _Refused (exit 3) with why,
    as redis-server refuses to start."""
    from streamkeep.engine.services.tls import TLSConfigError, server_context

    try:
        server_context(settings)
    except TLSConfigError as err:
        raise _Refused(f"Failed to configure TLS: {err}", EXIT_USAGE) from None


def _shared_directory(path: str, settings: dict[str, Any]) -> str:
    """The shared directory made or checked (its owner's only); its socket in the settings
    (CONFIG GET unixsocket names it)."""
    from streamkeep.aof.manifest import SHARED_SOCKET
    from streamkeep.engine.services.shared import prepare_directory

    try:
        path = prepare_directory(path)
    except (StreamkeepError, OSError) as err:
        raise _Refused(f"{path}: {err}", EXIT_UNAVAILABLE) from None
    settings["unixsocket"] = os.path.join(path, SHARED_SOCKET)
    settings["unixsocketperm"] = SHARED_SOCKET_PERM
    return path


def _detach(listening: _Listening, path: str) -> int | None:
    """--daemonize: the parent's exit status once the child serves (or cannot); None in the
    child, which goes on detached."""
    from streamkeep.aof.manifest import SHARED_LOG
    from streamkeep.engine.server.shared_mode import Daemon

    daemon = Daemon(os.path.join(path, SHARED_LOG) if listening.shared else os.devnull)
    status = daemon.detach()
    if status is None:
        listening.daemon = daemon
    return status


def _listen_shared(listening: _Listening, path: str, lock_fd: int | None) -> None:
    """DIR/shared.sock bound under the directory's start lock: the one its starter holds and
    handed over (`--start-lock-fd`), else taken here (waiting for a starter that holds it)."""
    from streamkeep.aof.manifest import SHARED_SOCKET
    from streamkeep.engine.services.shared import start_lock

    file = os.path.join(path, SHARED_SOCKET)
    if lock_fd is not None:
        _listen_unix(listening, file, SHARED_SOCKET_PERM)
        os.close(lock_fd)  # (the starter's descriptor holds it until it has connected)
        return
    with start_lock(path, exclusive=True):
        _listen_unix(listening, file, SHARED_SOCKET_PERM)


def _listen_unix(listening: _Listening, file: str, perm: int) -> None:
    from streamkeep.engine.server.shared_mode import UnixSocketError, listen_unix

    try:
        sock, identity = listen_unix(file, perm)
    except UnixSocketError as err:
        raise _Refused(str(err), EXIT_UNAVAILABLE) from None
    listening.sockets.append(sock)
    listening.unix = (file, identity)
    listening.where.append(file)


def _idle_exit(config: dict[str, Any]) -> str:
    """A shared server's idle exit in its ready line: after how long, or never (0)."""
    seconds = int(config["idle-shutdown"])
    if seconds <= 0:
        return "never exits when idle (idle-shutdown 0)"
    return f"exits {seconds} s after its last client"


def _run(args: argparse.Namespace, settings: dict[str, Any], path: str, bind: str,
         listening: _Listening, bounds: str | None = None) -> int:
    from streamkeep import Engine
    from streamkeep.aof.fs import LockedError
    from streamkeep.engine.server.limits import DescriptorLimitError
    from streamkeep.engine.server.network import Server, install_loop_policy, run_server
    from streamkeep.engine.server.shared_mode import IdleShutdown
    from streamkeep.engine.services.shared import EXIT_IN_USE

    loop_name = install_loop_policy()
    config_file = os.path.abspath(args.config) if args.config else None
    if listening.shared and config_file is None:
        from streamkeep.aof.manifest import SHARED_CONF

        config_file = os.path.join(path, SHARED_CONF)  # (CONFIG REWRITE writes it)
    try:
        # Ctrl-C during the replay: Engine.open releases the lock, the directory stays as it was.
        engine = Engine.open(path, config_file=config_file, **settings)
    except LockedError as err:  # (a shared starter waits for a holder that is going away)
        raise _Refused(f"cannot open {path}: {err}", EXIT_IN_USE) from None
    except Exception as err:  # noqa: BLE001 - refuse to start, say why
        raise _Refused(f"cannot open {path}: {err}", EXIT_UNAVAILABLE) from None
    sockets = listening.sockets
    idle: IdleShutdown | None = None
    try:
        port = sockets[0].getsockname()[1] if sockets and sockets[0].family != socket.AF_UNIX \
            else 0
        server = Server(engine, bind, port, sockets=sockets,
                        tls_sockets=listening.tls_sockets or None)
        if listening.shared and listening.unix is not None:
            idle = IdleShutdown(server, path, *listening.unix)
        # Everything alive now (modules, the replayed data set) stays alive: move it out of
        # the collector's generations, or each full collection walks all of it while every
        # client waits (pauses of 10+ ms, the delivery latency's tail, once the data set has
        # grown).
        gc.collect()
        gc.freeze()

        def ready(srv: Server) -> None:
            line = (f"streamkeep {srv.engine_version()} listening on "
                    f"{' and '.join(listening.where)} ({loop_name}); data in {path} "
                    f"(appendfsync {engine.journal.policy if engine.journal else 'no'})")
            if idle is not None:
                idle.start()
                line += f"; shared, pid {os.getpid()}, {_idle_exit(engine.config)}"
            if bounds is not None:
                line += f"; {bounds}"
            print(line, flush=True)
            if listening.daemon is not None:
                listening.daemon.ready(line)

        try:
            run_server(server, ready)
        except DescriptorLimitError as err:
            raise _Refused(str(err), EXIT_UNAVAILABLE) from None
    finally:
        engine.close()  # (run_server closed it already after a clean shutdown)
        listening.close()  # (the socket file goes before the start lock: see IdleShutdown)
        if idle is not None:
            idle.release()
    print("streamkeep: shut down cleanly" + (" (idle)" if idle is not None and idle.shut_down
                                             else ""), flush=True)
    return 0
