"""A small etcd v3 client over etcd's HTTP/JSON gateway, for the cluster's controller: keys
read, written and deleted, compare-and-swap on a key's mod_revision, leases granted, renewed
and revoked, the members listed. No dependency beyond the standard library.

The gateway (etcd 3.4 serves it under /v3/ on the client URL) takes and gives JSON: keys and
values base64, int64 fields as strings, a field at its zero value left out. One HTTP/1.1
connection per client, reused, opened again after an error. Several endpoints (a cluster's
members) are tried in turn; the first that answers is kept until it fails. A request whose
outcome is unknown (sent, and no reply came) is sent again to the next endpoint only when
sending it twice does what sending it once does; a compare-and-swap is not: EtcdError says
its outcome is unknown. A reply is read up to MAX_REPLY bytes.

Owns: the wire format of the gateway and the choice of endpoint. Must not touch: what the keys
mean (the controller's topology), the etcd server's process (tools.servers.EtcdServer). Not
shared between threads: a thread uses a client of its own.
"""

from __future__ import annotations

import base64
import http.client
import json
import select
from typing import Any, NamedTuple, Self
from urllib.parse import urlsplit

from streamkeep.engine.wire.errors import StreamkeepError

MAX_REPLY = 64 * 1024 * 1024  # bytes: a bigger reply is an error, not a memory exhausted
READ_CHUNK = 1 << 16
# gRPC status codes the gateway reports in an error reply's "code"
NOT_FOUND = 5
UNAVAILABLE = 14  # no leader, or the member is stopping: another member may answer


class EtcdError(StreamkeepError):
    """etcd did not do what was asked: no endpoint answered, a reply was not etcd's, or etcd
    refused (`code`: the gRPC status code etcd gave, None when etcd gave none). The message
    names the URL and what failed."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class Member(NamedTuple):
    """A member of the etcd cluster, as the member list gives it."""

    name: str
    client_urls: tuple[str, ...]
    peer_urls: tuple[str, ...]


class _NoAnswer(StreamkeepError):
    """An endpoint did not answer as etcd does; `sent`: the request may have reached it."""

    def __init__(self, reason: str, sent: bool) -> None:
        super().__init__(reason)
        self.sent = sent


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _key(key: str) -> bytes:
    return key.encode("utf-8", "surrogateescape")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _prefix_end(prefix: bytes) -> bytes:
    """The range_end that makes [prefix, end) every key starting with `prefix` ("\\0": every
    key, for an empty prefix or one of 0xff bytes only)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


