"""GET /metrics: the Prometheus exposition (app/exporter)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.exporter.registry import CONTENT_TYPE, Exporter

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    summary="Prometheus exposition (no authentication)",
    description="Latest fresh window per model and segment, drift flags, SLA objectives, "
    "ingestion counters, worker queue, process metrics (text format 0.0.4). "
    "Names: docs/reading.md.",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}},
)
def get_metrics(request: Request) -> Response:
    exporter: Exporter = request.app.state.exporter
    return Response(exporter.render(), media_type=CONTENT_TYPE)
