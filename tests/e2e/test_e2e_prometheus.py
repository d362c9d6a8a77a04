"""The shipped alert rules and dashboard against a real Prometheus scraping a real
``priorwatch serve`` (SQLite, API + in-process worker), all on loopback.

Seeded scenario (tests/e2e/_e2e_support.py): one model, two segments, hourly
windows ending about an hour ago. Three stable windows make the drift
reference; in the four windows after it, segment "prior" sees only its class
prior fall from 0.2 to 0.02 (P(s|y) unchanged) and segment "likelihood" sees
its positives' scores move towards the negatives' (P(s|y) shifts). Every
window is stored and computed BEFORE Prometheus starts (a backfill, as after
labels delivered in bulk or a Prometheus restart): the alerts must still
count four flagged windows.

Prometheus runs a temporary copy of deploy/prometheus/rules/ with short group
intervals and ``for:`` durations (the shipped files are unchanged) and the
shipped ``docs_base_url`` external label. The test checks: the target is up;
every rule is healthy; every dashboard query, with the template variables
substituted as Grafana does, returns data; PriorwatchLikelihoodDrift fires
(critical) for the likelihood segment; no warning or critical alert fires for
the prior segment (its info alert does).

Delayed labels: two more all-traffic windows, ended a day ago, hold every
prediction without its label and a third of the labels. The model completes
its windows (``label_missingness`` ``class``) and expects its labels within
a day (``label_horizon`` ``1d``): both windows are overdue and
PriorwatchLabelsOverdue fires (warning) for segment ``all``. The label
settings and the windows' ``maturity`` documents are written into the
database directly (the document's shape, whichever worker release runs).

Skipped when the ``prometheus`` binary is not installed, except under
PRIORWATCH_REQUIRE_POSTGRES=1 (CI: .ci/run installs Debian's package).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
import yaml
from _e2e_support import (
    HTTP_TIMEOUT,
    START_SECONDS,
    Process,
    Processes,
    UserPath,
    free_port,
    iso,
    process_env,
    simulate,
    wait_ready,
    wait_until,
)

from app.db.models import Model, WindowAggregate, WindowMetrics

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "priorwatch.json"
PROMETHEUS = shutil.which("prometheus")

MODEL = "checkout"
SEGMENTS = ("prior", "likelihood")
REFERENCE_WINDOWS = 3
SHIFTED_WINDOWS = 4
ROWS = 5000
SEED = 20261126
OBJECTIVE = {"metric": "recall", "op": ">=", "target": 0.6}
STABLE = (0.2, 3.0)  # (prior, separation): recall 0.84 at the threshold 0.5
SHIFTED = {"prior": (0.02, 3.0), "likelihood": (0.2, 1.5)}  # recall 0.84 / 0.31
RATE_INTERVAL = "1m"
"""Grafana's $__rate_interval for a 1 s scrape interval (at least 4 scrapes)."""
LABEL_HORIZON = "1d"
LATE_WINDOWS = 2
"""All-traffic windows that ended a day ago with a third of their labels: overdue."""
ALERT_SECONDS = 60.0
"""Bound of the wait for rules to be evaluated and the alerts to fire."""


def _require_prometheus() -> str:
    if PROMETHEUS is None:
        reason = "the prometheus binary is not installed (Debian package prometheus)"
        if os.environ.get("PRIORWATCH_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason}; required under PRIORWATCH_REQUIRE_POSTGRES=1 (.ci/run)")
        pytest.skip(reason)
    return PROMETHEUS


def test_rules_and_dashboard_against_a_real_prometheus(processes: Processes) -> None:
    binary = _require_prometheus()
    env = process_env(f"sqlite:///{processes.workdir / 'priorwatch.db'}")
    processes.run("migrate", ["migrate"], env)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    processes.start("serve", ["serve", "--port", str(port)], env)
    wait_ready(base, processes)

    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
        user = _feed(http, processes)
        latest = {  # the latest fresh window of each segment, as the API gives it
            segment: max(user.windows(None if segment == "all" else segment), key=_end)
            for segment in ("all", *SEGMENTS)
        }

    prometheus_url = _start_prometheus(binary, port, processes)
    with httpx.Client(base_url=prometheus_url, timeout=HTTP_TIMEOUT) as prom:
        _check_target_and_rules(prom, processes)
        _check_dashboard_queries(prom, processes)
        _check_derived_metrics(prom, latest)
        _check_alerts(prom, processes)
    assert user.posted  # the scenario was stored before Prometheus started


# --- the scenario ----------------------------------------------------------------


