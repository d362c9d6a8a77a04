"""GET /metrics: the Prometheus exposition (app/exporter).

``?shard=i&shards=n`` exposes the models with ``id % n == i`` (the series of no
model on shard 0 only), as kube-state-metrics shards; docs/operations.md.
Open by default; when PRIORWATCH_METRICS_TOKEN is set it requires
``Authorization: Bearer <that token>`` (401 problem+json otherwise).
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import StreamingResponse

from app.api.deps import BearerCredentials, SettingsDep
from app.api.errors import not_authenticated
from app.api.routes.models import PROBLEMS
from app.errors import InvalidInput
from app.exporter.reads import Shard
from app.exporter.registry import CONTENT_TYPE, MAX_SHARDS, Exporter

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    summary="Prometheus exposition (bearer token when PRIORWATCH_METRICS_TOKEN is set)",
    description="Latest fresh window per model and segment, drift flags, SLA objectives, "
    "ingestion counters, worker queue, process metrics (text format 0.0.4). "
    "`shard` and `shards` together expose the models with `id % shards == shard`; "
    "the series of no model are on shard 0. Names: docs/reading.md.",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/plain": {}}}, 401: PROBLEMS[401], 422: PROBLEMS[422]},
)
def get_metrics(
    request: Request,
    credentials: BearerCredentials,
    settings: SettingsDep,
    shard: Annotated[int | None, Query(ge=0, description="this shard's index")] = None,
    shards: Annotated[
        int | None, Query(ge=1, le=MAX_SHARDS, description="how many shards in all")
    ] = None,
) -> StreamingResponse:
    expected = settings.metrics_token
    if expected is not None:
        given = credentials.credentials if credentials is not None else ""
        if not hmac.compare_digest(given.encode(), expected.get_secret_value().encode()):
            raise not_authenticated(
                "send Authorization: Bearer <PRIORWATCH_METRICS_TOKEN> to read /metrics"
            )
    exporter: Exporter = request.app.state.exporter
    return StreamingResponse(exporter.render(_shard(shard, shards)), media_type=CONTENT_TYPE)


def _shard(index: int | None, count: int | None) -> Shard | None:
    """The shard of the query (None: unsharded); InvalidInput (422) when it is not one."""
    if index is None and count is None:
        return None
    if index is None:
        raise InvalidInput("shard", "required with shards")
    if count is None:
        raise InvalidInput("shards", "required with shard")
    if index >= count:
        raise InvalidInput("shard", f"must be below shards ({count})")
    return (index, count)
