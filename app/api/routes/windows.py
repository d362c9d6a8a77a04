"""Windows of a model: list (with re-windowing) and one window in full (read scope)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field
from starlette.responses import Response

from app.api.deps import ReadModelDep, SessionDep
from app.api.errors import ProblemError
from app.api.routes.models import PROBLEMS
from app.services.models.config import ModelConfig
from app.services.read.windows import get_window, list_windows
from app.timegrid import isoformat_z, parse_instant

router = APIRouter(prefix="/v1/models/{name}/windows", tags=["windows"])

_TIME_FORMS = (
    "ISO 8601 (a time without an offset is UTC; in a query string send `+` as `%2B`, "
    "e.g. `2026-11-26T10%3A00%3A00%2B01%3A00`) or epoch seconds"
)


def _instant(value: str | None, field: str) -> datetime | None:
    if value is None:
        return None
    number = _as_number(value)
    return parse_instant(number if number is not None else value, field, in_query=True)


def _as_number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


async def _from_query(
    value: Annotated[
        str | None,
        Query(
            alias="from",
            description="first window start (rounded down to its window); default: 100 windows "
            "before `to`. " + _TIME_FORMS,
            examples=["2026-11-26T00:00:00Z"],
        ),
    ] = None,
) -> datetime | None:
    return _instant(value, "from")


async def _to_query(
    value: Annotated[
        str | None,
        Query(
            alias="to",
            description="window starts before this instant; default: now. " + _TIME_FORMS,
            examples=["2026-11-27T00:00:00Z"],
        ),
    ] = None,
) -> datetime | None:
    return _instant(value, "to")


FromQuery = Annotated[datetime | None, Depends(_from_query)]
ToQuery = Annotated[datetime | None, Depends(_to_query)]
SegmentQuery = Annotated[
    str | None,
    Query(description="a registered segment; omitted: the all-traffic windows"),
]
GranularityQuery = Annotated[
    str | None,
    Query(
        description="window length to report (5m, 15m, 1h, 6h, 1d, 1w), a multiple of the "
        "model's window: longer windows are summed exactly from the stored ones and computed "
        "now; omitted: the model's window",
        examples=["1d"],
    ),
]


class WindowOut(BaseModel):
    """One window (documentation of the response; see docs/reading.md)."""

    start: datetime
    end: datetime
    segment: str | None = Field(description="null: the all-traffic window")
    granularity: str
    n: int
    positives: int
    prior: float | None
    status: str = Field(description='"fresh" or "pending" (waiting for the worker)')
    metrics: dict[str, float | None] = Field(description="names as in evaluate")
    reasons: dict[str, str] = Field(
        description='why each null metric is null; "estimate.error": why the '
        "estimate's error is null in a window with labelled rows"
    )
    intervals: dict[str, dict[str, float | str | None]] = Field(
        description="credible intervals {lower, upper, level} of prior-invariant metrics; "
        'null bounds with a "reason" where no honest interval exists (docs/intervals.md)'
    )
    drift: dict[str, Any] | None = Field(
        description='{"verdict", "prior", "likelihood", "attribution"}; verdict "reference" '
        "inside the reference period"
    )
    computed_at: datetime | None
    aggregate_version: int | None
    merged_windows: int
    curves: dict[str, Any] | None = Field(
        default=None,
        description="single-window view only: roc, pr, calibrated_pr, oprc (from the detail "
        "refresh the detail stamp describes)",
    )
    detail: dict[str, Any] | None = Field(
        default=None,
        description='{"aggregate_version", "computed_at", "current"}: when the curves and the '
        "intervals were computed, and from which aggregate version; "
        "older than the metrics between two full refreshes (current false); null while the "
        'window has no detail yet (docs/worker.md, "Tiered refresh")',
    )


class WindowList(BaseModel):
    windows: list[WindowOut]


def _json(document: Any) -> Response:
    return Response(orjson.dumps(document), media_type="application/json")


@router.get(
    "",
    response_model=WindowList,
    responses=PROBLEMS,
    summary="Windows with metrics and drift verdicts (read scope)",
)
def list_model_windows(
    model: ReadModelDep,
    session: SessionDep,
    start_from: FromQuery,
    to: ToQuery,
    segment: SegmentQuery = None,
    granularity: GranularityQuery = None,
) -> Response:
    views = list_windows(
        session,
        ModelConfig.from_row(model),
        segment=segment,
        start_from=start_from,
        to=to,
        granularity=granularity,
        now=datetime.now(UTC),
    )
    return _json({"windows": [v.to_dict() for v in views]})


@router.get(
    "/{start}",
    response_model=WindowOut,
    responses=PROBLEMS,
    summary="One window in full, curves included (read scope)",
)
def get_model_window(
    start_text: Annotated[
        str,
        Path(
            alias="start",
            description="the window's start, ISO 8601 (no offset: UTC)",
            examples=["2026-11-26T10:00:00Z"],
        ),
    ],
    model: ReadModelDep,
    session: SessionDep,
    segment: SegmentQuery = None,
    granularity: GranularityQuery = None,
) -> Response:
    start = parse_instant(start_text, "start")
    view = get_window(
        session,
        ModelConfig.from_row(model),
        start,
        segment=segment,
        granularity=granularity,
        now=datetime.now(UTC),
    )
    if view is None:
        where = f"segment {segment!r}" if segment else "all traffic"
        raise ProblemError(
            404,
            "window-not-found",
            f"no data in the window starting {isoformat_z(start)} ({where})",
        )
    return _json(view.to_dict(with_curves=True))
