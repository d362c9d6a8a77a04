"""The Prometheus names the exporter exposes (fixed: dashboards and alert rules use them).

Every family is documented in docs/reading.md ("Prometheus exposition").
Counter names are given without ``_total`` where prometheus_client adds it;
:data:`EXPOSED_NAMES` lists the sample names exactly as they appear in the
text exposition.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "priorwatch_"

WINDOW_METRIC = "priorwatch_window_metric"
"""gauge {model, segment, metric}: a metric of the latest fresh window."""
WINDOW_METRIC_LOWER = "priorwatch_window_metric_lower"
"""gauge {model, segment, metric}: lower credible bound of a prior-invariant metric."""
WINDOW_METRIC_UPPER = "priorwatch_window_metric_upper"
"""gauge {model, segment, metric}: upper credible bound of a prior-invariant metric."""
WINDOW_EXAMPLES = "priorwatch_window_examples"
"""gauge {model, segment, class}: examples of each class in the latest fresh window."""
WINDOW_END = "priorwatch_window_end_timestamp_seconds"
"""gauge {model, segment}: end of the latest fresh window, unix seconds."""
DRIFT_FLAG = "priorwatch_drift_flag"
"""gauge {model, segment, kind}: 1 if the prior/likelihood flag is raised, else 0."""
DRIFT_P_VALUE = "priorwatch_drift_p_value"
"""gauge {model, segment, kind}: p-value of the drift test."""
DRIFT_EFFECT = "priorwatch_drift_effect"
"""gauge {model, segment, kind}: effect size (prior: |change of pi|; likelihood: max PSI)."""
SLA_MET = "priorwatch_sla_objective_met"
"""gauge {model, segment, objective}: 1 met, 0.5 inconclusive, 0 breached (latest fresh
window; the objective's metric and op are labels of :data:`SLA_TARGET`)."""
SLA_TARGET = "priorwatch_sla_objective_target"
"""gauge {model, objective, metric, op}: the objective's target value (one per objective:
the series that names its metric and op)."""
DRIFT_STREAK = "priorwatch_drift_streak_windows"
"""gauge {model, segment, kind}: consecutive most recent fresh windows with the flag raised."""
SLA_BREACH_STREAK = "priorwatch_sla_breach_streak_windows"
"""gauge {model, segment, objective}: consecutive most recent fresh windows in which the
objective is breached."""
BATCHES_INGESTED = "priorwatch_batches_ingested"
"""counter {model} (exposed as ``..._total``): accepted batches."""
PREDICTIONS_INGESTED = "priorwatch_predictions_ingested"
"""counter {model} (exposed as ``..._total``): accepted rows."""
BATCHES_REJECTED = "priorwatch_batches_rejected"
"""counter {reason} (exposed as ``..._total``): rejected batch requests, per process."""
UNFOLDED_DELTAS = "priorwatch_unfolded_deltas"
"""gauge {model}: batches waiting for a worker to fold them (unfolded all-traffic deltas)."""
UNFOLDED_DELTAS_LIMIT = "priorwatch_unfolded_deltas_limit"
"""gauge: this process's bound on a model's unfolded deltas (PRIORWATCH_MAX_UNFOLDED_DELTAS;
0: none)."""
DELTAS_QUARANTINED = "priorwatch_deltas_quarantined"
"""counter {model} (exposed as ``..._total``): deltas the worker could not fold, set aside
(stored: the rows of ``quarantined_delta``)."""
DIRTY_WINDOWS = "priorwatch_dirty_windows"
"""gauge: windows waiting for the worker."""
WORKER_LAG = "priorwatch_worker_lag_seconds"
"""gauge: age of the oldest dirty mark in seconds (0 when none)."""

WINDOW_ESTIMATE = "priorwatch_window_estimate"
"""gauge {model, segment, metric}: label-free estimate of the latest fresh window with
unlabelled rows (``metric="prior"``: the estimated prior; else names as in evaluate)."""
WINDOW_ESTIMATE_LOWER = "priorwatch_window_estimate_lower"
"""gauge {model, segment, metric}: lower end of the estimate's interval (``metric="prior"``)."""
WINDOW_ESTIMATE_UPPER = "priorwatch_window_estimate_upper"
"""gauge {model, segment, metric}: upper end of the estimate's interval (``metric="prior"``)."""
ESTIMATE_END = "priorwatch_estimate_window_end_timestamp_seconds"
"""gauge {model, segment}: end of the window the label-free estimate is of, unix seconds."""
ESTIMATE_FLAG = "priorwatch_estimate_flag"
"""gauge {model, segment, kind}: 1 if the label-free verdict is ``kind`` (prior, likelihood)."""
ESTIMATE_P_VALUE = "priorwatch_estimate_p_value"
"""gauge {model, segment, kind}: p-value of the label-free prior test / fit test (likelihood)."""
ESTIMATE_RELIABLE = "priorwatch_estimate_reliable"
"""gauge {model, segment}: 1 if the label-free estimate is reliable, else 0."""
ESTIMATE_ERROR = "priorwatch_estimate_error"
"""gauge {model, segment, metric}: estimated minus labelled value, from the latest fresh
window that holds both unlabelled and labelled rows."""
WINDOW_LABEL_COMPLETENESS = "priorwatch_window_label_completeness"
"""gauge {model, segment}: labelled over scored rows of the latest fresh window holding
both kinds of rows (its stored ``maturity.completeness``)."""
WINDOW_COMPLETED = "priorwatch_window_completed"
"""gauge {model, segment, metric}: completed metric of that window (``metric="prior"``: the
completed prior; else names as in evaluate)."""
LABEL_COMPLETENESS = "priorwatch_label_completeness"
"""gauge {model, segment, age}: labelled over scored rows of the window that ended ``age``
ago (``1d``, ``7d``, ``30d``): the completeness curve."""
LABELS_OVERDUE = "priorwatch_labels_overdue_windows"
"""gauge {model, segment}: windows older than the model's ``label_horizon`` with a
completeness below 0.95 (models with a horizon only)."""
DATABASE_UP = "priorwatch_database_up"
"""gauge: 1 if this scrape read the database, 0 if it was unavailable (then no series
that the database holds is exposed)."""

EXPOSED_NAMES: tuple[str, ...] = (
    WINDOW_METRIC,
    WINDOW_METRIC_LOWER,
    WINDOW_METRIC_UPPER,
    WINDOW_EXAMPLES,
    WINDOW_END,
    DRIFT_FLAG,
    DRIFT_P_VALUE,
    DRIFT_EFFECT,
    SLA_MET,
    SLA_TARGET,
    DRIFT_STREAK,
    SLA_BREACH_STREAK,
    BATCHES_INGESTED + "_total",
    PREDICTIONS_INGESTED + "_total",
    BATCHES_REJECTED + "_total",
    UNFOLDED_DELTAS,
    UNFOLDED_DELTAS_LIMIT,
    DELTAS_QUARANTINED + "_total",
    DIRTY_WINDOWS,
    WORKER_LAG,
    WINDOW_ESTIMATE,
    WINDOW_ESTIMATE_LOWER,
    WINDOW_ESTIMATE_UPPER,
    ESTIMATE_END,
    ESTIMATE_FLAG,
    ESTIMATE_P_VALUE,
    ESTIMATE_RELIABLE,
    ESTIMATE_ERROR,
    WINDOW_LABEL_COMPLETENESS,
    WINDOW_COMPLETED,
    LABEL_COMPLETENESS,
    LABELS_OVERDUE,
    DATABASE_UP,
)
"""Every ``priorwatch_*`` sample name of the exposition (for rules and dashboards)."""


@dataclass(frozen=True)
class FamilySpec:
    """One exposed metric family: name (counters without ``_total``), type, help, labels."""

    name: str
    kind: str
    help: str
    labels: tuple[str, ...]


_WINDOW = ("model", "segment")
_OBJECTIVE = ("objective", "metric", "op")
"""The labels of an objective's target; a window's SLA series carry ``objective`` only."""
FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(
        WINDOW_METRIC,
        "gauge",
        "Metric of the latest fresh window (names as in evaluate)",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        WINDOW_METRIC_LOWER,
        "gauge",
        "Lower credible bound of a prior-invariant metric of the latest fresh window",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        WINDOW_METRIC_UPPER,
        "gauge",
        "Upper credible bound of a prior-invariant metric of the latest fresh window",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        WINDOW_EXAMPLES,
        "gauge",
        "Examples of each class in the latest fresh window",
        (*_WINDOW, "class"),
    ),
    FamilySpec(WINDOW_END, "gauge", "End of the latest fresh window (unix seconds)", _WINDOW),
    FamilySpec(
        DRIFT_FLAG,
        "gauge",
        "1 if the drift flag is raised in the latest fresh window, else 0",
        (*_WINDOW, "kind"),
    ),
    FamilySpec(
        DRIFT_P_VALUE,
        "gauge",
        "p-value of the drift test in the latest fresh window",
        (*_WINDOW, "kind"),
    ),
    FamilySpec(
        DRIFT_EFFECT,
        "gauge",
        "Drift effect size (prior: absolute change of pi; likelihood: max per-class PSI)",
        (*_WINDOW, "kind"),
    ),
    FamilySpec(
        SLA_MET,
        "gauge",
        "SLA objective in the latest fresh window: 1 met, 0.5 inconclusive, 0 breached",
        (*_WINDOW, "objective"),
    ),
    FamilySpec(SLA_TARGET, "gauge", "Target value of the SLA objective", ("model", *_OBJECTIVE)),
    FamilySpec(BATCHES_INGESTED, "counter", "Accepted batches", ("model",)),
    FamilySpec(PREDICTIONS_INGESTED, "counter", "Accepted rows (examples)", ("model",)),
    FamilySpec(
        UNFOLDED_DELTAS,
        "gauge",
        "Batches waiting for a worker to fold them (unfolded all-traffic deltas)",
        ("model",),
    ),
    FamilySpec(
        DELTAS_QUARANTINED,
        "counter",
        "Batch deltas the worker could not fold, quarantined instead of counted",
        ("model",),
    ),
    FamilySpec(DIRTY_WINDOWS, "gauge", "Windows waiting for the worker", ()),
    FamilySpec(WORKER_LAG, "gauge", "Age of the oldest dirty mark in seconds (0 when none)", ()),
)
"""Every family of the collector, in exposition order."""

