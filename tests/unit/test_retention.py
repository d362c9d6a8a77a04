"""The retention setting: its syntax, its floor, and which windows are past it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from app.errors import InvalidInput
from app.services.models.config import ModelConfig
from app.services.models.retention import check_label_horizon, check_retention, parse_retention
from app.services.refresh.retention import Expired, expired_windows, kept_for

NOW = datetime(2026, 6, 10, 12, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _model(
    retention: str | None,
    reference: dict[str, Any] | None = None,
    label_horizon: str | None = None,
) -> ModelConfig:
    return ModelConfig(
        id=1,
        name="m",
        window="1h",
        thresholds=(0.5,),
        pi0=0.1,
        cost_ratio=None,
        segments=frozenset(),
        sla=(),
        drift={"reference": reference},
        bin_edges=np.linspace(0.0, 1.0, 3),
        retention=retention,
        label_horizon=label_horizon,
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


@pytest.mark.parametrize(
    ("retention", "horizon", "kept"),
    [
        ("30d", None, timedelta(days=30)),
        ("30d", "90d", timedelta(days=90)),  # labels still arrive: the window stays
        ("52w", "90d", timedelta(weeks=52)),
        (None, "90d", None),  # no retention: every window is kept anyway
    ],
)
def test_windows_are_kept_until_their_labels_are_in(
    retention: str | None, horizon: str | None, kept: timedelta | None
) -> None:
    assert kept_for(_model(retention, label_horizon=horizon)) == kept


def test_a_window_younger_than_the_label_horizon_is_not_deleted() -> None:
    expired = expired_windows(_model("1d", label_horizon="90d"), NOW)
    assert expired is not None
    assert expired.before == datetime(2026, 3, 12, 12, tzinfo=UTC)  # NOW - 90 d, its hour


def test_label_horizon_is_capped() -> None:
    assert check_label_horizon("400d") == "400d"
    with pytest.raises(InvalidInput, match="cap of 400 days") as caught:
        check_label_horizon("401d")
    assert caught.value.field == "label_horizon"
    with pytest.raises(InvalidInput) as caught:
        check_label_horizon("90")
    assert caught.value.field == "label_horizon"
