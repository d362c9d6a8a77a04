"""Batch ingestion. The body is parsed once from raw bytes (no pydantic on the arrays).

The hot path takes one thread-pool hop per request (the ingestion; the caller
and model come from a cache), two on a cache miss, not one per dependency:
under load every hop waits for the GIL behind the other requests' parsing,
and the database work between them holds locks. A well-formed request skips
FastAPI's dependency resolution (:class:`BatchRoute`); docs/api.md,
"Ingestion speed".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson
from fastapi import APIRouter, Request, status
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.deps import (
    BearerCredentials,
    IdempotencyKey,
    JsonBody,
    ModelName,
    SettingsDep,
    active_key,
    bearer_credentials,
    bearer_token,
    check_key_rights,
    is_admin_token,
    is_json_content_type,
)
from app.api.openapi import raw_json_body
from app.api.routes.models import PROBLEMS
from app.api.schemas import BATCH_EXAMPLES, BatchAccepted, BatchIn
from app.config import Settings
from app.db.queries import CachedCredential
from app.errors import StaleCredential
from app.services.ingest.batch import ingest_batch
from app.services.ingest.idempotency import HEADER as IDEMPOTENCY_HEADER
from app.services.models import api_keys as keys
from app.services.models.auth_cache import AUTH_CACHE, CachedKey
from app.services.models.config import ModelConfig
from app.services.models.registry import get_model
from app.services.models.settings import SLUG_PATTERN

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

_NAME = re.compile(SLUG_PATTERN)


class BatchRoute(APIRoute):
    """The batch route, whose well-formed requests skip FastAPI's dependency resolution.

    Resolving the route's parameters through FastAPI (its dependency graph,
    the path, header and security parameters validated one by one) cost about
    as much CPU as the rest of the request's framework work together. A
    request whose inputs are all well formed (a JSON content type, a model
    name of the path's pattern, a bearer token, at most one Idempotency-Key)
    calls :func:`post_batch` with them directly; any other takes FastAPI's
    path, which refuses it (415, 401, 422 naming the field) exactly as before.
    The OpenAPI document is FastAPI's, from the route's declaration.
    """

    def get_route_handler(self) -> Handler:
        resolved = super().get_route_handler()

        async def handler(request: Request) -> Response:
            inputs = await well_formed_inputs(request)
            if inputs is None:
                return await resolved(request)
            return await post_batch(request, *inputs)

        return handler


async def well_formed_inputs(
    request: Request,
) -> tuple[str, HTTPAuthorizationCredentials, Settings, str | None] | None:
    """:func:`post_batch`'s arguments as FastAPI would resolve them, if every check of
    its dependencies passes; None if any would refuse the request."""
    if not is_json_content_type(request.headers.get("content-type")):
        return None
    name: str = request.path_params["name"]
    credentials = await bearer_credentials(request)
    keys = request.headers.getlist(IDEMPOTENCY_HEADER)
    # fullmatch: pydantic's "$" does not match before a final newline, Python's search's does
    if _NAME.fullmatch(name) is None or credentials is None or len(keys) > 1:
        return None
    settings: Settings = request.app.state.settings
    return name, credentials, settings, keys[0] if keys else None


router = APIRouter(prefix="/v1/models/{name}/batches", tags=["batches"], route_class=BatchRoute)

REPLAYED_HEADER = "Idempotent-Replayed"

_SCOPES = ("ingest",)


def _from_cache(
    engine: Any, name: str, token: str, settings: Settings
) -> tuple[ModelConfig, CachedCredential] | None:
    """The path's model if the cache alone can authorise the caller (no I/O), else None;
    with what ingestion must check again (the model's version, the key)."""
    model: ModelConfig | None = AUTH_CACHE.get(engine, ("model", name))
    if model is None:
        return None
    if is_admin_token(token, settings):
        return model, CachedCredential(model.updated_at, None)
    token_hash = keys.hash_token(token)
    key: CachedKey | None = AUTH_CACHE.get(engine, ("key", token_hash))
    if key is None:
        return None
    check_key_rights(key.model_id, key.scopes, model.id, name, _SCOPES)
    return model, CachedCredential(model.updated_at, token_hash)


def _authorize(session: Session, name: str, token: str, settings: Settings) -> ModelConfig:
    """The path's model for a caller with the ``ingest`` scope (401/404/403 otherwise).

    Reads through :data:`AUTH_CACHE` (app/services/models/auth_cache.py states the
    staleness bound) and fills it. Ends the session's transaction: its
    connection goes back to the pool before the route awaits the body (a
    slow client must not hold it).
    """
    try:
        return _authorize_in(session, name, token, settings)
    finally:
        session.close()


def _authorize_in(session: Session, name: str, token: str, settings: Settings) -> ModelConfig:
    engine = session.get_bind()
    generation = AUTH_CACHE.generation
    key: CachedKey | None = None
    if not is_admin_token(token, settings):
        token_hash = keys.hash_token(token)
        key = AUTH_CACHE.get(engine, ("key", token_hash))
        if key is None:
            row = active_key(session, token)
            key = CachedKey(model_id=row.model_id, scopes=frozenset(row.scopes))
            AUTH_CACHE.put(engine, ("key", token_hash), key, generation)
    model: ModelConfig | None = AUTH_CACHE.get(engine, ("model", name))
    if model is None:
        model = ModelConfig.from_row(get_model(session, name))
        AUTH_CACHE.put(engine, ("model", name), model, generation)
    if key is not None:
        check_key_rights(key.model_id, key.scopes, model.id, name, _SCOPES)
    return model


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    dependencies=[JsonBody],
    response_model=BatchAccepted,
    responses={**PROBLEMS, 400: PROBLEMS[422], 413: PROBLEMS[422], 429: PROBLEMS[422]},
    openapi_extra=raw_json_body(BatchIn, BATCH_EXAMPLES),
    summary="Ingest one batch (ingest scope)",
    description="Raw `scores` + `labels`, or a `histogram` over the model's bins, or a "
    "`confusion_matrix` at the primary threshold. Send an `Idempotency-Key`: a replay "
    "with the same key and body answers like the first time (header "
    "`Idempotent-Replayed: true`) and stores nothing.",
)
async def post_batch(
    request: Request,
    name: ModelName,
    credentials: BearerCredentials,
    settings: SettingsDep,
    idempotency_key: IdempotencyKey,
) -> Response:
    session: Session = request.app.state.session_factory()
    try:
        # the caller is checked before the body is read (401/403/404 first)
        token = bearer_token(credentials)
        credential: CachedCredential | None = None
        cached = _from_cache(session.get_bind(), name, token, settings)
        if cached is not None:  # checked again in the ingestion's first round trip
            model, credential = cached
        else:  # a cache miss queries the database: off the event loop
            model = await run_in_threadpool(_authorize, session, name, token, settings)
        body = await request.body()  # no connection is held while the client sends it
        ingest = partial(
            ingest_batch,
            session,
            body=body,
            idempotency_key=idempotency_key,
            settings=settings,
            now=datetime.now(UTC),
        )
        try:
            outcome = await run_in_threadpool(ingest, model=model, credential=credential)
        except StaleCredential:  # changed in another process: authorise from the database
            AUTH_CACHE.clear()
            model = await run_in_threadpool(_authorize, session, name, token, settings)
            outcome = await run_in_threadpool(ingest, model=model)
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
