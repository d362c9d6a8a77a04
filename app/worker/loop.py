"""The worker's claim loop: a small explicit loop around a job source.

The loop knows nothing about SQL; it drives a :class:`JobSource` (the database
queue in production, an in-memory fake in the unit tests):

* claim a job (one or more units of work claimed together: a group of
  windows); none -> sleep ``poll_interval_seconds`` (woken early by stop);
* stop requested after the claim -> release the job (another worker takes
  its units at once) and return; otherwise run it (compute and persist: a
  fraction of a second per unit; the job source looks at the stop event
  between units and releases those not started), then look at the stop
  event again;
* any exception (database unreachable, restarted, deadlock victim) -> log it
  (one line for an ``expected`` error such as an outage, with its traceback
  the first time otherwise), wait with exponential backoff
  (``backoff_initial_seconds`` doubling up to ``backoff_max_seconds``), try
  again: the worker never dies of a database outage, and resumes on its own
  once the database answers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

log = logging.getLogger("priorwatch.worker")

JobT = TypeVar("JobT", bound=Sized)
"""A job: ``len(job)`` units of work (windows) claimed together."""


class JobSource(Protocol[JobT]):
    """Where jobs come from and where they go."""

    def claim(self) -> JobT | None:
        """Take the next job (exclusively) or return None when there is none."""

    def run(self, job: JobT, stop: threading.Event) -> int:
        """Process a claimed job (its results persisted or fenced out); once ``stop``
        is set, give back the units not started. Returns the units processed."""

    def release(self, job: JobT) -> None:
        """Give a claimed job back unprocessed."""


@dataclass
class Backoff:
    """Exponential backoff: ``initial_seconds`` doubling up to ``max_seconds``."""

    initial_seconds: float
    max_seconds: float
    _failures: int = 0

    def next_delay_seconds(self) -> float:
        """The wait before the next retry (and count one more failure)."""
        delay = min(self.max_seconds, self.initial_seconds * 2.0 ** min(self._failures, 30))
        self._failures += 1
        return delay

    def reset(self) -> None:
        self._failures = 0

    @property
    def failures(self) -> int:
        """Consecutive failures since the last success."""
        return self._failures


@dataclass
class LoopStats:
    """What one loop did (for logs, tests and benchmarks), counted in units of work."""

    jobs_run: int = 0
    jobs_released: int = 0
    errors: int = 0


class WorkerLoop(Generic[JobT]):
    """Claim, run, repeat until ``stop`` is set.

    Parameters
    ----------
    jobs : JobSource
    stop : threading.Event
        Set it (signal handler, embedded-mode shutdown) to end the loop after
        the current unit of work (the job's units not started are released).
    poll_interval_seconds : float
        Sleep when the queue is empty.
    backoff : Backoff
        Waits after errors.
    expected : callable, optional
        Whether an error is an expected condition (a database outage): logged
        in one line, without traceback.
    """

    def __init__(
        self,
        jobs: JobSource[JobT],
        *,
        stop: threading.Event,
        poll_interval_seconds: float,
        backoff: Backoff,
        expected: Callable[[BaseException], bool] = lambda _exc: False,
    ) -> None:
        self.jobs = jobs
        self.expected = expected
        self.stop = stop
        self.poll_interval_seconds = poll_interval_seconds
        self.backoff = backoff
        self.stats = LoopStats()

    def run_once(self) -> bool:
        """Claim and run at most one job; True if one was run (exceptions propagate)."""
        job = self.jobs.claim()
        if job is None:
            return False
        if self.stop.is_set():
            self.jobs.release(job)
            self.stats.jobs_released += len(job)
            return False
        done = self.jobs.run(job, self.stop)
        self.stats.jobs_run += done
        self.stats.jobs_released += len(job) - done
        return True

    def run(self) -> LoopStats:
        """Loop until ``stop`` is set; never raises for a failing job source."""
        log.info("worker loop started (poll interval %.3f s)", self.poll_interval_seconds)
        while not self.stop.is_set():
            try:
                worked = self.run_once()
            except Exception as exc:  # the loop must outlive any outage
                self.stats.errors += 1
                delay = self.backoff.next_delay_seconds()
                if self.backoff.failures == 1 and not self.expected(exc):
                    log.warning("worker error, retrying in %.2f s: %s", delay, exc, exc_info=True)
                else:
                    log.warning(
                        "worker error #%d, retrying in %.2f s: %s",
                        self.backoff.failures,
                        delay,
                        _one_line(exc),
                    )
                self.stop.wait(delay)
                continue
            if self.backoff.failures:
                log.info("worker resumed after %d failed attempts", self.backoff.failures)
                self.backoff.reset()
            if not worked:
                self.stop.wait(self.poll_interval_seconds)
        log.info(
            "worker loop stopped: %d jobs run, %d released, %d errors",
            self.stats.jobs_run,
            self.stats.jobs_released,
            self.stats.errors,
        )
        return self.stats


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
