"""Progress of the Spark jobs a command runs, as finished / known tasks.

Spark's own console progress bar is off (spark.session: it writes over the terminal from the
JVM); instead a thread polls the SparkContext's status tracker and hands
``report(done_tasks, known_tasks)`` to a store.progress.ProgressReporter. Verify runs several
jobs one after the other, so the known total grows as they start: "some progress", honestly
counted, rather than a guess of the whole.
"""
from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Callable

POLL_S = 0.5


class SparkTaskProgress:
    """``with SparkTaskProgress(sc, report): run_jobs()``: reports the tasks of the jobs started
    inside the block (jobs that ran before it are not counted)."""

    def __init__(self, sc: Any, report: Callable[[int, int], None], poll_s: float = POLL_S) -> None:
        self.sc = sc
        self.report = report
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._before: set[int] = set()
        self._stages: dict[int, tuple[int, int]] = {}  # stage id -> (tasks, completed), kept once gone

    def counts(self) -> tuple[int, int]:
        """(completed, total) tasks of the jobs started since entering."""
        tracker = self.sc.statusTracker()
        for job_id in tracker.getJobIdsForGroup(None):
            if job_id in self._before:
                continue
            job = tracker.getJobInfo(job_id)
            for stage_id in (job.stageIds if job is not None else ()):
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    self._stages[stage_id] = (info.numTasks, info.numCompletedTasks)
        total = sum(t for t, _ in self._stages.values())
        done = sum(c for _, c in self._stages.values())
        return done, total

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.report(*self.counts())
            except Exception:  # noqa: BLE001 - progress must never break the job it watches
                return

    def __enter__(self) -> SparkTaskProgress:
        self._before = set(self.sc.statusTracker().getJobIdsForGroup(None))
        self._thread = threading.Thread(target=self._run, name="rmqd-spark-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if typ is None:
            try:
                self.report(*self.counts())
            except Exception:  # noqa: BLE001
                pass


__all__ = ["SparkTaskProgress"]
