"""Streak gauges: how many of the latest stored windows in a row raise a condition.

Alerts need "the likelihood flag is raised in 3 consecutive windows" and
"this SLA objective is breached in the last N windows". Prometheus cannot
count that from the latest-window gauges: it only sees the windows that
became the latest while it was scraping, so windows stored in bulk (a
backfill, labels delivered once a day, a Prometheus restart) would count as
one. The service knows every stored window, so the exporter counts them.

Per (model, segment) the most recent :data:`STREAK_WINDOWS` fresh windows are
read, newest first by window start (a backfilled or late window counts where
it belongs in time, once the worker has computed it; windows waiting for the
worker are not fresh and are left out). Each window gives one outcome per
condition: raised (True), not raised (False) or untested (None). A streak is
the number of raised outcomes before the first one not raised, untested
windows skipped (:func:`streak`); it is at most :data:`STREAK_WINDOWS`.

Conditions:

* ``priorwatch_drift_streak_windows{kind}``: the prior or likelihood flag of
  the stored drift verdict (untested: the test could not run, the window is
  in the reference period, or no reference is configured);
* ``priorwatch_sla_breach_streak_windows{objective, metric, op}``: the
  objective's status in the window is ``breached``, as the SLA report says
  (:func:`app.services.sla.evaluate_objective`); untested: insufficient data.

Counting stored outcomes is reading, not computing metrics: every flag and
every value compared with a target was stored by the worker. Cost per scrape:
one statement reading the keys of those windows (no documents), plus one per
500 windows whose outcomes are not cached yet (a new or recomputed window);
the cache holds exactly the windows read by the latest scrape.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import WindowMetrics
from app.exporter import names
from app.exporter.collector import (
    DRIFT_KINDS,
    LatestWindow,
    ModelRow,
    WindowKey,
    objective_labels,
    read_latest_windows,
    read_models,
    segment_label,
)
from app.exporter.names import STREAK_FAMILIES
from app.exporter.text import Series
from app.services.sla import BREACHED, INSUFFICIENT_DATA, Objective, evaluate_objective

STREAK_WINDOWS = 24
"""Most recent fresh windows read per (model, segment): the largest streak exposed."""

WM = WindowMetrics

Outcome = bool | None
"""A condition in one window: raised, not raised, or untested (None)."""
StoredKey = tuple[int, str, datetime, datetime]
"""(model id, segment key, window start, computed_at): changes whenever the result does."""


@dataclass(frozen=True)
class Outcomes:
    """The conditions of one stored window.

    Attributes
    ----------
    drift : tuple of Outcome
        The flag of each kind of :data:`app.exporter.collector.DRIFT_KINDS`.
    breached : tuple of Outcome
        Per objective of the model, in order: breached, not, insufficient data.
    """

    drift: tuple[Outcome, ...]
    breached: tuple[Outcome, ...]


def streak(outcomes: Iterable[Outcome]) -> int:
    """Raised outcomes before the first one not raised, newest first; None is skipped.

    >>> streak([True, None, True, False, True])
    2
    """
    count = 0
    for outcome in outcomes:
        if outcome is None:
            continue
        if not outcome:
            break
        count += 1
    return count


def _drift_flag(drift: Mapping[str, Any] | None, kind: str) -> Outcome:
    test = drift.get(kind) if drift else None
    flag = test.get("flag") if isinstance(test, Mapping) else None
    return flag if isinstance(flag, bool) else None


def _breached(objective: Objective, window: LatestWindow) -> Outcome:
    status = evaluate_objective(objective, window.metrics, window.intervals, window.reasons).status
    return None if status == INSUFFICIENT_DATA else status == BREACHED


def window_outcomes(objectives: Sequence[Objective], window: LatestWindow) -> Outcomes:
    """The conditions of one stored window (pure)."""
    return Outcomes(
        drift=tuple(_drift_flag(window.drift, kind) for kind in DRIFT_KINDS),
        breached=tuple(_breached(o, window) for o in objectives),
    )


def read_recent_keys(session: Session, limit: int = STREAK_WINDOWS) -> list[StoredKey]:
    """The keys of the ``limit`` most recent fresh windows of every (model, segment)
    (one statement), newest first within each."""
    ranked = select(
        WM.model_id,
        WM.segment,
        WM.window_start,
        WM.computed_at,
        func.row_number()
        .over(partition_by=(WM.model_id, WM.segment), order_by=WM.window_start.desc())
        .label("rank"),
    ).where(WM.status == "fresh")
    recent = ranked.subquery()
    rows = session.execute(
        select(recent.c.model_id, recent.c.segment, recent.c.window_start, recent.c.computed_at)
        .where(recent.c.rank <= limit)
        .order_by(recent.c.model_id, recent.c.segment, recent.c.window_start.desc())
    ).all()
    return [(int(m), s, start, computed) for m, s, start, computed in rows]


def streak_series(
    models: Iterable[ModelRow],
    keys: Sequence[StoredKey],
    outcomes: Mapping[tuple[StoredKey, tuple[Objective, ...]], Outcomes],
) -> Series:
    """The streak samples of every exposed (model, segment), by family (pure).

    ``keys`` as :func:`read_recent_keys` returns them; ``outcomes`` holds
    every key's conditions under its model's objectives.
    """
    out: Series = {spec.name: [] for spec in STREAK_FAMILIES}
    by_id = {m.id: m for m in models}
    groups: dict[tuple[int, str], list[StoredKey]] = {}
    for key in keys:
        groups.setdefault((key[0], key[1]), []).append(key)
    for (model_id, segment_key), stored in groups.items():
        model = by_id.get(model_id)
        segment = None if model is None else segment_label(model, segment_key)
        if model is None or segment is None:
            continue
        rows = [outcomes[(k, model.objectives)] for k in stored]
        labels = (model.name, segment)
        for i, kind in enumerate(DRIFT_KINDS):
            count = streak(r.drift[i] for r in rows)
            out[names.DRIFT_STREAK].append(((*labels, kind), float(count)))
        for i, objective in enumerate(model.objectives):
            count = streak(r.breached[i] for r in rows)
            out[names.SLA_BREACH_STREAK].append(
                ((*labels, *objective_labels(objective)), float(count))
            )
    return out


class StreakCollector(Collector):
    """The streak families of :data:`app.exporter.names.STREAK_FAMILIES`.

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per :meth:`collect`; it is only read from, then closed.

    ``GET /metrics`` writes them through
    :class:`app.exporter.collector.WindowResultsCollector` (this object is one
    of its ``parts``: :meth:`read` runs in its session, with its models);
    :meth:`collect` serves any prometheus_client registry. Each window's
    outcomes are kept until its stored result (computed_at) or its model's
    objectives change; the cache holds the windows of the latest read.
    """

    specs = STREAK_FAMILIES

    def __init__(self, session_factory: Callable[[], Session]) -> None:
        self._session_factory = session_factory
        self._lock = threading.Lock()
        self._outcomes: dict[tuple[StoredKey, tuple[Objective, ...]], Outcomes] = {}

    def read(self, session: Session, models: tuple[ModelRow, ...]) -> Series:
        """The streak samples: the keys of the recent windows, then the documents
        of those whose outcomes are not cached (read-only)."""
        with self._lock:
            cached = self._outcomes
        keys = read_recent_keys(session)
        objectives = {m.id: m.objectives for m in models}
        wanted = [(k, objectives[k[0]]) for k in keys if k[0] in objectives]
        missing = [k for k, o in wanted if (k, o) not in cached]
        fetched = read_latest_windows(session, _window_keys(missing)) if missing else []
        outcomes = {w: cached[w] for w in wanted if w in cached}
        for window in fetched:
            k = window.key
            own = objectives[k.model_id]
            stored = (k.model_id, k.segment, k.start, k.computed_at)
            outcomes[(stored, own)] = window_outcomes(own, window)
        # a window recomputed between the two statements is read by the next scrape
        present = [k for k, o in wanted if (k, o) in outcomes]
        with self._lock:
            self._outcomes = outcomes
        return streak_series(models, present, outcomes)

    def collect(self) -> Iterator[Metric]:
        with self._session_factory() as session:
            try:
                samples = self.read(session, read_models(session))
            finally:
                session.rollback()
        for spec in STREAK_FAMILIES:
            family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
            for labels, value in samples[spec.name]:
                family.add_metric(labels, value)
            yield family

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families are only known at scrape time (no check at register)."""
        return ()


def _window_keys(keys: Iterable[StoredKey]) -> list[WindowKey]:
    """What :func:`read_latest_windows` matches on: model, segment, start (not the version)."""
    return [
        WindowKey(model_id, segment, start, computed, 0)
        for model_id, segment, start, computed in keys
    ]
