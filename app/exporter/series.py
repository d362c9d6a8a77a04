"""Which series a scrape exposes and their values, from what was read (pure).

Label values come from registered names only: a model's name, its
registered segments (windows of a segment removed from the model are not
exposed) and ``"all"`` for the all-traffic window; metric names are the
stored keys, which are those of ``evaluate``. Undefined values (None) are
omitted, never exported as NaN. No sample carries a timestamp. The SLA
gauges judge the stored values with :mod:`app.sla.objectives`
(names only: no metric is computed here), a partially labelled window on its
completed values (its ``maturity`` document), as the SLA report does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from app.db.models import ALL_SEGMENTS, ALL_SEGMENTS_LABEL
from app.db.queue import QueueStats
from app.db.scrape import Projection
from app.exporter import names
from app.exporter.exposition import FULL, Exposition
from app.exporter.names import FAMILIES, FamilySpec
from app.exporter.reads import LatestWindow, ModelRow, ResultStamp, Shard, Snapshot
from app.exporter.text import Sample, Series
from app.sla.objectives import SLA_GAUGE, Objective, evaluate_objective, judged_documents
from app.timegrid import window_length

DRIFT_KINDS: tuple[str, ...] = ("prior", "likelihood")
"""``kind`` label values of the drift gauges."""
DRIFT_MEMBERS: tuple[str, ...] = ("flag", "p_value", "effect")
"""What the drift gauges read of each test of a stored drift verdict."""


def measured(value: Any) -> float | None:
    """``value`` as exposed, exact: a float, or None when it is absent, not a number, or
    not finite.

    >>> measured(0.6195380720781442), measured(12), measured(None), measured(True)
    (0.6195380720781442, 12.0, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def segment_label(model: ModelRow, key: str) -> str | None:
    """The ``segment`` label of a stored segment key; None when it must not be exposed."""
    if key == ALL_SEGMENTS:
        return ALL_SEGMENTS_LABEL
    if key not in model.segments or key == ALL_SEGMENTS_LABEL:
        return None  # deregistered, or would collide with the all-traffic label
    return key


WINDOW_FAMILIES: tuple[FamilySpec, ...] = tuple(
    f for f in FAMILIES if f.labels[:2] == ("model", "segment")
)

"""The families with one series set per exposed window."""


def window_series(
    model: ModelRow, segment: str, window: LatestWindow, exposition: Exposition = FULL
) -> Series:
    """The samples of one exposed window, by family of :data:`WINDOW_FAMILIES`: only
    those ``exposition`` writes (every one by default; pure)."""
    out: Series = {spec.name: [] for spec in WINDOW_FAMILIES}
    labels = (model.name, segment)
    add_named(
        out[names.WINDOW_METRIC], labels, window.metrics, exposition.kept(names.WINDOW_METRIC)
    )
    lower, upper = out[names.WINDOW_METRIC_LOWER], out[names.WINDOW_METRIC_UPPER]
    kept_lower = exposition.kept(names.WINDOW_METRIC_LOWER)
    kept_upper = exposition.kept(names.WINDOW_METRIC_UPPER)
    for name, bounds in window.intervals.items():
        if not isinstance(bounds, Mapping):
            continue
        low = measured(bounds.get("lower")) if kept_lower is None or name in kept_lower else None
        high = measured(bounds.get("upper")) if kept_upper is None or name in kept_upper else None
        if low is not None:
            lower.append(((*labels, name), low))
        if high is not None:
            upper.append(((*labels, name), high))
    examples = out[names.WINDOW_EXAMPLES]
    examples.append(((*labels, "positive"), float(window.positives)))
    examples.append(((*labels, "negative"), float(window.n - window.positives)))
    end = window.key.start + window_length(model.window)
    out[names.WINDOW_END].append((labels, end.timestamp()))
    _add_drift(out, labels, window.drift)
    judged = judged_documents(window.metrics, window.intervals, window.reasons, window.maturity)
    for objective in model.objectives:
        result = evaluate_objective(objective, *judged, detail_current=window.detail_current)
        gauge = SLA_GAUGE.get(result.status)
        if gauge is not None:
            out[names.SLA_MET].append(((*labels, *objective_labels(objective)), gauge))
    return out


def read_projection(
    models: Iterable[ModelRow], exposition_of: Callable[[ModelRow], Exposition]
) -> Projection:
    """What :func:`window_series` reads of the stored documents of ``models``' windows,
    each model written as ``exposition_of`` it says: the metrics and interval bounds
    written (every one as soon as one model writes every one) and those its objectives
    judge, of the drift verdict the members :func:`_add_drift` reads."""
    objectives = {o.evaluated_as for m in models for o in m.objectives}
    metrics: set[str] | None = set(objectives)
    intervals: set[str] | None = set(objectives)
    for model in models:
        exposition = exposition_of(model)
        metrics = _with(metrics, exposition.kept(names.WINDOW_METRIC))
        for family in (names.WINDOW_METRIC_LOWER, names.WINDOW_METRIC_UPPER):
            intervals = _with(intervals, exposition.kept(family))
    return Projection(
        metrics=None if metrics is None else sorted(metrics),
        intervals=None if intervals is None else sorted(intervals),
        judged=sorted(objectives),
        drift={kind: DRIFT_MEMBERS for kind in DRIFT_KINDS},
    )


def _with(names_read: set[str] | None, kept: Set[str] | None) -> set[str] | None:
    """``names_read`` and ``kept`` (None, every name, if either is)."""
    return None if names_read is None or kept is None else names_read | kept


def add_named(
    out: list[Sample], labels: tuple[str, ...], values: Mapping[str, Any], kept: Set[str] | None
) -> None:
    """A sample per defined value of ``values`` whose name is ``kept`` (None: every one),
    labelled ``(*labels, name)``."""
    for name, raw in values.items():
        if kept is not None and name not in kept:
            continue
        value = measured(raw)
        if value is not None:
            out.append(((*labels, name), value))


def objective_labels(objective: Objective) -> tuple[str]:
    """The ``objective`` label of a window's SLA series: the objective's id, unique in its
    model (its ``metric`` and ``op`` are labels of the target only, :func:`target_labels`:
    not repeated on every window's sample)."""
    return (objective.id,)


def target_labels(objective: Objective) -> tuple[str, str, str]:
    """The ``objective``, ``metric`` and ``op`` labels of an SLA objective's target."""
    return (objective.id, objective.metric, objective.op)


def _add_drift(out: Series, labels: tuple[str, str], drift: Mapping[str, Any] | None) -> None:
    if not drift:
        return
    for kind in DRIFT_KINDS:
        test = drift.get(kind)
        if not isinstance(test, Mapping):
            continue
        flag = test.get("flag")
        if isinstance(flag, bool):
            out[names.DRIFT_FLAG].append(((*labels, kind), 1.0 if flag else 0.0))
        p_value, effect = measured(test.get("p_value")), measured(test.get("effect"))
        if p_value is not None:
            out[names.DRIFT_P_VALUE].append(((*labels, kind), p_value))
        if effect is not None:
            out[names.DRIFT_EFFECT].append(((*labels, kind), effect))


def model_series(models: Iterable[ModelRow], queue: QueueStats | None) -> Series:
    """The samples that do not depend on a window: counters, targets, queue (pure;
    no queue series when ``queue`` is None: a shard other than 0)."""
    out: Series = {spec.name: [] for spec in FAMILIES if spec not in WINDOW_FAMILIES}
    for model in models:
        out[names.BATCHES_INGESTED].append(((model.name,), float(model.batches)))
        out[names.PREDICTIONS_INGESTED].append(((model.name,), float(model.rows)))
        out[names.UNFOLDED_DELTAS].append(((model.name,), float(model.unfolded)))
        out[names.DELTAS_QUARANTINED].append(((model.name,), float(model.quarantined)))
        for objective in model.objectives:
            out[names.SLA_TARGET].append(
                ((model.name, *target_labels(objective)), objective.target)
            )
    if queue is not None:
        out[names.DIRTY_WINDOWS].append(((), float(queue.dirty_windows)))
        out[names.WORKER_LAG].append(((), queue.lag_seconds))
    return out


def holds_process_series(shard: Shard | None) -> bool:
    """Whether a shard exposes the series of no model (queue, process, rejections,
    database up): shard 0, or an unsharded scrape."""
    return shard is None or shard[0] == 0


def exposed_windows(
    models: Iterable[ModelRow], keys: Iterable[ResultStamp]
) -> list[tuple[ModelRow, str, ResultStamp]]:
    """The windows to expose, as (model, segment label, key), in exposition order.

    Windows of unknown models and of segments that are not registered (any
    more) are left out.
    """
    by_id = {m.id: m for m in models}
    out = []
    for key in sorted(keys, key=lambda k: (k.model_id, k.segment)):
        model = by_id.get(key.model_id)
        if model is None:
            continue
        segment = segment_label(model, key.segment)
        if segment is not None:
            out.append((model, segment, key))
    return out


def series(snapshot: Snapshot) -> Series:
    """Every sample of one snapshot, by family (pure).

    The one place that decides which series exist and their values
    (:func:`window_series` and :func:`model_series`); :func:`families` and
    :meth:`WindowResultsCollector.render_text` both write it.
    """
    out: Series = {spec.name: [] for spec in FAMILIES}
    windows = {w.key: w for w in snapshot.windows}
    for model, segment, key in exposed_windows(snapshot.models, windows):
        for name, samples in window_series(model, segment, windows[key]).items():
            out[name].extend(samples)
    for name, samples in model_series(snapshot.models, snapshot.queue).items():
        out[name].extend(samples)
    return out


def families(snapshot: Snapshot) -> tuple[Metric, ...]:
    """The metric families of one snapshot as prometheus_client objects (pure)."""
    samples = series(snapshot)
    out: list[Metric] = []
    for spec in FAMILIES:
        family: GaugeMetricFamily | CounterMetricFamily
        if spec.kind == "counter":
            family = CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
        else:
            family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
        for labels, value in samples[spec.name]:
            family.add_metric(labels, value)
        out.append(family)
    return tuple(out)
