"""TLS as Redis configures it: the `tls-*` settings turned into OpenSSL contexts.

Owns `server_context(config)` (what the TLS port accepts: certificate and key, client
certificates per tls-auth-clients, protocols, ciphers and suites, session caching, DH
parameters), `client_context(config)` (what this server presents and checks when it connects
out: a replica to its primary under tls-replication), `TLS_SETTINGS` (the settings whose change
makes the server build its context again) and `TLSConfigError` (why a configuration cannot be
loaded, in Redis's words where Redis has them). The handshake and the record layer are
OpenSSL's, driven by the event loop (engine.server.network); nothing here touches sockets or
clients. Must not touch: settings' parsing (engine.exec.settings), connections.

Python's ssl module has no call for three of Redis's knobs (the TLSv1.3 suites, the session
cache's mode and size); they are set on the context's own OpenSSL object (`_OpenSSL`), in the
same libssl the ssl module uses.
"""

from __future__ import annotations

import ctypes
import os
import ssl
from collections.abc import Mapping
from typing import Any, Final

from streamkeep.engine.wire.errors import StreamkeepError

__all__ = ["TLS_SETTINGS", "TLSConfigError", "client_context", "server_context",
           "protocol_versions"]

# Every setting the server context reads: a CONFIG SET of one rebuilds it (Redis's applyTlsCfg).
TLS_SETTINGS: Final = ("tls-cert-file", "tls-key-file", "tls-key-file-pass",
                       "tls-client-cert-file", "tls-client-key-file",
                       "tls-client-key-file-pass", "tls-dh-params-file", "tls-ca-cert-file",
                       "tls-ca-cert-dir", "tls-protocols", "tls-ciphers", "tls-ciphersuites",
                       "tls-auth-clients", "tls-prefer-server-ciphers", "tls-session-caching",
                       "tls-session-cache-size", "tls-session-cache-timeout",
                       "tls-replication")

