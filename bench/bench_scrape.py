"""Scrape time of GET /metrics at 100 models x 10 segments (issue 4).

Builds a temporary database (SQLite file, and PostgreSQL when reachable at
PRIORWATCH_TEST_POSTGRES_URL or the default local server) through the real
migrations, fills it with 100 models of 10 segments, each (model, segment
key) holding WINDOWS stored windows with a real worker result (one
``compute_window_result`` document reused), and BATCHES_PER_MODEL batch rows
per model. Then it prints, per backend:

* the exporter's scrape (``Exporter.render``: the fixed-query read and the
  direct text writer): the first one, one where every window changed (text
  and streak caches emptied) and the steady one (no window changed), medians
  of REPEATS runs, with the SQL statements per scrape; the share of the
  streak gauges in the steady and the uncached case; ``GET /metrics`` through the
  ASGI app; and the same registry through prometheus_client's
  ``generate_latest`` once;
* the baseline measured in the same run: a naive collector that reads the
  same data with one query per (model, segment) (the N+1 pattern), and the
  ratio of the two.

``--fleet`` (issue 23.3; PostgreSQL only) fills 10,000 models with a fresh
all-traffic window and two fresh segment windows each, each with its stored
label maturity and current detail (30,000 windows), then
prints the compact default exposition scraped as 4 shards (each shard's time and
the API process's CPU time, cold then warm caches), its bytes and samples per
window and the process's RSS growth (peak, and kept by the caches), the latency
of 100-row batches posted to the same process idle and while another thread
scrapes the 4 shards, beside
the full exposition of the same data, unsharded, measured in the same run.

Usage: ``.venv/bin/python bench/bench_scrape.py`` (``make bench``);
``.venv/bin/python bench/bench_scrape.py --fleet``; ``--fleet --profile``: only the
cold scrape of shard 0, under cProfile (its 25 costliest functions, cumulative).
"""

from __future__ import annotations

import cProfile
import gc
import pstats
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from _common import batch_body, per_call, postgres_database
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from sqlalchemy.orm import Session

from app.config import Settings
from app.db.migrate import upgrade_to_head
from app.db.models import ALL_SEGMENTS, Batch, Model, WindowAggregate, WindowMetrics
from app.db.session import make_engine
from app.exporter.exposition import Exposition
from app.exporter.reads import read_models
from app.exporter.registry import Exporter
from app.main import create_app, settle_garbage_collection
from app.metrics.binning import default_bin_edges
from app.services.models.config import ModelConfig
from app.services.windows.compute import compute_window_result
from app.services.windows.sums import WindowSums

MODELS = 100
SEGMENTS = 10
WINDOWS = 3
BATCHES_PER_MODEL = 24
N_BINS = 1_000
REPEATS = 7
FLEET_MODELS = 10_000
ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
SHARDS = 4


def _result_document() -> dict[str, Any]:
    """One real worker result (metrics, reasons, intervals, drift, maturity: a quarter of
    the rows still unlabelled, completed by class), JSON-ready."""
    edges = default_bin_edges((0.5,), n_bins=N_BINS)
    rng = np.random.default_rng(0)
    labels = (rng.random(5_000) < 0.1).astype(np.int64)
    scores = 1.0 / (1.0 + np.exp(-(rng.normal(size=labels.size) + 1.5 * labels - 2.0)))
    known = scores.size * 3 // 4  # the labels of three quarters of the scored rows so far
    labelled = WindowSums.from_predictions(scores[:known], labels[:known], edges, (0.5,))
    scored = np.histogram(scores, bins=edges)[0].astype(np.int64)
    sums = replace(labelled, unlabelled=scored)
    config = ModelConfig(
        id=0,
        name="bench",
        window="1h",
        thresholds=(0.5,),
        pi0=0.05,
        cost_ratio=0.7,
        segments=frozenset(),
        sla=(),
        drift={"reference": {"trailing_windows": 3}},
        bin_edges=edges,
        label_missingness="class",
    )
    result = compute_window_result(config, sums, labelled)
    assert result.maturity is not None, result.reasons
    return {
        "metrics": result.metrics,
        "reasons": result.reasons,
        "intervals": result.intervals,
        "drift": result.drift,
        "maturity": result.maturity,
    }


