"""The export command's progress display: the running table's Spark tasks, on stderr.

Owns one transient rich bar per table write (the table's name, tasks done of the stage's
tasks, time elapsed) when stderr is a terminal, else a line every few seconds
(tools.progress.Ticker: ``streamkeep export: writing entries: 12/48 tasks, 15 s elapsed``),
both fed from Spark's status tracker by a polling thread. Must not touch: stdout (the
command's summary), what is exported.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

POLL_S = 0.5


class TableProgress:
    """`with TableProgress(spark, "entries"): df.write...`: a bar while the write runs."""

    def __init__(self, spark: Any, label: str, enabled: bool = True) -> None:
        self._spark = spark
        self._label = label
        self._progress: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticker: Any = None
        if enabled and not sys.stderr.isatty():
            from streamkeep.tools.progress import Ticker

            self._ticker = Ticker("streamkeep export", f"writing {label}")
        elif enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(TextColumn(f"{label:<10} tasks"), BarColumn(),
                                      MofNCompleteColumn(), TimeElapsedColumn(),
                                      console=Console(file=sys.stderr), transient=True,
                                      refresh_per_second=2)
            self._task = self._progress.add_task(label, total=None)

    def __enter__(self) -> TableProgress:
        if self._ticker is not None:
            self._ticker.__enter__()
        if self._progress is not None:
            self._progress.start()
        if self._progress is not None or self._ticker is not None:
            self._thread = threading.Thread(target=self._poll, name="export-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._progress is not None:
            self._progress.stop()
        if self._ticker is not None:
            self._ticker.__exit__()

    def _poll(self) -> None:
        tracker = self._spark.sparkContext.statusTracker()
        while not self._stop.wait(POLL_S):
            total = done = 0
            for stage in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage)
                if info is not None:
                    total += info.numTasks
                    done += info.numCompletedTasks
            if total and self._progress is not None:
                self._progress.update(self._task, total=total, completed=done)
            if total and self._ticker is not None:
                self._ticker.update(f"{done}/{total} tasks")
