"""The ``hardening`` section's parsing rows: a pipeline of XADDs whose values hold CRLF against
the same pipeline without, through a ``streamkeep serve`` child (the first once took 20x the
second, its parsing quadratic).

Owns :func:`bench_pipeline`: n pipelined ``XADD key * f <value>`` written at once over a raw
socket with a PING behind them, timed to the +PONG (every reply read), the best of a few
repeats. The values are the same length either way, so only their content differs. Must not
touch: the section declarations (rows, figures, targets: .sections), how the servers start and
stop (:mod:`.processes`).
"""

from __future__ import annotations

import time
from typing import Any

from streamkeep.engine.wire.reply_parser import encode_command
from streamkeep.tools.bench.bigvalues import connect, read_until_pong
from streamkeep.tools.bench.workload import Measurement

PIPELINE_REQUESTS = 20_000  # the size the CRLF target is set at
REPEATS = 3
CRLF_VALUE = b"line one\r\nline two\r\nline three\r\n"
PLAIN_VALUE = b"line one__line two__line three__"
assert len(CRLF_VALUE) == len(PLAIN_VALUE)


def bench_pipeline(server: Any, crlf: bool, n: int = PIPELINE_REQUESTS) -> Measurement:
    """n pipelined XADDs (values with or without CRLF) answered: requests per second."""
    value = CRLF_VALUE if crlf else PLAIN_VALUE
    key = f"hardening:pipeline:{'crlf' if crlf else 'plain'}"
    request = b"".join(encode_command(["XADD", key, "MAXLEN", "~", "1000", "*", "f", value])
                       for _ in range(n)) + encode_command(["PING"])
    sock = connect(server.port)
    best = float("inf")
    try:
        for _ in range(REPEATS):
            start = time.perf_counter()
            sock.sendall(request)
            read_until_pong(sock)
            best = min(best, time.perf_counter() - start)
    finally:
        sock.close()
    return Measurement(n / best, count=n, figures={"seconds": best})
