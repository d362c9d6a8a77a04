"""The retention setting: its syntax, its floor, and which windows are past it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from builders import model_config

from app.errors import InvalidInput
from app.services.models.config import ModelConfig
from app.services.models.retention import check_retention, parse_retention
from app.services.refresh.retention import Expired, expired_windows

NOW = datetime(2026, 6, 10, 12, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _model(retention: str | None, reference: dict[str, Any] | None = None) -> ModelConfig:
    return model_config(
        drift={"reference": reference}, bin_edges=np.linspace(0.0, 1.0, 3), retention=retention
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("36h", timedelta(hours=36)), ("90d", timedelta(days=90)), ("52w", timedelta(weeks=52))],
)
def test_parse_retention(text: str, expected: timedelta) -> None:
    assert parse_retention(text) == expected


@pytest.mark.parametrize("text", ["0d", "90", "90m", "-1d", "1.5d", "d", "123456d", " 9d"])
def test_parse_retention_refuses_other_text(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_retention(text)
    assert caught.value.field == "retention"


def test_retention_is_at_least_one_window() -> None:
    assert check_retention(None, "1w") is None
    assert check_retention("1w", "1w") == "1w"
    with pytest.raises(InvalidInput, match="at least one window") as caught:
        check_retention("6d", "1w")
    assert caught.value.field == "retention"


def test_without_retention_nothing_expires() -> None:
    assert expired_windows(_model(None), NOW) is None


def test_windows_that_ended_before_the_retention_expire() -> None:
    # now - 3h = 09:30: the 09:00 window ends after it (kept), the 08:00 one at 09:00
    assert expired_windows(_model("3h"), NOW) == Expired(datetime(2026, 6, 10, 9, tzinfo=UTC), None)


def test_a_fixed_reference_period_is_kept() -> None:
    reference = {"from": "2026-06-01T00:00:00Z", "to": "2026-06-02T00:00:00Z"}
    expired = expired_windows(_model("3h", reference), NOW)
    start, end = datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 6, 2, tzinfo=UTC)
    assert expired == Expired(datetime(2026, 6, 10, 9, tzinfo=UTC), (start, end))


def test_trailing_windows_of_the_oldest_kept_window_are_kept() -> None:
    expired = expired_windows(_model("3h", {"trailing_windows": 4}), NOW)
    assert expired == Expired(datetime(2026, 6, 10, 9, tzinfo=UTC) - 4 * HOUR, None)
