"""The ``security`` section's workloads: throwaway certificates, a TLS ``streamkeep serve`` and
redis-server, redis-benchmark --tls, XADD as a restricted ACL user (interleaved with the
default user's on both servers), PINGs beside a thousand stalled handshakes.
Must not touch: the servers' start and stop beyond their arguments, files outside its dirs.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import ssl
import time
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench.processes import (
    REDIS_AOF_ARGS,
    RedisServer,
    StreamkeepServer,
    redis_aof,
    streamkeep,
)
from streamkeep.tools.bench.server import bench_xadd, server_requests
from streamkeep.tools.bench.workload import Measurement, Skip, alternate, connect, delays_ms
from streamkeep.tools.servers import HOST, free_port

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv
    from streamkeep.tools.tls_certs import Certs

PIPELINE = 16
STALLED = 1_000  # connections stalled mid-handshake
PINGS = 2_000  # the served client's PINGs while they stall
CONNECT_TIMEOUT = 10.0
ACL_USER, ACL_PASS = "producer", "bench-producer-pass"
ACL_KEY = "orders:bench"
ACL_RULES = ("on", f">{ACL_PASS}", "+xadd", "~orders:*")
ACL_ROUNDS = 3  # each of the four runs, interleaved; the best of each kept


class _Certs:
    def __init__(self, made: Certs) -> None:
        self.certs = made

    def describe(self) -> list[str]:
        return ["security: a throwaway CA, EC P-256 certificates (server and client); TLS "
                "ports ask for client certificates (tls-auth-clients yes)"]


def certs(env: BenchEnv) -> Certs:
    """The run's certificates, in a temp dir removed at the end."""
    def made() -> Iterator[_Certs]:
        from streamkeep.tools.tls_certs import make_certs

        with temporaries.temp_directory("bench-certs") as path:
            try:
                made = make_certs(path)
            except (OSError, ValueError) as err:  # (no openssl command, or it failed)
                raise Skip(f"cannot make certificates with openssl: {err}") from None
            yield _Certs(made)

    return env.shared("certificates", made).certs  # type: ignore[no-any-return]


def _tls_args(made: Certs, tls_port: int) -> tuple[str, ...]:
    return ("--tls-port", str(tls_port), "--tls-cert-file", made.path("server.crt"),
            "--tls-key-file", made.path("server.key"), "--tls-ca-cert-file", made.ca)


def tls_server(env: BenchEnv, redis_server: bool) -> Any:
    """The run's TLS streamkeep serve, or redis-server (Skip with --no-redis)."""
    if redis_server and not env.use_redis:
        raise Skip("disabled (--no-redis)")
    made = certs(env)

    def start() -> Any:
        port = free_port()
        if redis_server:
            server: Any = RedisServer(persistence=(*REDIS_AOF_ARGS, *_tls_args(made, port)))
            server.describe = lambda: [
                f"security: redis-server {server.version()} on {HOST}:{server.port}, TLS port "
                f"{port} (started by this bench: --save \"\" {' '.join(REDIS_AOF_ARGS)}, AOF "
                f"in its temp dir)"]
        else:
            server = StreamkeepServer("everysec")
            server.extra, plain = _tls_args(made, port), server.describe
            server.describe = lambda: [line.replace("server: ", "security: ", 1) +
                                       f"; TLS port {port}" for line in plain()]
        server.name, server.tls_port = f"{server.name} (TLS)", port
        return server.start()

    return env.shared("redis-server --tls-port" if redis_server
                      else "streamkeep serve --tls-port", start)


# The rows' pair of servers: streamkeep's and redis-server's TLS ones (declarations.both).
TLS_SERVERS = (partial(tls_server, redis_server=False), partial(tls_server, redis_server=True))


def tls_xadd(env: BenchEnv, target: Any) -> Measurement:
    """redis-benchmark --tls -c 50 -P 16 XADD against the TLS port of ``target``."""
    made = certs(env)
    return bench_xadd(env, target, PIPELINE, connection=[
        "-h", HOST, "-p", str(target.tls_port), "--tls", "--cacert", made.ca, "--cert",
        made.path("client.crt"), "--key", made.path("client.key")])


