"""Debian's prometheus-redis-exporter for tests: `Exporters` starts one exporter per server
(`start(port)`: on a free loopback port, pointed at redis://127.0.0.1:port, with
`-check-streams` so that the stream families are there) and kills them all at `close()`;
`scrape(port)` reads its /metrics once and returns it parsed: family name -> {labels: value},
the labels as a sorted tuple of (name, value) pairs."""

from __future__ import annotations

import http.client
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from streamkeep.tools.servers import free_port

BINARY = "prometheus-redis-exporter"
START_TIMEOUT = 15.0
ATTEMPTS = 3
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Labels = tuple[tuple[str, str], ...]
Metrics = dict[str, dict[Labels, float]]


def binary() -> str:
    found = shutil.which(BINARY)
    assert found is not None, f"{BINARY} not found on PATH (make test installs it: Debian " \
                              f"prometheus-redis-exporter)"
    return found


def parse(text: str) -> Metrics:
    """Prometheus's text format: every family that has a `# TYPE` line, with its samples (a
    summary's _sum and _count under their own names, as the format writes them)."""
    metrics: Metrics = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            metrics.setdefault(line.split()[2], {})
            continue
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match is not None, line
        name, labels, value = match.groups()
        family = name if name in metrics else re.sub(r"_(sum|count|bucket)$", "", name)
        pairs = tuple(sorted(_LABEL.findall(labels or "")))
        metrics.setdefault(family, {})[pairs if family == name else (*pairs, ("", name))] = \
            float(value)
    return metrics


class Exporters:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[subprocess.Popen] = []
        self.ports: dict[int, int] = {}  # server port -> exporter port

    def start(self, server_port: int, scheme: str = "redis", extra: tuple[str, ...] = ()) -> int:
        """`scheme` rediss and `extra` its -tls-* options: the server over TLS. An exporter
        that exits at once (its port taken meanwhile by another test's server: free_port's
        race) is started again on another port."""
        for _attempt in range(ATTEMPTS):
            port = free_port()
            log = open(self.logs / f"exporter-{server_port}.log", "wb")  # noqa: SIM115
            with log:
                proc = subprocess.Popen(
                    [binary(), "-redis.addr", f"{scheme}://127.0.0.1:{server_port}",
                     "-web.listen-address", f"127.0.0.1:{port}", "-check-streams", "*",
                     *extra],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            self.procs.append(proc)
            self.ports[server_port] = port
            if self._serving(proc, port):
                return port
        raise AssertionError(f"{BINARY} did not start (see {self.logs})")

    @staticmethod
    def _serving(proc: subprocess.Popen, port: int) -> bool:
        """Whether the exporter answers HTTP on its port; False once it has exited."""
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(url, timeout=30):
                    return proc.poll() is None
            except urllib.error.HTTPError:
                return proc.poll() is None  # (an HTTP answer all the same)
            except (OSError, http.client.HTTPException):
                time.sleep(0.05)
        return False

    def scrape(self, server_port: int) -> Metrics:
        """The exporter's metrics for that server."""
        url = f"http://127.0.0.1:{self.ports[server_port]}/metrics"
        with urllib.request.urlopen(url, timeout=30) as response:
            return parse(response.read().decode())

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
        self.procs.clear()


__all__ = ["BINARY", "Exporters", "Labels", "Metrics", "binary", "parse"]
