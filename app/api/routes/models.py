"""Models: register (admin), list (admin), read, update (admin), delete (admin), bins."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from app.api.deps import (
    AdminDep,
    AdminModelDep,
    AnyScopeModelDep,
    JsonBody,
    SessionDep,
    UniqueKeys,
)
from app.api.schemas import BinsPublic, ModelList, Problem
from app.services.models import registry as service
from app.services.models.settings import ModelCreate, ModelPublic, ModelUpdate

router = APIRouter(prefix="/v1/models", tags=["models"])
PROBLEMS: dict[int | str, dict[str, Any]] = {
    code: {"model": Problem, "content": {"application/problem+json": {}}}
    for code in (401, 403, 404, 409, 415, 422)
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    dependencies=[JsonBody, UniqueKeys],
    responses=PROBLEMS,
    summary="Register a model (admin)",
)
def create_model(
    data: ModelCreate, _admin: AdminDep, session: SessionDep, response: Response
) -> ModelPublic:
    model = service.create_model(session, data, datetime.now(UTC))
    response.headers["Location"] = f"/v1/models/{model.name}"
    return service.to_public(model)


@router.get("", responses=PROBLEMS, summary="List the models, a page at a time (admin)")
def list_models(
    _admin: AdminDep,
    session: SessionDep,
    limit: Annotated[
        int, Query(ge=1, le=service.MODELS_PAGE_MAX, description="most models in the answer")
    ] = 100,
    cursor: Annotated[
        str | None, Query(description="the `next` of the previous page; omitted: the first page")
    ] = None,
) -> ModelList:
    page, next_cursor = service.list_models(session, cursor=cursor, limit=limit)
    return ModelList(models=[service.to_public(m) for m in page], next=next_cursor)


@router.get("/{name}", responses=PROBLEMS, summary="One model's settings (admin or any key of it)")
def get_model(model: AnyScopeModelDep) -> ModelPublic:
    return service.to_public(model)


@router.patch(
    "/{name}",
    dependencies=[JsonBody, UniqueKeys],
    responses=PROBLEMS,
    summary="Update settings (admin)",
)
def update_model(data: ModelUpdate, model: AdminModelDep, session: SessionDep) -> ModelPublic:
    return service.to_public(service.update_model(session, model, data, datetime.now(UTC)))


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=PROBLEMS,
    summary="Delete the model with its windows, batches and keys (admin)",
)
def delete_model(model: AdminModelDep, session: SessionDep) -> Response:
    service.delete_model(session, model)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{name}/bins",
    responses=PROBLEMS,
    summary="The model's score bins, for histogram batches (admin or any key of it)",
)
def get_bins(model: AnyScopeModelDep) -> BinsPublic:
    return BinsPublic(
        n_bins=model.n_bins,
        thresholds=[float(t) for t in model.thresholds],
        edges=service.bin_edges_list(model),
    )
