"""redis-py 8.1's own idempotent-producer methods (`xadd(idmp=..., idmpauto=...)`, `xcfgset`,
`xinfo_stream`) against `streamkeep serve` over RESP2 and RESP3, and against the embedded
redis-py-compatible API (engine.runtime.redis_api), with decode_responses off and on. The local
redis-server is 7.x (no IDMP), so the expected values are redis.io's (XADD, XCFGSET, XINFO
STREAM pages, Redis 8.6)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.exceptions

from streamkeep import Engine, ReplyError
from streamkeep.engine.runtime import redis_api
from tests.support.serve_process import ServeProcess

ID_RE = re.compile(r"^\d+-\d+$")


@pytest.fixture(params=[
    pytest.param(("serve", 2, False), id="serve-resp2"),
    pytest.param(("serve", 3, True), id="serve-resp3-decoded"),
    pytest.param(("engine", 0, False), id="engine-bytes"),
    pytest.param(("engine", 0, True), id="engine-decoded"),
])
def client(request: pytest.FixtureRequest, tmp_path: Path,
           spawn: Callable[..., ServeProcess]) -> Iterator[Any]:
    kind, protocol, decode = request.param
    if kind == "engine":
        engine = Engine()
        try:
            yield engine.redis(decode_responses=decode)
        finally:
            engine.close()
        return
    proc = spawn(tmp_path)
    conn = proc.client(protocol=protocol, decode_responses=decode)
    try:
        yield conn
    finally:
        conn.close()


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def info(client: Any) -> dict[str, Any]:
    return {text(k): v for k, v in client.xinfo_stream("s").items()}


def test_idmp_duplicate_returns_original_id(client: Any) -> None:
    first = client.xadd("s", {"amount": "100"}, idmp=("p1", b"payment-abc"))
    assert ID_RE.match(text(first))
    assert client.xadd("s", {"amount": "200"}, idmp=("p1", b"payment-abc")) == first
    assert client.xadd("s", {"amount": "100"}, idmp=("p2", b"payment-abc")) != first
    assert client.xlen("s") == 2
    assert [text(v) for _id, f in client.xrange("s") for v in f.values()] == ["100", "100"]


def test_idmpauto_and_options(client: Any) -> None:
    first = client.xadd("s", {"a": "1", "b": "2"}, idmpauto="p", maxlen=100)
    assert client.xadd("s", {"b": "2", "a": "1"}, idmpauto="p", maxlen=100) == first
    assert client.xadd("s", {"a": "1"}, idmpauto="p") != first
    assert client.xadd("missing", {"a": "1"}, idmpauto="p", nomkstream=True) is None
    assert client.xlen("s") == 2


def test_xcfgset_and_xinfo_fields(client: Any) -> None:
    client.xadd("s", {"f": "v"}, idmp=("p", b"i"))
    client.xadd("s", {"f": "v"}, idmp=("p", b"i"))
    got = info(client)
    assert [got[k] for k in ("idmp-duration", "idmp-maxsize", "pids-tracked", "iids-tracked",
                             "iids-added", "iids-duplicates")] == [100, 100, 1, 1, 1, 1]
    assert client.xcfgset("s", idmp_duration=60, idmp_maxsize=5) in (True, "OK", b"OK")
    got = info(client)
    assert (got["idmp-duration"], got["idmp-maxsize"], got["iids-tracked"]) == (60, 5, 0)


def test_errors(client: Any) -> None:
    errors = (redis.exceptions.ResponseError, ReplyError)
    with pytest.raises(errors, match="no such key"):
        client.xcfgset("missing", idmp_duration=10)
    data_errors = (redis.exceptions.DataError, redis_api.DataError)
    with pytest.raises(data_errors):
        client.xcfgset("s")
    client.xadd("s", {"f": "v"})
    with pytest.raises(data_errors):  # redis-py's own check, before sending
        client.xadd("s", {"f": "v"}, id="9-9", idmp=("p", b"i"))
    with pytest.raises(errors, match="IDMP/IDMPAUTO can be used only with auto-generated IDs"):
        client.execute_command("XADD", "s", "IDMP", "p", "i", "9-9", "f", "v")
    with pytest.raises(errors, match="IDMP-DURATION must be between 1 and 86400 seconds"):
        client.execute_command("XCFGSET", "s", "IDMP-DURATION", "0")
