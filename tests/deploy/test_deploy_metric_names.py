"""Alert rules and the Grafana dashboard use only the exporter's metric names.

The names are fixed (/work/briefs/exposition.md, app/exporter/names.py): a
typo in a PromQL expression silently selects nothing, so an alert would never
fire and a panel would stay empty. Every expression is scanned for the metric
names it selects, and each must be an exposed name, a name recorded by
deploy/prometheus/rules/priorwatch.rules.yml (rules only), or ``up``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.exporter.names import EXPOSED_NAMES

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules" / "priorwatch.rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "priorwatch.json"

#: The exposition names, as fixed for the exporter, dashboards and alert rules.
EXPOSITION_NAMES: tuple[str, ...] = (
    "priorwatch_window_metric",
    "priorwatch_window_metric_lower",
    "priorwatch_window_metric_upper",
    "priorwatch_window_examples",
    "priorwatch_window_end_timestamp_seconds",
    "priorwatch_drift_flag",
    "priorwatch_drift_p_value",
    "priorwatch_drift_effect",
    "priorwatch_sla_objective_met",
    "priorwatch_sla_objective_target",
    "priorwatch_drift_streak_windows",
    "priorwatch_sla_breach_streak_windows",
    "priorwatch_batches_ingested_total",
    "priorwatch_predictions_ingested_total",
    "priorwatch_batches_rejected_total",
    "priorwatch_unfolded_deltas",
    "priorwatch_unfolded_deltas_limit",
    "priorwatch_deltas_quarantined_total",
    "priorwatch_dirty_windows",
    "priorwatch_worker_lag_seconds",
    "priorwatch_window_estimate",
    "priorwatch_window_estimate_lower",
    "priorwatch_window_estimate_upper",
    "priorwatch_estimate_window_end_timestamp_seconds",
    "priorwatch_estimate_flag",
    "priorwatch_estimate_p_value",
    "priorwatch_estimate_reliable",
    "priorwatch_estimate_error",
    "priorwatch_window_label_completeness",
    "priorwatch_window_completed",
    "priorwatch_label_completeness",
    "priorwatch_labels_overdue_windows",
    "priorwatch_database_up",
)
#: Series Prometheus itself writes for every scrape target (rules only).
PROMETHEUS_SERIES = ("up",)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_BRACES = re.compile(r"\{[^}]*\}")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_GRAFANA_VARIABLE = re.compile(r"\$\{?\w+(?::\w+)?\}?")
_IDENTIFIER = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
     "group_left", "group_right", "inf", "nan", "atan2"}
)  # fmt: skip


def promql_metric_names(expr: str) -> set[str]:
    """The metric names an expression selects.

    Strings, label matchers, ranges, grouping clauses and Grafana variables are
    removed first; an identifier followed by ``(`` is a function or an
    aggregation, the operator keywords are skipped, and what remains is a
    metric name.
    """
    text = _STRING.sub('""', expr)
    text = _GROUPING.sub(" ", text)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GRAFANA_VARIABLE.sub(" ", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        name, call = match.group(1), match.group(2)
        if call is None and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("rate(foo_total[5m])", {"foo_total"}),
        ('sum by (model) (rate(a_total{reason="x"}[$__rate_interval]))', {"a_total"}),
        ("a > bool on (model, segment) max_over_time(b[6h] offset 1m) or on (x) 0 * c",
         {"a", "b", "c"}),
        ('label_replace(x, "metric", "$1", "objective", "(.+?)(>=|<=).*")', {"x"}),
        ("level:metric:rate5m / ignoring (instance) group_left (job) other", {"level:metric:rate5m",
                                                                             "other"}),
        ("clamp_min(3 * y, 6 * 3600) or vector(0) - time()", {"y"}),
        ('time() - max by (segment) (z{model="$model", segment=~"$segment"})', {"z"}),
        ("absent(q) and 1e3 > 0x1F and inf", {"q"}),
    ],
)  # fmt: skip
def test_promql_metric_names_finds_exactly_the_selected_names(
    expr: str, expected: set[str]
) -> None:
    assert promql_metric_names(expr) == expected


def test_exposition_names_match_the_exporter() -> None:
    assert set(EXPOSED_NAMES) == set(EXPOSITION_NAMES)


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> Iterator[tuple[str, str]]:
    """(where, expr) for every PromQL expression of the dashboard."""
    doc = json.loads(DASHBOARD.read_text())

    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets", []):
                yield f"panel {panel['title']!r}", target["expr"]
            yield from walk(panel.get("panels", []))

    yield from walk(doc["panels"])
    for annotation in doc["annotations"]["list"]:
        if "expr" in annotation:
            yield f"annotation {annotation['name']!r}", annotation["expr"]
    for variable in doc["templating"]["list"]:
        if variable["type"] == "query":
            # label_values(<selector>, <label>): the selector is PromQL
            found = re.fullmatch(r"label_values\((.*),\s*\w+\)", variable["definition"])
            assert found, f"variable {variable['name']}: unexpected query"
            yield f"variable {variable['name']!r}", found.group(1)


def test_rules_use_only_exposed_recorded_or_prometheus_names() -> None:
    rules = _rules()
    recorded = {rule["record"] for rule in rules if "record" in rule}
    allowed = set(EXPOSITION_NAMES) | recorded | set(PROMETHEUS_SERIES)
    unknown = {
        (rule.get("record") or rule["alert"], name)
        for rule in rules
        for name in promql_metric_names(str(rule["expr"]))
        if name not in allowed
    }
    assert not unknown


def test_every_recorded_name_is_used_by_another_rule() -> None:
    rules = _rules()
    used = set().union(*(promql_metric_names(str(rule["expr"])) for rule in rules))
    # a recorded series nothing reads is dead weight (or a typo on the reader's side)
    unused = {rule["record"] for rule in rules if "record" in rule} - used
    assert not unused


def test_rules_read_every_exposed_name_they_should() -> None:
    names = set().union(*(promql_metric_names(str(rule["expr"])) for rule in _rules()))
    # p-values, examples, values, intervals, per-window SLA verdicts and targets and
    # row counts are for people (dashboard); the SLA alerts read the breach streaks
    for_people = {
        "priorwatch_drift_p_value",
        "priorwatch_predictions_ingested_total",
        "priorwatch_window_examples",
        "priorwatch_window_metric",
        "priorwatch_window_metric_lower",
        "priorwatch_window_metric_upper",
        "priorwatch_sla_objective_met",
        "priorwatch_sla_objective_target",
        # the label-free estimate (only its verdict alerts)
        "priorwatch_window_estimate",
        "priorwatch_window_estimate_lower",
        "priorwatch_window_estimate_upper",
        "priorwatch_estimate_window_end_timestamp_seconds",
        "priorwatch_estimate_p_value",
        "priorwatch_estimate_reliable",
        "priorwatch_estimate_error",
        # label maturity (only the overdue windows alert)
        "priorwatch_window_label_completeness",
        "priorwatch_window_completed",
        "priorwatch_label_completeness",
    }
    assert set(EXPOSITION_NAMES) - for_people <= names


def test_dashboard_uses_only_exposed_names() -> None:
    unknown = {
        (where, name)
        for where, expr in _dashboard_exprs()
        for name in promql_metric_names(expr)
        if name not in EXPOSITION_NAMES
    }
    assert not unknown


def test_dashboard_shows_every_exposed_name() -> None:
    shown = set().union(*(promql_metric_names(expr) for _, expr in _dashboard_exprs()))
    assert shown == set(EXPOSITION_NAMES)
