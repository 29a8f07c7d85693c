"""`streamkeep crashbench`: its options, help (examples, exit codes), progress and output.

Owns the command line and what it prints: progress on stderr (tools.progress: a rich bar on a
terminal, else a plain line every few seconds and one at the end), the report on stdout (rich on a
terminal, plain text otherwise), `--json FILE` for machines and `--html FILE` for people (the
same document drawn by tools.report.crashbench; both through tools.safe_output: refused before the
run if they may not be written, written whole at the end), and the exit status. Cheap to import
(`streamkeep --help` builds this parser); the modes are imported when the command runs.
Must not touch: how crashes are made or judged (powerloss, sigkill, invariants, runs).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

EXIT_OK, EXIT_VIOLATED, EXIT_USAGE = 0, 1, 3
POLICIES = ("always", "everysec", "no")
MODES = ("exhaustive", "random", "sigkill", "ioerror")
TARGETS = ("streamkeep", "redis-server")  # sigkill mode's servers

HELP = "crash-recovery test bench: crash, recover, check invariants, report"
DESCRIPTION = """\
Run a seeded stream workload (XADD with checksummed payloads, consumer groups
with XREADGROUP / XACK / XCLAIM / XAUTOCLAIM, XDEL, XTRIM, compaction), crash
it, recover, and check what the recovered data holds against what was
acknowledged: no acknowledged write lost under always, losses within the
bound under everysec, always a prefix of the history (no phantoms, holes,
duplicates or resurrected entries), consumer groups equal to a model of that
prefix, recovery that opens unaided and twice the same, IDs never reused.

modes:
  exhaustive  power loss at every write, fsync, rename and directory fsync of
              one recorded run (the SQLite crash loop), under each fault model
  random      power loss at random points of runs of successive seeds
  sigkill     SIGKILL of a real server process at chosen moments (workload,
              compaction, segment rotation, recovery, replica sync, a primary
              rolled back under its replica; --target streamkeep or
              redis-server)
  ioerror     a full disk, EIO / ENOSPC on an AOF write or fsync at chosen
              points, met by a client that retries every error reply: an
              error reply must leave no trace, live or after recovery

--cluster N runs the sigkill mode against a cluster of N primaries (each a
`streamkeep serve --cluster-enabled yes` on its own data directory, made one
cluster as `streamkeep cluster create` makes it): RPUSH of unique values to
keys spread over the slots, through clients that follow MOVED; each round
SIGKILLs one node at a random moment, every node at once, one node while a
newer topology is being set, or (appendfsync always) the source or the target
of slots being moved with MIGRATE (clients follow ASK), restarts them on the
same port and directory,
and checks every shard: every acknowledged push in its list, in order, no
push twice, torn or never sent, each key only on its slot's node, and each
node holding the topology (epoch and CLUSTER NODES) it held before.

--workload types runs sorted sets, hashes (with field TTLs), sets and FCALL
of a loaded library instead (exhaustive, random and sigkill of streamkeep):
every acknowledged write there, a multi-key write whole or absent, the state
a prefix of the history.

--workload lists runs a reliable queue on lists instead (exhaustive, random
and sigkill of streamkeep or redis-server): LPUSH of unique jobs, BLMOVE /
LMOVE / RPOPLPUSH to a processing list, LREM to acknowledge, LPOP / RPOP
COUNT, LTRIM / LSET / LINSERT on a log: the lists a prefix of the history,
and no job lost, stored twice or in a queue and processing at once."""

EPILOG = f"""\
examples:
  streamkeep crashbench                       always, exhaustive, every model
  streamkeep crashbench --policy all --ops 300
  streamkeep crashbench --mode random --policy everysec --seconds 60
  streamkeep crashbench --mode sigkill --target redis-server --points 20
  streamkeep crashbench --workload types --policy all --ops 300
  streamkeep crashbench --workload lists --mode sigkill --points 20
  streamkeep crashbench --cluster 3 --points 30   (sigkill rounds on 3 nodes)
  streamkeep crashbench --json report.json    (--force replaces an existing one)
  streamkeep crashbench --policy all --ops 300 --html report.html
  streamkeep crashbench --replay powerloss:always:1:2000:666:1234:zeros

