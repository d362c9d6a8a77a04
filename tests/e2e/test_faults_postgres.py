"""Fault suite: real ``priorwatch serve`` and ``priorwatch worker`` processes on a
PostgreSQL cluster of their own (tests/e2e/_pg_cluster.py), through faults.

Each scenario posts seeded batches over HTTP, every one retried with the same
``Idempotency-Key`` until it is accepted (202), as a client should after a
503, a 409 or a broken connection; a fault strikes in the middle; the
scenario ends when every window is fresh, with every accepted row counted
exactly once: the stored window ``n`` and ``positives`` are the sums of the
accepted batches, and the batch table holds each accepted key once.

Scenarios: the cluster stopped and restarted under load; the whole cluster
frozen (SIGSTOP) under load, then thawed; a worker killed (SIGKILL) while
windows are being computed; the API killed (SIGKILL) while batches arrive; a
poison delta (sums the fold cannot hold) among other models' windows.
Slow clients and a frozen database (at the end): slow bodies in flight under
load, and a freeze answered within the deadline counted from the body's end.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import orjson
import pytest
import sqlalchemy as sa
from _e2e_support import (
    HTTP_TIMEOUT,
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
from _pg_cluster import Cluster, remove_cluster, start_cluster
from _slow_http import SlowRequest
from sqlalchemy.orm import Session

from app.db.models import BatchDelta, QuarantinedDelta

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FAULT_ENV = {
    "PRIORWATCH_REQUEST_DEADLINE_SECONDS": "3",
    "PRIORWATCH_DATABASE_CONNECT_TIMEOUT_SECONDS": "2",
    "PRIORWATCH_DATABASE_POOL_TIMEOUT_SECONDS": "2",
    "PRIORWATCH_DATABASE_RETRY_AFTER_SECONDS": "1",
    "PRIORWATCH_WORKER_LEASE_SECONDS": "3",
    "PRIORWATCH_WORKER_BACKOFF_MAX_SECONDS": "1",
}
"""Short bounds, so that each fault is felt and over within seconds."""
TRANSPORT_ERROR = "transport-error"
"""What :class:`Load` counts for an attempt without an HTTP answer (refused, reset)."""
RETRY_SECONDS = 90.0
"""Bound of the retries of one batch (the longest fault plus a restart)."""
FRESH_SECONDS = 90.0
MODEL = "faults"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    own = start_cluster(free_port())
    try:
        yield own
    finally:
        remove_cluster(own)


@pytest.fixture
def database(cluster: Cluster) -> str:
    """A fresh database of the cluster, migrated by ``priorwatch migrate`` in :func:`deploy`."""
    return cluster.create_database(f"priorwatch_faults_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def clients() -> Iterator[list[httpx.Client]]:
    """HTTP clients of the test, closed after it (also after a failure)."""
    opened: list[httpx.Client] = []
    yield opened
    for client in opened:
        client.close()


@dataclass
class Deployment:
    """The processes of one scenario: the API on ``port`` and its workers."""

    processes: Processes
    env: dict[str, str]
    port: int
    server: Process
    workers: list[Process] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_server(self, name: str = "serve") -> Process:
        self.server = self.processes.start(name, ["serve", "--port", str(self.port)], self.env)
        wait_ready(self.base, self.processes)
        return self.server

    def start_worker(self, name: str) -> Process:
        worker = self.processes.start(name, ["worker"], self.env)
        self.workers.append(worker)
        return worker


def deploy(processes: Processes, database: str, workers: int = 1) -> Deployment:
    env = process_env(database, **FAULT_ENV)
    processes.run("migrate", ["migrate"], env)
    port = free_port()
    deployment = Deployment(processes, env, port, server=None)  # type: ignore[arg-type]
    deployment.start_server()
    for i in range(workers):
        deployment.start_worker(f"worker-{i}")
    return deployment


@dataclass(frozen=True)
class Planned:
    key: str
    body: bytes
    window: str
    n: int
    positives: int


@dataclass
class Load:
    """Seeded batches over ``windows``, posted in order, each retried until 202."""

    user: UserPath
    planned: list[Planned]
    hold_at: int = 0
    """After this many batches the load waits for :attr:`resume` (0: never)."""
    resume: threading.Event = field(default_factory=threading.Event)
    accepted: dict[str, dict[str, object]] = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    before_send: Callable[[int], None] | None = None
    """Called in the load's thread before batch ``i`` is first sent."""

    @classmethod
    def plan(
        cls, user: UserPath, windows: int, batches: int, rows: int, rng: np.random.Generator
    ) -> Load:
        planned = []
        for b in range(batches):
            offset = b % windows
            scores, labels = simulate(rng, rows, 0.2, 3.0)
            at = user.start(offset) + timedelta(minutes=1 + b % 50)
            body = orjson.dumps(
                {"timestamp": iso(at), "scores": scores.tolist(), "labels": labels.tolist()}
            )
            planned.append(
                Planned(
                    str(uuid.uuid4()),
                    body,
                    iso(user.start(offset)),
                    int(labels.size),
                    int(labels.sum()),
                )
            )
        return cls(user, planned, hold_at=batches // 3)

    def count(self, answer: str) -> int:
        with self.lock:
            return self.answers[answer]

    @property
    def done(self) -> int:
        with self.lock:
            return len(self.accepted)

    def _post_until_accepted(self, batch: Planned) -> None:
        deadline = time.monotonic() + RETRY_SECONDS
        while time.monotonic() < deadline:
            try:
                r = self.user.send(batch.body, batch.key)
                answer = str(r.status_code)
            except httpx.TransportError:
                r, answer = None, TRANSPORT_ERROR
            with self.lock:
                self.answers[answer] += 1
                if r is not None and r.status_code == 202:
                    self.accepted[batch.key] = r.json()
                    return
            if r is not None and r.status_code not in (409, 503):
                self.failures.append(f"{batch.key}: {r.status_code} {r.text[:300]}")
                return
            time.sleep(0.2)
        self.failures.append(f"{batch.key}: not accepted within {RETRY_SECONDS:.0f} s")

    def run(self) -> None:
        for i, batch in enumerate(self.planned):
            if i == self.hold_at and not self.resume.wait(RETRY_SECONDS):
                self.failures.append("never resumed")
            if self.before_send is not None:
                self.before_send(i)
            self._post_until_accepted(batch)
            if self.failures:
                return

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="load", daemon=True)
        thread.start()
        return thread


