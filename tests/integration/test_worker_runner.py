"""``priorwatch worker``'s process entry (app/worker/runner.py, ``run``) on a migrated
SQLite database: SIGTERM and SIGINT stop the loop, the previous handlers come back."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

import pytest

from app.config import Settings
from app.worker.loop import LoopStats
from app.worker.runner import run
from app.worker.settings import WorkerSettings


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_worker_and_restores_the_handlers(
    sqlite_url: str,
    settings_for: Callable[..., Settings],
    signum: signal.Signals,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a sentinel handler stands in for the process's own: run() must replace it while it
    # runs (the signal would otherwise reach the sentinel, and the loop never stop) and put
    # it back afterwards
    reached_sentinel: list[int] = []

    def sentinel(received: int, _frame: FrameType | None) -> None:
        reached_sentinel.append(received)

    previous = signal.signal(signum, sentinel)
    stop = threading.Event()
    # the signal is sent from another thread once the loop waits on an empty queue;
    # Python runs the handler in the main thread, which is where run() is
    sender = threading.Thread(target=lambda: _signal_when_waiting(signum, caplog, stop))
    try:
        sender.start()
        with caplog.at_level(logging.INFO, logger="priorwatch.worker"):
            stats = run(
                settings_for(sqlite_url),
                WorkerSettings(warm_up=False, poll_interval_seconds=0.05),
                stop,
            )
        sender.join()
        assert stop.is_set()
        assert reached_sentinel == []
        assert stats == LoopStats(jobs_run=0, jobs_released=0, errors=0)
        assert f"received {signum.name}: stopping after the current window" in caplog.text
        assert signal.getsignal(signum) is sentinel
    finally:
        signal.signal(signum, previous)


def _signal_when_waiting(
    signum: signal.Signals, caplog: pytest.LogCaptureFixture, stop: threading.Event
) -> None:
    """Send ``signum`` to this process once the worker has logged that it is ready.

    Sent anyway after a minute, so that a worker that never gets ready fails the test
    instead of hanging it.
    """
    for _ in range(6_000):
        if "worker ready" in caplog.text:
            break
        stop.wait(0.01)
    os.kill(os.getpid(), signum)
