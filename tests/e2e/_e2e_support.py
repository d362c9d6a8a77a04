"""Support of the end-to-end tests: real ``priorwatch`` processes and a user's HTTP path.

Processes (:class:`Processes`) are started from the installed ``priorwatch``
command in a temporary directory (no ``.env`` of the source tree), with their
output in a log file each. Every wait is bounded (:func:`wait_until`).

The data are seeded binormal-logit scores: the logit of a negative is
Normal(-2, 1), of a positive Normal(-2 + separation, 1). At the threshold 0.5
(logit 0) the population rates are closed-form (:func:`population_rates`), so
the tests can compare what the service reports with the population values as
well as with ``app.metrics.evaluate`` on the raw data.

A :class:`Plan` lists windows and what happens in each: ``stable`` (the
reference behaviour), ``prior`` (only the class prior moves: P(s|y) is
unchanged) and ``likelihood`` (the positives' scores move: P(s|y) shifts,
the prior does not). :class:`UserPath` drives the HTTP API the way a client
does: register, create a key, post batches with an ``Idempotency-Key``, read.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families
from scipy import stats

from app.drift.simulation import shifted_logit_scores
from app.metrics import evaluate

Scores = npt.NDArray[np.float64]
Labels = npt.NDArray[np.int64]

ADMIN_TOKEN = "e2e-admin-token-0123456789abcdef"
START_SECONDS = 60.0
"""Bound of a process start (imports, migrations check, OPS cache warm-up)."""
FRESH_SECONDS = 90.0
"""Bound of the wait until every window is fresh."""
STOP_SECONDS = 30.0
"""Bound of a graceful stop after SIGTERM."""
HTTP_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
SUCCESS = re.compile(r'^INFO: .* HTTP/1\.1" 2\d\d ')
"""uvicorn's access-log line of a successful request (left out of the logs shown)."""

NEGATIVE_MU = -2.0
"""Logit mean of the negatives; a positive's is ``NEGATIVE_MU + separation``."""
THRESHOLD = 0.5
PI0 = 0.1
COST_RATIO = 0.7
PROBLEM_JSON = "application/problem+json"
VERDICTS = frozenset({"none", "prior", "likelihood", "both"})


# --- processes -----------------------------------------------------------------


def priorwatch_command(*args: str) -> list[str]:
    """The installed ``priorwatch`` console script (next to this interpreter) with ``args``."""
    exe = Path(sys.executable).with_name("priorwatch")
    found = str(exe) if exe.exists() else shutil.which("priorwatch")
    assert found, "the priorwatch command is not installed"
    return [found, *args]


def free_port() -> int:
    """A TCP port of 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PRIORWATCH_* but the database and admin token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIORWATCH_")}
    env["PRIORWATCH_DATABASE_URL"] = database_url
    env["PRIORWATCH_ADMIN_TOKEN"] = ADMIN_TOKEN
    env.update(extra)
    return env


@dataclass
class Process:
    """One started ``priorwatch`` process and its log file (stdout and stderr)."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self, tail: int = 8000) -> str:
        """The end of the log, without the access-log lines of successful requests."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        lines = [line for line in text.splitlines(keepends=True) if not SUCCESS.search(line)]
        return "".join(lines)[-tail:]

    def stop(self) -> int:
        """SIGTERM and wait (bounded) for the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} did not stop within {STOP_SECONDS:.0f} s of SIGTERM")

    def assert_clean_log(self) -> None:
        """Nothing went wrong in the process: no traceback, no error logged."""
        text = self.log_path.read_text(errors="replace")
        for marker in ("Traceback", "ERROR", "CRITICAL"):
            assert marker not in text, f"{self.name} logged {marker}:\n{self.log()}"


def assert_server_stopped_cleanly(server: Process) -> None:
    """SIGTERM: uvicorn's graceful shutdown (lifespan and worker thread stopped).

    uvicorn (>= 0.29) re-raises the captured signal once shut down, so the exit
    status is that of SIGTERM, as for any process a supervisor terminates
    (systemd counts it as a clean stop); 0 is accepted too.
    """
    code = server.stop()
    assert code in (0, -signal.SIGTERM), f"exit status {code}:\n{server.log()}"
    log = server.log_path.read_text(errors="replace")
    assert "Application shutdown complete" in log, server.log()
    assert "Finished server process" in log, server.log()
    server.assert_clean_log()