def _user(http: httpx.Client, windows: int) -> UserPath:
    first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=windows)
    return UserPath(http, MODEL, first, timedelta(hours=1))


def _finish(thread: threading.Thread, load: Load, deployment: Deployment) -> None:
    thread.join(RETRY_SECONDS * 2)
    assert not thread.is_alive(), "the load did not finish"
    assert not load.failures, load.failures
    assert load.done == len(load.planned)
    deployment.processes.check_alive()


def assert_counted_once(load: Load, deployment: Deployment, database: str) -> None:
    """Every window fresh, holding exactly the accepted batches (n, positives, keys)."""
    user = load.user
    windows = sorted({p.window for p in load.planned})
    reader = UserPath(
        httpx.Client(base_url=deployment.base, timeout=HTTP_TIMEOUT), MODEL, user.first, user.length
    )
    reader.token = user.token
    try:
        latest = reader.wait_all_fresh(len(windows), deployment.processes, (None,))[None]
    finally:
        reader.http.close()
    expected = {w: (0, 0) for w in windows}
    for p in load.planned:
        assert p.key in load.accepted
        n, positives = expected[p.window]
        expected[p.window] = (n + p.n, positives + p.positives)
    assert {w["start"]: (w["n"], w["positives"]) for w in latest} == expected
    engine = sa.create_engine(database)
    try:
        with engine.connect() as conn:
            keys = conn.execute(sa.text("SELECT idempotency_key FROM batch")).scalars().all()
            stored = conn.execute(
                sa.text("SELECT segment, sum(n), sum(positives) FROM window_aggregate GROUP BY 1")
            ).all()
    finally:
        engine.dispose()
    assert sorted(keys) == sorted(load.accepted)  # each accepted key once, nothing else
    total_n = sum(p.n for p in load.planned)
    total_pos = sum(p.positives for p in load.planned)
    assert [(s, int(n), int(pos)) for s, n, pos in stored] == [("*", total_n, total_pos)]


