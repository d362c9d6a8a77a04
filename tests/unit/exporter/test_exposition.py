"""The compact exposition keeps every series the shipped dashboard and rules read.

Every PromQL expression of deploy/grafana/dashboards/*.json and
deploy/prometheus/rules/*.yml is parsed for its selectors of ``priorwatch_*``
series; for a family that the compact exposition trims by its last label
(``metric``; ``kind`` for the drift streak), each selector must name (``=``)
or match (``=~``, over every value the service writes) only kept values.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
import yaml
from builders import model_config, sample, sums_of

from app.db.models import ALL_SEGMENTS
from app.exporter import names
from app.exporter.estimates import StoredEstimate, estimate_series
from app.exporter.exposition import COMPACT, COMPACT_METRICS, Exposition
from app.exporter.reads import ModelRow
from app.exporter.series import DRIFT_KINDS
from app.services.models.settings import ExpositionFamily
from app.services.windows.compute import compute_window_result

NOW = datetime(2026, 11, 27, 10, tzinfo=UTC)

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
SELECTOR = re.compile(r"(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(?P<matchers>[^}]*)\})?")
MATCHER = re.compile(r'\s*(?P<label>[A-Za-z_]\w*)\s*(?P<op>=~|!~|!=|=)\s*"(?P<value>[^"]*)"\s*,?')


def _dashboard_expressions() -> Iterator[str]:
    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in {"expr", "query", "definition"} and isinstance(value, str):
                    yield value
                else:
                    yield from walk(value)
        elif isinstance(node, list):
            for item in node:
                yield from walk(item)

    for path in sorted((DEPLOY / "grafana" / "dashboards").glob("*.json")):
        yield from walk(json.loads(path.read_text()))


def _rule_expressions() -> Iterator[str]:
    for path in sorted((DEPLOY / "prometheus" / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                yield str(rule["expr"])


def expressions() -> list[str]:
    """Every PromQL expression of the shipped dashboard and rules, variables filled in."""
    out = [*_dashboard_expressions(), *_rule_expressions()]
    return [e.replace("$model", "m").replace("$segment", ".*") for e in out]


def selectors(expression: str) -> Iterator[tuple[str, dict[str, tuple[str, str]]]]:
    """(exposed name, {label: (operator, value)}) of each ``priorwatch_*`` selector."""
    for found in SELECTOR.finditer(expression):
        if found["name"] not in names.EXPOSED_NAMES:
            continue
        text = found["matchers"] or ""
        matchers = {m["label"]: (m["op"], m["value"]) for m in MATCHER.finditer(text)}
        assert MATCHER.sub("", text).strip() == "", f"unparsed matchers in {expression!r}"
        yield found["name"], matchers


@cache
def computed_metric_names() -> frozenset[str]:
    """Every metric name a window result holds (metrics and intervals, two thresholds)."""
    config = model_config(
        (0.3, 0.5),
        n_bins=100,
        pi0=0.2,
        cost_ratio=0.5,
        drift={"reference": {"trailing_windows": 3}},
    )
    sums = sums_of(*sample(np.random.default_rng(1), 600, 0.2), config)
    result = compute_window_result(config, sums, sums)
    return frozenset({*result.metrics, *result.intervals, "prior"})


TRIMMED_BY = {
    spec.name: spec.labels[-1]
    for spec in (
        *names.FAMILIES,
        *names.STREAK_FAMILIES,
        *names.ESTIMATE_FAMILIES,
        *names.MATURITY_FAMILIES,
    )
    if spec.name in COMPACT_METRICS
}
"""The label each trimmed family is trimmed by: its last (``metric``, or ``kind``)."""


def dropped(expression: str) -> list[str]:
    """What ``expression`` selects that the compact exposition does not write."""
    out: list[str] = []
    for exposed, matchers in selectors(expression):
        kept = COMPACT_METRICS.get(exposed)
        if kept is None:
            continue  # a family the compact exposition writes whole
        label = TRIMMED_BY[exposed]
        universe = computed_metric_names() if label == "metric" else frozenset(DRIFT_KINDS)
        op, value = matchers.get(label, ("=~", ".*"))
        if op == "=":
            selected = {value}
        elif op == "=~":
            selected = {m for m in universe | kept if re.fullmatch(value, m)}
        else:
            selected = universe - kept  # a negative matcher: assume the worst
        out.extend(f"{exposed}{{{label}={m!r}}}" for m in sorted(selected - kept))
    return out


def test_every_series_the_dashboard_and_rules_read_is_in_the_compact_exposition() -> None:
    assert TRIMMED_BY.keys() == COMPACT_METRICS.keys()
    assert set(TRIMMED_BY.values()) == {"metric", "kind"}
    read = {name for e in expressions() for name, _ in selectors(e)}
    assert read >= COMPACT_METRICS.keys()  # every trimmed family is read, hence checked
    assert {e: dropped(e) for e in expressions() if dropped(e)} == {}


def test_a_selector_of_a_dropped_series_is_caught() -> None:
    every_ops = 'max(priorwatch_window_metric{model="m", metric=~"ops_.*"})'
    assert "priorwatch_window_metric{metric='ops_f1@t=0.5'}" in dropped(every_ops)
    assert dropped('priorwatch_window_metric_lower{metric="brier"}') != []
    assert dropped('priorwatch_window_estimate{model="m"}') != []
    assert dropped('priorwatch_window_metric{metric!="f1"}') != []
    assert dropped('priorwatch_drift_flag{kind="prior"}') == []
    assert dropped('priorwatch_window_metric{metric=~"ops_(f1|mcc)"}') == []
    assert dropped("max(priorwatch_drift_streak_windows)") == [
        "priorwatch_drift_streak_windows{kind='prior'}"
    ]
    assert dropped('priorwatch_drift_streak_windows{kind="likelihood"}') == []
    # derived in PromQL: (recall + specificity) / 2
    assert dropped('priorwatch_window_metric{metric="balanced_accuracy"}') != []
    assert dropped('priorwatch_window_metric{metric=~"prior|precision|f1|mcc"}') == []
    # bounds: of calibrated precision and F1 only
    assert dropped('priorwatch_window_metric_upper{metric="calibrated_f1"}') == []
    assert dropped('priorwatch_window_metric_lower{metric="calibrated_mcc"}') != []


def test_the_compact_exposition_drops_what_nothing_reads() -> None:
    unread = computed_metric_names() - COMPACT_METRICS[names.WINDOW_METRIC]
    assert {"brier", "log_loss", "f1@t=0.5", "ops_f1@t=0.5", "ops_auc_roc"} <= unread
    assert "balanced_accuracy" in unread  # the dashboard derives it from these two:
    assert {"recall", "specificity"} <= COMPACT_METRICS[names.WINDOW_METRIC]
    # the raw headline metrics are kept, beside their calibrated forms
    assert {"prior", "precision", "f1", "mcc", "auc_pr"} <= COMPACT_METRICS[names.WINDOW_METRIC]
    banded = {"calibrated_precision", "calibrated_f1"}  # no band for MCC and AUC-PR
    assert COMPACT_METRICS[names.WINDOW_METRIC_LOWER] == banded
    assert COMPACT_METRICS[names.WINDOW_METRIC_UPPER] == banded


def test_compact_full_and_a_list_of_families() -> None:
    assert COMPACT.keeps(names.WINDOW_METRIC, "f1")
    assert not COMPACT.keeps(names.WINDOW_METRIC, "brier")
    assert not COMPACT.keeps(names.WINDOW_METRIC_LOWER, "f1")
    assert COMPACT.keeps(names.WINDOW_METRIC_LOWER, "calibrated_f1")
    assert not COMPACT.keeps(names.WINDOW_METRIC_UPPER, "calibrated_mcc")
    assert COMPACT.keeps(names.DRIFT_STREAK, "likelihood")
    assert not COMPACT.keeps(names.DRIFT_STREAK, "prior")
    assert COMPACT.keeps(names.DRIFT_FLAG, "prior")  # a family not trimmed
    full = Exposition.parse("full")
    assert full.keeps(names.WINDOW_METRIC, "brier") and full.kept(names.WINDOW_METRIC) is None
    listed = Exposition.parse(f" {names.WINDOW_METRIC_LOWER} ,")
    assert listed.keeps(names.WINDOW_METRIC_LOWER, "f1")
    assert listed.kept(names.WINDOW_METRIC) == COMPACT.kept(names.WINDOW_METRIC)
    assert Exposition.parse("compact") == COMPACT


@pytest.mark.parametrize("value", ["", "priorwatch_nope", f"{names.DRIFT_FLAG}"])
def test_an_unknown_family_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match="compact"):
        Exposition.parse(value)


def test_the_models_setting_names_the_trimmed_families() -> None:
    assert set(get_args(ExpositionFamily)) == set(COMPACT_METRICS)


def test_a_models_setting_replaces_the_services_default() -> None:
    full = Exposition.parse("full")
    assert Exposition.of_setting(None, full) == full
    assert Exposition.of_setting("compact", full) == COMPACT
    assert Exposition.of_setting("full", COMPACT) == full
    listed = Exposition.of_setting((names.WINDOW_METRIC_LOWER,), full)
    assert listed == Exposition.parse(names.WINDOW_METRIC_LOWER)
    assert {listed: 1}[Exposition.parse(names.WINDOW_METRIC_LOWER)] == 1  # a cache key


def test_each_models_samples_follow_its_exposition() -> None:
    """A part leaves out, as it reads them, the series its model's exposition does not
    write (the estimates here); the families not trimmed stay whole."""
    models = [ModelRow(i, name, "1h", frozenset(), (), 0, 0) for i, name in ((1, "a"), (2, "b"))]
    document = {"metrics": {"precision": 0.5, "recall": 0.3}, "prior": {"p_value": 0.2}}
    stored = [StoredEstimate(m.id, ALL_SEGMENTS, NOW, document) for m in models]
    of = {"a": COMPACT, "b": Exposition.parse("full")}
    out = estimate_series(models, stored, [], lambda model: of[model.name])
    assert out[names.WINDOW_ESTIMATE] == [
        (("a", "all", "precision"), 0.5),
        (("b", "all", "precision"), 0.5),
        (("b", "all", "recall"), 0.3),
    ]
    assert [labels[0] for labels, _ in out[names.ESTIMATE_P_VALUE]] == ["a", "b"]