@dataclass
class Processes:
    """The processes of one test, started in ``workdir``; :meth:`kill_all` in teardown."""

    workdir: Path
    started: list[Process] = field(default_factory=list)

    def run(self, name: str, args: list[str], env: Mapping[str, str], status: int = 0) -> str:
        """Run a command to completion (bounded); fail unless it exits ``status``."""
        done = subprocess.run(
            priorwatch_command(*args),
            env=dict(env),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=START_SECONDS,
            check=False,
        )
        output = done.stdout + done.stderr
        assert done.returncode == status, f"{name} exited {done.returncode}:\n{output[-4000:]}"
        return output

    def start(self, name: str, args: list[str], env: Mapping[str, str]) -> Process:
        log_path = self.workdir / f"{name}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                priorwatch_command(*args),
                env=dict(env),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        process = Process(name, proc, log_path)
        self.started.append(process)
        return process

    def logs(self) -> str:
        return "\n".join(f"----- {p.name} (log tail)\n{p.log()}" for p in self.started)

    def check_alive(self) -> None:
        for p in self.started:
            code = p.proc.poll()
            if code is not None:
                pytest.fail(f"{p.name} exited with {code}:\n{self.logs()}")

    def kill_all(self) -> None:
        """Kill whatever still runs (teardown, also after a failure) and reap it."""
        for p in self.started:
            if p.proc.poll() is None:
                p.proc.kill()
        for p in self.started:
            p.proc.wait(STOP_SECONDS)


def wait_until(
    condition: Callable[[], bool], what: str, timeout: float, processes: Processes
) -> None:
    """Poll ``condition`` until true; fail after ``timeout`` s or when a process died."""
    deadline = time.monotonic() + timeout
    while True:
        processes.check_alive()
        if condition():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f} s: {what}\n{processes.logs()}")
        time.sleep(0.2)


def first_readyz_status(base_url: str, processes: Processes) -> int:
    """The status of ``GET /readyz`` once the server accepts connections (bounded wait)."""
    answers: list[int] = []

    def answered() -> bool:
        try:
            answers.append(httpx.get(f"{base_url}/readyz", timeout=2.0).status_code)
        except httpx.TransportError:
            return False
        return True

    wait_until(answered, f"{base_url}/readyz answers", START_SECONDS, processes)
    return answers[-1]


