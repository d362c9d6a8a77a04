"""Stateless evaluation: the full metric set of app.metrics.evaluate; nothing stored.

No authentication: the endpoint reads no stored data and writes nothing; it is
the HTTP form of `priorwatch evaluate`. It has its own smaller body limit
(PRIORWATCH_EVALUATE_MAX_BODY_BYTES, app/api/body_limit.py) and a cap on
calls running at once (PRIORWATCH_EVALUATE_MAX_CONCURRENCY, 429 beyond it);
the row limit applies.
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.api.concurrency import ConcurrencyCap
from app.api.deps import JsonBody, SettingsDep
from app.api.openapi import raw_json_body
from app.api.routes.models import PROBLEMS
from app.api.schemas import EVALUATE_EXAMPLE, EvaluateIn, EvaluateOut
from app.services.ingest.evaluate import evaluate_body

router = APIRouter(prefix="/v1/evaluate", tags=["evaluate"])


@router.post(
    "",
    dependencies=[JsonBody],
    response_model=EvaluateOut,
    responses={code: PROBLEMS[422] for code in (400, 413, 415, 422, 429)},
    openapi_extra=raw_json_body(
        EvaluateIn, {"example": {"summary": "six predictions", "value": EVALUATE_EXAMPLE}}
    ),
    summary="Evaluate scores and labels (no auth, nothing stored)",
)
async def post_evaluate(request: Request, settings: SettingsDep) -> Response:
    cap: ConcurrencyCap = request.app.state.evaluate_cap
    with cap.slot():  # the body is read inside: at most cap x the body limit in memory
        body = await request.body()
        metrics = await run_in_threadpool(evaluate_body, body, settings)
    return Response(
        orjson.dumps({"metrics": metrics}, option=orjson.OPT_SERIALIZE_NUMPY),
        media_type="application/json",
    )
