"""Prometheus configuration, alert rules and their promtool unit tests.

``promtool check config``/``check rules`` validate the files and
``promtool test rules`` runs deploy/prometheus/tests/*.yml (skipped when
promtool is not installed; .ci/run installs it). The Python tests check what
promtool does not: every alert is tested firing AND not firing, a pure prior
shift is tested to raise nothing but the info alert, every alert has a
severity and a runbook section in docs/operations.md, and the unit tests
catch a broken rule (mutation tests).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.db.models import ALL_SEGMENTS_LABEL
from app.services.sla_objectives import AT_PI0

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULES = PROMETHEUS_DIR / "rules" / "priorwatch.rules.yml"
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
OPERATIONS_DOC = ROOT / "docs" / "operations.md"

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed")

SEVERITIES = {"info", "warning", "critical"}
#: Alerts about the classifier itself: none may fire on a pure prior shift.
PERFORMANCE_ALERTS = {
    "PriorwatchLikelihoodDrift",
    "PriorwatchSLAObjectiveBreached",
    "PriorwatchCalibratedMetricBelowObjective",
}


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _alert_rules() -> list[dict[str, Any]]:
    return [r for g in _load(RULES)["groups"] for r in g["rules"] if "alert" in r]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], capture_output=True, text=True, timeout=300, check=False
    )


# --- promtool ------------------------------------------------------------------


@needs_promtool
def test_promtool_check_config_and_rules() -> None:
    result = _promtool("check", "config", str(CONFIG))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 rule files found" in result.stdout


@needs_promtool
def test_promtool_check_rules_finds_every_rule() -> None:
    result = _promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    n_rules = sum(len(g["rules"]) for g in _load(RULES)["groups"])
    assert f"SUCCESS: {n_rules} rules found" in result.stdout


@needs_promtool
@pytest.mark.parametrize("test_file", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_rule_unit_tests_pass(test_file: Path) -> None:
    result = _promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def _mutated_rules(tmp_path: Path, old: str, new: str, case: int) -> Path:
    """A copy of the rules with ``old`` replaced, and of test ``case`` of drift.test.yml."""
    text = RULES.read_text()
    assert text.count(old) == 1, f"mutation target {old!r} must occur once"
    (tmp_path / "rules").mkdir(parents=True)
    (tmp_path / "rules" / RULES.name).write_text(text.replace(old, new))
    (tmp_path / "tests").mkdir()
    unit_tests = _load(PROMETHEUS_DIR / "tests" / "drift.test.yml")
    unit_tests["tests"] = [unit_tests["tests"][case]]  # one scenario: a faster run
    test_file = tmp_path / "tests" / "drift.test.yml"
    test_file.write_text(yaml.safe_dump(unit_tests))
    return test_file


@needs_promtool
@pytest.mark.parametrize(
    ("old", "new", "case"),
    [
        # the streak counts the prior flag: a pure prior shift would page
        ('model_segment_kind:priorwatch_drift_flag:max{kind="likelihood"}',
         'model_segment_kind:priorwatch_drift_flag:max{kind="prior"}', 0),
        # two flagged windows are enough: fires one window early
        ("model_segment:priorwatch_likelihood_drift_streak:windows >= 3",
         "model_segment:priorwatch_likelihood_drift_streak:windows >= 2", 1),
        # a window that steps back and returns counts twice
        ("[6h] offset 1m", "[1m] offset 1m", 2),
    ],
    ids=["prior-flag-counted", "streak-of-two", "step-back-counted-twice"],
)  # fmt: skip
def test_rule_unit_tests_catch_a_broken_rule(tmp_path: Path, old: str, new: str, case: int) -> None:
    unmutated = _promtool("test", "rules", str(_mutated_rules(tmp_path / "a", old, old, case)))
    assert unmutated.returncode == 0, unmutated.stdout + unmutated.stderr
    result = _promtool("test", "rules", str(_mutated_rules(tmp_path / "b", old, new, case)))
    assert result.returncode != 0, "the drift unit tests passed against a broken rule"
    assert "FAILED" in result.stdout + result.stderr


# --- rules, read as data -------------------------------------------------------------


def test_every_alert_has_a_severity_summary_description_and_runbook() -> None:
    for rule in _alert_rules():
        assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
        assert {"summary", "description", "runbook"} <= rule["annotations"].keys(), rule["alert"]


def _github_anchor(heading: str) -> str:
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def test_every_runbook_points_at_a_section_of_docs_operations() -> None:
    anchors = {
        _github_anchor(line.lstrip("#"))
        for line in OPERATIONS_DOC.read_text().splitlines()
        if line.startswith("#")
    }
    for rule in _alert_rules():
        path, _, anchor = rule["annotations"]["runbook"].partition("#")
        assert path == "docs/operations.md", rule["alert"]
        assert anchor == rule["alert"].lower(), rule["alert"]
        assert anchor in anchors, f"docs/operations.md has no section {rule['alert']}"


def test_prior_shift_is_information_only() -> None:
    for rule in _alert_rules():
        if 'kind="prior"' in str(rule["expr"]):
            assert rule["labels"]["severity"] == "info", rule["alert"]
    severities = {r["alert"]: r["labels"]["severity"] for r in _alert_rules()}
    assert severities["PriorwatchPriorShift"] == "info"
    assert {severities[name] for name in PERFORMANCE_ALERTS} <= {"warning", "critical"}


def _unit_test_cases() -> list[dict[str, Any]]:
    return [case for path in RULE_TESTS for case in _load(path)["tests"]]


def test_every_alert_is_unit_tested_firing_and_not_firing() -> None:
    outcomes: dict[str, set[bool]] = defaultdict(set)
    for case in _unit_test_cases():
        for check in case.get("alert_rule_test", []):
            outcomes[check["alertname"]].add(bool(check["exp_alerts"]))
    for name in {rule["alert"] for rule in _alert_rules()}:
        assert outcomes[name] == {True, False}, f"{name}: tested {outcomes[name] or 'never'}"


def _series_values(case: dict[str, Any], pattern: str) -> list[str]:
    return [s["values"] for s in case["input_series"] if re.search(pattern, s["series"])]


def test_a_pure_prior_shift_is_unit_tested_to_raise_only_the_info_alert() -> None:
    """Some unit test raises the prior flag, keeps the likelihood flag down and
    the objectives met, and expects every performance alert silent and the
    prior-shift alert firing."""
    for case in _unit_test_cases():
        prior = _series_values(case, r'priorwatch_drift_flag\{.*kind="prior"')
        likelihood = _series_values(case, r'priorwatch_drift_flag\{.*kind="likelihood"')
        met = _series_values(case, r"priorwatch_sla_objective_met\{")
        pure_shift = (
            any(re.search(r"(^|\s)1\+", v) for v in prior)
            and likelihood
            and all(re.fullmatch(r"0\+0x\d+", v) for v in likelihood)
            and met
            and all(re.fullmatch(r"1\+0x\d+", v) for v in met)
        )
        if not pure_shift:
            continue
        checks = case.get("alert_rule_test", [])
        silent = {c["alertname"] for c in checks if not c["exp_alerts"]}
        firing = {c["alertname"] for c in checks if c["exp_alerts"]}
        if silent >= PERFORMANCE_ALERTS and "PriorwatchPriorShift" in firing:
            return
    pytest.fail("no unit test shows a pure prior shift raising only PriorwatchPriorShift")


# --- configuration -----------------------------------------------------------------


def test_config_loads_the_rules_files() -> None:
    config = _load(CONFIG)
    matched = {p for pattern in config["rule_files"] for p in CONFIG.parent.glob(pattern)}
    assert matched == {RULES}


def test_config_scrapes_the_api_and_finds_alertmanager() -> None:
    config = _load(CONFIG)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    # the alert rules select job="priorwatch-api"
    assert "priorwatch-api" in jobs
    assert 'job="priorwatch-api"' in RULES.read_text()
    api = jobs["priorwatch-api"]
    assert api.get("metrics_path", "/metrics") == "/metrics"
    (sd,) = api["dns_sd_configs"]
    assert sd["names"] == ["api"] and sd["type"] == "A" and sd["port"] == 8000
    (alertmanagers,) = config["alerting"]["alertmanagers"]
    (am_sd,) = alertmanagers["dns_sd_configs"]
    assert am_sd["names"] == ["alertmanager"] and am_sd["port"] == 9093


def test_rule_groups_are_evaluated_every_minute_or_less_often() -> None:
    # the "new window" and streak rules look back with `offset 1m`
    for group in _load(RULES)["groups"]:
        assert group["interval"] == "1m", group["name"]
    for path in RULE_TESTS:
        interval = _load(path)["evaluation_interval"]
        seconds = int(interval[:-1]) * {"m": 60, "h": 3600}[interval[-1]]
        assert seconds >= 60, path.name


def test_objectives_on_prior_dependent_metrics_are_read_at_pi0() -> None:
    """The rule that maps "f1>=0.6" to metric="calibrated_f1" lists exactly the
    metrics the SLA report evaluates at pi0."""
    parsed = next(
        r for g in _load(RULES)["groups"] for r in g["rules"]
        if r.get("record") == "model_objective:priorwatch_sla_objective_target:parsed"
    )  # fmt: skip
    (alternation,) = re.findall(r'"\(([\w|]+)\)\(@\.\*\)\?"', parsed["expr"])
    assert set(alternation.split("|")) == set(AT_PI0)
    assert all(value == "calibrated_" + name for name, value in AT_PI0.items())


def test_rules_name_the_all_traffic_segment_as_the_exporter_does() -> None:
    segments = set(re.findall(r'segment="(\w+)"', RULES.read_text()))
    assert segments == {ALL_SEGMENTS_LABEL}
