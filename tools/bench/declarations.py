"""What the registry is made of: a row (:class:`Benchmark`), a figure derived from rows
(:class:`Figure`: two rows' ratio, which the runner interleaves, or a figure a row reported), what
a row is compared with inside it (:class:`Reference`: another checkout's run of it), a
section (:class:`Section`; a key without a dot is its own), a ratio between sections
(:class:`Ratio`), and the short forms the sections use. Must not touch: rows, running.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamkeep.tools.bench.env import BenchEnv
    from streamkeep.tools.bench.workload import Measurement

Run = Callable[["BenchEnv"], "float | Measurement"]


@dataclass(frozen=True)
class Reference:
    """What a row is compared with, each repeat in turns with the row's own run (the runner's
    :func:`.runner.compared`): ``run(env)``, or the reason there is none this run; ``name``
    in the notes; ``costs``: (figure, what the note calls it) both sides report, lower better."""

    name: str
    run: Callable[[BenchEnv], Run | str]
    costs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Benchmark:
    key: str  # stable id, "section.name"; ratios and figures refer to it
    workload: str  # the row label
    run: Run  # ops per second (messages, fsyncs, records), or a Measurement
    target: float | None = None  # the row's minimum rate, printed with PASS/FAIL
    rank: Callable[[Measurement], float] | None = None  # which repeat is best (highest); rate
    reference: Reference | None = None  # run in turns with it, the ratios in its figures


@dataclass(frozen=True)
class Figure:
    """A number derived from rows of the same run: the ratio of two rows' rates
    (``denominator`` set; the runner interleaves the two rows' repeats) or a figure the
    numerator's best run reported (``extra``), with an optional target: a minimum, or a
    maximum with ``at_most``."""

    section: str
    label: str
    numerator: str  # Benchmark.key
    denominator: str | None = None  # Benchmark.key
    extra: str | None = None  # a Measurement.figures name
    unit: str = "x"  # "x" (a ratio), "" (a mean count), "count", "/s" (a rate), or one of UNITS
    target: float | None = None
    at_most: bool = False  # the target is a maximum

    UNITS = {"s": "{:.3f} s", "ms": "{:.1f} ms", "us": "{:,.1f} us", "MB": "{:.2f} MB"}

    def format(self, value: float) -> str:
        if self.unit == "x":
            return f"{value:.2f}x"
        if self.unit == "/s":
            return f"{value:,.0f}/s"
        if self.unit == "count":
            return f"{value:,.0f}"
        if self.unit in self.UNITS:
            return self.UNITS[self.unit].format(value)
        return f"{value:.1f}"


def _qualified(section: str, key: str) -> str:
    return key if "." in key else f"{section}.{key}"


@dataclass(frozen=True)
class Section:
    """A section's rows and figures. A key without a dot (a row's, a figure's) is the
    section's own (``xadd`` in ``embedded``: ``embedded.xadd``); a figure's section is this
    one."""

    name: str  # the rows' first column
    benchmarks: tuple[Benchmark, ...]
    option: str = ""  # another name ``--sections`` accepts for it
    figures: tuple[Figure, ...] = ()  # derived from its rows, in print order
    # The sizes its rows run at, (what, a value, or a Size or any callable of the run's env),
    # for its header line (:meth:`describe`); what the rows do is their labels' and the manual's.
    sizes: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        name = self.name
        object.__setattr__(self, "benchmarks", tuple(
            dataclasses.replace(b, key=_qualified(name, b.key)) for b in self.benchmarks))
        object.__setattr__(self, "figures", tuple(
            dataclasses.replace(f, section=name, numerator=_qualified(name, f.numerator),
                                denominator=f.denominator and _qualified(name, f.denominator))
            for f in self.figures))

    def describe(self, env: BenchEnv) -> list[str]:
        """Its header line, generated from its :attr:`sizes` (none without)."""
        values = [(what, size(env) if callable(size) else size) for what, size in self.sizes]
        return [f"{self.name}: " + "; ".join(
            f"{what}: {value:,}" if isinstance(value, int) else f"{what}: {value:g}"
            if isinstance(value, float) else f"{what}: {value}" for what, value in values)
        ] if values else []

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, self.option) if self.option else (self.name,)


@dataclass(frozen=True)
class Ratio:
    workload: str
    reference: str  # what it is compared with
    numerator: str  # Benchmark.key
    denominator: str


def ratio(label: str, numerator: str, denominator: str, target: float | None = None,
          at_most: bool = False) -> Figure:
    """A section's figure: two rows' rates, ``numerator / denominator``."""
    return Figure("", label, numerator, denominator, target=target, at_most=at_most)


def extra(label: str, numerator: str, name: str, unit: str = "x", target: float | None = None,
          at_most: bool = False) -> Figure:
    """A section's figure: ``name`` of what the row ``numerator``'s best run reported."""
    return Figure("", label, numerator, extra=name, unit=unit, target=target, at_most=at_most)


def lowest(name: str) -> Callable[[Measurement], float]:
    """A row's ``rank`` whose best repeat is the one reporting the lowest figure ``name``."""
    return lambda m: -m.figures.get(name, math.inf)


def vs_redis(label: str, key: str, target: float | None = None) -> Figure:
    """``<label>: streamkeep / redis-server``: the row ``key`` over its pair ``redis_<key>``."""
    return ratio(f"{label}: streamkeep / redis-server", key, f"redis_{key}", target)


# The two servers a pair of rows runs against: (key prefix, label, the run's shared server).
SERVERS = (("", "streamkeep", "streamkeep"), ("redis_", "redis-server", "redis_aof"))
ServerOf = Callable[["BenchEnv"], Any]


def each_server(label: str, key: str, name: str, unit: str = "x") -> tuple[Figure, ...]:
    """The figure ``name`` of the row ``key`` and of its pair ``redis_<key>``, ``{server}`` in
    ``label`` naming each."""
    return tuple(extra(label.replace("{server}", server), prefix + key, name, unit)
                 for prefix, server, _shared in SERVERS)


def both(key: str, label: str, workload: Callable[..., Any], *args: Any,
         appendfsync: str = "everysec",
         servers: tuple[ServerOf, ServerOf] | None = None) -> tuple[Benchmark, Benchmark]:
    """A row against ``streamkeep serve`` and its pair against redis-server (``redis_<key>``),
    each ``<label>: <server>``: ``workload(env, server, *args)`` on the run's shared server
    of that appendfsync policy (:mod:`.processes`), or on what ``servers`` (streamkeep's,
    redis-server's) give."""
    from streamkeep.tools.bench import processes

    def on(server_of: ServerOf) -> Run:
        return lambda env: workload(env, server_of(env), *args)

    pair = servers or tuple(lambda env, name=name: getattr(processes, name)(env, appendfsync)
                            for _prefix, _label, name in SERVERS)
    return tuple(Benchmark(prefix + key, f"{label}: {name}", on(server_of))  # type: ignore[return-value]
                 for (prefix, name, _shared), server_of in zip(SERVERS, pair, strict=True))
