"""Streak gauges: how many of the latest stored windows in a row raise a condition.

Alerts need "the likelihood flag is raised in 3 consecutive windows" and
"this SLA objective is breached in the last N windows". Prometheus cannot
count that from the latest-window gauges: it only sees the windows that
became the latest while it was scraping, so windows stored in bulk (a
backfill, labels delivered once a day, a Prometheus restart) would count as
one. The service knows every stored window, so the exporter counts them.

Per (model, segment) the most recent :data:`STREAK_WINDOWS` fresh windows are
read, newest first by window start: a backfilled or late window counts where
it belongs in time once the worker has computed it; a window waiting to be
recomputed counts with its stored result until the worker replaces it (as
the latest-window gauges do); a failed computation is not fresh. Each window gives one outcome per
condition: raised (True), not raised (False) or untested (None). A streak is
the number of raised outcomes before the first one not raised, untested
windows skipped (:func:`streak`); it is at most :data:`STREAK_WINDOWS`.

Conditions:

* ``priorwatch_drift_streak_windows{kind}``: the prior or likelihood flag of
  the stored drift verdict (untested: the test could not run, the window is
  in the reference period, or no reference is configured);
* ``priorwatch_sla_breach_streak_windows{objective, metric, op}``: the
  objective's status in the window is ``breached``, as the SLA report says
  (:func:`app.sla.objectives.evaluate_objective`); untested: insufficient data,
  or pending (the interval that decides it is not computed yet).

Counting stored outcomes is reading, not computing metrics: every flag and
every value compared with a target was stored by the worker (only those are
read, extracted from the stored documents in SQL). Cost per scrape:
one GROUP BY statement giving each group's :data:`Stamp` (one row per group,
whatever the history); only for the groups whose stamp changed since the
previous scrape, the keys of their recent windows (one statement per 500
groups) and the documents of the windows not seen before (one per 500
windows; on a cold cache, one statement for both). The cache holds the groups
of the latest scrape.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy.orm import Session

from app.db import scrape
from app.exporter import names
from app.exporter.names import STREAK_FAMILIES
from app.exporter.part import ExpositionOf, StoredPartCollector, whole
from app.exporter.reads import ModelRow, Shard
from app.exporter.series import DRIFT_KINDS, objective_labels, segment_label
from app.exporter.text import Series
from app.sla.objectives import Objective, evaluate_objective
from app.statuses import SlaStatus

STREAK_WINDOWS = 24
"""Most recent fresh windows read per (model, segment): the largest streak exposed."""

UNTESTED = frozenset({SlaStatus.INSUFFICIENT_DATA, SlaStatus.PENDING})
"""Objective statuses that neither extend nor end a breach streak."""

Outcome = bool | None
"""A condition in one window: raised, not raised, or untested (None)."""
StoredKey = tuple[int, str, datetime, datetime]
"""(model id, segment key, window start, computed_at): changes whenever the result does."""


class Outcomes(NamedTuple):
    """The conditions of one stored window (a tuple: the garbage collector stops tracking
    it, where the streak caches of a fleet hold tens of thousands).

    Attributes
    ----------
    drift : tuple of Outcome
        The flag of each kind of :data:`app.exporter.series.DRIFT_KINDS`.
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


def window_outcomes(
    objectives: Sequence[Objective],
    flags: Sequence[Outcome],
    metrics: Mapping[str, Any],
    intervals: Mapping[str, Any],
    *,
    detail_current: bool = True,
) -> Outcomes:
    """The conditions of one stored window (pure).

    Parameters
    ----------
    objectives : sequence of Objective
        The model's objectives.
    flags : sequence of bool or None
        The stored drift flag of each kind of :data:`DRIFT_KINDS` (None: untested).
    metrics, intervals : mapping
        The stored values and intervals of (at least) the metrics the
        objectives read, as in :func:`app.sla.objectives.evaluate_objective`,
        which gives each objective's status.
    detail_current : bool
        The detail tier's intervals are of the metrics' version (else an objective
        decided by an interval is pending: untested).
    """
    breached = []
    for objective in objectives:
        status = evaluate_objective(
            objective, metrics, intervals, detail_current=detail_current
        ).status
        breached.append(None if status in UNTESTED else status == SlaStatus.BREACHED)
    return Outcomes(tuple(flags), tuple(breached))


