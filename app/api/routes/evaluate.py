"""Stateless evaluation: the full metric set of app.metrics.evaluate; nothing stored.

No authentication: the endpoint reads no stored data and writes nothing; it is
the HTTP form of `priorwatch evaluate`. Body and row limits apply.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.deps import JsonBody, SettingsDep
from app.api.openapi import raw_json_body
from app.api.routes.models import PROBLEMS
from app.api.schemas import EVALUATE_EXAMPLE, EvaluateIn, EvaluateOut
from app.services.evaluation import evaluate_body

router = APIRouter(prefix="/v1/evaluate", tags=["evaluate"])


@router.post(
    "",
    dependencies=[JsonBody],
    response_model=EvaluateOut,
    responses={400: PROBLEMS[422], 413: PROBLEMS[422], 415: PROBLEMS[415], 422: PROBLEMS[422]},
    openapi_extra=raw_json_body(
        EvaluateIn, {"example": {"summary": "six predictions", "value": EVALUATE_EXAMPLE}}
    ),
    summary="Evaluate scores and labels (no auth, nothing stored)",
)
async def post_evaluate(request: Request, settings: SettingsDep) -> Response:
    body = await request.body()
    metrics = await run_in_threadpool(evaluate_body, body, settings)
    return Response(
        orjson.dumps({"metrics": metrics}, option=orjson.OPT_SERIALIZE_NUMPY),
        media_type="application/json",
    )