_VERSIONS: Final = {"tlsv1": ssl.TLSVersion.TLSv1, "tlsv1.1": ssl.TLSVersion.TLSv1_1,
                    "tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3}
_ORDER: Final = list(_VERSIONS.values())
BAD_PROTOCOLS: Final = ("Invalid tls-protocols specified. Use a combination of 'TLSv1', "
                        "'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.")
NEEDS_CA: Final = ("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when "
                   "tls-cluster, tls-replication or tls-auth-clients are enabled!")
_VERIFY: Final = {"yes": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL, "no": ssl.CERT_NONE}


class TLSConfigError(StreamkeepError, ValueError):
    """The TLS settings cannot be loaded: the reason (a file named, OpenSSL's words)."""


def protocol_versions(text: str) -> list[ssl.TLSVersion]:
    """tls-protocols' versions, oldest first (empty: TLSv1.2 and TLSv1.3, Redis's default)."""
    words = text.lower().split()
    if not words:
        return [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]
    if any(word not in _VERSIONS for word in words):
        raise TLSConfigError(BAD_PROTOCOLS)
    return sorted({_VERSIONS[word] for word in words}, key=_ORDER.index)


def _text(config: Mapping[str, Any], name: str) -> str:
    return str(config.get(name) or "")


def _set_protocols(ctx: ssl.SSLContext, text: str) -> None:
    versions = protocol_versions(text)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    low, high = _ORDER.index(versions[0]), _ORDER.index(versions[-1])
    gaps = {ssl.TLSVersion.TLSv1: ssl.OP_NO_TLSv1, ssl.TLSVersion.TLSv1_1: ssl.OP_NO_TLSv1_1,
            ssl.TLSVersion.TLSv1_2: ssl.OP_NO_TLSv1_2, ssl.TLSVersion.TLSv1_3: ssl.OP_NO_TLSv1_3}
    for version in _ORDER[low:high + 1]:
        if version not in versions:  # ("TLSv1.1 TLSv1.3": a range cannot say it)
            ctx.options |= gaps[version]


def _load_chain(ctx: ssl.SSLContext, cert: str, key: str, password: str, what: str) -> None:
    try:
        ctx.load_cert_chain(cert, key or None, password or None)
    except (OSError, ssl.SSLError) as err:
        raise TLSConfigError(f"Failed to load {what} certificate {cert!r} or key "
                             f"{key or cert!r}: {_why(err)}") from None


def _load_ca(ctx: ssl.SSLContext, config: Mapping[str, Any], needed: bool) -> None:
    cafile, capath = _text(config, "tls-ca-cert-file"), _text(config, "tls-ca-cert-dir")
    if not cafile and not capath:
        if needed:
            raise TLSConfigError(NEEDS_CA)
        return
    try:
        ctx.load_verify_locations(cafile or None, capath or None)
    except (OSError, ssl.SSLError) as err:
        raise TLSConfigError(f"Failed to configure CA certificate(s) file/directory: "
                             f"{_why(err)}") from None


def _why(err: BaseException) -> str:
    if isinstance(err, ssl.SSLError):
        return err.reason or str(err)
    if isinstance(err, OSError) and err.strerror:
        return f"{err.strerror}" + (f": {err.filename}" if err.filename else "")
    return str(err)


def _ciphers(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    ciphers = _text(config, "tls-ciphers")
    if ciphers:
        try:
            ctx.set_ciphers(ciphers)
        except ssl.SSLError:
            raise TLSConfigError("Failed to configure ciphers: no cipher matches "
                                 f"{ciphers!r}") from None
    suites = _text(config, "tls-ciphersuites")
    if suites:
        _OpenSSL.ciphersuites(ctx, suites)
    if config.get("tls-prefer-server-ciphers"):
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE


def server_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS port's context, from the settings as they are; TLSConfigError if they cannot
    be loaded (a missing file, a wrong passphrase, no CA where client certificates are asked
    for...)."""
    cert, key = _text(config, "tls-cert-file"), _text(config, "tls-key-file")
    if not cert:
        raise TLSConfigError("No tls-cert-file configured!")
    if not key:
        raise TLSConfigError("No tls-key-file configured!")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(ctx, _text(config, "tls-protocols"))
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    _load_chain(ctx, cert, key, _text(config, "tls-key-file-pass"), "server")
    verify = _VERIFY[_text(config, "tls-auth-clients") or "yes"]
    _load_ca(ctx, config, needed=verify != ssl.CERT_NONE or bool(config.get("tls-replication")))
    ctx.verify_mode = verify
    dh = _text(config, "tls-dh-params-file")
    if dh:
        try:
            ctx.load_dh_params(dh)
        except (OSError, ssl.SSLError) as err:
            raise TLSConfigError(f"Failed to load {dh}: {_why(err)}") from None
    _ciphers(ctx, config)
    if config.get("tls-session-caching", True):
        _OpenSSL.session_cache(ctx, int(config.get("tls-session-cache-size", 20480)),
                               int(config.get("tls-session-cache-timeout", 300)))
    else:
        ctx.options |= ssl.OP_NO_TICKET
        _OpenSSL.session_cache_off(ctx)
    return ctx


def client_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    """What a replica presents to its primary and checks it by: tls-client-cert-file (else
    tls-cert-file) and its key; the primary's certificate checked against the CA, its name not
    (Redis checks the chain only: a primary is named by address)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols(ctx, _text(config, "tls-protocols"))
    ctx.check_hostname = False
    cert = _text(config, "tls-client-cert-file")
    key, password = (_text(config, "tls-client-key-file"),
                     _text(config, "tls-client-key-file-pass"))
    if not cert:
        cert, key, password = (_text(config, "tls-cert-file"), _text(config, "tls-key-file"),
                               _text(config, "tls-key-file-pass"))
    if cert:
        _load_chain(ctx, cert, key, password, "client")
    _load_ca(ctx, config, needed=True)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ciphers = _text(config, "tls-ciphers")
    if ciphers:
        try:
            ctx.set_ciphers(ciphers)
        except ssl.SSLError:
            raise TLSConfigError(f"Failed to configure ciphers: no cipher matches "
                                 f"{ciphers!r}") from None
    suites = _text(config, "tls-ciphersuites")
    if suites:
        _OpenSSL.ciphersuites(ctx, suites)
    return ctx


class _OpenSSL:
    """The three knobs Python's ssl module lacks, set on a context's SSL_CTX (the pointer
    right after the context object's header, as CPython lays PySSLContext out) through the
    libssl the ssl module itself loaded. Checked before use: the pointer must give back the
    verify mode the context has, or the knob is refused rather than guessed."""

    _lib: Any = None
    _SET_SESS_CACHE_SIZE: Final = 42  # SSL_CTRL_* (OpenSSL's ssl.h; stable since 0.9.8)
    _SET_SESS_CACHE_MODE: Final = 44
    _CACHE_SERVER: Final = 2  # SSL_SESS_CACHE_SERVER
    _CACHE_OFF: Final = 0

    @classmethod
    def _libssl(cls) -> Any:
        if cls._lib is None:
            path = _loaded_libssl()
            if path is None:
                raise TLSConfigError("this Python's ssl module gives no access to OpenSSL's "
                                     "session cache and TLSv1.3 suite settings")
            lib = ctypes.CDLL(path)
            lib.SSL_CTX_ctrl.restype = ctypes.c_long
            lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long,
                                         ctypes.c_void_p]
            lib.SSL_CTX_set_ciphersuites.restype = ctypes.c_int
            lib.SSL_CTX_set_ciphersuites.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            lib.SSL_CTX_set_timeout.restype = ctypes.c_long
            lib.SSL_CTX_set_timeout.argtypes = [ctypes.c_void_p, ctypes.c_long]
            lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
            lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
            cls._lib = lib
        return cls._lib

    @classmethod
    def _ctx(cls, ctx: ssl.SSLContext) -> tuple[Any, int]:
        lib = cls._libssl()
        pointer = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
        expected = {ssl.CERT_NONE: 0, ssl.CERT_OPTIONAL: 1, ssl.CERT_REQUIRED: 3}
        saved = ctx.verify_mode
        ok = True
        for mode in (ssl.CERT_REQUIRED, ssl.CERT_NONE):  # (two distinct answers: no accident)
            if ctx.check_hostname and mode == ssl.CERT_NONE:
                continue
            ctx.verify_mode = mode
            ok = ok and pointer is not None and \
                lib.SSL_CTX_get_verify_mode(pointer) == expected[mode]
        ctx.verify_mode = saved
        if not ok or pointer is None:
            raise TLSConfigError("this Python's ssl module gives no access to OpenSSL's "
                                 "session cache and TLSv1.3 suite settings")
        return lib, pointer

    @classmethod
    def ciphersuites(cls, ctx: ssl.SSLContext, suites: str) -> None:
        lib, pointer = cls._ctx(ctx)
        if lib.SSL_CTX_set_ciphersuites(pointer, suites.encode()) != 1:
            raise TLSConfigError(f"Failed to configure ciphersuites: no suite matches "
                                 f"{suites!r}")

    @classmethod
    def session_cache_off(cls, ctx: ssl.SSLContext) -> None:
        lib, pointer = cls._ctx(ctx)
        lib.SSL_CTX_ctrl(pointer, cls._SET_SESS_CACHE_MODE, cls._CACHE_OFF, None)

    @classmethod
    def session_cache(cls, ctx: ssl.SSLContext, size: int, timeout: int) -> None:
        lib, pointer = cls._ctx(ctx)
        lib.SSL_CTX_ctrl(pointer, cls._SET_SESS_CACHE_MODE, cls._CACHE_SERVER, None)
        lib.SSL_CTX_ctrl(pointer, cls._SET_SESS_CACHE_SIZE, size, None)
        lib.SSL_CTX_set_timeout(pointer, timeout)


def _loaded_libssl() -> str | None:
    """The path of the libssl this process loaded for the ssl module (its maps say), so the
    knobs act on the same library's objects."""
    import _ssl  # noqa: F401 (loaded: its libssl is mapped)

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ", 5)[-1].strip()
                if "/libssl" in path and os.path.exists(path):
                    return path
    except OSError:
        pass
    import ctypes.util

    return ctypes.util.find_library("ssl")
