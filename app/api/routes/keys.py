"""API keys of a model (admin): create (token shown once), list, revoke."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, status
from starlette.responses import Response

from app.api.deps import AdminModelDep, JsonBody, SessionDep, UniqueKeys
from app.api.routes.models import PROBLEMS
from app.api.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyList, ApiKeyPublic
from app.db.models import ApiKey
from app.services.models import api_keys as service

router = APIRouter(prefix="/v1/models/{name}/keys", tags=["keys"])


def _public(key: ApiKey) -> ApiKeyPublic:
    return ApiKeyPublic(
        id=str(key.id),
        prefix=key.prefix,
        scopes=list(key.scopes),
        created_at=key.created_at,
        revoked_at=key.revoked_at,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    dependencies=[JsonBody, UniqueKeys],
    responses=PROBLEMS,
    summary="Create a key; the token is in this response only",
)
def create_key(data: ApiKeyCreate, model: AdminModelDep, session: SessionDep) -> ApiKeyCreated:
    key, token = service.create_key(session, model, data.scopes, datetime.now(UTC))
    return ApiKeyCreated(**_public(key).model_dump(), token=token)


@router.get("", responses=PROBLEMS, summary="List the model's keys (no tokens)")
def list_keys(model: AdminModelDep, session: SessionDep) -> ApiKeyList:
    return ApiKeyList(keys=[_public(k) for k in service.list_keys(session, model)])


@router.delete(
    "/{key_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=PROBLEMS,
    summary="Revoke a key (idempotent)",
)
def revoke_key(key_id: str, model: AdminModelDep, session: SessionDep) -> Response:
    service.revoke_key(session, model, key_id, datetime.now(UTC))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
