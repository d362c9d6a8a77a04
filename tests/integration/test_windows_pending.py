"""Window status through the real app: pending until the worker ran, fresh after, and
pending again (with the older result) when a batch arrives; SQLite and Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from _read_support import drain, iso
from builders import sample

from app.statuses import DriftStatus
from app.timegrid import window_start


def test_pending_then_fresh_then_pending_again(api: Any) -> None:
    api.create_model("fraud", pi0=0.1, n_bins=500)
    token = api.create_key("fraud", ("ingest", "read"))
    headers = api.bearer(token)
    hour = window_start(datetime.now(UTC) - timedelta(hours=5), "1h")
    rng = np.random.default_rng(3)

    def post(n: int) -> None:
        scores, labels = sample(rng, n, 0.3)
        body = {
            "timestamp": iso(hour + timedelta(minutes=1)),
            "scores": scores.tolist(),
            "labels": labels.tolist(),
        }
        assert api.post_batch("fraud", token, body).status_code == 202

    def window() -> dict[str, Any]:
        r = api.client.get("/v1/models/fraud/windows", params={"from": iso(hour)}, headers=headers)
        assert r.status_code == 200, r.text
        (only,) = r.json()["windows"]
        return dict(only)

    post(300)
    w = window()
    assert (w["status"], w["metrics"], w["drift"], w["computed_at"]) == ("pending", {}, None, None)
    assert w["n"] == 300

    assert drain(api.client) == 1
    fresh = window()
    assert fresh["status"] == "fresh"
    assert fresh["metrics"]["prior"] == fresh["prior"]
    assert fresh["drift"]["status"] == DriftStatus.NO_REFERENCE  # none configured

    post(100)
    again = window()
    assert again["status"] == "pending"
    assert again["n"] == 400
    assert again["metrics"] == fresh["metrics"]  # the older result, marked by its version
    assert again["aggregate_version"] == fresh["aggregate_version"]

    drain(api.client)
    latest = window()
    assert latest["status"] == "fresh"
    assert latest["aggregate_version"] == fresh["aggregate_version"] + 1
    assert latest["metrics"]["prior"] == latest["prior"]
