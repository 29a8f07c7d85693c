"""The ``security`` section's workloads: what TLS costs, and what stalled handshakes cost the
other clients, streamkeep serve beside redis-server in one run.

Owns the run's throwaway certificates (:mod:`streamkeep.tools.tls_certs`), the two TLS
servers (``streamkeep serve`` and redis-server, each with an everysec AOF, a plain port for
the bench's own checks and a TLS port asking for client certificates: :func:`tls_streamkeep`,
:func:`tls_redis`), ``redis-benchmark --tls -P 16`` XADD against each (:func:`tls_xadd`), and
the stalled-handshake row (:func:`stalled_handshakes`: a thousand connections to the TLS
port that start a handshake and stall, while one TLS client PINGs and each reply's delay is
timed). Must not touch: the declarations (tools.bench.sections.security), the processes'
start and stop beyond their arguments (tools.bench.processes), anything outside its temp dirs.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any

from streamkeep.tools import temporaries
from streamkeep.tools.bench import server
from streamkeep.tools.bench.processes import REDIS_AOF_ARGS, RedisServer, StreamkeepServer
from streamkeep.tools.bench.workload import Measurement, Skip
from streamkeep.tools.servers import HOST, free_port

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv
    from streamkeep.tools.tls_certs import Certs

PIPELINE = 16
STALLED = 1_000  # connections stalled mid-handshake
PINGS = 2_000  # the served client's PINGs while they stall
CONNECT_TIMEOUT = 10.0


class _Certs:
    """The run's certificates, in a temp dir removed at the end."""

    def __init__(self) -> None:
        from streamkeep.tools.tls_certs import make_certs

        self.dir = temporaries.temp_directory_path("bench-certs")
        try:
            self.certs: Certs = make_certs(self.dir)
        except (OSError, ValueError) as err:  # (no openssl command, or it failed)
            self.stop()
            raise Skip(f"cannot make certificates with openssl: {err}") from None

    def describe(self) -> list[str]:
        return ["security: a throwaway CA, EC P-256 certificates (server and client); TLS "
                "ports ask for client certificates (tls-auth-clients yes)"]

    def stop(self) -> None:
        temporaries.remove(self.dir)


def certs(env: BenchEnv) -> Certs:
    made: _Certs = env.shared("certificates", _Certs)
    return made.certs


def _tls_args(certs: Certs, tls_port: int) -> tuple[str, ...]:
    return ("--tls-port", str(tls_port), "--tls-cert-file", certs.path("server.crt"),
            "--tls-key-file", certs.path("server.key"), "--tls-ca-cert-file", certs.ca)


class _TLSStreamkeep(StreamkeepServer):
    def __init__(self, certs: Certs) -> None:
        super().__init__("everysec")
        self.tls_port = free_port()
        self.extra = _tls_args(certs, self.tls_port)
        self.name = "streamkeep (TLS)"

    def describe(self) -> list[str]:
        return [line.replace("server: ", "security: ", 1) + f"; TLS port {self.tls_port}"
                for line in super().describe()]


class _TLSRedis(RedisServer):
    def __init__(self, certs: Certs) -> None:
        self.tls_port = free_port()
        super().__init__(persistence=(*REDIS_AOF_ARGS, *_tls_args(certs, self.tls_port)))
        self.name = "redis-server (TLS)"

    def describe(self) -> list[str]:
        return [f"security: redis-server {self.version()} on {HOST}:{self.port}, TLS port "
                f"{self.tls_port} (started by this bench: --save \"\" "
                f"{' '.join(REDIS_AOF_ARGS)}, AOF in its temp dir)"]


def tls_streamkeep(env: BenchEnv) -> Any:
    made = certs(env)
    return env.shared("streamkeep serve --tls-port", lambda: _TLSStreamkeep(made).start())


def tls_redis(env: BenchEnv) -> Any:
    if not env.use_redis:
        raise Skip("disabled (--no-redis)")
    made = certs(env)
    return env.shared("redis-server --tls-port", lambda: _TLSRedis(made).start())


def _tls_connection(env: BenchEnv, target: Any) -> list[str]:
    made = certs(env)
    return ["-h", HOST, "-p", str(target.tls_port), "--tls", "--cacert", made.ca, "--cert",
            made.path("client.crt"), "--key", made.path("client.key")]


def tls_xadd(env: BenchEnv, target: Any) -> Measurement:
    """redis-benchmark --tls -c 50 -P 16 XADD against the TLS port of ``target``."""
    return server.bench_redis_benchmark(
        target, server.benchmark_tool(env), server.server_requests(env.n, PIPELINE), PIPELINE,
        connection=_tls_connection(env, target))


# --- stalled handshakes ---------------------------------------------------------------------------


def _client_context(made: Certs) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=made.ca)
    ctx.load_cert_chain(made.path("client.crt"), made.path("client.key"))
    return ctx


def _stall(made: Certs, port: int, hello: bool) -> socket.socket:
    """A connection to the TLS port that sends nothing (or its ClientHello, then never reads
    the answer)."""
    sock = socket.create_connection((HOST, port), CONNECT_TIMEOUT)
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


