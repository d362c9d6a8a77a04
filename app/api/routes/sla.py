"""SLA report of a model (read scope): JSON, CSV on ``Accept: text/csv``, an HTML
page on ``Accept: text/html``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Query
from pydantic import BaseModel, Field
from starlette.responses import Response

from app.api.deps import ReadModelDep, SessionDep
from app.api.routes.models import PROBLEMS
from app.api.routes.windows import FromQuery, ToQuery
from app.services.models.config import ModelConfig
from app.services.read.sla_report import RULE, sla_report
from app.sla.csv import reports_to_csv
from app.sla.html import reports_to_html

router = APIRouter(prefix="/v1/models/{name}/sla", tags=["sla"])

CSV_MEDIA_TYPE = "text/csv"
HTML_MEDIA_TYPE = "text/html"
JSON_MEDIA_TYPE = "application/json"
EVERY_SEGMENT = "*"
"""``segment=*``: all traffic and every registered segment, one report each."""
SlaSegmentQuery = Annotated[
    str | None,
    Query(
        description="a registered segment, or * for all traffic and every segment (JSON: "
        '{"model", "pi0", "from", "to", "rule", "reports": [one report per segment]}; '
        "HTML: a section per segment; CSV: the rows of all); omitted: all traffic"
    ),
]


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


def preferred_media(accept: str | None) -> str:
    """The report's media type for an Accept header: JSON, CSV or HTML.

    CSV or HTML is chosen when its quality is positive and at least that of
    JSON (``*/*`` counts as slightly less than an explicit JSON); between the
    two, the higher quality wins, CSV on a tie. So a browser (``text/html``
    first, ``*/*;q=0.8``) gets the page and a plain client JSON.
    """
    if not accept:
        return JSON_MEDIA_TYPE
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
    json_q = max(ranked.get(JSON_MEDIA_TYPE, 0.0), ranked.get("*/*", 0.0) * 0.99)
    best, best_q = JSON_MEDIA_TYPE, 0.0
    for media in (CSV_MEDIA_TYPE, HTML_MEDIA_TYPE):
        q = ranked.get(media, 0.0)
        if q > 0.0 and q >= json_q and q > best_q:
            best, best_q = media, q
    return best


@router.get(
    "",
    response_model=SlaReportOut,
    responses={**PROBLEMS, 200: {"content": {CSV_MEDIA_TYPE: {}, HTML_MEDIA_TYPE: {}}}},
    summary="SLA report against pi0 and the objectives "
    "(read scope; CSV on Accept: text/csv, HTML on Accept: text/html)",
)
def get_sla_report(
    model: ReadModelDep,
    session: SessionDep,
    start_from: FromQuery,
    to: ToQuery,
    segment: SlaSegmentQuery = None,
    accept: Annotated[str | None, Header()] = None,
) -> Response:
    config = ModelConfig.from_row(model)
    now = datetime.now(UTC)
    segments = [None, *sorted(config.segments)] if segment == EVERY_SEGMENT else [segment]
    reports = [
        sla_report(session, config, segment=s, start_from=start_from, to=to, now=now)
        for s in segments
    ]
    media = preferred_media(accept)
    if media == HTML_MEDIA_TYPE:
        return Response(
            reports_to_html([r.to_dict() for r in reports]),
            media_type=f"{HTML_MEDIA_TYPE}; charset=utf-8",
        )
    if media == CSV_MEDIA_TYPE:
        filename = f"sla-{config.name}.csv"
        return Response(
            reports_to_csv(*(r.to_dict() for r in reports)),
            media_type=f"{CSV_MEDIA_TYPE}; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )
    if segment != EVERY_SEGMENT:
        return Response(orjson.dumps(reports[0].to_dict()), media_type=JSON_MEDIA_TYPE)
    first = reports[0].to_dict()
    every = {k: first[k] for k in ("model", "pi0", "from", "to")}
    body = {**every, "rule": RULE, "reports": [r.to_dict() for r in reports]}
    return Response(orjson.dumps(body), media_type=JSON_MEDIA_TYPE)
