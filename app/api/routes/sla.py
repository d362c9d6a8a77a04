"""SLA report of a model (read scope): JSON, or CSV on ``Accept: text/csv``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header
from pydantic import BaseModel, Field
from starlette.responses import Response

from app.api.deps import ReadModelDep, SessionDep
from app.api.routes.models import PROBLEMS
from app.api.routes.windows import FromQuery, SegmentQuery, ToQuery
from app.services.model_config import ModelConfig
from app.services.sla import report_to_csv, sla_report

router = APIRouter(prefix="/v1/models/{name}/sla", tags=["sla"])

CSV_MEDIA_TYPE = "text/csv"


class SlaReportOut(BaseModel):
    """The SLA report (documentation of the response; see docs/reading.md)."""

    model: str
    pi0: float
    segment: str | None
    from_: datetime = Field(alias="from")
    to: datetime
    objectives: list[dict[str, Any]]
    summary: dict[str, Any] = Field(
        description="windows met / breached / insufficient_data / pending, compliance_ratio "
        "= met / (met + breached), and the same per objective"
    )
    windows: list[dict[str, Any]] = Field(
        description="per window: status and each objective's value at pi0, interval, status"
    )


def wants_csv(accept: str | None) -> bool:
    """True when the Accept header prefers ``text/csv`` to JSON."""
    if not accept:
        return False
    ranked: dict[str, float] = {}
    for part in accept.split(","):
        media, *params = (p.strip() for p in part.split(";"))
        quality = 1.0
        for p in params:
            if p.startswith("q="):
                try:
                    quality = float(p[2:])
                except ValueError:
                    quality = 0.0
        ranked[media.lower()] = max(quality, ranked.get(media.lower(), 0.0))
    csv_q = ranked.get(CSV_MEDIA_TYPE, 0.0)
    json_q = max(ranked.get("application/json", 0.0), ranked.get("*/*", 0.0) * 0.99)
    return csv_q > 0.0 and csv_q >= json_q


@router.get(
    "",
    response_model=SlaReportOut,
    responses={**PROBLEMS, 200: {"content": {CSV_MEDIA_TYPE: {}}}},
    summary="SLA report against pi0 and the objectives (read scope; CSV on Accept: text/csv)",
)
def get_sla_report(
    model: ReadModelDep,
    session: SessionDep,
    start_from: FromQuery,
    to: ToQuery,
    segment: SegmentQuery = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    report = sla_report(
        session,
        ModelConfig.from_row(model),
        segment=segment,
        start_from=start_from,
        to=to,
        now=datetime.now(UTC),
    )
    if wants_csv(accept):
        filename = f"sla-{report.model}.csv"
        return Response(
            report_to_csv(report),
            media_type=f"{CSV_MEDIA_TYPE}; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )
    return Response(orjson.dumps(report.to_dict()), media_type="application/json")