def _feed(http: httpx.Client, processes: Processes) -> UserPath:
    """Register the model, post every window's batches, one rejected batch, and wait
    until every window is fresh."""
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    n_windows = REFERENCE_WINDOWS + SHIFTED_WINDOWS
    first = now - timedelta(hours=n_windows + 1)  # the latest window ends an hour ago
    user = UserPath(http, MODEL, first, timedelta(hours=1))
    user.register(
        segments=list(SEGMENTS),
        sla=[OBJECTIVE],
        drift={"reference": {"from": iso(first), "to": iso(user.start(REFERENCE_WINDOWS))}},
    )
    rng = np.random.default_rng(SEED)
    for offset in range(n_windows):
        for segment in SEGMENTS:
            prior, separation = STABLE if offset < REFERENCE_WINDOWS else SHIFTED[segment]
            scores, labels = simulate(rng, ROWS, prior, separation)
            at = user.start(offset) + timedelta(minutes=10)
            if offset >= REFERENCE_WINDOWS:  # the scores first, without labels (estimates)
                unlabelled = {"timestamp": iso(at), "segment": segment, "scores": scores.tolist()}
                sent = user.send(json.dumps(unlabelled).encode(), None)
                assert sent.status_code == 202, sent.text
            user.post_batch(at, scores, labels, segment)
    # one rejection, so that the rejection counter (and its dashboard panel) has a series
    rejected = user.send(b'{"timestamp": "2026-11-26T00:00:00Z", "scores": [2.0]}', None)
    assert rejected.status_code == 422, rejected.text
    fresh = user.wait_all_fresh(n_windows, processes, (None, *SEGMENTS))
    flags = [w["drift"].get("likelihood", {}).get("flag") for w in fresh["likelihood"]]
    assert flags[REFERENCE_WINDOWS:] == [True] * SHIFTED_WINDOWS, flags
    prior_flags = [w["drift"].get("prior", {}).get("flag") for w in fresh["prior"]]
    assert prior_flags[REFERENCE_WINDOWS:] == [True] * SHIFTED_WINDOWS, prior_flags
    for hours in range(1, LATE_WINDOWS + 1):  # one of them ended 1 day ago, whatever the hour
        at = now - timedelta(days=1, hours=hours, minutes=-30)
        scores, labels = simulate(rng, ROWS, *STABLE)
        unlabelled = {"timestamp": iso(at), "scores": scores.tolist()}
        sent = user.send(json.dumps(unlabelled).encode(), None)
        assert sent.status_code == 202, sent.text
        user.post_batch(at, scores[: ROWS // 3], labels[: ROWS // 3])  # the prediction's time

    def late_windows_fresh() -> bool:
        since = {"from": iso(now - timedelta(days=2))}
        windows = user.get("/windows", **since)["windows"]
        return len(windows) == n_windows + LATE_WINDOWS and all(
            w["status"] == "fresh" for w in windows
        )

    wait_until(late_windows_fresh, "the late windows are fresh", ALERT_SECONDS, processes)
    _store_label_maturity(processes.workdir / "priorwatch.db")
    return user


def _store_label_maturity(database: Path) -> None:
    """The model's label settings, and a ``maturity`` document (the shape the worker
    stores) in every window holding both kinds of rows."""
    engine = sa.create_engine(f"sqlite:///{database}")
    try:
        with sa.orm.Session(engine) as session, session.begin():
            model = session.scalars(sa.select(Model).where(Model.name == MODEL)).one()
            model.label_missingness, model.label_horizon = "class", LABEL_HORIZON
            both = sa.select(WindowMetrics, WindowAggregate).join(
                WindowAggregate,
                sa.and_(
                    WindowAggregate.model_id == WindowMetrics.model_id,
                    WindowAggregate.segment == WindowMetrics.segment,
                    WindowAggregate.window_start == WindowMetrics.window_start,
                ),
            )
            rows = session.execute(
                both.where(WindowAggregate.n > 0, WindowAggregate.n_unlabelled > 0)
            ).all()
            assert len(rows) == 2 * SHIFTED_WINDOWS + SHIFTED_WINDOWS + LATE_WINDOWS
            for stored, aggregate in rows:
                prior = aggregate.positives / aggregate.n
                stored.maturity = {
                    "labelled": aggregate.n,
                    "scored": aggregate.n_unlabelled,
                    "completeness": aggregate.n / aggregate.n_unlabelled,
                    "assumption": "class",
                    "prior": {"value": prior, "lower": prior, "upper": prior, "level": 0.95},
                    # every metric, as the worker stores them (the SLA gauges read these)
                    "metrics": dict(stored.metrics),
                    "intervals": dict(stored.intervals or {}),
                    "reasons": {},
                    "fit": None,
                }
    finally:
        engine.dispose()


# --- Prometheus --------------------------------------------------------------------


def _fast_rules(text: str) -> str:
    """The shipped rules with 1 s group intervals and 2 s ``for:`` durations."""
    text, groups = re.subn(r"(?m)^(\s+interval:) 1m$", r"\1 1s", text)
    assert groups >= 2, "the rule groups' intervals were not found"
    return re.sub(r"(?m)^(\s+for:) \d+[smh]$", r"\1 2s", text)


def _start_prometheus(binary: str, api_port: int, processes: Processes) -> str:
    """Prometheus on loopback: the shipped external labels, a fast copy of the rules,
    one static target (the API)."""
    workdir = processes.workdir / "prometheus"
    (workdir / "rules").mkdir(parents=True)
    shipped_rules = sorted((PROMETHEUS_DIR / "rules").glob("*.rules.yml"))
    assert shipped_rules
    for path in shipped_rules:
        (workdir / "rules" / path.name).write_text(_fast_rules(path.read_text()))
    shipped = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    config = {
        "global": {
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "evaluation_interval": "1s",
            "external_labels": shipped["global"]["external_labels"],
        },
        "rule_files": ["rules/*.rules.yml"],
        "scrape_configs": [
            {
                "job_name": "priorwatch-api",  # the rules select this job
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [f"127.0.0.1:{api_port}"]}],
            }
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = processes.workdir / "prometheus.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    processes.started.append(Process("prometheus", proc, log_path))
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{url}/-/ready", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(ready, "Prometheus is ready", START_SECONDS, processes)
    return url


def _api(prom: httpx.Client, path: str, **params: Any) -> Any:
    r = prom.get(f"/api/v1/{path}", params=params)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["status"] == "success", doc
    return doc["data"]


def _check_target_and_rules(prom: httpx.Client, processes: Processes) -> None:
    def target_up() -> bool:
        targets = _api(prom, "targets")["activeTargets"]
        return bool(targets) and all(t["health"] == "up" for t in targets)

    wait_until(target_up, "the priorwatch target is up", ALERT_SECONDS, processes)
    shipped = sum(
        len(group["rules"])
        for path in (PROMETHEUS_DIR / "rules").glob("*.rules.yml")
        for group in yaml.safe_load(path.read_text())["groups"]
    )
    rules: list[dict[str, Any]] = []

    def every_rule_evaluated() -> bool:
        rules[:] = [r for g in _api(prom, "rules")["groups"] for r in g["rules"]]
        return len(rules) == shipped and all(r["health"] != "unknown" for r in rules)

    wait_until(every_rule_evaluated, "every rule is evaluated", ALERT_SECONDS, processes)
    unhealthy = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not unhealthy


# --- the dashboard -----------------------------------------------------------------


def _dashboard_queries() -> list[tuple[str, str]]:
    """(where, expr) of every panel target, annotation and variable query."""
    doc = json.loads(DASHBOARD.read_text())
    out: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            out.extend((panel["title"], t["expr"]) for t in panel.get("targets", []))
            walk(panel.get("panels", []))

    walk(doc["panels"])
    out += [(a["name"], a["expr"]) for a in doc["annotations"]["list"] if "expr" in a]
    for variable in doc["templating"]["list"]:
        if variable["type"] == "query":
            found = re.fullmatch(r"label_values\((.*),\s*\w+\)", variable["definition"])
            assert found, variable["definition"]
            out.append((f"variable {variable['name']}", found.group(1)))
    return out


def _grafana_substitute(expr: str, segments: tuple[str, ...]) -> str:
    """Template variables as Grafana writes them into a Prometheus query: a single
    value as is, several as a regex alternation of the escaped values."""
    values = [re.escape(s) for s in segments]
    segment = values[0] if len(values) == 1 else "(" + "|".join(values) + ")"
    for variable, value in (
        ("${datasource}", "prometheus"),
        ("$__rate_interval", RATE_INTERVAL),
        ("$model", MODEL),
        ("$segment", segment),
    ):
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def _check_dashboard_queries(prom: httpx.Client, processes: Processes) -> None:
    queries = _dashboard_queries()
    selections = [("all",), ("all", *SEGMENTS)]  # the default, and "All"
    empty: list[tuple[str, str]] = []

    def every_query_has_data() -> bool:
        empty.clear()
        for where, expr in queries:
            for segments in selections:
                query = _grafana_substitute(expr, segments)
                if not _api(prom, "query", query=query)["result"]:
                    empty.append((where, query))
        return not empty

    # rates need two scrapes within their range
    try:
        wait_until(every_query_has_data, "every dashboard query has data", ALERT_SECONDS, processes)
    except pytest.fail.Exception as failed:
        pytest.fail(f"dashboard queries without data: {empty}\n{failed}")


DERIVED = ("balanced_accuracy",)
"""Metrics the compact exposition leaves out and the dashboard derives from ``recall``
and ``specificity`` (docs/reading.md, "Derived in PromQL")."""


def _derived_targets() -> list[tuple[str, str]]:
    """(metric, expr) of every dashboard target deriving a metric of :data:`DERIVED`:
    named in its legend (``{{segment}} balanced_accuracy``), not selected, from the
    labelled window's metrics only."""
    out: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                expr = target["expr"]
                if set(re.findall(r"priorwatch_\w+", expr)) != {"priorwatch_window_metric"}:
                    continue
                selected = re.findall(r'metric=~?"([^"]*)"', expr)
                words = re.findall(r"\w+", target["legendFormat"])
                out.extend(
                    (name, expr)
                    for name in DERIVED
                    if name in words and not any(name in s.split("|") for s in selected)
                )
            walk(panel.get("panels", []))

    walk(json.loads(DASHBOARD.read_text())["panels"])
    return out


def _end(window: dict[str, Any]) -> str:
    return str(window["end"])


def _check_derived_metrics(prom: httpx.Client, latest: dict[str, dict[str, Any]]) -> None:
    """What the dashboard derives from the compact exposition equals what the service
    computed (``latest``: the latest fresh window of each segment, from the API)."""
    derived = _derived_targets()
    assert {name for name, _ in derived} == set(DERIVED)
    for segment, window in latest.items():
        for name, expr in derived:
            result = _api(prom, "query", query=_grafana_substitute(expr, (segment,)))["result"]
            assert [r["metric"] for r in result] == [{"segment": segment}], (name, expr)
            got = float(result[0]["value"][1])
            assert got == pytest.approx(window["metrics"][name], rel=1e-9, abs=1e-12), name


# --- alerts ------------------------------------------------------------------------


def _firing(prom: httpx.Client) -> list[dict[str, Any]]:
    return [a for a in _api(prom, "alerts")["alerts"] if a["state"] == "firing"]


def _check_alerts(prom: httpx.Client, processes: Processes) -> None:
    def both_segments_alerted() -> bool:
        firing = {(a["labels"]["alertname"], a["labels"].get("segment")) for a in _firing(prom)}
        return {
            ("PriorwatchLikelihoodDrift", "likelihood"),
            ("PriorwatchPriorShift", "prior"),  # the prior segment was evaluated too
        } <= firing

    wait_until(both_segments_alerted, "the drift alerts fire", ALERT_SECONDS, processes)

    def labels_overdue() -> bool:
        return any(a["labels"]["alertname"] == "PriorwatchLabelsOverdue" for a in _firing(prom))

    wait_until(labels_overdue, "the labels-overdue alert fires", ALERT_SECONDS, processes)
    firing = _firing(prom)
    (overdue,) = [a for a in firing if a["labels"]["alertname"] == "PriorwatchLabelsOverdue"]
    assert (overdue["labels"]["segment"], overdue["labels"]["severity"]) == ("all", "warning")
    assert float(overdue["value"]) == LATE_WINDOWS
    (drift,) = [
        a for a in firing
        if a["labels"]["alertname"] == "PriorwatchLikelihoodDrift"
        and a["labels"]["segment"] == "likelihood"
    ]  # fmt: skip
    assert drift["labels"]["severity"] == "critical"  # pages (deploy/alertmanager)
    assert float(drift["value"]) == SHIFTED_WINDOWS  # every stored window counted
    shipped = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    base = shipped["global"]["external_labels"]["docs_base_url"]
    assert drift["annotations"]["runbook_url"] == f"{base}/operations.md#priorwatchlikelihooddrift"
    loud_for_prior = [
        a["labels"] for a in firing
        if a["labels"].get("segment") == "prior"
        and a["labels"]["severity"] in ("warning", "critical")
    ]  # fmt: skip
    assert not loud_for_prior
    pending_for_prior = [
        a["labels"] for a in _api(prom, "alerts")["alerts"]
        if a["labels"].get("segment") == "prior" and a["labels"]["severity"] != "info"
    ]  # fmt: skip
    assert not pending_for_prior
