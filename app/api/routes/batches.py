"""Batch ingestion. The body is parsed once from raw bytes (no pydantic on the arrays)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Header, Request, status
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.deps import IngestModelDep, JsonBody, SessionDep, SettingsDep
from app.api.openapi import raw_json_body
from app.api.routes.models import PROBLEMS
from app.api.schemas import BATCH_EXAMPLES, BatchAccepted, BatchIn
from app.services.ingestion import ingest_batch
from app.services.model_config import ModelConfig

router = APIRouter(prefix="/v1/models/{name}/batches", tags=["batches"])

REPLAYED_HEADER = "Idempotent-Replayed"


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[JsonBody],
    response_model=BatchAccepted,
    responses={**PROBLEMS, 400: PROBLEMS[422], 413: PROBLEMS[422]},
    openapi_extra=raw_json_body(BatchIn, BATCH_EXAMPLES),
    summary="Ingest one batch (ingest scope)",
    description="Raw `scores` + `labels`, or a `histogram` over the model's bins, or a "
    "`confusion_matrix` at the primary threshold. Send an `Idempotency-Key`: a replay "
    "with the same key and body answers like the first time (header "
    "`Idempotent-Replayed: true`) and stores nothing.",
)
async def post_batch(
    request: Request,
    model: IngestModelDep,
    session: SessionDep,
    settings: SettingsDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    body = await request.body()
    outcome = await run_in_threadpool(
        ingest_batch,
        session,
        ModelConfig.from_row(model),
        body,
        idempotency_key=idempotency_key,
        settings=settings,
        now=datetime.now(UTC),
    )
    headers = {REPLAYED_HEADER: "true"} if outcome.replayed else {}
    return Response(
        orjson.dumps(outcome.response),
        status_code=status.HTTP_202_ACCEPTED,
        media_type="application/json",
        headers=headers,
    )
