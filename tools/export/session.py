"""The SparkSession an export starts, and how it writes Parquet: one place for both.

Owns the session settings of `streamkeep export`, the export bench and the demo (workers run
this interpreter with this import path; the throughput collector; no console progress bar;
Python filter push-down on; the `streamkeep` data source registered), the JVM it starts (in a
session of its own, so the terminal's Ctrl-C reaches only this process, which cancels the jobs;
its output in a log file, not on the command's stderr; shut down by `stop`) and the Parquet
writer options the export uses. Importing it stays cheap: pyspark is imported when a session
starts.
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
from typing import Any

from streamkeep.engine.wire.errors import StreamkeepError

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


def java_options() -> str:
    if " " in LOG_CONFIG or not os.path.exists(LOG_CONFIG):
        return JAVA_OPTIONS
    return f"{JAVA_OPTIONS} -Dlog4j2.configurationFile=file:{LOG_CONFIG}"


class StartError(StreamkeepError):
    """The JVM did not start: the reason, with the last line it logged."""


def start(master: str, app: str = "streamkeep-export") -> Any:
    """A new SparkSession on `master` with the data source registered. Its Python workers
    are this interpreter (PYSPARK_PYTHON, unless set) importing from this import path. A
    JVM this starts is in a session of its own and logs to a file (`stop` ends it)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys(p for p in [*sys.path, *os.environ.get("PYTHONPATH", "").split(
            os.pathsep)] if p))
    conf = SparkConf().setMaster(master).setAppName(app).setAll([
        ("spark.ui.showConsoleProgress", "false"),
        ("spark.driver.extraJavaOptions", java_options()),
        ("spark.executor.extraJavaOptions", java_options()),
        ("spark.sql.python.filterPushdown.enabled", "true")])
    gateway = None
    if SparkContext._gateway is None:  # (a JVM this process started before is used again)
        gateway = _launch(conf)
    previous = signal.getsignal(signal.SIGINT)
    try:
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
    # py4j logs a call that Ctrl-C interrupted on the root logger, traceback and all (which
    # stderr shows when nothing configured logging); the interrupt itself is what to report.
    # A logger's filter sees only the records logged on it, not those its children propagate:
    # py4j's own module loggers get it too.
    for name in ("", "py4j.clientserver", "py4j.java_gateway"):
        logging.getLogger(name).addFilter(_not_py4j)
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def _launch(conf: Any) -> Any:
    from pyspark.java_gateway import launch_gateway

    fd, log = tempfile.mkstemp(prefix="streamkeep-spark-", suffix=".log")
    try:
        with os.fdopen(fd, "wb") as out:
            gateway = launch_gateway(conf, popen_kwargs={
                "stdout": out, "stderr": out, "start_new_session": True})
    except Exception as err:
        with open(log, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        raise StartError(f"{err}{': ' + lines[-1] if lines else ''}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(log)  # (the JVM keeps writing to it, unlinked, until it exits)
    return gateway


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
    """End the gateway's JVM: it exits when its stdin closes; killed if it lingers."""
    import subprocess

    with contextlib.suppress(Exception):
        gateway.shutdown()
    proc = gateway.proc
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def register(spark: Any) -> None:
    from streamkeep.tools.export.datasource import StreamkeepDataSource

    spark.dataSource.register(StreamkeepDataSource)
