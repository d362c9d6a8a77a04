"""The Grafana dashboard and its provisioning.

The dashboard must load (JSON, a current schemaVersion, panels that do not
overlap), be templated by model and segment, show raw and prior-invariant
metrics side by side, and query Prometheus with valid PromQL (checked by
promtool when installed). The metric names are checked in
test_deploy_metric_names.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.db.models import ALL_SEGMENTS_LABEL
from app.exporter import names
from app.exporter.exposition import COMPACT_METRICS

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD: dict[str, Any] = json.loads((GRAFANA / "dashboards" / "priorwatch.json").read_text())
DATASOURCES = yaml.safe_load(
    (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
)
PROVIDERS = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "priorwatch.yml").read_text())
PROMTOOL = shutil.which("promtool")

DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
#: Families labelled by model / by segment (exposition.md).
BY_MODEL = re.compile(r"priorwatch_(window_\w+|drift_\w+|sla_\w+|\w+_ingested_total)")
BY_SEGMENT = re.compile(r"priorwatch_(window_\w+|drift_\w+|sla_objective_met)")


def _panels() -> Iterator[dict[str, Any]]:
    for panel in DASHBOARD["panels"]:
        yield panel
        yield from panel.get("panels", [])


def _data_panels() -> list[dict[str, Any]]:
    return [p for p in _panels() if p["type"] != "row"]


def _variables() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in DASHBOARD["templating"]["list"]}


def _selected_metrics(panel: dict[str, Any]) -> set[str]:
    """Values of the ``metric`` label the panel's queries select (= and =~ alternatives)."""
    found: set[str] = set()
    for target in panel["targets"]:
        for op, value in re.findall(r'\bmetric(=~?)"([^"]*)"', target["expr"]):
            found.update(value.split("|") if op == "=~" else [value])
    return found


def test_dashboard_identity_and_schema() -> None:
    assert DASHBOARD["uid"] == "priorwatch-overview"
    assert DASHBOARD["title"]
    assert isinstance(DASHBOARD["schemaVersion"], int) and DASHBOARD["schemaVersion"] >= 41
    assert "id" not in DASHBOARD or DASHBOARD["id"] is None  # provisioning assigns it


