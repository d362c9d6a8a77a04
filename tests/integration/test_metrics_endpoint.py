"""GET /metrics through the real app (SQLite, Postgres): the exposition holds the
latest fresh window of every (model, segment) exactly as the windows endpoint
shows it, the ingestion counters, the queue, and passes promtool."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import (
    BACKENDS,
    MODEL,
    OBJECTIVES,
    ROWS,
    SEGMENTS,
    Populated,
    drain,
    iso,
    populated_app,
    shared_database_url,
)
from builders import sample
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.db.models import ALL_SEGMENTS, ALL_SEGMENTS_LABEL, Model
from app.exporter import collector as collector_module
from app.exporter import names
from app.exporter.exposition import COMPACT_METRICS, Exposition
from app.exporter.names import FAMILIES
from app.exporter.reads import ResultStamp
from app.exporter.registry import MAX_SHARDS, Exporter
from app.exporter.series import series
from app.exporter.text import render_series
from app.main import create_app

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module", params=BACKENDS)
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Populated]:
    url = shared_database_url(request, tmp_path_factory.mktemp("metrics"))
    yield from populated_app(url)


def _scrape(data: Populated, **params: int) -> tuple[str, Samples]:
    r = data.client.get("/metrics", params=params)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return r.text, _parse(r.text)


def _parse(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.timestamp is None, s
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, key
            samples[key] = s.value
    return samples


def _families(text: str) -> dict[str, Any]:
    return {
        f.name: (f.type, sorted((s.name, sorted(s.labels.items()), s.value) for s in f.samples))
        for f in text_string_to_metric_families(text)
    }


def _compact(families: dict[str, Any]) -> dict[str, Any]:
    """``families`` (of :func:`_families`) without what the compact exposition leaves out."""
    out = dict(families)
    for name, kept in COMPACT_METRICS.items():
        kind, samples = families[name]
        by = "kind" if name == names.DRIFT_STREAK else "metric"  # the label it is trimmed by
        out[name] = (kind, [s for s in samples if dict(s[1])[by] in kept])
    return out


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _latest_fresh(data: Populated, segment: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"from": iso(data.day)}
    if segment:
        params["segment"] = segment
    windows = [w for w in data.get("/windows", **params)["windows"] if w["status"] == "fresh"]
    return dict(windows[-1])


def test_latest_fresh_windows_are_exposed_as_stored(data: Populated) -> None:
    _, samples = _scrape(data)
    for segment in (None, *SEGMENTS):
        window = _latest_fresh(data, segment)
        labels = {"model": MODEL, "segment": segment or ALL_SEGMENTS_LABEL}
        exposed = {
            dict(k[1])["metric"]: v
            for k, v in samples.items()
            if k[0] == names.WINDOW_METRIC
            and {(a, b) for a, b in k[1] if a != "metric"} == set(labels.items())
        }
        kept = COMPACT_METRICS[names.WINDOW_METRIC]
        defined = {k: v for k, v in window["metrics"].items() if v is not None and k in kept}
        assert exposed == pytest.approx(defined, rel=1e-15)
        for metric, bounds in window["intervals"].items():
            if (
                bounds.get("lower") is not None
                and metric in COMPACT_METRICS[names.WINDOW_METRIC_LOWER]
            ):
                assert _get(
                    samples, names.WINDOW_METRIC_LOWER, **labels, metric=metric
                ) == pytest.approx(bounds["lower"], rel=1e-15)
        end = datetime.fromisoformat(window["end"].replace("Z", "+00:00"))
        assert _get(samples, names.WINDOW_END, **labels) == end.timestamp()
        positives = _get(samples, names.WINDOW_EXAMPLES, **labels, **{"class": "positive"})
        negatives = _get(samples, names.WINDOW_EXAMPLES, **labels, **{"class": "negative"})
        assert (positives, negatives) == (window["positives"], window["n"] - window["positives"])
        for kind in ("prior", "likelihood"):
            test = window["drift"][kind]
            assert _get(samples, names.DRIFT_FLAG, **labels, kind=kind) == float(test["flag"])
            assert _get(samples, names.DRIFT_P_VALUE, **labels, kind=kind) == pytest.approx(
                test["p_value"], rel=1e-15
            )
            assert _get(samples, names.DRIFT_EFFECT, **labels, kind=kind) == pytest.approx(
                test["effect"], rel=1e-15
            )


def test_the_full_exposition_holds_every_stored_metric(data: Populated) -> None:
    factory = data.client.app.state.session_factory  # type: ignore[attr-defined]
    full = Exporter(factory, max_unfolded_deltas=0, exposition=Exposition.parse("full"))
    samples = _parse(b"".join(full.render()).decode())
    compact = _scrape(data)[1]
    assert len(compact) < len(samples) and set(compact) - set(samples) == set()
    window = _latest_fresh(data, "eu")
    labels = {"model": MODEL, "segment": "eu"}
    for metric, value in window["metrics"].items():
        if value is not None:
            assert _get(samples, names.WINDOW_METRIC, **labels, metric=metric) == value
    for metric, bounds in window["intervals"].items():
        if bounds.get("upper") is not None:
            got = _get(samples, names.WINDOW_METRIC_UPPER, **labels, metric=metric)
            assert got == bounds["upper"]


def test_sla_gauges_agree_with_the_report(data: Populated) -> None:
    _, samples = _scrape(data)
    report = data.get("/sla")
    for objective, listed in zip(OBJECTIVES, report["objectives"], strict=True):
        labels = {"objective": listed["id"], "metric": objective["metric"], "op": objective["op"]}
        assert str(objective["target"]) not in listed["id"]
        target = _get(samples, names.SLA_TARGET, model=MODEL, **labels)
        assert target == objective["target"]
    for segment in (None, *SEGMENTS):
        latest = _latest_fresh(data, segment)
        params: dict[str, Any] = {"from": latest["start"], "to": latest["end"]}
        if segment:
            params["segment"] = segment
        (window,) = data.get("/sla", **params)["windows"]
        seg = segment or ALL_SEGMENTS_LABEL
        for result in window["objectives"]:
            met = _get(samples, names.SLA_MET, model=MODEL, segment=seg, objective=result["id"])
            expected = {"met": 1.0, "breached": 0.0}.get(result["status"])
            assert met == expected, result


def test_counters_queue_and_process_metrics(data: Populated) -> None:
    text, samples = _scrape(data)
    assert _get(samples, "priorwatch_batches_ingested_total", model=MODEL) == data.batches
    rows = sum(labels.size for _, labels in data.raw.values())
    assert _get(samples, "priorwatch_predictions_ingested_total", model=MODEL) == rows
    assert _get(samples, names.DIRTY_WINDOWS) == 0
    assert _get(samples, names.WORKER_LAG) == 0
    assert "process_cpu_seconds_total" in text and "python_info" in text
    assert "NaN" not in text


def test_rejections_are_counted_by_reason(data: Populated) -> None:
    def count(reason: str) -> float:
        _, samples = _scrape(data)
        return _get(samples, "priorwatch_batches_rejected_total", reason=reason) or 0.0

    before = {r: count(r) for r in ("invalid_input", "malformed_json", "model_not_found")}
    path = f"/v1/models/{MODEL}/batches"
    good = {"timestamp": iso(data.hour(2)), "scores": [0.5, 0.2], "labels": [0, 1]}
    assert (
        data.client.post(path, json={**good, "labels": [0, 2]}, headers=data.ingest).status_code
        == 422
    )
    assert (
        data.client.post(path, json={**good, "segment": "mars"}, headers=data.ingest).status_code
        == 422
    )
    r = data.client.post(
        path, content=b"{", headers={**data.ingest, "Content-Type": "application/json"}
    )
    assert r.status_code == 400
    r = data.client.post("/v1/models/nope/batches", json=good, headers=data.admin)
    assert r.status_code == 404
    assert count("invalid_input") == before["invalid_input"] + 2
    assert count("malformed_json") == before["malformed_json"] + 1
    assert count("model_not_found") == before["model_not_found"] + 1


@contextmanager
def _statements(data: Populated) -> Iterator[list[str]]:
    """Collect the SQL statements the app runs inside the block."""
    engine: sa.Engine = data.client.app.state.engine  # type: ignore[attr-defined]
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(str(args[2]))

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def _documents_read(statements: list[str]) -> int:
    """The statements reading the latest windows' documents (the only ones to read their
    ``reasons``; whole, or on PostgreSQL only the members the exposition writes)."""
    return sum("window_metrics.reasons" in s for s in statements)


def test_scrape_runs_a_fixed_number_of_queries(data: Populated) -> None:
    _scrape(data)  # fills the text cache
    with _statements(data) as warm:
        _scrape(data)
    # models, latest keys, queue (+ BEGIN on SQLite), the keys of the streak windows, the
    # estimates (one statement) and the label maturity (the latest documents; the
    # completeness curve and the overdue windows only for the models that need them)
    assert len(warm) <= 9 and _documents_read(warm) == 0
    for i in range(3):
        body = {"name": f"extra-{i}", "pi0": 0.2, "segments": ["a", "b"], "n_bins": 100}
        assert data.client.post("/v1/models", json=body, headers=data.admin).status_code == 201
    with _statements(data) as more:
        _, samples = _scrape(data)
    assert len(more) == len(warm)
    assert _get(samples, "priorwatch_batches_ingested_total", model="extra-2") == 0


def test_new_batches_show_in_the_queue_then_in_the_gauges(data: Populated) -> None:
    later = data.hour(40)
    scores, labels = sample(np.random.default_rng(11), ROWS, 0.2)
    data.post("eu", 40, scores, labels)
    data.raw[("eu", 40)] = (scores, labels)
    _, samples = _scrape(data)
    assert _get(samples, names.DIRTY_WINDOWS) == 2  # the eu window and the all-traffic one
    assert (_get(samples, names.WORKER_LAG) or 0.0) >= 0.0
    # until the worker ran, the gauges keep the previous fresh window
    end = _get(samples, names.WINDOW_END, model=MODEL, segment="eu")
    assert end is not None and end < later.timestamp()
    drain(data.client)
    with _statements(data) as statements:
        _, samples = _scrape(data)
    # only the changed windows' documents are read again, in one statement (the
    # streaks extract their few values in SQL)
    assert _documents_read(statements) == 1
    exporter: Exporter = data.client.app.state.exporter  # type: ignore[attr-defined]
    uncached = render_series(FAMILIES, series(exporter.windows.snapshot()))  # full
    parts = CollectorRegistry(auto_describe=False)
    parts.register(exporter.streaks)  # prometheus_client's path: its own session and models
    parts.register(exporter.estimates)
    parts.register(exporter.maturity)
    every = {**_families(uncached), **_families(generate_latest(parts).decode())}
    assert _families(exporter.windows.render_text()) == _compact(every)
    assert _get(samples, names.DIRTY_WINDOWS) == 0
    assert (
        _get(samples, names.WINDOW_END, model=MODEL, segment="eu")
        == (later + timedelta(hours=1)).timestamp()
    )
    assert _get(
        samples, names.WINDOW_EXAMPLES, model=MODEL, segment="eu", **{"class": "positive"}
    ) == int(labels.sum())


def test_deregistered_segments_disappear(data: Populated) -> None:
    path = f"/v1/models/{MODEL}"
    r = data.client.patch(path, json={"segments": ["eu"]}, headers=data.admin)
    assert r.status_code == 200, r.text
    try:
        _, samples = _scrape(data)
        segments = {dict(k[1]).get("segment") for k in samples if k[0] == names.WINDOW_END}
        assert segments == {"all", "eu"}
    finally:
        r = data.client.patch(path, json={"segments": list(SEGMENTS)}, headers=data.admin)
        assert r.status_code == 200, r.text
    drain(data.client)  # a settings change may mark windows for recomputation


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
@pytest.mark.parametrize("shard", [{}, {"shard": 0, "shards": 2}, {"shard": 1, "shards": 2}])
def test_promtool_check_metrics_passes(data: Populated, shard: dict[str, int]) -> None:
    text, _ = _scrape(data, **shard)  # the compact default, whole or one shard
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _model_of(key: tuple[str, frozenset[tuple[str, str]]]) -> str | None:
    return dict(key[1]).get("model")


@pytest.mark.parametrize("shards", [1, 2, 3])
def test_shards_partition_the_model_series(data: Populated, shards: int) -> None:
    for i in range(4):
        body = {"name": f"sharded-{i}", "pi0": 0.2, "n_bins": 100}
        data.client.post("/v1/models", json=body, headers=data.admin)  # 409 once made
    engine: sa.Engine = data.client.app.state.engine  # type: ignore[attr-defined]
    with engine.connect() as connection:
        ids = {name: id_ for name, id_ in connection.execute(sa.select(Model.name, Model.id))}
    _, whole = _scrape(data)
    parts = [_scrape(data, shard=i, shards=shards)[1] for i in range(shards)]
    for i, part in enumerate(parts):
        models = {_model_of(k) for k in part} - {None}
        assert models and all(ids[m] % shards == i for m in models)
        if i > 0:  # the series of no model (queue, process, database up) on shard 0 only
            assert all(_model_of(k) is not None for k in part)
    keys = [k for part in parts for k in part]
    assert len(keys) == len(set(keys))  # no series in two shards
    assert set(keys) == set(whole)  # and every series in one
    for part in parts:
        for key, value in part.items():
            if key[0].startswith("priorwatch_") and key[0] != names.WORKER_LAG:
                assert whole[key] == value, key


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"shard": 0}, "shards"),
        ({"shards": 2}, "shard"),
        ({"shard": 2, "shards": 2}, "shard"),
        ({"shard": -1, "shards": 2}, "shard"),
        ({"shard": 0, "shards": 0}, "shards"),
        ({"shard": 0, "shards": MAX_SHARDS + 1}, "shards"),
        ({"shard": "a", "shards": 2}, "shard"),
    ],
)
def test_a_bad_shard_is_refused(data: Populated, params: dict[str, Any], field: str) -> None:
    r = data.client.get("/metrics", params=params)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in r.json()["errors"]] == [field]


def test_each_shard_keeps_its_own_cache(data: Populated) -> None:
    exporter: Exporter = data.client.app.state.exporter  # type: ignore[attr-defined]
    first = exporter.shard((0, 2))
    assert exporter.shard((0, 2)) is first and exporter.shard((1, 2)) is not first
    assert exporter.shard(None) is exporter.windows
    for count in range(3, MAX_SHARDS + 3):
        exporter.shard((0, count))  # (0, 2) is the least recently scraped: dropped
    assert exporter.shard((0, 2)) is not first
    _scrape(data, shard=0, shards=2)
    _scrape(data, shard=1, shards=2)
    with _statements(data) as warm:
        _scrape(data, shard=1, shards=2)
        _scrape(data, shard=0, shards=2)
    assert _documents_read(warm) == 0  # each shard's windows are still cached


def test_an_unknown_exposition_refuses_to_start(tmp_path: Any) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        database_url=f"sqlite:///{tmp_path / 'x.db'}",
        metrics_exposition="priorwatch_nope",
    )
    with pytest.raises(ValueError, match="unknown: priorwatch_nope"):
        create_app(settings)


def test_a_window_recomputed_during_a_scrape_is_written_once(
    data: Populated, monkeypatch: pytest.MonkeyPatch
) -> None:
    exporter: Exporter = data.client.app.state.exporter  # type: ignore[attr-defined]
    real_keys, real_windows = (
        collector_module.read_latest_keys,
        collector_module.read_latest_windows,
    )
    read: list[ResultStamp] = []
    monkeypatch.setattr(collector_module, "read_latest_keys", lambda *a: read or real_keys(*a))
    with data.client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        read.extend(real_keys(session))
    first = min(read, key=lambda k: (k.model_id, k.segment))
    # the keys were read before the first window was recomputed: its cached lines are of
    # the older key, and every other window must be read again (one statement for all)
    older = replace(first, computed_at=first.computed_at - timedelta(seconds=1))
    read[read.index(first)] = older
    monkeypatch.setattr(
        collector_module,
        "read_latest_windows",
        lambda *a, **k: (
            replace(w, key=older) if w.key == first else w for w in real_windows(*a, **k)
        ),
    )
    _scrape(data)  # caches the first window's lines under the older key
    exporter.windows._chunks = {
        key: lines
        for key, lines in exporter.windows._chunks.items()
        if key[:2] == (first.model_id, first.segment)
    }
    monkeypatch.setattr(collector_module, "read_latest_windows", real_windows)
    _, samples = _scrape(data)  # _parse fails on a series written twice
    segment = ALL_SEGMENTS_LABEL if first.segment == ALL_SEGMENTS else first.segment
    assert _get(samples, names.WINDOW_END, model=MODEL, segment=segment) is not None


def _metrics_of(samples: Samples, family: str) -> set[str]:
    return {dict(k[1])["metric"] for k in samples if k[0] == family and _model_of(k) == MODEL}


def test_a_models_exposition_setting_changes_its_families(data: Populated) -> None:
    path = f"/v1/models/{MODEL}"
    _, before = _scrape(data)
    lower = _metrics_of(before, names.WINDOW_METRIC_LOWER)
    assert lower and lower <= COMPACT_METRICS[names.WINDOW_METRIC_LOWER]
    listed = [names.WINDOW_METRIC_LOWER]
    r = data.client.patch(path, json={"exposition": listed}, headers=data.admin)
    assert r.status_code == 200 and r.json()["exposition"] == listed, r.text
    try:
        _, whole_lower = _scrape(data)
        assert _metrics_of(whole_lower, names.WINDOW_METRIC_LOWER) > lower  # every bound
        for family in (names.WINDOW_METRIC, names.WINDOW_METRIC_UPPER):  # the others compact
            assert _metrics_of(whole_lower, family) == _metrics_of(before, family)
        r = data.client.patch(path, json={"exposition": "full"}, headers=data.admin)
        assert r.status_code == 200 and r.json()["exposition"] == "full", r.text
        _, full = _scrape(data)
        metrics = _metrics_of(full, names.WINDOW_METRIC)
        assert metrics > _metrics_of(before, names.WINDOW_METRIC) and "brier" in metrics
        others = {k: v for k, v in full.items() if _model_of(k) not in {MODEL, None}}
        assert others == {k: v for k, v in before.items() if _model_of(k) not in {MODEL, None}}
    finally:
        r = data.client.patch(path, json={"exposition": None}, headers=data.admin)
        assert r.status_code == 200 and r.json()["exposition"] is None, r.text
    _, after = _scrape(data)
    assert {k for k in after if _model_of(k) == MODEL} == {
        k for k in before if _model_of(k) == MODEL
    }


@pytest.mark.parametrize(
    ("exposition", "field"),
    [
        ("everything", "exposition"),
        (["priorwatch_drift_flag"], "exposition.list[...].0"),
        ([], "exposition"),
    ],
)
def test_an_unknown_exposition_setting_is_refused(
    data: Populated, exposition: Any, field: str
) -> None:
    r = data.client.patch(
        f"/v1/models/{MODEL}", json={"exposition": exposition}, headers=data.admin
    )
    assert r.status_code == 422, r.text
    assert any(e["field"].startswith("exposition") for e in r.json()["errors"]), r.text
