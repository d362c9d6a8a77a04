"""deploy/alertmanager/alertmanager.yml (the optional `alerting` profile).

Routing by severity: info never notifies, critical pages, warning goes to the
team. amtool validates the file and resolves the routes when it is installed
(Debian package prometheus-alertmanager); the structural checks run always.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CONFIG_FILE = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
CONFIG: dict[str, Any] = yaml.safe_load(CONFIG_FILE.read_text())
RULES = yaml.safe_load(
    (ROOT / "deploy" / "prometheus" / "rules" / "priorwatch.rules.yml").read_text()
)
ALERTS = {r["alert"]: r for g in RULES["groups"] for r in g["rules"] if "alert" in r}
AMTOOL = shutil.which("amtool")
needs_amtool = pytest.mark.skipif(AMTOOL is None, reason="amtool not installed")

_MATCHER = re.compile(r'^(\w+)(=~|!=|=)"(.*)"$')


def _matchers(route: dict[str, Any], key: str = "matchers") -> list[tuple[str, str, str]]:
    out = []
    for matcher in route.get(key, []):
        found = _MATCHER.match(matcher)
        assert found, f'matcher {matcher!r} is not label<op>"value"'
        out.append((found.group(1), found.group(2), found.group(3)))
    return out


def test_receivers_of_every_route_exist() -> None:
    receivers = {r["name"] for r in CONFIG["receivers"]}
    routes = [CONFIG["route"], *CONFIG["route"].get("routes", [])]
    assert {r["receiver"] for r in routes} <= receivers


def test_routes_match_the_severities_the_rules_use() -> None:
    severities = {rule["labels"]["severity"] for rule in ALERTS.values()}
    routed = {
        value
        for route in CONFIG["route"]["routes"]
        for label, op, value in _matchers(route)
        if label == "severity" and op == "="
    }
    assert routed == severities - {"warning"}  # warning takes the default route


def test_inhibit_rules_name_existing_alerts_and_labels() -> None:
    for rule in CONFIG["inhibit_rules"]:
        for key in ("source_matchers", "target_matchers"):
            for label, op, value in _matchers(rule, key):
                if label == "alertname" and op == "=":
                    assert value in ALERTS, value
                if label == "alertname" and op == "=~":
                    assert any(re.fullmatch(value, name) for name in ALERTS), value
        for label in rule.get("equal", []):
            # every alert the rule can silence carries the label it compares
            assert label == "alertname" or any(
                label in str(alert["expr"]) for alert in ALERTS.values()
            ), label


def test_a_critical_alert_silences_only_its_own_warning_twin() -> None:
    """Critical SLA breach of one objective must not hide the warning of another."""
    (rule,) = [
        r for r in CONFIG["inhibit_rules"]
        if ("severity", "=", "critical") in _matchers(r, "source_matchers")
    ]  # fmt: skip
    assert ("severity", "=", "warning") in _matchers(rule, "target_matchers")
    assert set(rule["equal"]) == {"alertname", "model", "segment", "objective"}
    twins = {name for name, rule in ALERTS.items() if rule["labels"]["severity"] == "critical"}
    assert {"PriorwatchSLAObjectiveBreached", "PriorwatchWorkerLagHigh"} <= twins


@needs_amtool
def test_amtool_accepts_the_config() -> None:
    assert AMTOOL is not None
    result = subprocess.run(
        [AMTOOL, "check-config", str(CONFIG_FILE)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@needs_amtool
@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ({"alertname": "PriorwatchPriorShift", "severity": "info"}, "blackhole"),
        ({"alertname": "PriorwatchNoFreshWindow", "severity": "warning"}, "team"),
        ({"alertname": "PriorwatchLikelihoodDrift", "severity": "critical"}, "oncall"),
    ],
)  # fmt: skip
def test_amtool_routes_each_severity(labels: dict[str, str], receiver: str) -> None:
    assert AMTOOL is not None
    assert ALERTS[labels["alertname"]]["labels"]["severity"] == labels["severity"]
    result = subprocess.run(
        [AMTOOL, "config", "routes", "test", f"--config.file={CONFIG_FILE}",
         *(f"{k}={v}" for k, v in labels.items())],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver
