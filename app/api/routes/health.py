"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import Response

from app.api.errors import problem_response, problem_type
from app.db.revisions import head_revisions, reachable_revisions

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: database reachable and migrations at head",
    responses={503: {"description": "not ready (problem+json)"}},
)
def readyz(request: Request) -> Any:
    try:
        current = reachable_revisions(request.app.state.engine)
    except SQLAlchemyError as exc:
        return _not_ready(request, f"database unreachable ({type(exc).__name__})")
    heads = head_revisions()
    if current != heads:
        return _not_ready(
            request,
            f"migrations not at head (database {sorted(current)}, code {sorted(heads)}); "
            "run `priorwatch migrate`",
        )
    return {"status": "ready", "revision": ",".join(sorted(heads))}


def _not_ready(request: Request, detail: str) -> Response:
    return problem_response(
        503,
        type_=problem_type("not-ready"),
        detail=detail,
        instance=request.url.path,
        headers={"Retry-After": "5"},
    )
