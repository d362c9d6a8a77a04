"""Prometheus configuration, alert rules and their promtool unit tests.

``promtool check config``/``check rules`` validate the files and
``promtool test rules`` runs deploy/prometheus/tests/*.yml (skipped when
promtool is not installed; .ci/run installs it). The Python tests check what
promtool does not: every alert is tested firing AND not firing, a pure prior
shift is tested to raise nothing but the info alert, every alert has a
severity and a runbook section in docs/operations.md linked through the
operator's ``docs_base_url`` external label, the rules use no syntax that
only one of Prometheus 2.42 and 3.x accepts, and the unit tests catch a
broken rule (mutation tests).
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
PERFORMANCE_ALERTS = {"PriorwatchLikelihoodDrift", "PriorwatchSLAObjectiveBreached"}
RUNBOOK_BASE = "{{ $externalLabels.docs_base_url }}/operations.md#"


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
        # the prior streak recorded in place of the likelihood one: a pure prior
        # shift would page
        ('(priorwatch_drift_streak_windows{kind="likelihood"})',
         '(priorwatch_drift_streak_windows{kind="prior"})', 0),
        # two flagged windows are enough: fires one window early
        ('{kind="likelihood"} >= 3', '{kind="likelihood"} >= 2', 1),
        # replicas summed instead of collapsed: two replicas double the streak
        ('max by (model, segment, kind) (priorwatch_drift_streak_windows{kind="likelihood"})',
         'sum by (model, segment, kind) (priorwatch_drift_streak_windows{kind="likelihood"})',
         1),
    ],
    ids=["prior-streak-read", "streak-of-two", "replicas-summed"],
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
        keys = rule["annotations"].keys()
        assert {"summary", "description", "runbook_url"} <= keys, rule["alert"]


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
        url = rule["annotations"]["runbook_url"]
        assert url == RUNBOOK_BASE + rule["alert"].lower(), rule["alert"]
        assert rule["alert"].lower() in anchors, f"no section {rule['alert']} in operations.md"


def test_the_docs_base_url_is_an_external_label_of_the_shipped_config() -> None:
    """Nothing is hard-coded in the rules: the operator sets the base URL once."""
    labels = _load(CONFIG)["global"]["external_labels"]
    assert labels["docs_base_url"].startswith("https://")
    assert not labels["docs_base_url"].endswith("/")
    assert "http" not in RULES.read_text().replace("docs_base_url", "")


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


def test_rules_parse_no_label_with_a_regex() -> None:
    """Objectives carry metric and op labels; no rule splits a label value."""
    for group in _load(RULES)["groups"]:
        for rule in group["rules"]:
            assert "label_replace" not in rule["expr"], rule.get("record", rule.get("alert"))


#: Syntax that only one of Prometheus 2.42 (Debian) and 3.x (compose) accepts.
VERSION_SPECIFIC = {
    "keep_firing_for": "rule field added in 2.42, absent from older promtool unit tests",
    "query_offset": "group field of 2.53+",
    "limit:": "group field whose semantics changed",
    "holt_winters": "removed in 3.0 (renamed double_exponential_smoothing)",
    "double_exponential_smoothing": "3.x only",
    '{"': "quoted (UTF-8) metric names: 3.x only",
    "info(": "3.x only",
    "sort_by_label": "experimental, 3.x only",
    "ts_of_": "3.x only",
    "first_over_time": "3.x only",
}


def test_rules_use_no_syntax_only_one_prometheus_version_accepts() -> None:
    text = RULES.read_text()
    for token, why in VERSION_SPECIFIC.items():
        assert token not in text, f"{token}: {why}"
    for group in _load(RULES)["groups"]:
        assert set(group) <= {"name", "interval", "rules"}, group["name"]
        for rule in group["rules"]:
            allowed = {"record", "expr", "labels"} | (
                {"alert", "for", "annotations"} if "alert" in rule else set()
            )
            assert set(rule) <= allowed, rule


def test_rules_name_the_all_traffic_segment_as_the_exporter_does() -> None:
    segments = set(re.findall(r'segment="(\w+)"', RULES.read_text()))
    assert segments == {ALL_SEGMENTS_LABEL}
