"""SLA objectives, their evaluation at pi0, the summary ratio and the CSV form (no database)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from app.api.routes.sla import wants_csv
from app.metrics.labeling import LABELING_METRICS, PRIOR_DEPENDENT
from app.services.metric_names import metric_names
from app.services.sla import CSV_COLUMNS, SlaReport, SlaWindow, Tally, report_to_csv, window_results
from app.services.sla_objectives import AT_PI0, Objective, evaluate_objective
from app.services.window_read import WindowView


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
    scarce = evaluate_objective(Objective("recall", ">=", 0.5), metrics, intervals, reasons)
    assert (scarce.status, scarce.value, scarce.reason) == (
        "insufficient_data",
        None,
        "insufficient_data",
    )
    absent = evaluate_objective(Objective("auc_roc", ">=", 0.5), metrics)
    assert absent.status == "insufficient_data"
    assert "not computed" in (absent.reason or "")


def test_tally_ratio() -> None:
    t = Tally.of(["met", "met", "breached", "insufficient_data", "pending"])
    assert (t.met, t.breached, t.insufficient_data, t.pending) == (2, 1, 1, 1)
    assert t.compliance_ratio == pytest.approx(2 / 3)
    assert Tally.of(["pending"]).compliance_ratio is None


def _view(start: datetime, status: str, metrics: dict[str, float | None]) -> WindowView:
    return WindowView(
        start=start,
        end=start + timedelta(hours=1),
        segment="eu",
        granularity="1h",
        n=100,
        positives=10,
        status=status,
        metrics=metrics,
    )


def test_report_windows_summary_and_csv() -> None:
    start = datetime(2026, 11, 26, tzinfo=UTC)
    objectives = (Objective("f1", ">=", 0.5), Objective("recall", ">=", 0.5))
    views = [
        _view(start, "fresh", {"calibrated_f1": 0.6, "recall": 0.7}),  # met
        _view(start + timedelta(hours=1), "fresh", {"calibrated_f1": 0.4, "recall": None}),
        _view(start + timedelta(hours=2), "fresh", {"calibrated_f1": 0.6, "recall": None}),
        _view(start + timedelta(hours=3), "pending", {"calibrated_f1": 0.1}),
    ]
    windows = tuple(SlaWindow(v, window_results(objectives, v)) for v in views)
    assert [w.status for w in windows] == ["met", "breached", "insufficient_data", "pending"]
    report = SlaReport("fraud", 0.1, "eu", start, start + timedelta(hours=4), objectives, windows)
    summary = report.summary()
    assert (summary["windows_met"], summary["windows_breached"]) == (1, 1)
    assert summary["compliance_ratio"] == 0.5
    assert summary["windows_pending"] == 1
    f1 = summary["objectives"][0]
    assert (f1["windows_met"], f1["windows_breached"], f1["compliance_ratio"]) == (2, 1, 2 / 3)

    rows = list(csv.reader(io.StringIO(report_to_csv(report))))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 1 + len(views) * len(objectives)
    first = dict(zip(CSV_COLUMNS, rows[1], strict=True))
    assert first["objective"] == "f1>=0.5"
    assert first["evaluated_as"] == "calibrated_f1"
    assert (first["value"], first["status"], first["lower"]) == ("0.6", "met", "")
    assert first["window_start"] == "2026-11-26T00:00:00Z"
    pending = dict(zip(CSV_COLUMNS, rows[-1], strict=True))
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
    assert wants_csv(accept) is csv_wanted
