"""Progress of a long Spark job on the terminal: events done / total, rate, ETA.

Spark reports progress per task; the job's share of finished tasks (over all its stages) times
the number of input events is the estimate of events done. Printed on stderr: in place on a
terminal, one line every `every_s` otherwise (CI logs).
"""

from __future__ import annotations

import sys
import threading
import time


def fmt_eta(seconds: float) -> str:
    seconds = int(max(0, seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """'12,000 / 48,000 events (25%), 3,000 events/s, ETA 0:00:12' (pure)."""
    pct = 100 * done / total if total else 100
    rate = done / elapsed_s if elapsed_s > 0 else 0
    eta = (total - done) / rate if rate > 0 else None
    return (
        f"{done:,} / {total:,} events ({pct:.0f}%), {rate:,.0f} events/s, "
        f"ETA {fmt_eta(eta) if eta is not None else '?'}"
    )


class JobProgress:
    """Context manager: runs the jobs started inside it under one job group and reports them."""

    def __init__(
        self, spark, total_events: int, label: str = "replay", out=None, every_s: float = 2.0
    ) -> None:
        self.sc = spark.sparkContext
        self.total = total_events
        self.label = label
        self.out = out or sys.stderr
        self.every_s = every_s
        self.group = f"replmon-{label}-{id(self)}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._start = 0.0
        self._tty = hasattr(self.out, "isatty") and self.out.isatty()

    def __enter__(self):
        self.sc.setJobGroup(self.group, f"replmon {self.label}")
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        self.sc.setLocalProperty("spark.jobGroup.id", None)
        if exc[0] is None:
            self._print(progress_line(self.total, self.total, time.monotonic() - self._start), final=True)
        return False

    def fraction(self) -> float:
        tracker = self.sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        return done / total if total else 0.0

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                done = int(self.total * self.fraction())
            except Exception:  # noqa: BLE001 - py4j raises several types while the JVM goes away; best effort
                return
            self._print(progress_line(done, self.total, time.monotonic() - self._start))

    def _print(self, line: str, final: bool = False) -> None:
        if self._tty:
            self.out.write(f"\r{self.label}: {line}   " + ("\n" if final else ""))
        else:
            self.out.write(f"{self.label}: {line}\n")
        self.out.flush()