def read_outcomes(
    session: Session,
    keys: Sequence[StoredKey] | None,
    objectives: Mapping[int, Sequence[Objective]],
    shard: Shard | None = None,
    *,
    whole_shard: bool = False,
) -> dict[StoredKey, Outcomes]:
    """The outcomes of the fresh windows ``keys``: one statement per 500 windows, or, with
    ``whole_shard``, one statement reading the recent windows (:data:`STREAK_WINDOWS`) of
    every group of the models of ``shard``, of which those of ``keys`` are kept (cheaper
    when they are most of them). ``keys`` None: every one of those recent windows of the
    models of ``objectives`` (one statement; their keys need no statement of their own).

    Only what the outcomes need is read, extracted in SQL from the stored
    documents: the drift flags, and the value and interval bounds of every
    metric an objective of these windows' models reads (the completed ones of a
    window with a ``maturity`` document, as the SLA report and gauges judge it). A window recomputed
    since its key was read comes back under its new key.
    """
    models = objectives if keys is None else {key[0] for key in keys}
    names = sorted({o.evaluated_as for model_id in models for o in objectives[model_id]})
    wanted = None if keys is None else [(m, seg, start) for m, seg, start, _ in keys]
    read = scrape.outcome_values(
        session,
        None if whole_shard or wanted is None else wanted,
        DRIFT_KINDS,
        names,
        (STREAK_WINDOWS, shard),
    )
    if wanted is None:  # every recent window of the shard: those of the models known
        read = (r for r in read if int(r[0]) in objectives)
    elif whole_shard:  # every recent window of the shard: keep those asked for
        asked = set(wanted)
        read = (r for r in read if (int(r[0]), r[1], r[2]) in asked)
    first = 5 + len(DRIFT_KINDS)
    out: dict[StoredKey, Outcomes] = {}
    for row in read:
        key = (int(row[0]), row[1], row[2], row[3])
        values = row[first:]
        metrics = {name: values[3 * j] for j, name in enumerate(names)}
        intervals = {
            name: {"lower": values[3 * j + 1], "upper": values[3 * j + 2]}
            for j, name in enumerate(names)
        }
        flags, current = tuple(row[4 : first - 1]), bool(row[first - 1])
        out[key] = window_outcomes(
            objectives[key[0]], flags, metrics, intervals, detail_current=current
        )
    return out


Group = tuple[int, str]
"""(model id, segment key)."""
Stamp = tuple[int, datetime | None]
"""A group's fresh windows: how many, and the latest ``computed_at`` among them.

Any change of a group's fresh windows changes it: a window computed or
recomputed gets the newest ``computed_at``, one that stops being fresh
lowers the count (workers' clocks are assumed to agree)."""


def read_stamps(session: Session, shard: Shard | None = None) -> dict[Group, Stamp]:
    """The :data:`Stamp` of every group (of the models of ``shard``) with a fresh window
    (one statement)."""
    rows = scrape.fresh_stamps(session, shard)
    return {(int(m), sys.intern(seg)): (int(n), latest) for m, seg, n, latest in rows}


def read_recent_keys(
    session: Session,
    groups: Collection[Group] | None = None,
    limit: int = STREAK_WINDOWS,
    shard: Shard | None = None,
) -> list[StoredKey]:
    """The keys of the ``limit`` most recent fresh windows with labelled rows of every
    group of the models of ``shard`` (or of ``groups``, 500 per statement), newest first
    within each. (A window of unlabelled rows only tests nothing: it neither counts nor
    breaks a streak.)"""
    rows = scrape.recent_keys(session, groups, limit, shard)
    return [(int(m), sys.intern(seg), start, computed) for m, seg, start, computed in rows]


@dataclass(frozen=True, slots=True)
class GroupStreaks:
    """The recent fresh windows of one group and its streaks.

    Attributes
    ----------
    stamp : Stamp
        The group's stamp when its windows were read.
    objectives : tuple of Objective
        The model's objectives the outcomes were evaluated with.
    keys : tuple of StoredKey
        Its most recent fresh windows, newest first.
    outcomes : tuple of Outcomes
        Their conditions, in the same order.
    drift : tuple of int
        Streak per kind of :data:`DRIFT_KINDS`.
    breached : tuple of int
        Breach streak per objective.
    """

    stamp: Stamp
    objectives: tuple[Objective, ...]
    keys: tuple[StoredKey, ...]
    outcomes: tuple[Outcomes, ...]
    drift: tuple[int, ...]
    breached: tuple[int, ...]

    @classmethod
    def of(
        cls,
        stamp: Stamp,
        objectives: tuple[Objective, ...],
        keys: Sequence[StoredKey],
        outcomes: Sequence[Outcomes],
    ) -> GroupStreaks:
        """Count the streaks of ``outcomes`` (newest first) (pure)."""
        return cls(
            stamp,
            objectives,
            tuple(keys),
            tuple(outcomes),
            tuple(streak(o.drift[i] for o in outcomes) for i in range(len(DRIFT_KINDS))),
            tuple(streak(o.breached[i] for o in outcomes) for i in range(len(objectives))),
        )


