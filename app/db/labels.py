"""How far the labels of scored windows have arrived: reads over the window aggregates.

A window's **completeness** is its labelled rows over its scored (unlabelled)
rows, ``n / n_unlabelled`` of its aggregate: the producer sends every
prediction once without its label and again with it (docs/client.md,
"Delayed labels"), so the ratio climbs to 1 as the labels arrive. It is the
``completeness`` the worker stores in a window's ``maturity`` document, read
here from the counts so that a window without any label yet (no document)
counts too. Only windows with scored rows take part. Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import case, func, literal, select
from sqlalchemy.orm import Session

from app.db.models import WindowAggregate
from app.db.types import UTCDateTime

WA = WindowAggregate

OVERDUE_COMPLETENESS = 0.95
"""A window older than its model's ``label_horizon`` whose completeness is below this
is overdue (its labels should have arrived)."""


@dataclass(frozen=True)
class WindowCompleteness:
    """The labelled and scored rows of one stored window aggregate."""

    model_id: int
    segment: str
    start: datetime
    labelled: int
    scored: int

    @property
    def completeness(self) -> float:
        """Labelled over scored rows (``scored`` is positive)."""
        return self.labelled / self.scored


def windows_completeness(
    session: Session, starts: Mapping[int, Collection[datetime]]
) -> list[WindowCompleteness]:
    """The windows of each model starting at one of its ``starts`` that hold scored rows,
    every segment (one statement; the models of ``starts`` only).

    The statement selects the windows of the distinct starts (a few per window
    length) of the listed models; the pairs are matched here.
    """
    wanted = {(model_id, start) for model_id, few in starts.items() for start in few}
    if not wanted:
        return []
    rows = session.execute(
        select(WA.model_id, WA.segment, WA.window_start, WA.n, WA.n_unlabelled).where(
            WA.model_id.in_(sorted(starts)),
            WA.window_start.in_(sorted({start for _, start in wanted})),
            WA.n_unlabelled > 0,
        )
    ).all()
    return [
        WindowCompleteness(int(model_id), segment, start, int(n), int(scored))
        for model_id, segment, start, n, scored in rows
        if (model_id, start) in wanted
    ]


def overdue_windows(
    session: Session, started_before: Mapping[int, datetime]
) -> dict[tuple[int, str], int]:
    """Per (model, segment): the windows starting before the model's ``started_before``
    (the windows past its label horizon) with scored rows and a completeness below
    :data:`OVERDUE_COMPLETENESS` (one statement; the models listed only, pairs without
    such a window absent)."""
    if not started_before:
        return {}
    cutoff = case(
        {model_id: literal(at, UTCDateTime) for model_id, at in sorted(started_before.items())},
        value=WA.model_id,
    )
    incomplete = WA.n < OVERDUE_COMPLETENESS * WA.n_unlabelled
    rows = session.execute(
        select(WA.model_id, WA.segment, func.count())
        .where(
            WA.model_id.in_(sorted(started_before)),
            WA.window_start < cutoff,
            WA.n_unlabelled > 0,
            incomplete,
        )
        .group_by(WA.model_id, WA.segment)
    ).all()
    return {(int(model_id), segment): int(count) for model_id, segment, count in rows}