def _endpoint(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/"):
        raise EtcdError(f"{url!r} is not an etcd endpoint (http://host:port)")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise EtcdError(f"{url!r} is not an etcd endpoint (http://host:port)")
    return parts.hostname, port


class Etcd:
    """A client of the etcd at `url` ("http://host:port", or several such endpoints separated
    by commas); `timeout` bounds each connect, send and read (seconds)."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self.url = url
        self.timeout = timeout
        self.endpoints = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        if not self.endpoints:
            raise EtcdError(f"{url!r} names no etcd endpoint")
        self._addresses = [_endpoint(u) for u in self.endpoints]
        self._current = 0  # the endpoint that answered last
        self._conn: http.client.HTTPConnection | None = None

    # ------------------------------------------------------------------ keys

    def get(self, key: str) -> tuple[bytes, int] | None:
        """The key's (value, mod_revision), None when it is absent."""
        reply = self._call("/v3/kv/range", {"key": _b64(_key(key))}, resend=True)
        kvs = reply.get("kvs") or []
        return self._entry(kvs[0])[1] if kvs else None

    def get_prefix(self, prefix: str) -> dict[str, tuple[bytes, int]]:
        """Every key starting with `prefix`: key -> (value, mod_revision)."""
        start = _key(prefix) or b"\0"
        reply = self._call("/v3/kv/range",
                           {"key": _b64(start), "range_end": _b64(_prefix_end(_key(prefix)))},
                           resend=True)
        return dict(self._entry(kv) for kv in reply.get("kvs") or [])

    def put(self, key: str, value: bytes, lease: int = 0) -> int:
        """Set the key (attached to `lease` unless 0); the store's revision after the put."""
        reply = self._call("/v3/kv/put", self._put_request(key, value, lease), resend=True)
        return self._revision(reply)

    def delete(self, key: str) -> None:
        self._call("/v3/kv/deleterange", {"key": _b64(_key(key))}, resend=True)

    def compare_and_put(self, key: str, value: bytes, mod_revision: int,
                        lease: int = 0) -> bool:
        """Put only if the key's mod_revision is `mod_revision` (0: only if it is absent);
        True if the put happened."""
        return self._txn(key, mod_revision,
                         {"request_put": self._put_request(key, value, lease)})

    def compare_and_delete(self, key: str, mod_revision: int) -> bool:
        """Delete only if the key's mod_revision is `mod_revision`; True if it matched."""
        return self._txn(key, mod_revision,
                         {"request_delete_range": {"key": _b64(_key(key))}})

    # ---------------------------------------------------------------- leases

    def grant(self, ttl: int) -> int:
        """A new lease of `ttl` seconds: its id."""
        reply = self._call("/v3/lease/grant", {"TTL": str(ttl)}, resend=True)
        if reply.get("error"):
            raise EtcdError(f"etcd at {self._url()}: lease grant: {reply['error']}")
        lease = int(reply.get("ID", 0))
        if lease == 0:
            raise EtcdError(f"etcd at {self._url()}: lease grant: the reply has no lease id")
        return lease

    def keepalive(self, lease: int) -> int:
        """Renew the lease: its TTL after renewal, 0 when it has expired or is unknown."""
        reply = self._call("/v3/lease/keepalive", {"ID": str(lease)}, resend=True,
                           result=True)
        return int(reply.get("TTL", 0))

    def revoke(self, lease: int) -> None:
        """Revoke the lease (its keys are deleted); nothing if it is already gone."""
        try:
            self._call("/v3/lease/revoke", {"ID": str(lease)}, resend=True)
        except EtcdError as err:
            if err.code != NOT_FOUND:
                raise

    # --------------------------------------------------------------- cluster

    def members(self) -> list[Member]:
        """The etcd cluster's members, as the endpoint answering knows them."""
        reply = self._call("/v3/cluster/member/list", {}, resend=True)
        return [Member(str(m.get("name", "")), tuple(m.get("clientURLs") or ()),
                       tuple(m.get("peerURLs") or ()))
                for m in reply.get("members") or []]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- requests

    @staticmethod
    def _put_request(key: str, value: bytes, lease: int) -> dict[str, str]:
        request = {"key": _b64(_key(key)), "value": _b64(value)}
        if lease:
            request["lease"] = str(lease)
        return request

    def _txn(self, key: str, mod_revision: int, operation: dict[str, Any]) -> bool:
        compare = {"key": _b64(_key(key)), "target": "MOD", "result": "EQUAL",
                   "mod_revision": str(mod_revision)}
        reply = self._call("/v3/kv/txn", {"compare": [compare], "success": [operation]},
                           resend=False)
        return bool(reply.get("succeeded", False))

    def _entry(self, kv: dict[str, Any]) -> tuple[str, tuple[bytes, int]]:
        try:
            key = _unb64(kv.get("key", "")).decode("utf-8", "surrogateescape")
            return key, (_unb64(kv.get("value", "")), int(kv.get("mod_revision", 0)))
        except (ValueError, TypeError, AttributeError) as err:
            raise EtcdError(f"etcd at {self._url()}: a key in its reply is malformed: "
                            f"{err}") from None

    def _revision(self, reply: dict[str, Any]) -> int:
        return int(reply["header"].get("revision", 0))

    def _url(self) -> str:
        return self.endpoints[self._current]

    def _call(self, path: str, body: dict[str, Any], *, resend: bool,
              result: bool = False) -> dict[str, Any]:
        """POST `body` to `path` on the endpoint in use, else on the others in turn; etcd's
        reply (with `result`: the first message of a stream, inside its "result")."""
        failures = []
        count = len(self.endpoints)
        for step in range(count):
            index = (self._current + step) % count
            if index != self._current or self._conn is None:
                self.close()
                self._current = index
            try:
                return self._exchange(path, body, result)
            except _NoAnswer as err:
                self.close()
                failures.append(f"{self._url()}: {err}")
                if err.sent and not resend:
                    raise EtcdError(f"etcd at {self._url()}: {path} got no reply ({err}): "
                                    f"its outcome is unknown") from None
        raise EtcdError(f"no etcd endpoint answered {path}: {'; '.join(failures)}")

    def _connection(self) -> http.client.HTTPConnection:
        conn = self._conn
        if conn is not None and conn.sock is not None:
            # An idle connection that has something to read was closed by the server (it
            # restarted, say): a request sent on it would be lost, so open another first.
            readable, _, _ = select.select([conn.sock], [], [], 0)
            if readable:
                self.close()
                conn = None
        if conn is None:
            host, port = self._addresses[self._current]
            conn = self._conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        return conn

    def _exchange(self, path: str, body: dict[str, Any], result: bool) -> dict[str, Any]:
        conn = self._connection()
        try:
            conn.request("POST", path, body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
        except (OSError, http.client.HTTPException) as err:  # not all sent: not done
            raise _NoAnswer(str(err) or type(err).__name__, sent=False) from None
        try:
            response = conn.getresponse()
            data = self._read(response, path)
        except (OSError, http.client.HTTPException) as err:
            raise _NoAnswer(str(err) or type(err).__name__, sent=True) from None
        return self._reply(response.status, data, path, result)

    def _read(self, response: http.client.HTTPResponse, path: str) -> bytes:
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and int(length) > MAX_REPLY:
            self.close()
            raise EtcdError(f"etcd at {self._url()}: {path}: a reply of {length} bytes "
                            f"(more than {MAX_REPLY})")
        parts, size = [], 0
        while chunk := response.read(READ_CHUNK):
            size += len(chunk)
            if size > MAX_REPLY:
                self.close()
                raise EtcdError(f"etcd at {self._url()}: {path}: a reply of more than "
                                f"{MAX_REPLY} bytes")
            parts.append(chunk)
        return b"".join(parts)

    def _reply(self, status: int, data: bytes, path: str, result: bool) -> dict[str, Any]:
        """etcd's reply decoded; EtcdError for etcd's refusal, _NoAnswer for what is not
        etcd's (another server on the port, a proxy's page)."""
        try:
            # (a stream's messages follow one another: the first is the answer)
            reply, _ = json.JSONDecoder().raw_decode(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise _NoAnswer(f"HTTP {status}, not etcd's reply: {data[:80]!r}",
                            sent=True) from None
        if not isinstance(reply, dict):
            raise _NoAnswer(f"HTTP {status}, not etcd's reply: {data[:80]!r}", sent=True)
        if result:
            reply = reply.get("result", reply)
        failure = reply.get("error")
        if isinstance(failure, dict):  # a stream's error
            reply = failure
        if "header" not in reply and "code" in reply and "message" in reply:
            code = int(reply["code"]) if str(reply["code"]).isdigit() else None
            if code == UNAVAILABLE:
                raise _NoAnswer(f"unavailable: {reply['message']}", sent=True)
            raise EtcdError(f"etcd at {self._url()}: {path}: {reply['message']}", code)
        if not isinstance(reply.get("header"), dict):
            raise _NoAnswer(f"HTTP {status}, not etcd's reply: {data[:80]!r}", sent=True)
        return reply
