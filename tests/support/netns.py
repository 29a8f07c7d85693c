"""Hosts in network namespaces for partition tests: three of them (p, r, c), a veth link between
each pair, faults as iptables rules inside the namespaces. Root only (the suite runs as root
here and in CI); `available()` says whether this machine can.

    with Net() as net:
        server = net.run("p", [python, "-m", "streamkeep", "serve", ...])
        net.cut("p", "r")      # nothing between them in either direction (a partition)
        net.lossy("p", "r", 0.2)   # a fifth of the packets between them dropped
        net.heal()             # every rule gone
"""

from __future__ import annotations

import os
import shutil
import subprocess
from itertools import combinations
from typing import Any

HOSTS = ("p", "r", "c")


def available() -> str | None:
    """None if network namespaces and iptables can be used here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs iproute2 and iptables)"
    return None


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


class Net:
    def __init__(self) -> None:
        tag = f"{os.getpid() % 10000}"
        self.ns = {host: f"sk{host}{tag}" for host in HOSTS}
        octet = 100 + os.getpid() % 150
        # One /24 per link: p-r is .1, p-c .2, r-c .3; each end's address is its host's.
        self.addr: dict[tuple[str, str], str] = {}
        for index, (a, b) in enumerate(combinations(HOSTS, 2), start=1):
            self.addr[a, b] = f"10.{octet}.{index}.1"
            self.addr[b, a] = f"10.{octet}.{index}.2"
        self.procs: list[subprocess.Popen] = []
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # a leftover
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        for a, b in combinations(HOSTS, 2):
            left, right = f"v{tag}{a}{b}", f"v{tag}{b}{a}"
            _sh("ip", "link", "add", left, "type", "veth", "peer", "name", right)
            for dev, host, peer in ((left, a, b), (right, b, a)):
                _sh("ip", "link", "set", dev, "netns", self.ns[host])
                _sh("ip", "-n", self.ns[host], "addr", "add", f"{self.addr[host, peer]}/24",
                    "dev", dev)
                _sh("ip", "-n", self.ns[host], "link", "set", dev, "up")
        self.rules: list[str] = []

    def to(self, src: str, dst: str) -> str:
        """The address `dst` has on its link with `src`."""
        return self.addr[dst, src]

    def run(self, host: str, argv: list[str], **popen: Any) -> subprocess.Popen:
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns[host], *argv], **popen)
        self.procs.append(proc)
        return proc

    def call(self, host: str, argv: list[str], timeout: float = 60) -> str:
        done = subprocess.run(["ip", "netns", "exec", self.ns[host], *argv],
                              capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{argv} in {host}: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def _rule(self, host: str, peer: str, extra: list[str]) -> None:
        ns, addr = self.ns[host], self.to(host, peer)
        for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
            _sh("ip", "netns", "exec", ns, "iptables", "-A", chain, flag, addr, *extra, "-j",
                "DROP")
        self.rules.append(host)

    def cut(self, a: str, b: str) -> None:
        """A partition between a and b: every packet dropped, both ways, on both ends."""
        self._rule(a, b, [])
        self._rule(b, a, [])

    def lossy(self, a: str, b: str, share: float) -> None:
        """Drop about `share` of the packets between a and b (each end, both directions)."""
        extra = ["-m", "statistic", "--mode", "random", "--probability", f"{share:.3f}"]
        self._rule(a, b, extra)
        self._rule(b, a, extra)

    def heal(self) -> None:
        for host in set(self.rules):
            _sh("ip", "netns", "exec", self.ns[host], "iptables", "-F")
        self.rules.clear()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __enter__(self) -> Net:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["HOSTS", "Net", "available"]
