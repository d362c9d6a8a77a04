"""GET /metrics: the Prometheus exposition (app/exporter).

Open by default; when PRIORWATCH_METRICS_TOKEN is set it requires
``Authorization: Bearer <that token>`` (401 problem+json otherwise).
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from starlette.responses import Response

from app.api.deps import BearerCredentials, SettingsDep
from app.api.errors import not_authenticated
from app.api.routes.models import PROBLEMS
from app.exporter.registry import CONTENT_TYPE, Exporter

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    summary="Prometheus exposition (bearer token when PRIORWATCH_METRICS_TOKEN is set)",
    description="Latest fresh window per model and segment, drift flags, SLA objectives, "
    "ingestion counters, worker queue, process metrics (text format 0.0.4). "
    "Names: docs/reading.md.",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}, 401: PROBLEMS[401]},
)
def get_metrics(
    request: Request, credentials: BearerCredentials, settings: SettingsDep
) -> Response:
    expected = settings.metrics_token
    if expected is not None:
        given = credentials.credentials if credentials is not None else ""
        if not hmac.compare_digest(given.encode(), expected.get_secret_value().encode()):
            raise not_authenticated(
                "send Authorization: Bearer <PRIORWATCH_METRICS_TOKEN> to read /metrics"
            )
    exporter: Exporter = request.app.state.exporter
    return Response(exporter.render(), media_type=CONTENT_TYPE)
