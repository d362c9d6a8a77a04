"""Streak gauges of GET /metrics through the real app and worker (SQLite, Postgres).

Model "streaky" (hourly windows, one segment "eu"): hours 0-2 are the drift
reference; hours 3-6 and 8 move the positives' scores (P(s|y) shift: the
likelihood flag is raised and recall falls below its objective); hour 7 holds
20 rows (too few to test anything: skipped by both streaks). Hour 8 arrives
first; hours 3-7 are backfilled afterwards. The streaks must count the stored
windows where they belong in time, and agree with a count made from the
API's window history and SLA report. The model's ``exposition`` setting
lists the drift streak family, so both of its kinds are written. The tests
share the module's database and run in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from _read_support import ADMIN_TOKEN, BACKENDS, iso, shared_database_url
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.db.models import ALL_SEGMENTS_LABEL, Model, WindowAggregate, WindowMetrics
from app.exporter import names
from app.exporter.reads import read_models
from app.exporter.streaks import StreakCollector, read_outcomes, read_recent_keys, window_outcomes
from app.main import create_app
from app.sla.objectives import Objective
from app.timegrid import window_start
from app.worker.jobs import DatabaseJobs

MODEL = "streaky"
ROWS = 600
OBJECTIVE = {"metric": "recall", "op": ">=", "target": 0.6}
RECALL = {"objective": "recall_ge"}
RECALL_TARGET = {**RECALL, "metric": "recall", "op": ">="}
"""The labels of its target: the one series that names its metric and op."""
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module", params=BACKENDS)
def client(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    url = shared_database_url(request, tmp_path_factory.mktemp("streaks"))
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, database_url=url, admin_token=ADMIN_TOKEN, embedded_worker=False
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as test_client:
        yield test_client


class Feed:
    """Posts seeded batches of one model and drains the worker."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.day = window_start(datetime.now(UTC) - timedelta(days=2), "1d")
        r = client.post(
            "/v1/models",
            json={
                "name": MODEL,
                "window": "1h",
                "threshold": 0.5,
                "pi0": 0.1,
                "segments": ["eu"],
                "sla": [OBJECTIVE],
                "drift": {"reference": {"from": iso(self.day), "to": iso(self.hour(3))}},
                # the prior streak too (the compact exposition writes the likelihood one)
                "exposition": [names.DRIFT_STREAK],
            },
            headers=ADMIN,
        )
        assert r.status_code == 201, r.text
        r = client.post(
            f"/v1/models/{MODEL}/keys", json={"scopes": ["ingest", "read"]}, headers=ADMIN
        )
        assert r.status_code == 201, r.text
        self.key = {"Authorization": f"Bearer {r.json()['token']}"}
        self.rng = np.random.default_rng(20261126)

    @classmethod
    def existing(cls, client: TestClient) -> Feed:
        """The model registered by an earlier test of this module (with a new key)."""
        feed = cls.__new__(cls)
        feed.client = client
        feed.day = window_start(datetime.now(UTC) - timedelta(days=2), "1d")
        r = client.post(
            f"/v1/models/{MODEL}/keys", json={"scopes": ["ingest", "read"]}, headers=ADMIN
        )
        assert r.status_code == 201, r.text
        feed.key = {"Authorization": f"Bearer {r.json()['token']}"}
        feed.rng = np.random.default_rng(7)
        return feed

    def hour(self, h: int) -> datetime:
        return self.day + timedelta(hours=h)

    def post(self, h: int, separation: float, n: int = ROWS) -> None:
        labels = (self.rng.random(n) < 0.2).astype(np.int64)
        logits = self.rng.normal(size=n) - 2.0 + separation * labels
        body = {
            "timestamp": iso(self.hour(h) + timedelta(minutes=5)),
            "segment": "eu",
            "scores": (1.0 / (1.0 + np.exp(-logits))).tolist(),
            "labels": labels.tolist(),
        }
        r = self.client.post(f"/v1/models/{MODEL}/batches", json=body, headers=self.key)
        assert r.status_code == 202, r.text

    def drain(self) -> None:
        jobs = DatabaseJobs(self.client.app.state.session_factory, lease_seconds=60.0)  # type: ignore[attr-defined]
        while (job := jobs.claim()) is not None:
            jobs.run(job)

    def get(self, path: str, **params: Any) -> Any:
        r = self.client.get(f"/v1/models/{MODEL}{path}", params=params, headers=self.key)
        assert r.status_code == 200, r.text
        return r.json()


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _scrape(client: TestClient) -> Samples:
    r = client.get("/metrics")
    assert r.status_code == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def _get(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _count_from_history(feed: Feed, segment: str | None) -> tuple[int, int, int]:
    """(likelihood, prior, recall-breach) streaks counted from GET /windows and GET /sla."""
    params: dict[str, Any] = {"from": iso(feed.day)}
    if segment is not None:
        params["segment"] = segment
    windows = [w for w in feed.get("/windows", **params)["windows"] if w["status"] == "fresh"]
    report = feed.get("/sla", **params)["windows"]
    statuses = {w["start"]: w["objectives"][0]["status"] for w in report}
    counts = []
    for outcome in (
        lambda w: (w["drift"].get("likelihood") or {}).get("flag"),
        lambda w: (w["drift"].get("prior") or {}).get("flag"),
        lambda w: {"breached": True, "insufficient_data": None}.get(statuses[w["start"]], False),
    ):
        count = 0
        for w in reversed(windows):  # newest first
            value = outcome(w)
            if value is None:
                continue
            if not value:
                break
            count += 1
        counts.append(count)
    return counts[0], counts[1], counts[2]


def _streaks(samples: Samples, segment: str) -> tuple[float | None, ...]:
    m = {"model": MODEL, "segment": segment}
    return (
        _get(samples, names.DRIFT_STREAK, **m, kind="likelihood"),
        _get(samples, names.DRIFT_STREAK, **m, kind="prior"),
        _get(samples, names.SLA_BREACH_STREAK, **m, **RECALL),
    )


def test_backfilled_windows_count_where_they_belong(client: TestClient) -> None:
    feed = Feed(client)
    for h in range(3):
        feed.post(h, separation=3.0)
    feed.post(8, separation=1.0)
    feed.drain()
    first = _scrape(client)
    assert _streaks(first, "eu") == (1, 0, 1)  # the reference windows are not tested
    assert _streaks(first, "eu") == _count_from_history(feed, "eu")

    for h in (3, 4, 5, 6):
        feed.post(h, separation=1.0)
    feed.post(7, separation=1.0, n=20)  # too few examples: skipped
    feed.drain()
    samples = _scrape(client)
    # same latest window (hour 8) as before the backfill; 5 flagged windows behind it
    assert _get(samples, names.WINDOW_END, model=MODEL, segment="eu") == feed.hour(9).timestamp()
    for segment, label in ((None, ALL_SEGMENTS_LABEL), ("eu", "eu")):
        assert _streaks(samples, label) == (5, 0, 5), label
        assert _streaks(samples, label) == _count_from_history(feed, segment), label
    target = _get(samples, names.SLA_TARGET, model=MODEL, **RECALL_TARGET)
    assert target == OBJECTIVE["target"]

    feed.post(9, separation=3.0)  # back to the reference behaviour: both streaks end
    feed.drain()
    samples = _scrape(client)
    assert _streaks(samples, "eu") == (0, 0, 0)
    assert _streaks(samples, "eu") == _count_from_history(feed, "eu")


def test_steady_scrape_reads_one_statement_and_recent_keys_are_bounded(
    client: TestClient,
) -> None:
    statements: list[str] = []
    engine = client.app.state.engine  # type: ignore[attr-defined]

    def record(*args: Any) -> None:
        statements.append(str(args[2]))

    _scrape(client)
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        _scrape(client)
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    # no document, and no key of a recent window, when no window changed
    assert not [s for s in statements if "window_metrics.reasons" in s]
    assert not [s for s in statements if "row_number()" in s.lower()]
    with client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        keys = read_recent_keys(session, limit=2)
        only_eu = read_recent_keys(session, [(keys[0][0], "eu")], limit=3)
    by_segment: dict[str, list[datetime]] = {}
    for _, segment, start, _ in keys:
        by_segment.setdefault(segment, []).append(start)
    assert len(by_segment) == 2  # "eu" and the all-traffic key
    day = window_start(datetime.now(UTC) - timedelta(days=2), "1d")
    for starts in by_segment.values():
        assert starts == [day + timedelta(hours=h) for h in (9, 8)]
    assert [(k[1], k[2]) for k in only_eu] == [("eu", day + timedelta(hours=h)) for h in (9, 8, 7)]


def test_a_cold_read_names_no_window_and_gives_what_the_reads_by_key_give(
    client: TestClient,
) -> None:
    """With no group cached (a new process), the recent windows' keys and outcomes are
    read for the whole shard, in one statement each and with no window named in bound
    parameters (thousands of them cost seconds on a fleet), and they are the outcomes
    read window by window."""
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    engine = client.app.state.engine  # type: ignore[attr-defined]
    bound: list[int] = []

    def record(*args: Any) -> None:
        bound.append(len(args[3] or ()))

    _scrape(client)  # the app's streaks: cached by group
    with factory() as session:
        models = read_models(session)
        warm = client.app.state.exporter.streaks.read(session, models)  # type: ignore[attr-defined]
        objectives = {m.id: m.objectives for m in models}
        keys = read_recent_keys(session)
        sa.event.listen(engine, "before_cursor_execute", record)
        try:
            cold = StreakCollector(factory).read(session, models)
        finally:
            sa.event.remove(engine, "before_cursor_execute", record)
        by_key = read_outcomes(session, keys, objectives)
        whole = read_outcomes(session, keys, objectives, whole_shard=True)
        session.rollback()
    assert len(keys) >= 16 and len(bound) <= 4  # stamps, keys, outcomes (+ BEGIN)
    assert max(bound) < len(keys)  # by key: 3 bound values a window
    assert whole == by_key and len(by_key) == len(keys)
    assert cold == warm and cold[names.DRIFT_STREAK]


def test_a_recomputed_window_is_read_again(client: TestClient) -> None:
    """A changed objective (new outcomes for every window) and a late batch in an old
    window (recomputed) both reach the streaks at the next scrape."""
    feed = Feed.existing(client)
    r = client.patch(
        f"/v1/models/{MODEL}", json={"sla": [{**OBJECTIVE, "target": 0.1}]}, headers=ADMIN
    )
    assert r.status_code == 200, r.text
    feed.drain()
    samples = _scrape(client)
    assert _get(samples, names.SLA_BREACH_STREAK, model=MODEL, segment="eu", **RECALL) == 0
    # a new target keeps the series: same labels, new value
    targets = {k: v for k, v in samples.items() if k[0] == names.SLA_TARGET}
    assert targets == {
        (names.SLA_TARGET, frozenset({"model": MODEL, **RECALL_TARGET}.items())): 0.1
    }
    assert _streaks(samples, "eu") == _count_from_history(feed, "eu")
    # hour 9 was stable: a late batch with shifted scores flags it, the streak reads 6
    feed.post(9, separation=0.0, n=3000)
    feed.drain()
    samples = _scrape(client)
    assert _get(samples, names.DRIFT_STREAK, model=MODEL, segment="eu", kind="likelihood") == 6
    assert _streaks(samples, "eu") == _count_from_history(feed, "eu")


def test_outcomes_are_extracted_from_any_stored_document_shape(client: TestClient) -> None:
    """The SQL extraction of read_outcomes gives what the stored documents say:
    raised, not raised, or untested (no test, reference window, no document)."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    metric = "calibrated_f1@t=0.3"  # a threshold suffix in the JSON path
    docs: list[dict[str, Any]] = [
        {"drift": {"prior": {"flag": True}, "likelihood": {"flag": False}},
         "metrics": {"recall": 0.3, metric: 0.9},
         "intervals": {"recall": {"lower": 0.2, "upper": 0.4}}},
        {"drift": {"prior": {"flag": None}, "likelihood": {"flag": True}},
         "metrics": {"recall": None}, "intervals": None},
        {"drift": {"verdict": "reference"}, "metrics": {}, "intervals": {}},
        {"drift": None, "metrics": {"recall": 0.9},
         "intervals": {"recall": {"lower": 0.85, "upper": 0.95}}},
    ]  # fmt: skip
    objectives = (Objective("recall", ">=", 0.6), Objective(metric, "<=", 0.5))
    keys = []
    with client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        model_id = session.scalar(sa.select(Model.id).where(Model.name == MODEL))
        assert model_id is not None
        for i, doc in enumerate(docs):
            key = (model_id, "eu", start + timedelta(hours=i), start)
            keys.append(key)
            session.add(
                WindowAggregate(
                    model_id=key[0],
                    segment=key[1],
                    window_start=key[2],
                    n=0,
                    positives=0,
                    confusion=[],
                    version=1,
                    dirty=False,
                    created_at=start,
                    updated_at=start,
                )
            )
            session.flush()
            session.add(
                WindowMetrics(
                    model_id=key[0],
                    segment=key[1],
                    window_start=key[2],
                    aggregate_version=1,
                    computed_at=key[3],
                    status="fresh",
                    reasons=None,
                    curves=None,
                    detail_version=1,  # the intervals are of the metrics' data
                    detail_computed_at=key[3],
                    **doc,
                )
            )
        session.flush()
        got = read_outcomes(session, keys, {model_id: objectives})
        session.rollback()
    expected = [
        window_outcomes(objectives, flags, doc["metrics"], doc["intervals"] or {})
        for flags, doc in zip(
            [(True, False), (None, True), (None, None), (None, None)], docs, strict=True
        )
    ]
    assert [got[k] for k in keys] == expected
    assert [o.breached for o in expected] == [
        (True, True),
        (None, None),
        (None, None),
        (False, None),
    ]
