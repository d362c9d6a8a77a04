"""The claim loop against an in-memory fake queue (no database).

The fake mimics the queue's contract: a job is a group of up to ``group_size``
units (ints), exclusive until run or released; a run looks at the stop event
between units and gives back those not started; runs can fail like a
database outage would.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections import deque
from dataclasses import dataclass, field

import pytest

from app.worker.loop import Backoff, WorkerLoop
from app.worker.runner import install_stop_handlers

WAIT_SECONDS = 10.0
"""Upper bound of every wait in these tests (they finish in milliseconds)."""


@dataclass
class FakeQueue:
    """Units are ints; ``failures`` makes the next N claims raise (an outage)."""

    pending: deque[int] = field(default_factory=deque)
    held: set[int] = field(default_factory=set)
    done: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    failures: int = 0
    claims: int = 0
    group_size: int = 1
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_claim: threading.Event | None = None
    on_unit: threading.Event | None = None
    all_done: threading.Event = field(default_factory=threading.Event)
    expected: int = 0

    def claim(self) -> list[int] | None:
        if self.on_claim is not None:
            self.on_claim.set()
        with self.lock:
            self.claims += 1
            if self.failures:
                self.failures -= 1
                raise ConnectionError("database unreachable")
            if not self.pending:
                return None
            job = [self.pending.popleft() for _ in range(min(self.group_size, len(self.pending)))]
            assert not self.held.intersection(job)
            self.held.update(job)
        return job

    def run(self, job: list[int], stop: threading.Event) -> int:
        for done, unit in enumerate(job):
            if stop.is_set():
                self.release(job[done:])
                return done
            with self.lock:
                assert unit in self.held, "ran a unit it does not hold"
                self.held.discard(unit)
                self.done.append(unit)
                if len(self.done) >= self.expected:
                    self.all_done.set()
            if self.on_unit is not None:
                self.on_unit.set()
        return len(job)

    def release(self, job: list[int]) -> None:
        with self.lock:
            self.held.difference_update(job)
            self.released += job
            self.pending.extendleft(reversed(job))


def make_loop(queue: FakeQueue, stop: threading.Event) -> WorkerLoop[list[int]]:
    return WorkerLoop(queue, stop=stop, poll_interval_seconds=0.001, backoff=Backoff(0.001, 0.004))


def run_in_thread(loop: WorkerLoop[list[int]]) -> threading.Thread:
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    return thread


def test_runs_every_job_once_then_idles_until_stopped() -> None:
    queue = FakeQueue(pending=deque(range(50)), expected=50)
    stop = threading.Event()
    loop = make_loop(queue, stop)
    thread = run_in_thread(loop)
    assert queue.all_done.wait(WAIT_SECONDS)
    claims_when_done = queue.claims
    stop.set()
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive()
    assert sorted(queue.done) == list(range(50))
    assert loop.stats.jobs_run == 50
    assert queue.claims >= claims_when_done  # kept polling the empty queue
    assert not queue.held


def test_two_loops_share_the_queue_without_running_a_job_twice() -> None:
    queue = FakeQueue(pending=deque(range(200)), expected=200, group_size=8)
    stop = threading.Event()
    loops = [make_loop(queue, stop) for _ in range(2)]
    threads = [run_in_thread(loop) for loop in loops]
    assert queue.all_done.wait(WAIT_SECONDS)
    stop.set()
    for t in threads:
        t.join(WAIT_SECONDS)
    assert sorted(queue.done) == list(range(200))
    assert sum(loop.stats.jobs_run for loop in loops) == 200


def test_stop_after_claim_releases_the_job_instead_of_running_it() -> None:
    queue = FakeQueue(pending=deque([7, 8]))
    stop = threading.Event()
    loop = make_loop(queue, stop)
    original_claim = queue.claim

    def claim_then_stop() -> list[int] | None:
        job = original_claim()
        stop.set()  # SIGTERM arrives while the job is claimed, before it runs
        return job

    queue.claim = claim_then_stop  # type: ignore[method-assign]
    stats = loop.run()
    assert queue.released == [7]
    assert queue.done == []
    assert list(queue.pending) == [7, 8]
    assert stats.jobs_released == 1 and stats.jobs_run == 0


def test_stop_during_a_group_releases_the_units_not_started() -> None:
    queue = FakeQueue(pending=deque(range(5)), group_size=4)
    stop = threading.Event()
    loop = make_loop(queue, stop)
    queue.on_unit = stop  # SIGTERM arrives while the group's first unit runs
    stats = loop.run()
    assert queue.done == [0]
    assert queue.released == [1, 2, 3]
    assert list(queue.pending) == [1, 2, 3, 4]
    assert stats.jobs_run == 1 and stats.jobs_released == 3


def test_outage_backs_off_and_resumes() -> None:
    queue = FakeQueue(pending=deque(range(5)), failures=6, expected=5)
    stop = threading.Event()
    loop = make_loop(queue, stop)
    thread = run_in_thread(loop)
    assert queue.all_done.wait(WAIT_SECONDS)
    stop.set()
    thread.join(WAIT_SECONDS)
    assert loop.stats.errors == 6
    assert sorted(queue.done) == list(range(5))
    assert loop.backoff.failures == 0  # reset by the first success


@pytest.mark.parametrize("expected", [False, True])
def test_an_expected_outage_is_logged_in_one_line_per_failure(
    expected: bool, caplog: pytest.LogCaptureFixture
) -> None:
    queue = FakeQueue(pending=deque(range(2)), failures=3, expected=2)
    stop = threading.Event()
    loop = WorkerLoop(
        queue,
        stop=stop,
        poll_interval_seconds=0.001,
        backoff=Backoff(0.001, 0.004),
        expected=lambda exc: expected and isinstance(exc, ConnectionError),
    )
    caplog.set_level(logging.WARNING, logger="priorwatch.worker")
    thread = run_in_thread(loop)
    assert queue.all_done.wait(WAIT_SECONDS)
    stop.set()
    thread.join(WAIT_SECONDS)
    errors = [r for r in caplog.records if "worker error" in r.getMessage()]
    assert len(errors) == 3
    assert [r.exc_info is not None for r in errors] == [not expected, False, False]


def test_run_failure_does_not_kill_the_loop() -> None:
    queue = FakeQueue(pending=deque(range(3)), expected=3)
    stop = threading.Event()
    loop = make_loop(queue, stop)
    original_run = queue.run
    calls = {"n": 0}

    def flaky_run(job: list[int], stop: threading.Event) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            with queue.lock:  # the fake's lease ends: the job goes back to the queue
                queue.held.difference_update(job)
                queue.pending.extend(job)
            raise ConnectionError("connection lost during completion")
        return original_run(job, stop)

    queue.run = flaky_run  # type: ignore[method-assign]
    thread = run_in_thread(loop)
    assert queue.all_done.wait(WAIT_SECONDS)
    stop.set()
    thread.join(WAIT_SECONDS)
    assert sorted(queue.done) == [0, 1, 2]
    assert loop.stats.errors == 1


def test_stop_wakes_an_idle_loop_at_once() -> None:
    queue = FakeQueue()
    stop = threading.Event()
    queue.on_claim = threading.Event()
    loop = WorkerLoop(queue, stop=stop, poll_interval_seconds=3600.0, backoff=Backoff(1, 1))
    thread = run_in_thread(loop)
    assert queue.on_claim.wait(WAIT_SECONDS)
    stop.set()
    thread.join(WAIT_SECONDS)  # would hang for an hour if the sleep ignored stop
    assert not thread.is_alive()


def test_backoff_doubles_up_to_the_cap_and_resets() -> None:
    backoff = Backoff(initial_seconds=0.1, max_seconds=1.0)
    delays = [backoff.next_delay_seconds() for _ in range(6)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert backoff.failures == 6
    backoff.reset()
    assert backoff.next_delay_seconds() == pytest.approx(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stop_signals_set_the_stop_event(signum: signal.Signals) -> None:
    stop = threading.Event()
    restore = install_stop_handlers(stop)
    try:
        os.kill(os.getpid(), signum)
        assert stop.wait(WAIT_SECONDS)
    finally:
        restore()
    assert signal.getsignal(signum) is not None