def _ping_delays(made: Certs, port: int, count: int) -> list[float]:
    with socket.create_connection((HOST, port), CONNECT_TIMEOUT) as raw, \
            _client_context(made).wrap_socket(raw, server_hostname="localhost") as tls:
        tls.settimeout(CONNECT_TIMEOUT)
        delays = []
        for _ in range(count):
            sent = time.perf_counter()
            tls.sendall(b"PING\r\n")
            if tls.recv(64) != b"+PONG\r\n":
                raise AssertionError("a PING over TLS was not answered +PONG")
            delays.append(time.perf_counter() - sent)
    return delays


def stalled_handshakes(env: BenchEnv, target: Any, stalled: int = STALLED) -> Measurement:
    """``stalled`` connections to ``target``'s TLS port that start a handshake and stall
    (half silent, half after their ClientHello); then one TLS client's PINGs, each reply's
    delay timed: the rate is its PINGs/s, the figures its p99 and max delay (ms). With
    ``stalled`` 0, the same client alone (the baseline)."""
    made = certs(env)
    _room_for(stalled)
    stalls: list[socket.socket] = []
    try:
        for i in range(stalled):
            stalls.append(_stall(made, target.tls_port, hello=bool(i % 2)))
        began = time.perf_counter()
        delays = _ping_delays(made, target.tls_port, PINGS)
        seconds = time.perf_counter() - began
    finally:
        for sock in stalls:
            sock.close()
    delays.sort()
    p99 = delays[min(len(delays) - 1, int(len(delays) * 0.99))] * 1000
    worst = delays[-1] * 1000
    return Measurement(PINGS / seconds, count=PINGS, figures={"p99_ms": p99, "max_ms": worst},
                       notes=[f"{target.name}: {stalled:,} stalled handshakes; a TLS client's "
                              f"{PINGS:,} PINGs: p99 {p99:.2f} ms, max {worst:.2f} ms"])


# --- a restricted ACL user ---------------------------------------------------------------------

ACL_USER, ACL_PASS = "producer", "bench-producer-pass"
ACL_KEY = "orders:bench"
ACL_RULES = ("on", f">{ACL_PASS}", "+xadd", "~orders:*")
ACL_ROUNDS = 3  # each of the four runs, interleaved; the best of each kept


def _as_user(target: Any) -> list[str]:
    target.client.execute_command("ACL", "SETUSER", ACL_USER, "reset", *ACL_RULES)
    return ["-h", HOST, "-p", str(target.port), "--user", ACL_USER, "-a", ACL_PASS]


def acl_xadd(env: BenchEnv) -> Measurement:
    """redis-benchmark -P 16 XADD to orders:bench as the default user and as a user that may
    only XADD to orders:* (+xadd ~orders:*), on streamkeep and on redis-server, interleaved in
    that order ACL_ROUNDS times, the best of each kept: the rate is streamkeep's as the restricted user; the figures the restricted
    user's rate over the default user's on streamkeep, and streamkeep's ratio to redis-server
    as the restricted user over that ratio as the default user (what the check costs here
    compared with what it costs Redis)."""
    tool = server.benchmark_tool(env)
    requests = server.server_requests(env.n, PIPELINE)
    ours, theirs = server.streamkeep(env), server.redis_aof(env)
    rates: dict[tuple[str, str], float] = {}
    for _round in range(ACL_ROUNDS):  # (interleaved: a drift of the machine hits all four)
        for name, target in (("sk", ours), ("redis", theirs)):
            plain = ["-h", HOST, "-p", str(target.port)]
            for who, connection in (("default", plain), ("user", _as_user(target))):
                rate = server.bench_redis_benchmark(target, tool, requests, PIPELINE,
                                                    connection=connection, key=ACL_KEY).rate
                rates[name, who] = max(rates.get((name, who), 0.0), rate)
            target.client.execute_command("ACL", "DELUSER", ACL_USER)
    over_default = rates["sk", "user"] / rates["sk", "default"]
    plain_ratio = rates["sk", "default"] / rates["redis", "default"]
    user_ratio = rates["sk", "user"] / rates["redis", "user"]
    return Measurement(rates["sk", "user"], count=requests,
                       figures={"user_over_default": over_default,
                                "ratio_of_ratios": user_ratio / plain_ratio},
                       notes=[f"XADD -P {PIPELINE} as {ACL_USER} ({' '.join(ACL_RULES[2:])}) / "
                              f"as default: streamkeep {over_default:.3f}x, redis-server "
                              f"{rates['redis', 'user'] / rates['redis', 'default']:.3f}x; "
                              f"streamkeep / redis-server: {user_ratio:.3f}x as {ACL_USER}, "
                              f"{plain_ratio:.3f}x as default"])


__all__ = ["acl_xadd", "certs", "stalled_handshakes", "tls_redis", "tls_streamkeep",
           "tls_xadd"]