def fill(
    url: str,
    n_models: int = MODELS,
    n_segments: int = SEGMENTS,
    n_windows: int = WINDOWS,
    n_batches: int = BATCHES_PER_MODEL,
) -> int:
    """Insert the models, batches, aggregates and results; returns the window count."""
    doc = _result_document()
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    edges = default_bin_edges((0.5,), n_bins=N_BINS)
    hist = np.ones(N_BINS, dtype=np.int64)
    segment_names = [f"seg-{j}" for j in range(n_segments)]
    sla = [
        {"metric": "calibrated_f1", "op": ">=", "target": 0.3},
        {"metric": "auc_roc", "op": ">=", "target": 0.7},
    ]
    # the service's engine: its connections compress the stored documents as the
    # worker's do (lz4 where the server has it: app/db/session.py); pglz, the server's
    # default, costs the scrape's reads about 0.15 s more per shard of 7,500 windows
    engine = make_engine(url)
    models, batches, aggregates, results = [], [], [], []
    for i in range(n_models):
        models.append(
            {
                "id": i + 1,
                "name": f"model-{i:05d}",
                "window": "1h",
                "thresholds": [0.5],
                "pi0": 0.05,
                "cost_ratio": 0.7,
                "segments": segment_names,
                "sla": sla,
                "drift": {"reference": {"trailing_windows": 3}},
                "n_bins": N_BINS,
                "label_missingness": "class",
                "bin_edges": edges,
                "created_at": now,
                "updated_at": now,
            }
        )
        for b in range(n_batches):
            batches.append(
                {
                    "model_id": i + 1,
                    "id": uuid.uuid4(),
                    "idempotency_key": f"k{b}",
                    "request_hash": "0" * 64,
                    "kind": "scores",
                    "event_at": now,
                    "window_start": now,
                    "segment": segment_names[b % n_segments],
                    "n": 1000,
                    "positives": 100,
                    "response": {},
                    "received_at": now,
                }
            )
        for key in [ALL_SEGMENTS, *segment_names]:
            for w in range(n_windows):
                start = now - timedelta(hours=n_windows - w)
                window_key = {"model_id": i + 1, "segment": key, "window_start": start}
                aggregates.append(
                    {
                        **window_key,
                        "n": 2 * N_BINS,
                        "n_unlabelled": N_BINS // 2,
                        "positives": N_BINS,
                        "hist_positives": hist,
                        "hist_negatives": hist,
                        "confusion": [{"threshold": 0.5, "tp": 1, "fp": 1, "fn": 1, "tn": 1}],
                        "version": 1,
                        "dirty": False,
                        "created_at": now,
                        "updated_at": now,
                    }
                )
                results.append(
                    {
                        **window_key,
                        "aggregate_version": 1,
                        "detail_version": 1,  # the intervals are of this version
                        "computed_at": now,
                        "status": "fresh",
                        **doc,
                    }
                )
    with Session(engine) as session, session.begin():
        session.execute(sa.insert(Model), models)
        if batches:
            session.execute(sa.insert(Batch), batches)
        for i in range(0, len(results), 5_000):
            session.execute(sa.insert(WindowAggregate), aggregates[i : i + 5_000])
            session.execute(sa.insert(WindowMetrics), results[i : i + 5_000])
    engine.dispose()
    return len(results)


def naive_scrape(session: Session) -> int:
    """Baseline: the same data with one query per (model, segment key); returns values read."""
    values = 0
    for model_id, segments in session.execute(sa.select(Model.id, Model.segments)).all():
        for key in [ALL_SEGMENTS, *segments]:
            row = session.execute(
                sa.select(WindowMetrics.metrics, WindowMetrics.drift, WindowMetrics.intervals)
                .where(
                    WindowMetrics.model_id == model_id,
                    WindowMetrics.segment == key,
                    WindowMetrics.status == "fresh",
                )
                .order_by(WindowMetrics.window_start.desc())
                .limit(1)
            ).first()
            if row is not None:
                values += sum(v is not None for v in row.metrics.values())
        session.scalar(
            sa.select(sa.func.count()).select_from(Batch).where(Batch.model_id == model_id)
        )
    session.rollback()
    return values


