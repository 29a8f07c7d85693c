"""LATENCY: LATEST, HISTORY, RESET, GRAPH, DOCTOR, HISTOGRAM and HELP, with Redis's replies
and errors (src/latency.c). The events and the command histograms are the engine's
(engine.exec.latency, engine.exec.stats); what is sampled is set by latency-monitor-threshold
and latency-tracking. DOCTOR's report is streamkeep's own wording. Must not touch: stream
state.
"""

from __future__ import annotations

from streamkeep.engine.exec.context import Ctx
from streamkeep.engine.exec.latency import cumulative_usec
from streamkeep.engine.exec.table import (
    ADMIN,
    COMMANDS,
    Argv,
    container,
    help_subcommand,
    subcommand,
)
from streamkeep.engine.wire.errors import ReplyError
from streamkeep.engine.wire.reply import RespMap, Verbatim

LATENCY = container("latency", "A container for latency diagnostics commands.", group="server",
                    since="2.8.13")


def _event(arg: bytes) -> str:
    return arg.decode("utf-8", "surrogateescape")


@subcommand(LATENCY, "latest", 2, ADMIN, since="2.8.13",
            keys="",
            summary="Returns the latest latency samples for all events.")
def latency_latest(ctx: Ctx, argv: Argv) -> list:
    """[event, Unix time of its latest sample, that sample's milliseconds, the highest]."""
    return ctx.engine.latency.latest()


@subcommand(LATENCY, "history", 3, ADMIN, since="2.8.13",
            keys="",
            summary="Returns timestamp-latency samples for an event.", syntax="event")
def latency_history(ctx: Ctx, argv: Argv) -> list:
    return ctx.engine.latency.history(_event(argv[2]))


@subcommand(LATENCY, "reset", -2, ADMIN, since="2.8.13",
            keys="",
            summary="Resets the latency data for one or more events.", syntax="[event...]")
def latency_reset(ctx: Ctx, argv: Argv) -> int:
    monitor = ctx.engine.latency
    if len(argv) == 2:
        return monitor.reset()
    return sum(monitor.reset([_event(arg)]) for arg in argv[2:])


@subcommand(LATENCY, "graph", 3, ADMIN, since="2.8.13",
            keys="",
            summary="Returns a latency graph for an event.", syntax="event")
def latency_graph(ctx: Ctx, argv: Argv) -> Verbatim:
    graph = ctx.engine.latency.graph(_event(argv[2]))
    if graph is None:
        raise ReplyError(f"ERR No samples available for event '{_event(argv[2])}'")
    return Verbatim(graph)


@subcommand(LATENCY, "doctor", 2, ADMIN, since="2.8.13",
            keys="",
            summary="Returns a human-readable latency analysis report.")
def latency_doctor(ctx: Ctx, argv: Argv) -> Verbatim:
    engine = ctx.engine
    return Verbatim(engine.latency.doctor(int(engine.config["latency-monitor-threshold"])))


@subcommand(LATENCY, "histogram", -2, ADMIN, since="7.0.0",
            keys="",
            summary="Returns the cumulative distribution of latencies of a subset or all "
                    "commands.",
            syntax="[command...]")
def latency_histogram(ctx: Ctx, argv: Argv) -> RespMap:
    """Per command with a histogram: {calls, histogram_usec: {µs: cumulative calls}}. Named
    commands (a container names its subcommands too; "container|sub" one of them) or all;
    an unknown name is skipped."""
    stats = ctx.engine.stats
    if len(argv) == 2:
        names = [name for name, _histogram in stats.histograms()]
    else:
        names = [name for arg in argv[2:] for name in _named(arg.lower())]
    items = []
    for name in names:
        histogram = stats.commands[name].histogram if name in stats.commands else None
        if histogram is None:
            continue
        items.append((name.encode(), RespMap([
            (b"calls", sum(histogram)),
            (b"histogram_usec", RespMap(cumulative_usec(histogram))),
        ])))
    return RespMap(items)


def _named(arg: bytes) -> list[str]:
    """The command `arg` names (lookupCommandBySds) and, for a container, its subcommands."""
    head, _bar, sub = arg.partition(b"|")
    spec = COMMANDS.get(head)
    if spec is None or spec.internal:
        return []
    if sub:
        found = spec.subcommands.get(sub)
        return [found.name] if found is not None else []
    return [spec.name, *(spec.subcommands[s].name for s in spec.subcommands)]


help_subcommand(LATENCY, [
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the "
    "specified command names.",
    "    If no commands are specified then all histograms are replied.",
], since="2.8.13")