def _client_context(made: Certs) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=made.ca)
    ctx.load_cert_chain(made.path("client.crt"), made.path("client.key"))
    return ctx


def _stall(made: Certs, port: int, hello: bool) -> socket.socket:
    """A connection to the TLS port that sends nothing (or its ClientHello, then never reads
    the answer)."""
    sock = connect(port, CONNECT_TIMEOUT)
    if hello:
        outgoing = ssl.MemoryBIO()
        obj = _client_context(made).wrap_bio(ssl.MemoryBIO(), outgoing,
                                             server_hostname="localhost")
        with contextlib.suppress(ssl.SSLWantReadError):
            obj.do_handshake()
        sock.sendall(outgoing.read())
    return sock


def _room_for(sockets: int) -> None:
    """This process may hold `sockets` more descriptors (the soft limit raised to fit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = sockets + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            raise Skip(f"the open-files limit ({hard}) is below {wanted}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def stalled_handshakes(env: BenchEnv, target: Any, stalled: int = STALLED) -> Measurement:
    """``stalled`` connections to ``target``'s TLS port that start a handshake and stall (half
    silent, half after their ClientHello); then one TLS client's PINGs, each reply's delay
    timed: its PINGs/s, figures its p99 and max delay (ms). With ``stalled`` 0, the client
    alone."""
    made = certs(env)
    _room_for(stalled)
    with contextlib.ExitStack() as stack:
        for i in range(stalled):
            stack.enter_context(_stall(made, target.tls_port, hello=bool(i % 2)))
        delays, began = [], time.perf_counter()  # (the client's handshake included)
        raw = stack.enter_context(connect(target.tls_port, CONNECT_TIMEOUT))
        tls = stack.enter_context(_client_context(made).wrap_socket(
            raw, server_hostname="localhost"))
        tls.settimeout(CONNECT_TIMEOUT)
        for _ in range(PINGS):
            sent = time.perf_counter()
            tls.sendall(b"PING\r\n")
            if tls.recv(64) != b"+PONG\r\n":
                raise AssertionError("a PING over TLS was not answered +PONG")
            delays.append(time.perf_counter() - sent)
        seconds = time.perf_counter() - began
    return Measurement(PINGS / seconds, count=PINGS, figures=delays_ms(delays))


def acl_xadd(env: BenchEnv) -> Measurement:
    """redis-benchmark -P 16 XADD to orders:bench as the default user and as a user that may
    only XADD to orders:*, on streamkeep and on redis-server, interleaved ACL_ROUNDS times
    (:func:`.workload.alternate`), the best of each kept: the rate is streamkeep's as that user;
    figures its rate over the default user's on streamkeep, and streamkeep's ratio to
    redis-server as that user over the ratio as the default user (what the check costs here
    against what it costs Redis)."""
    servers = {"sk": streamkeep(env), "redis": redis_aof(env)}

    def run(name: str, as_user: bool) -> Any:
        def once(_round: int) -> float:
            # (the user made before the default user's run, deleted after its own)
            target, acl = servers[name], servers[name].client.execute_command
            where = ["-h", HOST, "-p", str(target.port)]
            if as_user:
                where += ["--user", ACL_USER, "-a", ACL_PASS]
            else:
                acl("ACL", "SETUSER", ACL_USER, "reset", *ACL_RULES)
            rate = bench_xadd(env, target, PIPELINE, connection=where, key=ACL_KEY).rate
            if as_user:
                acl("ACL", "DELUSER", ACL_USER)
            return rate
        return once

    rounds = alternate(ACL_ROUNDS, {f"{name} {who}": run(name, who == "user")
                                    for name in servers for who in ("default", "user")})
    best = {party: max(r[party] for r in rounds) for party in rounds[0]}
    over_default = best["sk user"] / best["sk default"]
    plain_ratio = best["sk default"] / best["redis default"]
    user_ratio = best["sk user"] / best["redis user"]
    return Measurement(best["sk user"], count=server_requests(env.n, PIPELINE), figures={
        "user_over_default": over_default, "ratio_of_ratios": user_ratio / plain_ratio,
        "redis_user_over_default": best["redis user"] / best["redis default"],
        "user_ratio": user_ratio, "default_ratio": plain_ratio})
