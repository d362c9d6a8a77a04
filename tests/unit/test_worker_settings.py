"""Worker settings come from PRIORWATCH_WORKER_* variables and refuse nonsense."""

from __future__ import annotations

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
    ],
)
def test_invalid_values_are_refused(values: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        WorkerSettings(_env_file=None, **values)  # type: ignore[call-arg]
