"""Client throughput: rows/s through ``Client.log`` and bytes sent per million rows.

The client logs seeded numpy arrays of 1,000,000 (score, label) rows into a
10,000-bin model (the default resolution) and flushes; the service is an
in-memory stand-in (``httpx.MockTransport``) that answers the model's
metadata and acknowledges every batch, so the figures are the client's own
cost. Baselines in the same run, on the same arrays:

- ``np.histogram`` of the scores over the model's edges (one class only);
- the service's own work for a scores batch of those rows, JSON aside:
  ``histogram_counts`` plus ``ProbabilitySums.from_predictions``.

Bytes: the JSON bodies the client sent, against the body of one raw scores
batch of a million rows (what a client without aggregation would send).

Usage: ``python bench/bench_client.py [--rows 1000000] [--calls 20] [--windows 1]``.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import orjson
from _common import per_call

from app.metrics.binning import default_bin_edges, histogram_counts
from app.metrics.probability import ProbabilitySums
from priorwatch_client import Client

EDGES = default_bin_edges((0.5,))


class Service:
    """Answers the metadata and counts what the client sends."""

    def __init__(self) -> None:
        self.batches = 0
        self.bytes = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/bins"):
            return httpx.Response(200, json={"edges": EDGES.tolist()})
        if request.method == "GET":
            doc = {"name": "m", "window": "1h", "thresholds": [0.5], "segments": []}
            return httpx.Response(200, json={**doc, "pi0": 0.1, "n_bins": EDGES.size - 1})
        body = request.read()
        self.batches += 1
        self.bytes += len(body) + sum(len(k) + len(v) + 4 for k, v in request.headers.raw)
        return httpx.Response(202, json={"batch_id": "b", "count": 0})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--windows", type=int, default=1, help="windows the calls spread over")
    args = parser.parse_args()
    rng = np.random.default_rng(20261126)
    labels = rng.random(args.rows) < 0.01
    scores = 1.0 / (1.0 + np.exp(-(rng.normal(size=args.rows) * 2.0 + 4.0 * labels - 5.0)))

    service = Service()
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    with Client(
        "http://bench",
        "pw_bench",
        "m",
        transport=httpx.MockTransport(service),
        flush_interval_s=1.0,
        rng=random.Random(1),
    ) as pw:
        pw.log(scores[:10], labels[:10], timestamp=start)  # metadata fetched once, not timed
        pw.flush()
        sent_before = service.bytes
        t0 = time.perf_counter()
        for i in range(args.calls):
            at = start + timedelta(hours=i % args.windows, seconds=i)
            pw.log(scores, labels, timestamp=at)
        logged = time.perf_counter() - t0
        pw.flush()
        total = time.perf_counter() - t0
    rows = args.rows * args.calls
    sent = service.bytes - sent_before

    t_hist = per_call(lambda: np.histogram(scores, bins=EDGES), 5)
    t_service = per_call(
        lambda: (
            histogram_counts(scores, labels, EDGES),
            ProbabilitySums.from_predictions(scores, labels),
        ),
        5,
    )
    raw_body = len(
        orjson.dumps(
            {"timestamp": "2026-11-26T10:00:00Z", "scores": scores, "labels": labels.astype(int)},
            option=orjson.OPT_SERIALIZE_NUMPY,
        )
    )
    per_million = 1e6 / args.rows

    print(f"client: {args.calls} log calls of {args.rows:,} rows, {EDGES.size - 1:,} bins")
    print(f"  log           {rows / logged / 1e6:8.2f} M rows/s  (binning and sums, in the caller)")
    print(f"  log + flush   {rows / total / 1e6:8.2f} M rows/s  (until acknowledged)")
    print(f"  np.histogram  {args.rows / t_hist / 1e6:8.2f} M rows/s  (scores only, baseline)")
    print(f"  service bins  {args.rows / t_service / 1e6:8.2f} M rows/s  (histogram_counts + sums)")
    print(f"  ratio log / np.histogram: {(rows / logged) / (args.rows / t_hist):.2f}")
    print(f"  ratio log / service binning: {(rows / logged) / (args.rows / t_service):.2f}")
    print(
        f"bytes: {service.batches - 1} batches, {sent:,} B for {rows:,} rows = "
        f"{sent / (rows / 1e6):,.0f} B per million rows (body + headers)"
    )
    print(
        f"  raw scores batch: {raw_body * per_million:,.0f} B per million rows; "
        f"ratio {raw_body * per_million / (sent / (rows / 1e6)):,.0f}x smaller"
    )


if __name__ == "__main__":
    main()
