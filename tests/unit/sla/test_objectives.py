"""SLA objectives, their evaluation at pi0, the summary ratio and the CSV form (no database)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from app.api.routes.sla import CSV_MEDIA_TYPE, preferred_media
from app.metrics.area_intervals import FEW_NEGATIVES, calibrated_auc_pr_interval
from app.metrics.evaluate import OPS_METRICS
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT
from app.services.models.metric_names import metric_names
from app.services.read.sla_report import SlaReport, SlaWindow, Tally, window_results
from app.services.read.windows import WindowView
from app.sla.csv import CSV_COLUMNS, reports_to_csv
from app.sla.objectives import AT_PI0, OPS_WITH_INTERVALS, Objective, evaluate_objective


@pytest.mark.parametrize(
    ("metric", "evaluated_as"),
    [
        ("calibrated_f1", "calibrated_f1"),
        ("f1", "calibrated_f1"),
        ("precision", "calibrated_precision"),
        ("auc_pr", "calibrated_auc_pr"),
        ("mcc@t=0.3", "calibrated_mcc@t=0.3"),
        ("recall", "recall"),
        ("balanced_accuracy", "balanced_accuracy"),
        ("auc_roc", "auc_roc"),
        ("ops_f1", "ops_f1"),
        ("weighted_accuracy", "weighted_accuracy"),
    ],
)
def test_objectives_read_the_value_at_pi0(metric: str, evaluated_as: str) -> None:
    assert Objective(metric, ">=", 0.5).evaluated_as == evaluated_as


def test_every_value_at_pi0_is_a_metric_of_evaluate() -> None:
    keys = metric_names()
    assert set(AT_PI0.values()) <= keys
    # prior-invariant labeling metrics are not remapped
    invariant = set(LABELING_METRICS) - set(PRIOR_DEPENDENT)
    assert {"recall", "specificity", "balanced_accuracy"} <= invariant
    assert not invariant & set(AT_PI0)


def test_label_and_comparison() -> None:
    assert Objective("calibrated_f1", ">=", 0.6).label == "calibrated_f1>=0.6"
    assert Objective("brier", "<=", 1).label == "brier<=1.0"
    ge, le = Objective("recall", ">=", 0.5), Objective("brier", "<=", 0.1)
    assert ge.holds(0.5) and ge.holds(0.9) and not ge.holds(0.49)
    assert le.holds(0.1) and le.holds(0.0) and not le.holds(0.11)
    with pytest.raises(ValueError, match="op"):
        Objective.from_document({"metric": "f1", "op": ">", "target": 0.5})


def test_evaluate_objective_statuses_and_bounds() -> None:
    metrics = {"calibrated_f1": 0.7, "recall": None, "brier": 0.2}
    intervals = {"calibrated_f1": {"lower": 0.65, "upper": 0.75, "level": 0.95}}
    reasons = {"recall": "insufficient_data"}
    met = evaluate_objective(Objective("f1", ">=", 0.6), metrics, intervals, reasons)
    assert (met.status, met.value, met.lower, met.upper) == ("met", 0.7, 0.65, 0.75)
    breached = evaluate_objective(Objective("brier", "<=", 0.1), metrics, intervals, reasons)
    assert (breached.status, breached.lower) == ("breached", None)
    # brier has no interval: the point value decides, and the objective says so
    assert breached.objective.evidence == "point"
    assert "no credible interval" in (breached.objective.evidence_reason or "")
    scarce = evaluate_objective(Objective("recall", ">=", 0.5), metrics, intervals, reasons)
    assert (scarce.status, scarce.value, scarce.reason) == (
        "insufficient_data",
        None,
        "insufficient_data",
    )
    absent = evaluate_objective(Objective("auc_roc", ">=", 0.5), metrics)
    assert absent.status == "insufficient_data"
    assert "not computed" in (absent.reason or "")


@pytest.mark.parametrize(
    ("op", "target", "lower", "upper", "status"),
    [
        (">=", 0.6, 0.65, 0.75, "met"),
        (">=", 0.65, 0.65, 0.75, "met"),  # the target itself is the right side
        (">=", 0.7, 0.65, 0.75, "inconclusive"),  # point 0.7 meets it, the interval does not
        (">=", 0.72, 0.65, 0.75, "inconclusive"),  # point 0.7 misses it, the interval does not
        (">=", 0.75, 0.65, 0.75, "inconclusive"),
        (">=", 0.8, 0.65, 0.75, "breached"),
        ("<=", 0.8, 0.65, 0.75, "met"),
        ("<=", 0.75, 0.65, 0.75, "met"),
        ("<=", 0.68, 0.65, 0.75, "inconclusive"),
        ("<=", 0.65, 0.65, 0.75, "inconclusive"),
        ("<=", 0.6, 0.65, 0.75, "breached"),
    ],
)
def test_interval_evidence_decides_met_breached_inconclusive(
    op: str, target: float, lower: float, upper: float, status: str
) -> None:
    metrics = {"calibrated_f1": 0.7}
    intervals = {"calibrated_f1": {"lower": lower, "upper": upper, "level": 0.95}}
    result = evaluate_objective(Objective("f1", op, target), metrics, intervals)
    assert (result.status, result.reason) == (status, None)
    point = evaluate_objective(Objective("f1", op, target, "point"), metrics, intervals)
    expected = "met" if Objective("f1", op, target).holds(0.7) else "breached"
    assert point.status == expected
    assert point.to_dict()["evidence"] == "point"


def test_interval_evidence_without_a_stored_interval_is_inconclusive() -> None:
    result = evaluate_objective(Objective("recall", ">=", 0.5), {"recall": 0.9}, {})
    assert result.status == "inconclusive"
    assert "no credible interval of recall" in (result.reason or "")
    # the point value is used only when asked for
    asked = evaluate_objective(Objective("recall", ">=", 0.5, "point"), {"recall": 0.9}, {})
    assert (asked.status, asked.objective.evidence_reason) == ("met", None)


def test_an_auc_pr_objective_is_decided_by_the_calibrated_auc_pr_interval() -> None:
    """The SLA's headline metric: a target inside the stored interval is inconclusive,
    not a coin flip on the point value."""
    pos, neg = [1, 2, 5, 12, 30], [400, 250, 100, 40, 10]
    low, high, _ = calibrated_auc_pr_interval(pos, neg, pi0=0.1)
    metrics = {"calibrated_auc_pr": 0.694}
    intervals = {"calibrated_auc_pr": {"lower": low, "upper": high, "level": 0.95}}
    for target, status in ((0.694, "inconclusive"), (low - 0.01, "met"), (high + 0.01, "breached")):
        result = evaluate_objective(Objective("auc_pr", ">=", target), metrics, intervals)
        assert (result.objective.evidence, result.status) == ("interval", status), target
    # a window gated for too few negatives: inconclusive, and the report says why
    gated = {"calibrated_auc_pr": {"lower": None, "upper": None, "reason": FEW_NEGATIVES}}
    result = evaluate_objective(Objective("auc_pr", ">=", 0.5), metrics, gated)
    assert result.status == "inconclusive"
    assert result.reason is not None and FEW_NEGATIVES in result.reason


@pytest.mark.parametrize(
    ("metric", "evidence"),
    [
        ("f1", "interval"),  # calibrated_f1
        ("recall", "interval"),
        ("ops_f1", "interval"),
        ("auc_roc", "interval"),
        ("auc_pr", "interval"),  # calibrated_auc_pr: closed-form interval
        ("ks", "interval"),
        ("f1@t=0.3", "point"),
        ("recall@t=0.3", "point"),
        ("weighted_accuracy", "point"),
        ("brier", "point"),
        ("log_loss", "point"),
        ("auc_lift", "point"),
        ("nauc_lift", "point"),
        ("ops_balanced_accuracy", "point"),
    ],
)
def test_metrics_without_an_interval_fall_back_to_the_point_value(
    metric: str, evidence: str
) -> None:
    objective = Objective(metric, ">=", 0.5)
    assert objective.evidence == evidence
    assert (objective.evidence_reason is None) == (evidence == "interval")
    assert objective.to_dict()["rule"].startswith(evidence)


def test_the_labeling_ops_with_intervals_are_those_of_evaluate() -> None:
    expected = {f"ops_{m}" for m in OPS_METRICS if m in LABELING_METRICS}
    assert expected == OPS_WITH_INTERVALS


def test_objective_document_evidence() -> None:
    doc = {"metric": "f1", "op": ">=", "target": 0.5}
    assert Objective.from_document(doc).requested == "interval"
    assert Objective.from_document({**doc, "evidence": "point"}).evidence == "point"
    with pytest.raises(ValueError, match="evidence"):
        Objective.from_document({**doc, "evidence": "vibes"})


def test_tally_ratio() -> None:
    t = Tally.of(["met", "met", "breached", "inconclusive", "insufficient_data", "pending"])
    assert (t.met, t.breached, t.inconclusive, t.insufficient_data, t.pending) == (2, 1, 1, 1, 1)
    assert t.compliance_ratio == pytest.approx(2 / 3)
    assert t.to_dict()["windows_inconclusive"] == 1
    assert Tally.of(["pending"]).compliance_ratio is None
    assert Tally.of(["inconclusive"]).compliance_ratio is None


def _view(
    start: datetime,
    status: str,
    metrics: dict[str, float | None],
    intervals: dict[str, tuple[float, float]] | None = None,
) -> WindowView:
    return WindowView(
        start=start,
        end=start + timedelta(hours=1),
        segment="eu",
        granularity="1h",
        n=100,
        positives=10,
        status=status,
        metrics=metrics,
        intervals={
            k: {"lower": low, "upper": high, "level": 0.95}
            for k, (low, high) in (intervals or {}).items()
        },
        aggregate_version=1,
        detail_version=1,  # the intervals are of the current data
        detail_computed_at=start,
    )


def test_report_windows_summary_and_csv() -> None:
    start = datetime(2026, 11, 26, tzinfo=UTC)
    objectives = (Objective("f1", ">=", 0.5), Objective("recall", ">=", 0.5))
    hour = timedelta(hours=1)
    f1_ok, recall_ok = {"calibrated_f1": (0.55, 0.65)}, {"recall": (0.6, 0.8)}
    views = [
        _view(start, "fresh", {"calibrated_f1": 0.6, "recall": 0.7}, f1_ok | recall_ok),  # met
        _view(start + hour, "fresh", {"calibrated_f1": 0.4, "recall": None}, {}),
        _view(start + 2 * hour, "fresh", {"calibrated_f1": 0.6, "recall": None}, f1_ok),
        _view(start + 3 * hour, "pending", {"calibrated_f1": 0.1}),
        _view(start + 4 * hour, "fresh", {"calibrated_f1": 0.6, "recall": 0.7}, f1_ok),
    ]
    views[1].intervals["calibrated_f1"] = {"lower": 0.3, "upper": 0.45, "level": 0.95}
    windows = tuple(SlaWindow(v, window_results(objectives, v)) for v in views)
    assert [w.status for w in windows] == [
        "met",
        "breached",
        "insufficient_data",
        "pending",
        "inconclusive",  # recall has a value but no interval in that window
    ]
    report = SlaReport("fraud", 0.1, "eu", start, start + 5 * hour, objectives, windows)
    summary = report.summary()
    assert (summary["windows_met"], summary["windows_breached"]) == (1, 1)
    assert summary["compliance_ratio"] == 0.5
    assert (summary["windows_pending"], summary["windows_inconclusive"]) == (1, 1)
    f1 = summary["objectives"][0]
    assert (f1["windows_met"], f1["windows_breached"], f1["compliance_ratio"]) == (3, 1, 3 / 4)
    recall = summary["objectives"][1]
    assert (recall["windows_met"], recall["windows_inconclusive"]) == (1, 1)
    assert recall["windows_insufficient_data"] == 2
    doc = report.to_dict()
    assert "inconclusive" in doc["rule"] and "met / (met + breached)" in doc["rule"]
    assert doc["objectives"][0]["evidence"] == "interval"
    assert doc["objectives"][0]["rule"] == (
        "interval: met if lower >= 0.5; breached if upper < 0.5; else inconclusive"
    )

    rows = list(csv.reader(io.StringIO(reports_to_csv(doc))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 1 + len(views) * len(objectives)
    first = dict(zip(CSV_COLUMNS, rows[1], strict=True))
    assert first["objective"] == "f1>=0.5"
    assert first["evaluated_as"] == "calibrated_f1"
    assert (first["value"], first["status"], first["lower"]) == ("0.6", "met", "0.55")
    assert first["evidence"] == "interval"
    assert first["rule"] == doc["objectives"][0]["rule"]
    assert first["window_start"] == "2026-11-26T00:00:00Z"
    pending = dict(zip(CSV_COLUMNS, rows[-3], strict=True))
    assert (pending["status"], pending["value"]) == ("pending", "")


@pytest.mark.parametrize(
    ("accept", "csv_wanted"),
    [
        (None, False),
        ("", False),
        ("*/*", False),
        ("application/json", False),
        ("text/csv", True),
        ("text/csv, application/json", True),
        ("application/json, text/csv;q=0.9", False),
        ("application/json;q=0.5, text/csv", True),
        ("text/csv;q=0", False),
        ("text/csv;q=oops, */*", False),
        ("text/*, TEXT/CSV", True),
    ],
)
def test_accept_negotiation(accept: str | None, csv_wanted: bool) -> None:
    assert (preferred_media(accept) == CSV_MEDIA_TYPE) is csv_wanted
