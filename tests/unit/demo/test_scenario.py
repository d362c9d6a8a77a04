"""The traffic of ``priorwatch simulate`` (app/demo/scenario.py) and its tables
(app/demo/summary.py): pure, seeded, checked against the laws they claim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from scipy import stats

from app.demo.scenario import (
    DEGRADATION,
    RETURN,
    STABLE,
    WAVE,
    batches,
    first_window_start,
    fraud_scenario,
)
from app.demo.summary import per_phase_table, per_window_table, window_lines

HOUR = timedelta(hours=1)
FIRST = datetime(2026, 11, 25, 6, tzinfo=UTC)


def _logit(s: np.ndarray) -> np.ndarray:
    return np.log(s / (1.0 - s))


def test_first_window_ends_the_day_at_the_current_window_start() -> None:
    now = datetime(2026, 11, 26, 6, 19, 23, tzinfo=UTC)
    first = first_window_start(now, HOUR, 24)
    assert first == datetime(2026, 11, 25, 6, tzinfo=UTC)
    assert first_window_start(datetime(2026, 11, 26, 6, tzinfo=UTC), HOUR, 1) == datetime(
        2026, 11, 26, 5, tzinfo=UTC
    )
    # 15-minute windows count from the epoch as the service does
    assert first_window_start(now, timedelta(minutes=15), 2) == datetime(
        2026, 11, 26, 5, 45, tzinfo=UTC
    )


def test_phases_in_order_and_reference_is_the_stable_period() -> None:
    scenario = fraud_scenario()
    assert [p.name for p in scenario.phases] == [STABLE, WAVE, RETURN, DEGRADATION]
    assert scenario.windows == 24
    assert scenario.reference_windows == 8
    assert [scenario.phase_of(k).name for k in (0, 7, 8, 13, 14, 17, 18, 23)] == [
        STABLE, STABLE, WAVE, WAVE, RETURN, RETURN, DEGRADATION, DEGRADATION,
    ]  # fmt: skip
    with pytest.raises(IndexError):
        scenario.phase_of(24)
    with pytest.raises(IndexError):
        scenario.phase_of(-1)


def test_batches_cover_every_window_with_all_rows_inside_it() -> None:
    scenario = fraud_scenario(rows_per_window=1001, batches_per_window=4)
    out = list(batches(scenario, np.random.default_rng(1), FIRST, HOUR))
    assert len(out) == 24 * 4
    for offset in range(24):
        mine = [b for b in out if b.offset == offset]
        assert sum(b.scores.size for b in mine) == 1001
        start = FIRST + offset * HOUR
        assert all(start <= b.timestamp < start + HOUR for b in mine)
        assert {b.phase for b in mine} == {scenario.phase_of(offset).name}
        assert all(((b.scores > 0) & (b.scores < 1)).all() for b in mine)


def test_seeded_traffic_is_reproducible() -> None:
    scenario = fraud_scenario(rows_per_window=500)
    a = list(batches(scenario, np.random.default_rng(7), FIRST, HOUR))
    b = list(batches(scenario, np.random.default_rng(7), FIRST, HOUR))
    c = list(batches(scenario, np.random.default_rng(8), FIRST, HOUR))
    assert all(np.array_equal(x.scores, y.scores) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x.scores, y.scores) for x, y in zip(a, c, strict=True))


def _phase_data(phase: str) -> tuple[np.ndarray, np.ndarray]:
    scenario = fraud_scenario(rows_per_window=50_000)
    out = [b for b in batches(scenario, np.random.default_rng(3), FIRST, HOUR) if b.phase == phase]
    return np.concatenate([b.scores for b in out]), np.concatenate([b.labels for b in out])


@pytest.mark.parametrize(
    ("phase", "prior", "positive_mean"),
    [(STABLE, 0.01, 0.5), (WAVE, 0.04, 0.5), (RETURN, 0.01, 0.5), (DEGRADATION, 0.01, -1.5)],
)
def test_each_phase_draws_its_prior_and_class_laws(
    phase: str, prior: float, positive_mean: float
) -> None:
    """Prior within 4 standard errors; each class's logit is Normal(mean, 1.2) (KS test)."""
    scores, labels = _phase_data(phase)
    n = labels.size
    assert abs(labels.mean() - prior) < 4 * np.sqrt(prior * (1 - prior) / n)
    logits = _logit(scores)
    for cls, mean in ((1, positive_mean), (0, -3.5)):
        sample = logits[labels == cls]
        assert stats.kstest(sample, stats.norm(mean, 1.2).cdf).pvalue > 1e-3


def _window_doc(start: str, prior: float, verdict: str, **metrics: float | None) -> dict[str, Any]:
    return {
        "start": start,
        "segment": None,
        "prior": prior,
        "metrics": metrics,
        "drift": {"verdict": verdict},
        "status": "fresh",
    }


def test_tables_match_windows_by_start_and_average_per_phase() -> None:
    scenario = fraud_scenario()
    docs = [
        _window_doc("2026-11-25T06:00:00Z", 0.01, "reference", precision=0.7, recall=0.6),
        _window_doc("2026-11-25T07:00:00Z", 0.03, "reference", precision=0.9, recall=None),
        _window_doc("2026-11-25T14:00:00Z", 0.04, "prior", precision=0.95),
        {**_window_doc("2026-11-25T06:00:00Z", 0.5, "both", precision=0.1), "segment": "eu"},
    ]
    sla = [
        {"start": "2026-11-25T06:00:00Z", "status": "met"},
        {"start": "2026-11-25T07:00:00Z", "status": "breached"},
    ]
    lines = window_lines(scenario, FIRST, HOUR, docs, sla)
    assert len(lines) == 24
    assert lines[0].prior == 0.01  # the segment's window is not the all-traffic one
    assert (lines[0].verdict, lines[0].sla) == ("reference", "met")
    assert (lines[2].verdict, lines[2].sla, lines[2].prior) == ("-", "-", None)
    assert lines[8].phase == WAVE and lines[8].verdict == "prior"

    per_window = per_window_table(lines).splitlines()
    assert per_window[0].split()[:4] == ["window", "(UTC)", "phase", "prior"]
    assert per_window[2].split()[:5] == ["11-25", "06:00", "stable", "0.0100", "0.700"]

    per_phase = {line.split()[0]: line for line in per_phase_table(lines).splitlines()[2:]}
    stable = per_phase["stable"].split()
    assert stable[1] == "0.0200"  # mean prior of the two windows with data
    assert stable[2] == "0.800"  # mean precision
    assert stable[6] == "0.600"  # recall: the one defined value
    assert "reference x2" in per_phase["stable"] and "- x6" in per_phase["stable"]
    assert "met x1" in per_phase["stable"] and "breached x1" in per_phase["stable"]
    assert list(per_phase) == ["stable", "fraud", "return", "degradation"]
