"""The SparkSession an export starts, and how it writes Parquet: one place for both.

Owns the session settings of `streamkeep export`, the export bench and the demo (workers run
this interpreter with this import path; the throughput collector; no console progress bar;
Python filter push-down on; the `streamkeep` data source registered), the JVM it starts and
the Parquet writer options the export uses. The JVM is in a session of its own, so the
terminal's Ctrl-C reaches only this process, which cancels the jobs; it dies with this process
(tools.temporaries: PR_SET_PDEATHSIG, set in the JVM's process before it runs, so even SIGKILL
of the command leaves no JVM behind; an interrupt while it starts kills it); its files (its
log, py4j's connection file, Spark's local directories, Java's temporary files) are in one
temporary directory of the command's, `streamkeep-spark-<pid>-<token>`, removed by `stop`
(or swept by a later export when the command was killed); `stop` shuts it down. Importing it
stays cheap: pyspark is imported when a session starts.
Must not touch: what is read (tools.export.datasource), the command line (tools.export.cli).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError
from streamkeep.tools import temporaries

# The entries columns whose values are (nearly) all distinct: Parquet's dictionary encoding
# would fill a dictionary, give up at its size limit and write them plain anyway, after
# hashing every value (a fifth of the write's time here). The other columns keep it.
PARQUET_OPTIONS = {f"parquet.enable.dictionary#{column}": "false" for column in (
    "id", "pairs.list.element.value", "fields.key_value.value")}

def default_partitions(spark: Any) -> int:
    """An export's read partitions: one per core of the cluster (its default parallelism).
    More are slower: each task pays for its own Parquet writer and file (local[2], 2M entries,
    alternating in one JVM: 2 partitions 295k-335k entries/s, 4: 260k-298k, 6: 224k-290k)."""
    return int(spark.sparkContext.defaultParallelism)


# An export is a batch job: the throughput collector, not G1's pause targets (measured here:
# 5-15% faster end to end on local[2]).
JAVA_OPTIONS = "-XX:+UseParallelGC"
# Errors only (Spark's default logs its start-up and warnings on stderr): the file beside this
# module, unless its path has a space (Spark splits Java options on white space).
LOG_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")


def java_options(work: str | None = None) -> str:
    """The JVM's options; with `work` (the driver's: a JVM this process starts), its
    temporary files go there, and it writes no /tmp/hsperfdata file."""
    options = JAVA_OPTIONS
    if " " not in LOG_CONFIG and os.path.exists(LOG_CONFIG):
        options += f" -Dlog4j2.configurationFile=file:{LOG_CONFIG}"
    if work is not None and " " not in work:  # (Spark splits the options on white space)
        options += f" -Djava.io.tmpdir={work} -XX:-UsePerfData"
    return options


class StartError(StreamkeepError):
    """The JVM did not start: the reason, with the last line it logged."""


def start(master: str, app: str = "streamkeep-export") -> Any:
    """A new SparkSession on `master` with the data source registered. Its Python workers
    are this interpreter (PYSPARK_PYTHON, unless set) importing from this import path. A
    JVM this starts is in a session of its own and logs to a file (`stop` ends it)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    # py4j logs a call that Ctrl-C interrupted on the root logger, traceback and all (which
    # stderr shows when nothing configured logging): from before the JVM starts, since the
    # start itself is calls into it. The interrupt itself is what to report. A logger's
    # filter sees only the records logged on it, not those its children propagate: py4j's
    # own module loggers get it too.
    for name in ("", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(name).addFilter(_not_py4j)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys(p for p in [*sys.path, *os.environ.get("PYTHONPATH", "").split(
            os.pathsep)] if p))
    # (a JVM this process started before is used again: it has its files already)
    work = temporaries.temp_directory_path("spark") if SparkContext._gateway is None else None
    try:
        conf = SparkConf().setMaster(master).setAppName(app).setAll([
            ("spark.ui.showConsoleProgress", "false"),
            ("spark.driver.extraJavaOptions", java_options(work)),
            ("spark.executor.extraJavaOptions", java_options()),
            ("spark.sql.python.filterPushdown.enabled", "true")])
        if work is not None and master.startswith("local"):
            conf.set("spark.local.dir", work)  # (a cluster's executors have their own)
        gateway = None if work is None else _launch(conf, work)
    except BaseException:
        if work is not None:
            temporaries.remove(work)
        raise
    previous = signal.getsignal(signal.SIGINT)
    try:
        with warnings.catch_warnings():
            # A context interrupted while it starts stops itself, and warns when the JVM does
            # not answer; the JVM is ended below whatever it was doing.
            warnings.filterwarnings("ignore", "Unable to cleanly shutdown", RuntimeWarning)
            spark = SparkSession.builder.config(conf=conf).getOrCreate() if gateway is None \
                else SparkSession(SparkContext(conf=conf, gateway=gateway))
    except BaseException:
        if gateway is not None:
            _shutdown(gateway)
        raise
    if signal.getsignal(signal.SIGINT) is not previous:
        # SparkContext's own Ctrl-C handler cancels the jobs by a call into the JVM from inside
        # the call it interrupts, which py4j refuses (a reentrant read, logged with tracebacks).
        # The handler before stays: stopping the context (stop) cancels the jobs.
        signal.signal(signal.SIGINT, previous)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _launch(conf: Any, work: str) -> Any:
    """Start the JVM, its files in `work`: the gateway to it (`work` goes with it)."""
    from pyspark.java_gateway import launch_gateway

    log = os.path.join(work, "jvm.log")
    try:
        with open(log, "wb") as out, _jvm_tied(work) as started:
            try:
                gateway = launch_gateway(conf, popen_kwargs={
                    "stdout": out, "stderr": out, "start_new_session": True})
            except BaseException:  # (an interrupt while it starts: it is not left running)
                for proc in started:
                    temporaries.kill_group(proc)
                    temporaries.untrack(proc)
                raise
    except Exception as err:
        with open(log, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        raise StartError(f"{err}{': ' + lines[-1] if lines else ''}") from None
    gateway.streamkeep_work = work  # removed by _shutdown
    return gateway


@contextlib.contextmanager
def _jvm_tied(work: str) -> Iterator[list[Any]]:
    """While pyspark launches its JVM: the process it starts (listed, tracked by
    tools.temporaries) is asked to die with this process before it runs (pyspark's own
    preexec_fn, which keeps Ctrl-C from it, is kept), and py4j's connection file goes in the
    command's temporary directory. (pyspark takes no preexec_fn of ours: its Popen is
    wrapped for the launch.)"""
    import pyspark.java_gateway as java_gateway

    started: list[Any] = []
    real = java_gateway.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        theirs = kwargs.get("preexec_fn")
        kwargs["preexec_fn"] = temporaries.die_with_parent_hook(theirs) or theirs
        proc = real(*args, **kwargs)
        temporaries.track(proc)
        started.append(proc)
        return proc

    setattr(java_gateway, "Popen", popen)  # noqa: B010 (a class replaced by a function)
    system_temp, tempfile.tempdir = tempfile.tempdir, work  # (pyspark's mkdtemp())
    try:
        yield started
    finally:
        setattr(java_gateway, "Popen", real)  # noqa: B010
        tempfile.tempdir = system_temp


def _not_py4j(record: logging.LogRecord) -> bool:
    return f"{os.sep}py4j{os.sep}" not in record.pathname


def stop(spark: Any) -> None:
    """Stop a session `start` made, and the JVM it started (waited for)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    try:
        with warnings.catch_warnings():
            # After Ctrl-C the context may not stop by a call into the JVM (pyspark warns so):
            # the JVM is ended below whatever it was doing.
            warnings.simplefilter("ignore", RuntimeWarning)
            spark.stop()
    finally:
        if gateway is not None and getattr(gateway, "proc", None) is not None:
            SparkContext._gateway = SparkContext._jvm = None
            _shutdown(gateway)


def _shutdown(gateway: Any) -> None:
    """End the gateway's JVM: it exits when its stdin closes; killed if it lingers (what is
    left of its process group too), and its temporary directory removed."""
    with contextlib.suppress(Exception):
        gateway.shutdown()
    proc = gateway.proc
    try:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        temporaries.end_child(proc, timeout=30)
    finally:
        # (not getattr: a py4j gateway answers any attribute it lacks with a JavaMember)
        work = vars(gateway).get("streamkeep_work")
        if isinstance(work, str):
            temporaries.remove(work)


def register(spark: Any) -> None:
    from streamkeep.tools.export.datasource import StreamkeepDataSource

    spark.dataSource.register(StreamkeepDataSource)