STREAK_FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(
        DRIFT_STREAK,
        "gauge",
        "Consecutive most recent fresh windows with the drift flag raised "
        "(untested windows skipped; capped)",
        (*_WINDOW, "kind"),
    ),
    FamilySpec(
        SLA_BREACH_STREAK,
        "gauge",
        "Consecutive most recent fresh windows in which the SLA objective is breached "
        "(windows with insufficient data skipped; capped)",
        (*_WINDOW, "objective"),
    ),
)
"""The streak families (app/exporter/streaks.py), written after :data:`FAMILIES`."""

ESTIMATE_FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(
        WINDOW_ESTIMATE,
        "gauge",
        "Label-free estimate of the latest fresh window with unlabelled rows (prior, metrics)",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        WINDOW_ESTIMATE_LOWER,
        "gauge",
        "Lower end of the label-free estimate's interval",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        WINDOW_ESTIMATE_UPPER,
        "gauge",
        "Upper end of the label-free estimate's interval",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        ESTIMATE_END,
        "gauge",
        "End of the window of the label-free estimate (unix seconds)",
        _WINDOW,
    ),
    FamilySpec(
        ESTIMATE_FLAG,
        "gauge",
        "1 if the label-free verdict is this kind (prior, likelihood), else 0",
        (*_WINDOW, "kind"),
    ),
    FamilySpec(
        ESTIMATE_P_VALUE,
        "gauge",
        "p-value of the label-free prior test (prior) or fit test (likelihood)",
        (*_WINDOW, "kind"),
    ),
    FamilySpec(
        ESTIMATE_RELIABLE,
        "gauge",
        "1 if the label-free estimate is reliable (the mixture fits), else 0",
        _WINDOW,
    ),
    FamilySpec(
        ESTIMATE_ERROR,
        "gauge",
        "Estimated minus labelled metric, latest fresh window holding both kinds of rows",
        (*_WINDOW, "metric"),
    ),
)
"""The families of the label-free estimates (app/exporter/estimates.py)."""

MATURITY_FAMILIES: tuple[FamilySpec, ...] = (
    FamilySpec(
        WINDOW_LABEL_COMPLETENESS,
        "gauge",
        "Labelled over scored rows, latest fresh window holding both kinds of rows",
        _WINDOW,
    ),
    FamilySpec(
        WINDOW_COMPLETED,
        "gauge",
        "Completed metric (labelled and still unlabelled rows) of that window",
        (*_WINDOW, "metric"),
    ),
    FamilySpec(
        LABEL_COMPLETENESS,
        "gauge",
        "Labelled over scored rows of the window that ended this long ago",
        (*_WINDOW, "age"),
    ),
    FamilySpec(
        LABELS_OVERDUE,
        "gauge",
        "Windows past the model's label horizon with less than 95% of their labels",
        _WINDOW,
    ),
)
"""The families of label maturity (app/exporter/maturity.py)."""

DATABASE_UP_FAMILY = FamilySpec(
    DATABASE_UP,
    "gauge",
    "1 if this scrape read the database, 0 if it was unavailable (no stored series then)",
    (),
)
"""Written first by ``GET /metrics`` (app/exporter/registry.py), database up or not."""