def streak_series(
    models: Iterable[ModelRow],
    groups: Mapping[Group, GroupStreaks],
    exposition_of: ExpositionOf = whole,
) -> Series:
    """The streak samples of every exposed group, by family (pure): of the drift
    streaks, the kinds ``exposition_of`` the group's model writes.

    Groups of unknown models and of segments that are not registered (any
    more) are left out.
    """
    out: Series = {spec.name: [] for spec in STREAK_FAMILIES}
    by_id = {m.id: m for m in models}
    for (model_id, key), group in sorted(groups.items(), key=lambda item: item[0]):
        model = by_id.get(model_id)
        segment = None if model is None else segment_label(model, key)
        if model is None or segment is None:
            continue
        labels = (model.name, segment)
        exposition = exposition_of(model)
        for kind, count in zip(DRIFT_KINDS, group.drift, strict=True):
            if exposition.keeps(names.DRIFT_STREAK, kind):
                out[names.DRIFT_STREAK].append(((*labels, kind), float(count)))
        for objective, count in zip(group.objectives, group.breached, strict=True):
            out[names.SLA_BREACH_STREAK].append(
                ((*labels, *objective_labels(objective)), float(count))
            )
    return out


class StreakCollector(StoredPartCollector):
    """The streak families of :data:`app.exporter.names.STREAK_FAMILIES`.

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per :meth:`collect`; it is only read from, then closed.

    ``GET /metrics`` writes them through
    :class:`app.exporter.collector.WindowResultsCollector` (this object is one
    of its ``parts``: :meth:`read` runs in its session, with its models);
    :meth:`collect` serves any prometheus_client registry. Each group's
    windows, outcomes and streaks are kept until its :data:`Stamp` or its
    model's objectives change; then only the outcomes of windows not seen
    before are read from their documents.
    """

    specs = STREAK_FAMILIES

    def __init__(self, session_factory: Callable[[], Session]) -> None:
        super().__init__(session_factory)
        self._lock = threading.Lock()
        self._groups: dict[Group, GroupStreaks] = {}

    def read(
        self,
        session: Session,
        models: tuple[ModelRow, ...],
        shard: Shard | None = None,
        exposition_of: ExpositionOf = whole,
    ) -> Series:
        """The streak samples (read-only): one statement when no group changed, then
        the keys of the changed groups and the documents of their new windows; of the
        drift streaks, the kinds ``exposition_of`` each model writes."""
        with self._lock:
            cached = self._groups
        objectives = {m.id: m.objectives for m in models}
        stamps = {g: s for g, s in read_stamps(session, shard).items() if g[0] in objectives}
        groups: dict[Group, GroupStreaks] = {}
        changed: list[Group] = []
        for group, stamp in stamps.items():
            old = cached.get(group)
            if old is not None and old.stamp == stamp and old.objectives == objectives[group[0]]:
                groups[group] = old
            else:
                changed.append(group)
        if changed:
            groups.update(self._read_groups(session, changed, stamps, objectives, cached, shard))
        with self._lock:
            self._groups = groups
        return streak_series(models, groups, exposition_of)

    @staticmethod
    def _read_groups(
        session: Session,
        changed: Sequence[Group],
        stamps: Mapping[Group, Stamp],
        objectives: Mapping[int, tuple[Objective, ...]],
        cached: Mapping[Group, GroupStreaks],
        shard: Shard | None,
    ) -> dict[Group, GroupStreaks]:
        """The streaks of the ``changed`` groups. When they are most of the shard's, their
        keys and outcomes are read for the whole shard in one statement each (naming
        thousands of groups or windows costs more than reading them all); with no outcome
        cached to reuse (a cold cache), the outcomes alone, which bring their keys: one
        statement fewer that ranks the shard's recent windows."""
        known: dict[StoredKey, Outcomes] = {}
        for group in changed:
            old = cached.get(group)
            if old is not None and old.objectives == objectives[group[0]]:
                known.update(zip(old.keys, old.outcomes, strict=True))
        whole_shard = len(changed) * 2 > len(stamps)
        wanted = set(changed)
        if whole_shard and not known:  # a cold cache: the outcomes bring their keys
            read = read_outcomes(session, None, objectives, shard)
            known = {key: outcomes for key, outcomes in read.items() if key[:2] in wanted}
            keys = sorted(known, key=lambda key: key[2], reverse=True)  # newest first
        elif whole_shard:
            keys = [k for k in read_recent_keys(session, shard=shard) if k[:2] in wanted]
        else:
            keys = read_recent_keys(session, changed)
        missing = [k for k in keys if k not in known]
        if missing:
            whole_shard = whole_shard and len(missing) * 2 > len(keys)
            known.update(
                read_outcomes(session, missing, objectives, shard, whole_shard=whole_shard)
            )
        by_group: dict[Group, list[StoredKey]] = {group: [] for group in changed}
        for key in keys:
            if key in known:  # else recomputed meanwhile: read again next scrape (new stamp)
                by_group[(key[0], key[1])].append(key)
        return {
            group: GroupStreaks.of(
                stamps[group], objectives[group[0]], held, [known[k] for k in held]
            )
            for group, held in by_group.items()
        }