def wait_ready(base_url: str, processes: Processes) -> None:
    """Wait until ``GET /readyz`` answers 200 (the database is at the migrations' head)."""

    def ready() -> bool:
        try:
            return httpx.get(f"{base_url}/readyz", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(ready, f"{base_url}/readyz answers 200", START_SECONDS, processes)


# --- simulated data ------------------------------------------------------------


def simulate(
    rng: np.random.Generator, n: int, prior: float, separation: float
) -> tuple[Scores, Labels]:
    """``n`` seeded examples: labels Bernoulli(prior), scores sigmoid of the class's logit."""
    scores, labels = shifted_logit_scores(rng, n, prior, separation=separation, offset=NEGATIVE_MU)
    return scores, labels.astype(np.int64)


def population_rates(separation: float) -> tuple[float, float]:
    """(TPR, FPR) of the population at the threshold 0.5, i.e. logit >= 0 (closed form)."""
    return float(stats.norm.cdf(NEGATIVE_MU + separation)), float(stats.norm.cdf(NEGATIVE_MU))


def population_precision(separation: float, prior: float) -> float:
    """Precision of the population at ``prior`` (Bayes' rule on the closed-form rates)."""
    tpr, fpr = population_rates(separation)
    return prior * tpr / (prior * tpr + (1.0 - prior) * fpr)


def population_f1(separation: float, prior: float) -> float:
    precision = population_precision(separation, prior)
    recall, _ = population_rates(separation)
    return 2.0 * precision * recall / (precision + recall)


@dataclass(frozen=True)
class WindowPlan:
    """One window: its offset (in model windows) from the plan's first window, what moved."""

    offset: int
    kind: str  # "stable", "prior" or "likelihood"
    prior: float
    separation: float


@dataclass(frozen=True)
class Plan:
    """The windows of a scenario and how many rows each batch holds."""

    windows: tuple[WindowPlan, ...]
    batches_per_window: int
    rows_per_batch: int

    def of_kind(self, kind: str) -> list[WindowPlan]:
        return [w for w in self.windows if w.kind == kind]


def plan(
    kinds: list[tuple[int, str]],
    *,
    batches_per_window: int,
    rows_per_batch: int,
    stable_prior: float = 0.2,
    shifted_prior: float = 0.02,
    stable_separation: float = 3.0,
    shifted_separation: float = 1.5,
) -> Plan:
    """A :class:`Plan` from (offset, kind) pairs with the scenario's standard parameters."""
    params = {
        "stable": (stable_prior, stable_separation),
        "prior": (shifted_prior, stable_separation),
        "likelihood": (stable_prior, shifted_separation),
    }
    windows = tuple(WindowPlan(o, k, *params[k]) for o, k in kinds)
    return Plan(windows, batches_per_window, rows_per_batch)


# --- the HTTP path -------------------------------------------------------------


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class Posted:
    """A batch as the client sent it: body bytes, key, answer, raw data."""

    body: bytes
    key: str
    answer: dict[str, Any]
    scores: Scores
    labels: Labels
    segment: str | None


@dataclass
class UserPath:
    """A client of one model over HTTP: the admin token, a model key, what was posted."""

    http: httpx.Client
    model: str
    first: datetime
    """Start of the plan's first window (offset 0)."""
    length: timedelta
    token: str = ""
    posted: list[Posted] = field(default_factory=list)

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    @property
    def key(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self, offset: int) -> datetime:
        return self.first + offset * self.length

    def register(self, **fields: Any) -> dict[str, Any]:
        body = {
            "name": self.model,
            "window": "1h",
            "threshold": THRESHOLD,
            "pi0": PI0,
            "cost_ratio": COST_RATIO,
            **fields,
        }
        r = self.http.post("/v1/models", json=body, headers=self.admin)
        assert r.status_code == 201, r.text
        assert r.headers["location"].endswith(f"/v1/models/{self.model}")
        r = self.http.post(
            f"/v1/models/{self.model}/keys", json={"scopes": ["ingest", "read"]}, headers=self.admin
        )
        assert r.status_code == 201, r.text
        self.token = str(r.json()["token"])
        assert self.token.startswith("pw_")
        return dict(body)

    def send(self, body: bytes, key: str | None) -> httpx.Response:
        headers = {**self.key, "Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        return self.http.post(f"/v1/models/{self.model}/batches", content=body, headers=headers)

    def post_batch(
        self,
        at: datetime,
        scores: Scores,
        labels: Labels,
        segment: str | None = None,
        key: str | None = None,
    ) -> Posted:
        """Post one batch with ``key`` (default: a fresh UUID); it must be accepted (202)."""
        doc: dict[str, Any] = {
            "timestamp": iso(at),
            "scores": scores.tolist(),
            "labels": labels.tolist(),
        }
        if segment is not None:
            doc["segment"] = segment
        body = orjson.dumps(doc)
        key = key or str(uuid.uuid4())
        r = self.send(body, key)
        assert r.status_code == 202, r.text
        assert "idempotent-replayed" not in r.headers
        answer = dict(r.json())
        posted = Posted(body, key, answer, scores, labels, segment)
        self.posted.append(posted)
        return posted

    def post_plan(
        self, scenario: Plan, rng: np.random.Generator, segments: tuple[str, ...] = ()
    ) -> None:
        """Post every batch of ``scenario`` (segments, if any, taken in turn)."""
        step = self.length / (scenario.batches_per_window + 1)
        for w in scenario.windows:
            for b in range(scenario.batches_per_window):
                scores, labels = simulate(rng, scenario.rows_per_batch, w.prior, w.separation)
                segment = segments[b % len(segments)] if segments else None
                at = self.start(w.offset) + (b + 1) * step
                posted = self.post_batch(at, scores, labels, segment)
                assert posted.answer["window_start"] == iso(self.start(w.offset))
                assert posted.answer["count"] == scores.size

    def raw(self, offset: int, segment: str | None = None) -> tuple[Scores, Labels]:
        """The concatenated raw data posted into a window (of a segment, or all traffic)."""
        start = iso(self.start(offset))
        parts = [
            p
            for p in self.posted
            if p.answer["window_start"] == start and (segment is None or p.segment == segment)
        ]
        assert parts, f"nothing posted into {start}"
        return (
            np.concatenate([p.scores for p in parts]),
            np.concatenate([p.labels for p in parts]),
        )

    def expected(self, offset: int, segment: str | None = None) -> dict[str, float | None]:
        scores, labels = self.raw(offset, segment)
        return evaluate(scores, labels, threshold=THRESHOLD, pi0=PI0, cost_ratio=COST_RATIO)

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(f"/v1/models/{self.model}{path}", params=params, headers=self.key)
        assert r.status_code == 200, r.text
        return r.json()

    def windows(self, segment: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"from": iso(self.first)}
        if segment is not None:
            params["segment"] = segment
        return list(self.get("/windows", **params)["windows"])

    def wait_all_fresh(
        self, expected_windows: int, processes: Processes, segments: tuple[str | None, ...]
    ) -> dict[str | None, list[dict[str, Any]]]:
        """Poll GET /windows (bounded) until every window of every segment is fresh, its
        detail (intervals, curves) of the same data: under a backlog the worker computes a
        window's summary first and its detail after (docs/worker.md, "Tiered refresh")."""
        latest: dict[str | None, list[dict[str, Any]]] = {}

        def current(w: dict[str, Any]) -> bool:
            return w["status"] == "fresh" and bool((w["detail"] or {}).get("current"))

        def all_fresh() -> bool:
            for segment in segments:
                latest[segment] = self.windows(segment)
            return all(
                len(ws) == expected_windows and all(map(current, ws)) for ws in latest.values()
            )

        wait_until(all_fresh, "every window is fresh", FRESH_SECONDS, processes)
        return latest


# --- checks --------------------------------------------------------------------


def assert_problem(r: httpx.Response, status: int, problem: str, field: str | None = None) -> None:
    """An RFC 9457 problem of ``status`` and type ``problem``, naming ``field`` if given."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith(PROBLEM_JSON), r.headers
    doc = r.json()
    assert doc["type"] == f"urn:priorwatch:problem:{problem}", doc
    assert doc["status"] == status
    if field is not None:
        assert field in {e["field"] for e in doc["errors"]}, doc


def check_drift_directions(windows: list[dict[str, Any]], scenario: Plan) -> None:
    """Prior shift -> verdict "prior"; likelihood shift -> the likelihood flag (positives).

    The attribution of the AUC-PR change points the same way.
    """
    for w, p in zip(windows, scenario.windows, strict=True):
        drift = w["drift"]
        if p.kind == "prior":
            assert drift["verdict"] == "prior", drift
            assert (drift["prior"]["flag"], drift["likelihood"]["flag"]) == (True, False)
            assert drift["prior"]["p_value"] < 1e-6
            auc_pr = drift["attribution"]["auc_pr"]
            assert abs(auc_pr["prior"]) > 2 * abs(auc_pr["likelihood"]), auc_pr
            assert auc_pr["total"] < 0  # a rarer positive class lowers AUC-PR
        elif p.kind == "likelihood":
            assert drift["verdict"] == "likelihood", drift
            assert (drift["prior"]["flag"], drift["likelihood"]["flag"]) == (False, True)
            assert drift["likelihood"]["per_class"]["positive"]["flag"] is True
            auc_pr = drift["attribution"]["auc_pr"]
            assert abs(auc_pr["likelihood"]) > 2 * abs(auc_pr["prior"]), auc_pr
            assert auc_pr["likelihood"] < 0


Sample = Callable[..., float | None]


def scrape(http: httpx.Client) -> tuple[str, Sample]:
    """GET /metrics, parsed by prometheus_client; returns the text and a sample lookup.

    ``get(name, **labels)`` is the value of the sample with exactly those labels,
    None when absent. Every sample is unique, without timestamp and not NaN.
    """
    r = http.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, key
            assert s.timestamp is None and not math.isnan(s.value), key
            samples[key] = s.value

    def get(name: str, **labels: str) -> float | None:
        return samples.get((name, frozenset(labels.items())))

    return r.text, get