def measure(label: str, url: str) -> None:
    t0 = time.perf_counter()
    upgrade_to_head(url)
    windows = fill(url)
    print(
        f"[{label}] {MODELS} models x {SEGMENTS} segments: {windows} stored windows, "
        f"{MODELS * BATCHES_PER_MODEL} batches (setup {time.perf_counter() - t0:.1f} s)"
    )
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=url, embedded_worker=False
    )
    app = create_app(settings)
    exporter = app.state.exporter

    def scrape() -> None:
        b"".join(exporter.render())

    engine: sa.Engine = app.state.engine
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    t0 = time.perf_counter()
    text = b"".join(exporter.render())  # first scrape: every window's document read, written
    cold = time.perf_counter() - t0
    cold_statements = len(statements)
    statements.clear()
    scrape()
    n_statements = len(statements)
    samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    collector = per_call(scrape, REPEATS)

    def uncached() -> None:
        exporter.windows._chunks = {}
        exporter.streaks._groups = {}
        scrape()

    no_cache = per_call(uncached, REPEATS)
    factory = app.state.session_factory
    with factory() as session:
        models = read_models(session)
        streaks_steady = per_call(lambda: exporter.streaks.read(session, models), REPEATS)

        def streaks_uncached() -> None:
            exporter.streaks._groups = {}
            exporter.streaks.read(session, models)

        streaks_cold = per_call(streaks_uncached, REPEATS)
        session.rollback()
    t0 = time.perf_counter()
    generate_latest(exporter.registry)
    library = time.perf_counter() - t0
    with TestClient(app) as client:
        client.get("/metrics")
        http = per_call(lambda: client.get("/metrics"), REPEATS)

    def naive() -> None:
        with factory() as session:
            naive_scrape(session)

    naive()
    baseline = per_call(naive, REPEATS)
    print(
        f"[{label}] exposition: {samples} samples, {len(text) / 1e6:.2f} MB; SQL statements: "
        f"{cold_statements} on the first scrape, {n_statements} when no window changed"
    )
    print(f"[{label}] first scrape (cold process)           : {cold * 1e3:8.1f} ms")
    print(
        f"[{label}] scrape, every window changed (no cache): {no_cache * 1e3:8.1f} ms "
        f"(median of {REPEATS})"
    )
    print(f"[{label}] scrape, no window changed (steady)    : {collector * 1e3:8.1f} ms")
    print(
        f"[{label}] of which streaks (app/exporter/streaks.py): {streaks_steady * 1e3:6.1f} ms "
        f"steady, {streaks_cold * 1e3:6.1f} ms when every window changed"
    )
    print(f"[{label}] same data via prometheus_client generate_latest: {library * 1e3:8.1f} ms")
    print(f"[{label}] GET /metrics over ASGI (steady)       : {http * 1e3:8.1f} ms")
    print(
        f"[{label}] baseline, 1 query per (model, segment), reading only: "
        f"{baseline * 1e3:8.1f} ms ({MODELS * (SEGMENTS + 2) + 1} statements)"
    )
    print(
        f"[{label}] ratio scrape without cache / baseline: {no_cache / baseline:.2f}; "
        f"steady scrape / baseline: {collector / baseline:.3f}"
    )
    app.state.engine.dispose()


def _rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak since the last :func:`_reset_peak`) of this process, MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise LookupError(field)


def _reset_peak() -> None:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux)