output:
  stdout: the report (one row per target x policy x mode x fault model, the
  invariants, each violation with its --replay token and history).
  --json FILE: the same as one JSON document, every crash point included.
  --html FILE: the same as one self-contained HTML page of charts: the
  workload's timeline with every crash point coloured by outcome, recovery
  times, points and violations per fault model and policy, each violation's
  details (needs matplotlib: streamkeep[report]).
  stderr: progress: a bar on a terminal, else a line every 5 seconds (points
  judged of the run's, the rate, the time left) and one at the end.

exit codes:
  {EXIT_OK}    every invariant held
  {EXIT_VIOLATED}    an invariant was violated (the report says which and how to replay
       it)
  {EXIT_USAGE}    usage or I/O error (the --json or --html FILE exists without --force,
       is inside a data directory or cannot be written, or --html without
       matplotlib: refused before the run, nothing written)
  130  interrupted (Ctrl-C): no report, and no --json or --html FILE"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from streamkeep.tools.crashbench.faultfs import MODEL_DESCRIPTIONS
    from streamkeep.tools.crashbench.workloads import WORKLOADS
    from streamkeep.tools.exits import positive_int

    parser.description = DESCRIPTION + "\n\npower-loss fault models (--model):\n" + "\n".join(
        textwrap.fill(text, 79, initial_indent=f"  {name:<17} ", subsequent_indent=" " * 20)
        for name, text in MODEL_DESCRIPTIONS.items())
    parser.epilog = EPILOG
    parser.add_argument("--policy", default="always", choices=(*POLICIES, "all"),
                        help="appendfsync policy (default always; all: each in turn)")
    parser.add_argument("--mode", choices=MODES,
                        help="default exhaustive (sigkill with --cluster)")
    parser.add_argument("--model", action="append", metavar="MODEL",
                        help="power-loss fault model, repeatable (default: all; listed "
                             "above)")
    parser.add_argument("--workload", choices=WORKLOADS,
                        help="streams (default): streams and consumer groups; types: sorted "
                             "sets, hashes with field TTLs, sets and FCALL of a loaded "
                             "function library; lists: a reliable job queue (LPUSH, "
                             "BLMOVE / LMOVE to a processing list, LREM)")
    parser.add_argument("--target", default="streamkeep", choices=TARGETS,
                        help="sigkill mode: the server to crash")
    parser.add_argument("--cluster", type=positive_int, metavar="N",
                        help="sigkill rounds against a cluster of N primaries, every "
                             "shard checked (its own workload: RPUSH to keys spread over "
                             "the slots)")
    parser.add_argument("--ops", type=positive_int, default=2000,
                        help="operations per recorded run (default 2000)")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float, help="random/sigkill: stop after this long")
    budget.add_argument("--points", type=positive_int,
                        help="random/sigkill: crash points to try")
    parser.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    parser.add_argument("--jobs", type=positive_int, default=2,
                        help="worker processes judging crash points (default 2)")
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON (a new "
                        "file, outside any data directory)")
    parser.add_argument("--html", metavar="FILE", help="also write the report as one "
                        "self-contained HTML page of charts (a new file, outside any data "
                        "directory)")
    parser.add_argument("--force", action="store_true", help="replace the --json or --html "
                        "FILE if it exists")
    parser.add_argument("--replay", metavar="TOKEN",
                        help="run the one crash point a violation's token names")


def main(args: argparse.Namespace) -> int:
    # The engine logs each torn tail it truncates on "streamkeep.*": thousands per run here,
    # and expected; the report counts them instead. (Restored after: a caller running the
    # command in process keeps its logging.)
    engine_log = logging.getLogger("streamkeep")
    level = engine_log.level
    engine_log.setLevel(logging.CRITICAL)
    try:
        return _main(args)
    finally:
        engine_log.setLevel(level)