def _one_line_failures(process: Process) -> None:
    text = process.log_path.read_text(errors="replace")
    assert "Traceback" not in text, process.log()


def _register(deployment: Deployment, windows: int, clients: list[httpx.Client]) -> UserPath:
    http = httpx.Client(base_url=deployment.base, timeout=HTTP_TIMEOUT)
    clients.append(http)
    user = _user(http, windows)
    user.register(n_bins=500)
    return user


def test_postgres_stopped_and_restarted_under_load(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    deployment = deploy(processes, database)
    user = _register(deployment, 3, clients)
    load = Load.plan(user, windows=3, batches=36, rows=300, rng=np.random.default_rng(901))
    thread = load.start()
    wait_until(lambda: load.done == load.hold_at, "the first batches", RETRY_SECONDS, processes)
    cluster.stop("fast")
    load.resume.set()
    try:
        wait_until(lambda: load.count("503") >= 3, "503 answers", RETRY_SECONDS, processes)
        with httpx.Client(base_url=deployment.base, timeout=HTTP_TIMEOUT) as probe:
            assert probe.get("/healthz").status_code == 200
            r = probe.get("/readyz")
            assert r.status_code == 503 and "retry-after" in r.headers
    finally:
        cluster.start()
    _finish(thread, load, deployment)
    assert_counted_once(load, deployment, database)
    assert "database unavailable on POST" in deployment.server.log_path.read_text()
    _one_line_failures(deployment.server)
    for worker in deployment.workers:
        _one_line_failures(worker)


def test_a_frozen_cluster_answers_503_in_bounded_time_then_recovers(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    deployment = deploy(processes, database)
    user = _register(deployment, 3, clients)
    load = Load.plan(user, windows=3, batches=30, rows=300, rng=np.random.default_rng(902))
    thread = load.start()
    wait_until(lambda: load.done == load.hold_at, "the first batches", RETRY_SECONDS, processes)
    frozen = cluster.freeze()
    load.resume.set()
    try:
        with httpx.Client(base_url=deployment.base, timeout=HTTP_TIMEOUT) as probe:
            r = probe.get("/readyz")  # would hang until the client gives up
            assert r.status_code == 503, r.text
            assert "retry-after" in r.headers
        wait_until(lambda: load.count("503") >= 2, "503 answers", RETRY_SECONDS, processes)
    finally:
        cluster.thaw(frozen)
    _finish(thread, load, deployment)
    assert_counted_once(load, deployment, database)


def test_a_worker_killed_while_computing_loses_and_doubles_nothing(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    deployment = deploy(processes, database, workers=0)
    user = _register(deployment, 8, clients)
    load = Load.plan(user, windows=8, batches=16, rows=2000, rng=np.random.default_rng(903))
    load.resume.set()
    load.run()
    assert not load.failures, load.failures
    victim = deployment.start_worker("victim")

    def some_fresh() -> bool:
        return any(w["status"] == "fresh" for w in user.windows())

    wait_until(some_fresh, "the victim computed a window", RETRY_SECONDS, processes)
    victim.proc.kill()
    victim.proc.wait(30)
    deployment.workers.remove(victim)
    processes.started.remove(victim)
    deployment.start_worker("survivor")
    assert_counted_once(load, deployment, database)


def test_the_api_killed_mid_batch_loses_and_doubles_nothing(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    deployment = deploy(processes, database)
    user = _register(deployment, 2, clients)
    load = Load.plan(user, windows=2, batches=30, rows=20000, rng=np.random.default_rng(904))
    victim = deployment.server.proc

    def kill_soon_after_sending(i: int) -> None:
        # a few milliseconds into the batch after the hold: most likely while it is
        # being stored; if it was already stored, the next batch finds the API gone,
        # so the client notices either way, however fast the API is
        if i == load.hold_at + 1:
            threading.Timer(0.005, victim.kill).start()

    load.before_send = kill_soon_after_sending
    thread = load.start()
    wait_until(lambda: load.done == load.hold_at, "the first batches", RETRY_SECONDS, processes)
    load.resume.set()
    victim.wait(30)
    processes.started.remove(deployment.server)
    wait_until(
        lambda: load.count(TRANSPORT_ERROR) > 0, "the client notices", RETRY_SECONDS, processes
    )
    deployment.start_server("serve-again")
    _finish(thread, load, deployment)
    assert_counted_once(load, deployment, database)


POISON_LOG_LOSS = 1e300
"""A log loss sum past 2^896: the fold's fixed-point sums cannot hold it."""


def _poison_delta(database: str, batch_id: str) -> None:
    """Write the fault around the API (ingestion refuses such sums): the delta of
    ``batch_id`` claims a log loss sum no rows can have."""
    engine = sa.create_engine(database)
    try:
        with Session(engine) as session, session.begin():
            delta = session.scalars(
                sa.select(BatchDelta).where(BatchDelta.batch_id == uuid.UUID(batch_id))
            ).one()
            assert delta.sums is not None
            sums = delta.sums.copy()
            sums[3] = POISON_LOG_LOSS  # (positives, negatives, brier, log loss, ...)
            delta.sums = sums
    finally:
        engine.dispose()


def _refused_poison(user: UserPath) -> None:
    """The poison through the API: a histogram batch whose log loss sum overflows the
    fold. Ingestion refuses it (422 naming the field) and stores nothing."""
    positives, negatives = {"bins": [400], "counts": [3]}, {"bins": [10], "counts": [5]}
    sums = {"brier_sum": 1.0, "log_loss_sum": 5e269, "score_sum_positive": 2.4,
            "score_sum_negative": 0.5}  # fmt: skip
    body = {
        "timestamp": iso(user.start(0) + timedelta(minutes=5)),
        "histogram": {"positives": positives, "negatives": negatives, "sums": sums},
    }
    r = user.send(orjson.dumps(body), str(uuid.uuid4()))
    assert r.status_code == 422, r.text
    assert [e["field"] for e in r.json()["errors"]] == ["histogram.sums.log_loss_sum"]


def test_a_poison_delta_stalls_no_bystander_window(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    """Before the quarantine, folding the poison raised in the claim: its whole group
    rolled back and was claimed again forever, so other models' windows in that
    group stayed pending (with 1 or 2 workers). Now the poison is quarantined and
    every other window goes fresh; the victim's window too, without it."""
    deployment = deploy(processes, database, workers=0)
    http = httpx.Client(base_url=deployment.base, timeout=HTTP_TIMEOUT)
    clients.append(http)
    first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    users = [
        UserPath(http, name, first, timedelta(hours=1))
        for name in (MODEL, "bystander-1", "bystander-2", "bystander-3")
    ]
    loads = []
    for i, user in enumerate(users):
        user.register(n_bins=500)
        load = Load.plan(user, windows=2, batches=8, rows=300, rng=np.random.default_rng(905 + i))
        load.hold_at = 4
        loads.append(load)
    victim, bystanders = users[0], users[1:]
    _refused_poison(victim)
    threads = [load.start() for load in loads]
    for load in loads:
        wait_until(lambda load=load: load.done == 4, "half the batches", RETRY_SECONDS, processes)
    poisoned = loads[0].planned[0]
    _poison_delta(database, str(loads[0].accepted[poisoned.key]["batch_id"]))
    for i in range(2):
        deployment.start_worker(f"worker-{i}")
    for load in loads:
        load.resume.set()  # the second half arrives while the poison waits in the queue
    for thread, load in zip(threads, loads, strict=True):
        _finish(thread, load, deployment)

    started = time.monotonic()  # every batch accepted
    fresh_after = {}
    latest = {}
    for user in [*bystanders, victim]:
        latest[user.model] = user.wait_all_fresh(2, processes, (None,))[None]
        fresh_after[user.model] = round(time.monotonic() - started, 1)
    for user, load in zip(users, loads, strict=True):
        expected = {w: [0, 0] for w in sorted({p.window for p in load.planned})}
        for p in load.planned:
            if p is not poisoned:
                expected[p.window][0] += p.n
                expected[p.window][1] += p.positives
        got = {w["start"]: [w["n"], w["positives"]] for w in latest[user.model]}
        assert got == expected, user.model
        errors = {w["start"]: w.get("error") for w in latest[user.model]}
        if user is victim:
            assert "1 delta quarantined, not counted" in errors.pop(poisoned.window)
        assert set(errors.values()) == {None}, (user.model, errors)

    def rewindowed() -> bool:  # 503 (the read's deadline, on a busy machine) is retried
        r = http.get(
            f"/v1/models/{MODEL}/windows",
            params={"granularity": "1d", "from": iso(first)},
            headers=victim.key,
        )
        assert r.status_code in (200, 503), r.text  # never 500
        counted = sum(p.n for p in loads[0].planned if p is not poisoned)
        return r.status_code == 200 and sum(w["n"] for w in r.json()["windows"]) == counted

    wait_until(rewindowed, "the victim's windows merged by day", RETRY_SECONDS, processes)

    engine = sa.create_engine(database)
    try:
        with engine.connect() as conn:
            keys = conn.execute(sa.text("SELECT idempotency_key FROM batch")).scalars().all()
            counted = conn.execute(sa.text("SELECT sum(n) FROM window_aggregate")).scalar_one()
            quarantined = conn.execute(sa.select(QuarantinedDelta.n)).scalars().all()
    finally:
        engine.dispose()
    accepted = [key for load in loads for key in load.accepted]
    assert sorted(keys) == sorted(accepted)  # each accepted batch once, nothing else
    duplicates = len(keys) - len(set(keys))
    rows_accepted = sum(p.n for load in loads for p in load.planned)
    assert quarantined == [poisoned.n]
    assert int(counted) + poisoned.n == rows_accepted  # counted once, or quarantined
    exposition = http.get("/metrics").text
    assert f'priorwatch_deltas_quarantined_total{{model="{MODEL}"}} 1.0' in exposition
    print(
        "poison-delta report:",
        {
            "faults_injected": ["histogram sums 5e269 via the API (refused, 422)",
                                "log_loss_sum 1e300 written into one delta"],
            "rows_accepted": rows_accepted,
            "rows_counted": int(counted),
            "rows_quarantined": poisoned.n,
            "duplicates": duplicates,
            "every_window_fresh_after_the_last_batch_s": fresh_after,
        },
    )  # fmt: skip


# --- slow clients and a frozen database: every answer bounded, nothing held ---------


def _slow_head(deployment: Deployment, token: str, batch: Planned) -> SlowRequest:
    """A batch whose headers are sent, authorised (``100 Continue``), body not yet sent."""
    request = SlowRequest(deployment.port)
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Content-Length": str(len(batch.body)),
        "Idempotency-Key": batch.key,
    }
    request.send_head("POST", f"/v1/models/{MODEL}/batches", headers, expect_continue=True)
    assert request.read_interim_or_answer() == 100
    return request


def _new_keys(user: UserPath, count: int) -> list[str]:
    tokens = []
    for _ in range(count):
        r = user.http.post(
            f"/v1/models/{MODEL}/keys", json={"scopes": ["ingest"]}, headers=user.admin
        )
        assert r.status_code == 201, r.text
        tokens.append(str(r.json()["token"]))
    return tokens


def report_counts(scenario: str, faults: str, load: Load, database: str) -> None:
    """The scenario's closing line: faults, rows accepted and counted, duplicate keys."""
    engine = sa.create_engine(database)
    try:
        with engine.connect() as conn:
            counted = conn.execute(sa.text("SELECT sum(n) FROM window_aggregate")).scalar_one()
            duplicates = conn.execute(
                sa.text("SELECT count(*) - count(DISTINCT idempotency_key) FROM batch")
            ).scalar_one()
    finally:
        engine.dispose()
    accepted = sum(p.n for p in load.planned if p.key in load.accepted)
    print(
        f"\n[fault report] {scenario}: faults injected: {faults}; rows accepted: {accepted}; "
        f"rows counted: {int(counted)}; duplicates: {int(duplicates)}"
    )
    assert accepted == int(counted) and duplicates == 0


SLOW_BODIES = 30


def test_slow_bodies_under_load_hold_no_connection(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    deployment = deploy(processes, database)
    user = _register(deployment, 3, clients)
    load = Load.plan(user, windows=3, batches=24, rows=300, rng=np.random.default_rng(905))
    slow = Load.plan(user, windows=3, batches=SLOW_BODIES, rows=300, rng=np.random.default_rng(906))
    thread = load.start()
    wait_until(lambda: load.done == load.hold_at, "the first batches", RETRY_SECONDS, processes)
    opened = []
    try:
        # each slow body from its own key: every one authorised from the database
        for token, batch in zip(_new_keys(user, SLOW_BODIES), slow.planned, strict=True):
            request = _slow_head(deployment, token, batch)
            opened.append(request)
            request.send_body(batch.body[:100])
        load.resume.set()  # the other batches go on while the slow bodies trickle
        for request, batch in zip(opened, slow.planned, strict=True):
            request.send_body(batch.body[100:200])
        wait_until(
            lambda: load.done == len(load.planned), "the other batches", RETRY_SECONDS, processes
        )
        assert load.count("503") == 0, load.answers  # the pool was never exhausted
        with httpx.Client(base_url=deployment.base, timeout=HTTP_TIMEOUT) as probe:
            assert probe.get("/readyz").status_code == 200
        for request, batch in zip(opened, slow.planned, strict=True):
            request.send_body(batch.body[200:], last=True)
        for request, batch in zip(opened, slow.planned, strict=True):
            answer = request.answer()
            assert answer.status == 202, answer.body
            slow.accepted[batch.key] = orjson.loads(answer.body)
    finally:
        for request in opened:
            request.close()
    _finish(thread, load, deployment)
    load.planned += slow.planned
    load.accepted.update(slow.accepted)
    assert_counted_once(load, deployment, database)
    report_counts("slow bodies", f"{SLOW_BODIES} slow bodies in flight", load, database)


FROZEN_DEADLINE_SECONDS = float(FAULT_ENV["PRIORWATCH_REQUEST_DEADLINE_SECONDS"])


def test_a_frozen_database_answers_503_within_the_deadline_of_the_body_end(
    processes: Processes, cluster: Cluster, database: str, clients: list[httpx.Client]
) -> None:
    deployment = deploy(processes, database)
    user = _register(deployment, 3, clients)
    load = Load.plan(user, windows=3, batches=24, rows=300, rng=np.random.default_rng(907))
    thread = load.start()
    wait_until(lambda: load.done == load.hold_at, "the first batches", RETRY_SECONDS, processes)
    upload = _slow_head(deployment, user.token, load.planned[-1])  # the load sends it again
    body = load.planned[-1].body
    frozen = cluster.freeze()
    load.resume.set()
    try:
        # a request that the database does not answer gets 503 within the deadline;
        # the client's own timeout would end one that hangs
        bound = httpx.Timeout(FROZEN_DEADLINE_SECONDS + 10, connect=5.0)
        with httpx.Client(base_url=deployment.base, timeout=bound) as probe:
            planned = load.planned[-2]
            batch_headers = {**user.key, "Content-Type": "application/json",
                             "Idempotency-Key": planned.key}  # fmt: skip
            answers = [
                probe.get("/readyz"),
                probe.get("/v1/models", headers=user.admin),
                probe.get(f"/v1/models/{MODEL}/windows", headers=user.key),
                probe.post(
                    f"/v1/models/{MODEL}/batches", content=planned.body, headers=batch_headers
                ),
            ]
            for r in answers:
                assert r.status_code == 503, r.text
                assert r.headers["content-type"].startswith("application/problem+json")
                assert int(r.headers["retry-after"]) > 0
            assert probe.get("/healthz").status_code == 200
        # a slow upload is no outage: the deadline starts when its body has arrived
        pieces = [body[i : i + len(body) // 4 + 1] for i in range(0, len(body), len(body) // 4 + 1)]
        for piece in pieces[:-1]:
            upload.send_body(piece)
            time.sleep(FROZEN_DEADLINE_SECONDS / 2)
        assert not upload.answer_waiting()  # longer than the deadline, still no answer
        upload.send_body(pieces[-1], last=True)
        answer = upload.answer()
        assert answer.status == 503 and int(answer.headers["retry-after"]) > 0
    finally:
        upload.close()
        cluster.thaw(frozen)
    _finish(thread, load, deployment)
    assert_counted_once(load, deployment, database)
    report_counts("frozen database", "cluster frozen (SIGSTOP) under load", load, database)
