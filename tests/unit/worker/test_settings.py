"""Worker settings come from PRIORWATCH_WORKER_* variables and refuse nonsense."""

from __future__ import annotations

import threading

import pytest
from pydantic import ValidationError

from app.worker.settings import WorkerSettings


def test_defaults_poll_at_most_every_half_second() -> None:
    settings = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    assert settings.poll_interval_seconds <= 0.5
    assert settings.lease_seconds > settings.poll_interval_seconds


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIORWATCH_WORKER_LEASE_SECONDS", "2.5")
    monkeypatch.setenv("PRIORWATCH_WORKER_POLL_INTERVAL_SECONDS", "0.05")
    monkeypatch.setenv("PRIORWATCH_WORKER_WARM_UP", "false")
    settings = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    assert (settings.lease_seconds, settings.poll_interval_seconds) == (2.5, 0.05)
    assert settings.warm_up is False


@pytest.mark.parametrize(
    "values",
    [
        {"lease_seconds": 0},
        {"poll_interval_seconds": -1},
        {"backoff_initial_seconds": 2.0, "backoff_max_seconds": 1.0},
        {"reference_cache_mb": -1},
    ],
)
def test_invalid_values_are_refused(values: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        WorkerSettings(_env_file=None, **values)  # type: ignore[call-arg]


def test_the_reference_cache_is_bounded_by_its_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy.orm import sessionmaker

    from app.worker.jobs import DatabaseJobs
    from app.worker.runner import build_loop

    assert WorkerSettings(_env_file=None).reference_cache_mb == 256  # type: ignore[call-arg]
    monkeypatch.setenv("PRIORWATCH_WORKER_REFERENCE_CACHE_MB", "1.5")
    settings = WorkerSettings(_env_file=None)  # type: ignore[call-arg]
    loop = build_loop(sessionmaker(), settings, threading.Event())
    assert isinstance(loop.jobs, DatabaseJobs)
    assert loop.jobs.cache.max_bytes == 1.5 * 2**20