def _main(args: argparse.Namespace) -> int:
    from streamkeep.tools.crashbench import report

    problem = _defaults(args) or _refused(args)  # now, not after the run
    if problem is not None:
        print(f"streamkeep crashbench: {problem}", file=sys.stderr)
        return EXIT_USAGE
    notes: list[str] = []
    refusals: tuple[type[Exception], ...] = (ValueError,)
    if getattr(args, "cluster", None) is not None or (args.replay or "").startswith("cluster:"):
        from streamkeep.tools.crashbench.cluster import ClusterFailed

        refusals += (ClusterFailed,)  # (a node that would not start: no report to give)
    try:
        rows = [_replay(args.replay, notes)] if args.replay else _run(args, notes)
    except refusals as err:
        print(f"streamkeep crashbench: {err}", file=sys.stderr)
        return EXIT_USAGE
    report.print_report(rows, sys.stdout, notes)
    if args.json or getattr(args, "html", None):
        from streamkeep.tools.safe_output import OutputRefused

        doc = report.to_json(rows, notes)
        try:
            if args.json:
                write_json(args.json, doc, args.force)
            if getattr(args, "html", None):
                from streamkeep.tools.report import crashbench as crashbench_report

                crashbench_report.write(args.html, doc, args.force)
        except OutputRefused as err:  # made meanwhile
            print(f"streamkeep crashbench: {err}", file=sys.stderr)
            return EXIT_USAGE
    return EXIT_OK if all(r.ok for r in rows) else EXIT_VIOLATED


def _defaults(args: argparse.Namespace) -> str | None:
    """The mode and workload not given filled in (--cluster's: sigkill, its own workload),
    or why the options do not go together."""
    cluster = getattr(args, "cluster", None)
    if cluster is not None:
        if args.mode not in (None, "sigkill"):
            return "--cluster runs the sigkill mode only"
        if args.workload is not None or getattr(args, "target", "streamkeep") != "streamkeep":
            return "--cluster runs its own workload against streamkeep nodes"
        args.mode = "sigkill"
    args.mode = args.mode or "exhaustive"
    args.workload = args.workload or "streams"
    return None


def _refused(args: argparse.Namespace) -> str | None:
    """Why an output asked for cannot be written (or drawn), or None."""
    from streamkeep.tools.safe_output import OutputRefused, check_output

    try:
        if args.json and not _is_stream(args.json):
            check_output(args.json, directory=False, force=args.force)
        if getattr(args, "html", None):
            from streamkeep.tools.report.charts import ReportUnavailable, require

            try:
                require()
            except ReportUnavailable as err:
                return str(err)
            check_output(args.html, directory=False, force=args.force)
    except OutputRefused as err:
        return str(err)
    return None


def _is_stream(path: str) -> bool:
    """A pipe or a terminal (`--json /dev/stdout`): written into as it is, never replaced."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def write_json(path: str, doc: dict[str, Any], force: bool = False) -> None:
    """FILE whole or not at all (tools.safe_output: beside it, then renamed; Ctrl-C or a full disk
    leave no half a report), or into a pipe as it is."""
    from streamkeep.tools.safe_output import write_file

    text = json.dumps(doc, indent=1, default=str)
    if _is_stream(path):
        with open(path, "w") as f:
            f.write(text)
        return
    write_file(path, [text.encode()], force=force)


def _replay(token: str, notes: list[str]) -> Any:
    """The row of the one crash point (or sigkill rounds) a violation's token names."""
    parts = token.split(":")
    if parts[0] == "sigkill" and len(parts) in (5, 6):
        from streamkeep.tools.crashbench import sigkill
        from streamkeep.tools.crashbench.runs import POLICIES, token_choice, token_number
        from streamkeep.tools.crashbench.workloads import WORKLOADS

        target = token_choice(token, "target", parts[1], TARGETS)
        policy = token_choice(token, "policy", parts[2], POLICIES)
        seed = token_number(token, "seed", parts[3])
        rounds = token_number(token, "rounds", parts[4], least=1)
        workload = token_choice(token, "workload", parts[5], WORKLOADS) if len(parts) == 6 \
            else "streams"
        notes.append(f"the same {rounds} rounds with seed {seed} (a process crash lands where "
                     f"the timing puts it: the rounds repeat, the exact kill instants do not)")
        return sigkill.rows(policy, target, seed, rounds, None, workload=workload)[0]
    if parts[0] == "cluster" and len(parts) == 5:
        from streamkeep.tools.crashbench import cluster
        from streamkeep.tools.crashbench.runs import POLICIES, token_choice, token_number

        policy = token_choice(token, "policy", parts[1], POLICIES)
        nodes = token_number(token, "nodes", parts[2], least=1)
        seed = token_number(token, "seed", parts[3])
        rounds = token_number(token, "rounds", parts[4], least=1)
        notes.append(f"the same {rounds} rounds on a cluster of {nodes} with seed {seed} (the "
                     f"rounds repeat, the exact kill instants do not)")
        return cluster.rows(policy, nodes, seed, rounds, None, notes=notes)[0]
    if parts[0] == "ioerror" and len(parts) == 8:
        from streamkeep.tools.crashbench import ioerrors

        notes.append(f"the I/O error point {token}")
        return ioerrors.replay(token)
    from streamkeep.tools.crashbench import runs

    row, lines = runs.replay_one(token)
    notes.extend(lines)
    return row