class _Size:
    """Bytes and sample lines of streamed chunks (not kept: the RSS is the service's)."""

    def __init__(self) -> None:
        self.bytes = self.samples = 0

    def add(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        self.samples += chunk.count(b"\n") - chunk.count(b"#")  # no '#' in a sample line

    def per_window(self, windows: int) -> str:
        return (
            f"{self.bytes / 1e6:7.1f} MB, {self.samples:>9,} samples; "
            f"{self.bytes / windows / 1e3:5.2f} KB and {self.samples / windows:5.1f} samples "
            "per window"
        )


def _ingestion_during_scrapes(app: Any) -> None:
    """Latency of 100-row batches posted in this process, idle and while another thread
    scrapes the SHARDS shards (as a scrape's worker thread shares the API process)."""
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with TestClient(app) as client:
        made = client.post("/v1/models", json={"name": "ingest", "pi0": 0.05}, headers=admin)
        assert made.status_code == 201, made.text
        key = client.post("/v1/models/ingest/keys", json={"scopes": ["ingest"]}, headers=admin)
        assert key.status_code == 201, key.text
        headers = {"Authorization": f"Bearer {key.json()['token']}"}
        headers["Content-Type"] = "application/json"
        body = batch_body(np.random.default_rng(0), 100, datetime.now(UTC))

        def post() -> float:
            t0 = time.perf_counter()
            h = {**headers, "Idempotency-Key": uuid.uuid4().hex}
            r = client.post("/v1/models/ingest/batches", content=body, headers=h)
            assert r.status_code == 202, r.text
            return time.perf_counter() - t0

        idle = [post() for _ in range(100)]
        scraping = threading.Thread(
            target=lambda: [b"".join(app.state.exporter.render((i, SHARDS))) for i in range(SHARDS)]
        )
        scraping.start()
        busy = []
        while scraping.is_alive():
            busy.append(post())
        scraping.join()
    for label, times in (("idle", idle), (f"during {SHARDS} shard scrapes", busy)):
        p50, p99 = np.percentile(np.array(times) * 1e3, [50, 99])
        print(f"[fleet] 100-row batch latency, {label}: p50 {p50:.1f} ms, p99 {p99:.1f} ms "
              f"({len(times)} batches)")  # fmt: skip


def fleet(url: str) -> None:
    """30,000 windows (FLEET_MODELS models, the all-traffic window and 2 segments each):
    the compact exposition as SHARDS shards beside the full one, unsharded, in one run."""
    t0 = time.perf_counter()
    upgrade_to_head(url)
    windows = fill(url, FLEET_MODELS, 2, 1, 0)
    engine = sa.create_engine(url)
    with engine.begin() as connection:  # fill set the ids: move the sequence past them
        connection.execute(sa.text("SELECT setval('model_id_seq', (SELECT max(id) FROM model))"))
    engine.dispose()
    print(f"[fleet] {FLEET_MODELS} models x 3 windows: {windows} fresh windows "
          f"(setup {time.perf_counter() - t0:.1f} s)")  # fmt: skip
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=url, embedded_worker=False, admin_token=ADMIN_TOKEN
    )
    app = create_app(settings)
    settle_garbage_collection()  # as `priorwatch serve` does once its application is built
    exporter = app.state.exporter
    if "--profile" in sys.argv:
        _profile_cold_shard(exporter)
        app.state.engine.dispose()
        return
    _reset_peak()
    before = _rss_mb("VmRSS")
    for round_ in ("first (cold caches)", "second (warm caches)"):
        size = _Size()
        times, cpu = [], []
        for i in range(SHARDS):
            t0, c0 = time.perf_counter(), time.process_time()
            for chunk in exporter.render((i, SHARDS)):
                size.add(chunk)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        print(f"[fleet] compact, {SHARDS} shards, {round_}: "
              + ", ".join(f"{t:.2f}" for t in times) + " s (this process's CPU: "
              + ", ".join(f"{t:.2f}" for t in cpu) + " s)")  # fmt: skip
    kept = _rss_mb("VmRSS") - before
    peak = _rss_mb("VmHWM") - before
    print(f"[fleet] compact exposition : {size.per_window(windows)}")
    print(f"[fleet] compact RSS growth : peak {peak:.0f} MB, kept after (caches) {kept:.0f} MB")
    _ingestion_during_scrapes(app)
    full = Exporter(
        app.state.session_factory, max_unfolded_deltas=0, exposition=Exposition.parse("full")
    )
    _reset_peak()
    before = _rss_mb("VmRSS")
    t0 = time.perf_counter()
    size = _Size()
    for chunk in full.render():
        size.add(chunk)
    elapsed = time.perf_counter() - t0
    peak = _rss_mb("VmHWM") - before
    print(f"[fleet] full exposition    : {size.per_window(windows)}")
    print(f"[fleet] full, unsharded, first scrape: {elapsed:.2f} s; RSS growth: peak {peak:.0f} MB")
    app.state.engine.dispose()


def _profile_cold_shard(exporter: Exporter) -> None:
    """The cold scrape of shard 0 of SHARDS under cProfile: its time, then the 25
    costliest functions (cumulative), to see where a cold shard spends it."""
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    for _chunk in exporter.render((0, SHARDS)):
        pass
    profile.disable()
    print(f"[fleet] compact, shard 0 of {SHARDS}, cold, profiled: "
          f"{time.perf_counter() - t0:.2f} s")  # fmt: skip
    pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(20)


def main() -> None:
    if "--fleet" in sys.argv:
        with postgres_database(skipped="[fleet] skipped: {reason}") as url:
            if url is not None:
                fleet(url)
        return
    with tempfile.TemporaryDirectory() as tmp:
        measure("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")
    with postgres_database(skipped="[postgres] skipped: {reason}") as url:
        if url is not None:
            measure("postgres", url)


if __name__ == "__main__":
    main()