def test_panel_ids_are_unique_and_the_grid_has_no_overlap() -> None:
    panels = list(_panels())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    boxes = []
    for panel in panels:
        g = panel["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, panel["title"]
        assert g["h"] > 0, panel["title"]
        boxes.append((panel["title"], g["x"], g["y"], g["x"] + g["w"], g["y"] + g["h"]))
    for (a, ax0, ay0, ax1, ay1), (b, bx0, by0, bx1, by1) in combinations(boxes, 2):
        overlap = ax0 < bx1 and bx0 < ax1 and ay0 < by1 and by0 < ay1
        assert not overlap, f"{a!r} overlaps {b!r}"


def test_every_panel_queries_prometheus_through_the_datasource_variable() -> None:
    for panel in _data_panels():
        assert panel["datasource"] == DATASOURCE_REF, panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE_REF, panel["title"]
            assert target["expr"].strip(), panel["title"]


def test_templated_by_datasource_model_and_segment() -> None:
    variables = _variables()
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    (provisioned,) = DATASOURCES["datasources"]
    assert variables["datasource"]["current"]["value"] == provisioned["uid"]
    assert provisioned["type"] == "prometheus"
    for name in ("model", "segment"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == DATASOURCE_REF
        assert variables[name]["definition"].startswith("label_values(")
        assert variables[name]["definition"].endswith(f", {name})")
    assert variables["model"]["multi"] is False
    assert "$model" in variables["segment"]["definition"]
    # the all-traffic window is what a newcomer should see first
    assert variables["segment"]["current"]["value"] == [ALL_SEGMENTS_LABEL]


def test_every_query_is_filtered_by_the_selected_model_and_segment() -> None:
    for panel in _data_panels():
        for target in panel["targets"]:
            expr = target["expr"]
            if BY_MODEL.search(expr):
                assert 'model="$model"' in expr, (panel["title"], expr)
            if BY_SEGMENT.search(expr):
                assert 'segment=~"$segment"' in expr, (panel["title"], expr)


@pytest.mark.parametrize("raw", ["f1", "precision", "auc_pr", "mcc"])
def test_raw_and_calibrated_metric_share_a_panel(raw: str) -> None:
    invariant = f"calibrated_{raw}"
    # the band where the compact exposition writes its bounds (precision, F1)
    banded = invariant in COMPACT_METRICS[names.WINDOW_METRIC_LOWER]
    for panel in _data_panels():
        exprs = " ".join(t["expr"] for t in panel["targets"])
        if {raw, invariant} <= _selected_metrics(panel):
            assert panel["type"] == "timeseries"
            bounds = [f"priorwatch_window_metric_{side}" in exprs for side in ("lower", "upper")]
            assert bounds == [banded, banded], panel["title"]
            if not banded:  # the description says where the band is
                assert "`full` exposition" in panel["description"], panel["title"]
                assert "`exposition` setting" in panel["description"], panel["title"]
            return
    pytest.fail(f"no panel shows {raw} next to {invariant}")


def test_required_views_are_present() -> None:
    metrics = set().union(*(_selected_metrics(p) for p in _data_panels()))
    assert "prior" in metrics  # pi over time
    assert {"ops_f1", "ops_precision", "ops_auc_pr", "ops_mcc"} <= metrics  # OPS
    exprs = " ".join(t["expr"] for p in _data_panels() for t in p["targets"])
    for family in (
        "priorwatch_drift_flag",
        "priorwatch_drift_p_value",
        "priorwatch_sla_objective_met",
        "priorwatch_sla_objective_target",
        "priorwatch_worker_lag_seconds",
        "rate(priorwatch_batches_ingested_total",
        "rate(priorwatch_batches_rejected_total",
    ):
        assert family in exprs, family


def test_time_series_of_window_values_step_between_windows() -> None:
    # window results are constant over a window: a straight line between two
    # windows would draw values no window ever had
    for panel in _data_panels():
        exprs = " ".join(t["expr"] for t in panel["targets"])
        if panel["type"] == "timeseries" and "priorwatch_window_metric" in exprs:
            assert panel["fieldConfig"]["defaults"]["custom"]["lineInterpolation"] == "stepAfter"


def test_provisioning_loads_this_directory_from_grafana() -> None:
    assert DATASOURCES["apiVersion"] == 1 and PROVIDERS["apiVersion"] == 1
    (provisioned,) = DATASOURCES["datasources"]
    assert provisioned["isDefault"] is True
    (provider,) = PROVIDERS["providers"]
    assert provider["type"] == "file"
    # start.sh writes deploy/grafana/dashboards here (test_deploy_compose.py)
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"


START = GRAFANA / "start.sh"
LOCAL_API = "http://localhost:8000"


def _start(tmp_path: Path, url: str | None) -> subprocess.CompletedProcess[str]:
    """Run start.sh on the repository's dashboards into ``tmp_path`` (then ``true``)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "PRIORWATCH_DASHBOARDS_SOURCE": str(GRAFANA / "dashboards"),
        "PRIORWATCH_DASHBOARDS_DIR": str(tmp_path),
    }
    if url is not None:
        env["PRIORWATCH_PUBLIC_URL"] = url
    return subprocess.run(
        ["sh", str(START), "true"], env=env, capture_output=True, text=True, check=False
    )


def test_only_the_api_url_variable_holds_the_local_api_address() -> None:
    """start.sh replaces that address everywhere: it must mean api_url only."""
    text = (GRAFANA / "dashboards" / "priorwatch.json").read_text()
    api_url = _variables()["api_url"]
    assert text.count(f'"{LOCAL_API}"') == 3
    assert api_url["query"] == api_url["current"]["text"] == api_url["current"]["value"]
    assert api_url["query"] == LOCAL_API


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://priorwatch.example.org/", "https://priorwatch.example.org"),
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000"),
        (None, LOCAL_API),
    ],
)
def test_api_url_is_provisioned_from_the_environment(
    tmp_path: Path, given: str | None, expected: str
) -> None:
    result = _start(tmp_path, given)
    assert result.returncode == 0, result.stderr
    written = json.loads((tmp_path / "priorwatch.json").read_text())
    variables = {v["name"]: v for v in written["templating"]["list"]}
    api_url = variables.pop("api_url")
    assert api_url["query"] == api_url["current"]["text"] == api_url["current"]["value"]
    assert api_url["query"] == expected
    # nothing else changed
    assert variables == {k: v for k, v in _variables().items() if k != "api_url"}
    assert written["panels"] == DASHBOARD["panels"]


@pytest.mark.parametrize(
    "url", ["ftp://x.example.org", "priorwatch:8000", 'http://x/"a', "http://x/a b", "http://a|b"]
)
def test_start_refuses_an_api_url_that_is_no_plain_http_url(tmp_path: Path, url: str) -> None:
    result = _start(tmp_path, url)
    assert result.returncode != 0
    assert "PRIORWATCH_PUBLIC_URL" in result.stderr
    assert not list(tmp_path.iterdir())


def _exprs_with_variables_substituted() -> list[str]:
    substitutions = {"$__rate_interval": "5m", "$model": "m", "$segment": "all"}
    exprs = [t["expr"] for p in _data_panels() for t in p["targets"]]
    exprs += [a["expr"] for a in DASHBOARD["annotations"]["list"] if "expr" in a]
    out = []
    for expr in exprs:
        for variable, value in substitutions.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"unsubstituted variable in {expr}"
        out.append(expr)
    return out


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed")
def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    exprs = _exprs_with_variables_substituted()
    rules = [{"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]
    rules_file = tmp_path / "dashboard.rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(rules_file)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout


#: Metrics whose values lie in [0, 1] (shown as percentages); MCC lies in [-1, 1].
UNIT_INTERVAL = re.compile(
    r"(calibrated_)?(f1|precision|auc_pr|recall|specificity|balanced_accuracy"
    r"|weighted_accuracy|prior)|ops_\.\*"
)
PER_SECOND_UNITS = {"reqps", "cps", "ops", "rps", "wps"}


def _unit(panel: dict[str, Any]) -> str | None:
    unit: str | None = panel["fieldConfig"]["defaults"].get("unit")
    return unit


def test_every_panel_has_a_unit() -> None:
    for panel in _data_panels():
        assert _unit(panel), panel["title"]


def test_unit_interval_metrics_are_percentages_and_rates_per_second() -> None:
    for panel in _data_panels():
        metrics = _selected_metrics(panel)
        exprs = " ".join(t["expr"] for t in panel["targets"])
        if metrics and all(UNIT_INTERVAL.fullmatch(m) for m in metrics):
            assert _unit(panel) == "percentunit", panel["title"]
        if "priorwatch_drift_p_value" in exprs:
            assert _unit(panel) == "percentunit", panel["title"]
        if "rate(" in exprs:
            assert _unit(panel) in PER_SECOND_UNITS, panel["title"]


def test_the_p_value_panel_can_draw_zero() -> None:
    """A log axis cannot draw p = 0, the value of a strongly drifted window."""
    (panel,) = [
        p for p in _data_panels()
        if any("priorwatch_drift_p_value" in t["expr"] for t in p["targets"])
    ]  # fmt: skip
    defaults = panel["fieldConfig"]["defaults"]
    assert defaults["custom"]["scaleDistribution"]["type"] == "linear"
    assert defaults["min"] == 0


def test_window_panels_say_they_show_the_latest_window_and_link_to_its_history() -> None:
    for panel in _data_panels():
        exprs = " ".join(t["expr"] for t in panel["targets"])
        if not BY_SEGMENT.search(exprs) and "streak" not in exprs:
            continue
        text = panel["title"] + " " + panel["description"]
        assert "latest" in text and "window" in text, panel["title"]
        urls = {link["url"] for link in panel["links"]}
        assert urls == {
            "${api_url}/v1/models/${model}/windows",
            "${api_url}/v1/models/${model}/sla",
        }
    assert _variables()["api_url"]["type"] == "textbox"


def test_streak_gauges_are_shown_as_the_alerts_read_them() -> None:
    exprs = " ".join(t["expr"] for p in _data_panels() for t in p["targets"])
    assert (
        'priorwatch_drift_streak_windows{model="$model", segment=~"$segment", kind="likelihood"}'
        in exprs
    )
    assert "priorwatch_sla_breach_streak_windows" in exprs
