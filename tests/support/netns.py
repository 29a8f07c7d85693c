"""Hosts in network namespaces for partition tests: three of them (p, r, c), a veth link between
each pair, faults as iptables rules inside the namespaces. Root only (the suite runs as root
here and in CI); `available()` says whether this machine can.

    with Net() as net:
        server = net.run("p", [python, "-m", "streamkeep", "serve", ...])
        net.cut("p", "r")      # nothing between them in either direction (a partition)
        net.lossy("p", "r", 0.2)   # a fifth of the packets between them dropped
        net.heal()             # every rule gone

`Bridge` is the variant for a cluster, whose nodes each announce ONE address every other host
must reach: named hosts, each with one address on a Linux bridge that lives in a namespace of
its own (a veth from every host to it), the same cuts as iptables rules by the peer's address,
and `inside(host)`: a thread of the calling process in the host's namespace, to talk to the
hosts from the test itself.

    with Bridge(["n1", "n2", "w"]) as net:
        net.run("n1", [...]); net.addr["n1"]   # 10.77.0.1
        net.cut("n1", "n2"); net.isolate("n1"); net.heal()
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
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


CLONE_NEWNET = 0x40000000  # (setns(2)'s flag: only the calling thread changes namespace)


def enter(ns: str) -> None:
    """The calling thread moved into network namespace `ns` (sockets it opens from then on
    live there, whichever thread uses them later)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {ns}: {os.strerror(errno)}")
    finally:
        os.close(fd)


class Bridge:
    """`hosts` in namespaces of their own, host i at 10.77.0.i on one bridge. Everything made
    is removed by `close` (also when the making fails half-way): the processes started, then
    any process left in the namespaces, then the namespaces (their links, the bridge and the
    rules go with them)."""

    SUBNET = "10.77.0"  # (inside the namespaces only: no clash with the machine's own)

    def __init__(self, hosts: Sequence[str]) -> None:
        tag = f"{os.getpid() % 100000}"
        self.hosts = list(hosts)
        self.hub = f"skbr{tag}"
        self.ns = {host: f"skb{tag}{host}" for host in self.hosts}
        self.addr = {host: f"{self.SUBNET}.{i}" for i, host in enumerate(self.hosts, start=1)}
        self.procs: list[subprocess.Popen] = []
        self.cuts: set[tuple[str, str]] = set()
        self.threads: list[ThreadPoolExecutor] = []
        try:
            self._make(tag)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def sweep() -> None:
        """The namespaces a run killed before its `close` left (an interrupt in the middle of
        it): those of a tag no live process has."""
        live = {str(int(name) % 100000) for name in os.listdir("/proc") if name.isdigit()}
        listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
        for line in listed.stdout.splitlines():
            name = line.split()[0] if line.split() else ""
            match = re.fullmatch(r"skbr?(\d+)[a-z0-9]*", name)
            if match is None or match.group(1) in live:
                continue
            subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def _make(self, tag: str) -> None:
        self.sweep()
        for ns in (self.hub, *self.ns.values()):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # a leftover
            _sh("ip", "netns", "add", ns)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        _sh("ip", "-n", self.hub, "link", "set", "br0", "up")
        for i, host in enumerate(self.hosts, start=1):
            port, ns = f"h{i}", self.ns[host]
            _sh("ip", "-n", self.hub, "link", "add", port, "type", "veth", "peer", "name",
                "eth0", "netns", ns)
            _sh("ip", "-n", self.hub, "link", "set", port, "master", "br0", "up")
            _sh("ip", "-n", ns, "addr", "add", f"{self.addr[host]}/24", "dev", "eth0")
            _sh("ip", "-n", ns, "link", "set", "eth0", "up")

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

    def inside(self, host: str) -> ThreadPoolExecutor:
        """One thread in `host`'s namespace: what is submitted to it talks from there."""
        thread = ThreadPoolExecutor(1, initializer=enter, initargs=(self.ns[host],))
        self.threads.append(thread)
        return thread

    def _drop(self, host: str, peer: str) -> None:
        for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
            _sh("ip", "netns", "exec", self.ns[host], "iptables", "-A", chain, flag,
                self.addr[peer], "-j", "DROP")

    def cut(self, a: str, b: str) -> None:
        """Nothing between a and b, both ways, dropped on both ends."""
        if (a, b) in self.cuts or a == b:
            return
        self._drop(a, b)
        self._drop(b, a)
        self.cuts |= {(a, b), (b, a)}

    def isolate(self, a: str) -> None:
        """a cut from every other host."""
        for other in self.hosts:
            self.cut(a, other)

    def heal(self) -> None:
        for host in {a for a, _b in self.cuts}:
            _sh("ip", "netns", "exec", self.ns[host], "iptables", "-F")
        self.cuts.clear()

    def close(self) -> None:
        for thread in self.threads:
            thread.shutdown(wait=False, cancel_futures=True)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        for ns in (*self.ns.values(), self.hub):
            found = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in found.stdout.split():  # (a child of a process started here)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def __enter__(self) -> Bridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["HOSTS", "Bridge", "Net", "available", "enter"]
