"""Delayed labels in ``priorwatch simulate --delayed-labels``: when each label arrives,
and what the service makes of the day at each stage of their delivery.

The day's predictions are sent without labels at once (as a producer sends
them at prediction time); their labels arrive over the following days,
**depending on the class**: a fraud is reported by its chargeback within
days, a legitimate payment is only confirmed when its dispute period closes.
Each row's label arrives on day D >= 1, geometric with a daily rate of
:data:`POSITIVE_DAILY_RATE` for frauds and :data:`NEGATIVE_DAILY_RATE` for
the others (frauds about 3x faster). The labels known early are therefore
mostly frauds, and the labelled subset's prior overstates the true one
until every label is in.

Pure and seeded (``rng``); :mod:`app.cli.simulate` sends the labels stage by
stage and prints :func:`stage_table`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.text_tables import format_number, format_table

POSITIVE_DAILY_RATE = 0.5
"""Chance that a fraud's label still missing arrives on the next day."""
NEGATIVE_DAILY_RATE = 0.15
"""Chance that a legitimate transaction's label still missing arrives on the next day."""

STAGES: tuple[int | None, ...] = (1, 3, 7, None)
"""Days after the traffic at which the summary looks (None: every label delivered)."""


def arrival_days(
    rng: np.random.Generator,
    labels: npt.NDArray[np.int64],
    positive_rate: float = POSITIVE_DAILY_RATE,
    negative_rate: float = NEGATIVE_DAILY_RATE,
) -> npt.NDArray[np.int64]:
    """The day (1, 2, ...) on which each row's label arrives: geometric, rate per class.

    >>> days = arrival_days(np.random.default_rng(1), np.array([1, 0, 0, 1]))
    >>> bool((days >= 1).all())
    True
    """
    rate = np.where(labels == 1, positive_rate, negative_rate)
    return rng.geometric(rate).astype(np.int64)


def arriving(
    days: npt.NDArray[np.int64], after: int | None, until: int | None
) -> npt.NDArray[np.bool_]:
    """The rows whose label arrives after day ``after`` (None: from the start) and by day
    ``until`` (None: every remaining one)."""
    late = np.ones(days.shape, dtype=bool) if after is None else days > after
    return late if until is None else late & (days <= until)


def stage_name(until: int | None) -> str:
    """``day 3`` for a stage, ``all`` for the last one."""
    return "all" if until is None else f"day {until}"


@dataclass(frozen=True)
class StageLine:
    """The day's all-traffic windows as the service reports them after one stage."""

    stage: str
    completeness: float | None
    """Labelled over scored rows of the day."""
    labelled_prior: float | None
    """Positives over labelled rows: the labelled subset's prior."""
    completed_prior: float | None
    """The windows' stored completed priors (``maturity.prior.value``), weighted by their
    scored rows; None unless every window with scored rows has one."""
    true_prior: float


def stage_line(stage: str, windows: Sequence[Mapping[str, Any]], true_prior: float) -> StageLine:
    """One stage from the ``GET .../windows`` documents of the day (all traffic only)."""
    day = [w for w in windows if w.get("segment") is None and w.get("n_unlabelled")]
    scored = sum(int(w["n_unlabelled"]) for w in day)
    labelled = sum(int(w["n"]) for w in day)
    positives = sum(int(w["positives"]) for w in day)
    completed = [_completed_prior(w) for w in day]
    known = [(value, int(w["n_unlabelled"])) for value, w in zip(completed, day, strict=True)]
    complete = bool(day) and all(value is not None for value in completed)
    return StageLine(
        stage=stage,
        completeness=labelled / scored if scored else None,
        labelled_prior=positives / labelled if labelled else None,
        completed_prior=(sum(float(v or 0.0) * n for v, n in known) / scored if complete else None),
        true_prior=true_prior,
    )


def _completed_prior(window: Mapping[str, Any]) -> float | None:
    maturity = window.get("maturity")
    prior = maturity.get("prior") if isinstance(maturity, Mapping) else None
    value = prior.get("value") if isinstance(prior, Mapping) else None
    return float(value) if isinstance(value, int | float) else None


STAGE_HEADERS = (
    "labels delivered",
    "completeness",
    "prior (labelled)",
    "prior (completed)",
    "prior (truth)",
)


def stage_table(lines: Sequence[StageLine]) -> str:
    """One row per stage: completeness, the labelled, completed and true prior."""
    rows = [
        [
            line.stage,
            format_number(line.completeness, 3),
            format_number(line.labelled_prior, 4),
            format_number(line.completed_prior, 4),
            format_number(line.true_prior, 4),
        ]
        for line in lines
    ]
    return format_table(list(STAGE_HEADERS), rows)
