"""The client against a real ``priorwatch serve`` behind a proxy that refuses and drops.

The proxy (tests/e2e/_fault_proxy.py) answers some batch POSTs 503/429/409
itself and forwards others but loses their answers. The client must retry
the first (nothing was stored) and retry the second with the same
Idempotency-Key (stored once: the service answers a replay). After
``flush`` the stored counts equal the rows logged, per window and segment:
nothing lost, nothing counted twice. Brier score and log loss, computed by
the worker from the client's score sums, equal ``evaluate`` on the raw rows.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from _e2e_support import (
    FRESH_SECONDS,
    HTTP_TIMEOUT,
    Processes,
    UserPath,
    assert_server_stopped_cleanly,
    free_port,
    iso,
    process_env,
    simulate,
    wait_ready,
    wait_until,
)
from _fault_proxy import FaultProxy

from app.metrics import evaluate
from priorwatch_client import Client, RetryPolicy

MODEL = "fraud-scorer"
SEGMENTS = ("eu", "us")
HOURS = 3
CALLS_PER_HOUR = 24
ROWS_PER_CALL = 2_000
SEED = 20261127


def test_counts_are_exact_through_refusals_and_lost_answers(processes: Processes) -> None:
    env = process_env(f"sqlite:///{processes.workdir / 'priorwatch.db'}")
    processes.run("migrate", ["migrate"], env)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = processes.start("serve", ["serve", "--port", str(port)], env)
    wait_ready(base, processes)
    proxy = FaultProxy(port, random.Random(SEED), refuse=0.25, drop=0.2).start()
    try:
        with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT) as http:
            first = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
            first -= timedelta(hours=HOURS + 1)
            user = UserPath(http, MODEL, first, timedelta(hours=1))
            user.register(segments=list(SEGMENTS))
            logged = _log_through_proxy(proxy, user, first)
            assert proxy.fates["refuse"] >= 10 and proxy.fates["drop"] >= 10, proxy.fates
            # every key whose answer was lost was answered as a replay later, once
            assert proxy.replays_relayed == len(proxy.dropped_keys)
            _check_stored(user, logged, processes)
    finally:
        proxy.stop()
    assert_server_stopped_cleanly(server)


def _log_through_proxy(
    proxy: FaultProxy, user: UserPath, first: datetime
) -> dict[tuple[int, str | None], list[Any]]:
    """Log the seeded rows through the proxy; the raw rows per (hour, segment or None)."""
    rng = np.random.default_rng(SEED)
    logged: dict[tuple[int, str | None], list[Any]] = {}
    fast = RetryPolicy(initial_s=0.01, max_delay_s=0.2, max_elapsed_s=120.0)
    with Client(
        f"http://127.0.0.1:{proxy.port}",
        user.token,
        MODEL,
        flush_rows=5 * ROWS_PER_CALL,  # many batches: several per window
        flush_interval_s=0.05,
        retry=fast,
        rng=random.Random(SEED),
    ) as pw:
        for call in range(HOURS * CALLS_PER_HOUR):
            hour = call % HOURS
            segment = (None, *SEGMENTS)[(call // HOURS) % 3]
            scores, labels = simulate(rng, ROWS_PER_CALL, 0.1, 2.0)
            at = first + timedelta(hours=hour, seconds=call)
            pw.log(scores, labels, timestamp=at, segment=segment)
            for key in ((hour, None), (hour, segment)) if segment else ((hour, None),):
                logged.setdefault(key, []).append((scores, labels))
            if call % 4 == 3:
                pw.flush()  # more, smaller batches: more faults to get through
        pw.flush()
    return logged


def _check_stored(
    user: UserPath, logged: dict[tuple[int, str | None], list[Any]], processes: Processes
) -> None:
    for segment in (None, *SEGMENTS):
        windows = user.windows(segment)
        got = {w["start"]: (w["n"], w["positives"]) for w in windows}
        expected = {
            iso(user.start(h)): (
                sum(s.size for s, _ in logged[(h, segment)]),
                sum(int(y.sum()) for _, y in logged[(h, segment)]),
            )
            for h in range(HOURS)
        }
        assert got == expected, segment

    def fresh() -> bool:
        return all(w["status"] == "fresh" for w in user.windows(None))

    wait_until(fresh, "every window is fresh", FRESH_SECONDS, processes)
    for w in user.windows(None):
        h = next(h for h in range(HOURS) if iso(user.start(h)) == w["start"])
        scores = np.concatenate([s for s, _ in logged[(h, None)]])
        labels = np.concatenate([y for _, y in logged[(h, None)]])
        reference = evaluate(scores, labels, threshold=0.5)
        for name in ("brier", "log_loss", "recall", "precision"):
            assert w["metrics"][name] == pytest.approx(reference[name], rel=1e-9), name
