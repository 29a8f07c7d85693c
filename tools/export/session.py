"""The SparkSession an export starts, and how it writes Parquet: one place for both.

Owns the session settings of `streamkeep export`, the export bench and the demo (workers run
this interpreter with this import path; the throughput collector; no console progress bar;
Python filter push-down on; the `streamkeep` data source registered) and the Parquet writer
options the export uses, and Ctrl-C during and after the start (it stops the command, never
hangs it). Importing it stays cheap: pyspark is imported when a session starts.
Must not touch: what is read (tools.export.datasource), the command line (tools.export.cli).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

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


def start(master: str, app: str = "streamkeep-export") -> Any:
    """A new SparkSession on `master` with the data source registered. Its Python workers
    are this interpreter (PYSPARK_PYTHON, unless set) importing from this import path."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys(p for p in [*sys.path, *os.environ.get("PYTHONPATH", "").split(
            os.pathsep)] if p))
    with _ctrl_c_after_start():
        spark = (SparkSession.builder.master(master).appName(app)
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.driver.extraJavaOptions", java_options())
                 .config("spark.executor.extraJavaOptions", java_options())
                 .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
    return spark


@contextlib.contextmanager
def _ctrl_c_after_start() -> Iterator[None]:
    """Ctrl-C while the session starts takes effect once it has started, and from then on
    raises KeyboardInterrupt where the command is, as before. PySpark's own SIGINT handler
    (installed as its context starts) calls into the JVM gateway first: received while the
    main thread waits on that gateway (starting, registering, writing a table), the call
    waits behind the one in progress and the command hangs instead of stopping."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C meanwhile: raised here


def register(spark: Any) -> None:
    from streamkeep.tools.export.datasource import StreamkeepDataSource

    spark.dataSource.register(StreamkeepDataSource)