def _run(args: argparse.Namespace, notes: list[str]) -> list[Any]:
    from streamkeep.tools.crashbench import runs
    from streamkeep.tools.crashbench.faultfs import MODELS

    policies = POLICIES if args.policy == "all" else (args.policy,)
    models = tuple(args.model or MODELS)
    for model in models:
        if model not in MODELS:
            raise ValueError(f"--model {model}: one of {', '.join(MODELS)}")
    rows = []
    with _progress(sys.stderr) as progress:
        for policy in policies:
            if getattr(args, "cluster", None) is not None:
                from streamkeep.tools.crashbench import cluster

                rows.extend(cluster.rows(policy, args.cluster, args.seed, args.points,
                                         args.seconds, progress, notes))
                continue
            if args.mode == "sigkill":
                from streamkeep.tools.crashbench import sigkill

                rows.extend(sigkill.rows(policy, args.target, args.seed, args.points,
                                         args.seconds, progress, args.workload))
                continue
            if args.mode == "ioerror":
                from streamkeep.tools.crashbench import ioerrors

                if args.workload != "streams":
                    raise ValueError("--mode ioerror runs the streams workload only")

                rows.extend(ioerrors.rows(policy, args.seed, min(args.ops, 300),
                                          args.points or 10, progress))
                continue
            config = runs.Config(policy, args.mode, models, ops=args.ops, seed=args.seed,
                                 points=args.points, seconds=args.seconds, jobs=args.jobs,
                                 workload=args.workload)
            if args.mode == "random" and args.points is None and args.seconds is None:
                config.points = 200
            rows.extend(runs.powerloss_rows(config, progress))
    if args.mode == "ioerror":
        notes.append(f"ioerror: {args.points or 10} error points per fault, runs of up to "
                     f"{min(args.ops, 300)} operations, seed {args.seed}")
    elif getattr(args, "cluster", None) is not None:
        notes.append(f"sigkill of a cluster of {args.cluster} primaries: rounds kill one node "
                     f"at a random moment, every node at once, one node while a newer "
                     f"topology is set, or (always) the source or target of a slot move; "
                     f"every shard judged after the restart")
    elif args.mode == "sigkill":
        notes.append(f"sigkill: rounds on one data directory, seed {args.seed}; each round "
                     f"kills {args.target} at a moment (workload, compaction, rotation, "
                     f"recovery, replica sync, primary rollback) and judges the restarted "
                     f"server")
    else:
        notes.append(f"power loss: {args.ops} operations per recorded run, seed {args.seed}; "
                     f"fault models: {', '.join(models)}")
    return rows


Progress = Callable[[str, int, int], None]  # (what runs, points judged, points in it)


@contextlib.contextmanager
def _progress(stream: Any) -> Iterator[Progress]:
    """Progress on `stream` (tools.progress): a rich bar per part on a terminal, else plain
    lines with the rate and the time left (`RateLines`); the last line says how long the run
    took. An exception (Ctrl-C) ends it without that line."""
    from streamkeep.tools.progress import Bar, RateLines

    tally = RateLines("crashbench", "judged", stream)
    with Bar("crashbench", stream=stream, ticking=False) as bar:
        def update(what: str, done: int, total: int) -> None:
            if not bar.terminal:
                tally.update(what, done, total)
                return
            done = tally.count(what, done, total)
            bar.update(f"crashbench {what}", completed=done, total=total,
                       detail=f"{done:,}/{total:,}")

        yield update
    tally.finish()
