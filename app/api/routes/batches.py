"""Batch ingestion. The body is parsed once from raw bytes (no pydantic on the arrays).

The hot path takes two thread-pool hops per request (the caller and model, then
the ingestion), not one per dependency: under load every hop waits for the GIL
behind the other requests' parsing, and the database work between them holds
locks (docs/api.md, "Ingestion speed").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Header, Request, status
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.deps import BearerCredentials, JsonBody, SettingsDep, get_caller, model_with_scope
from app.api.openapi import raw_json_body
from app.api.routes.models import PROBLEMS
from app.api.schemas import BATCH_EXAMPLES, BatchAccepted, BatchIn
from app.config import Settings
from app.services.ingestion import IngestOutcome, ingest_batch
from app.services.model_config import ModelConfig

router = APIRouter(prefix="/v1/models/{name}/batches", tags=["batches"])

REPLAYED_HEADER = "Idempotent-Replayed"

_ingest_model = model_with_scope("ingest")


def _authorize(
    session: Session, name: str, credentials: BearerCredentials, settings: Settings
) -> ModelConfig:
    """The path's model for a caller with the ``ingest`` scope (401/403/404 otherwise)."""
    caller = get_caller(credentials, session, settings)
    return ModelConfig.from_row(_ingest_model(name, caller, session))


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
    name: str,
    credentials: BearerCredentials,
    settings: SettingsDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Response:
    session: Session = request.app.state.session_factory()
    try:
        # the caller is checked before the body is read (401/403/404 first)
        model = await run_in_threadpool(_authorize, session, name, credentials, settings)
        body = await request.body()
        outcome: IngestOutcome = await run_in_threadpool(
            ingest_batch,
            session,
            model,
            body,
            idempotency_key=idempotency_key,
            settings=settings,
            now=datetime.now(UTC),
        )
    finally:
        if session.in_transaction():  # closing rolls back: database I/O
            await run_in_threadpool(session.close)
        else:
            session.close()
    headers = {REPLAYED_HEADER: "true"} if outcome.replayed else {}
    return Response(
        orjson.dumps(outcome.response),
        status_code=status.HTTP_202_ACCEPTED,
        media_type="application/json",
        headers=headers,
    )
