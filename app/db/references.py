"""The reads of drift references: the windows of reference periods, with their versions
or their sums.

A drift reference is the sum of the windows of one (model, segment) starting in a
period [start, end); the window model caches the sums by the versions of the
windows (``app.services.windows.reference_cache``). :class:`ReferenceRows` reads
both for several periods in one statement each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, cast

from sqlalchemy import Row, Select, Table, and_, bindparam, or_, select
from sqlalchemy.orm import Session

from app.db.models import SUM_COLUMNS, WindowAggregate
from app.db.session import BINARY_RESULTS

Period = tuple[int, str, datetime, datetime]
"""(model id, segment key, start, end) of a reference period."""
Columns = Literal["versions", "sums"]
"""What :func:`rows_by_period` reads of each window besides its key."""


@dataclass(frozen=True)
class ReferenceRows:
    """The windows of reference periods, read in ``session`` (one statement per call)."""

    session: Session

    def versions(self, periods: Sequence[Period]) -> Iterator[tuple[Period, Row[Any]]]:
        """``window_start`` and ``version`` of the windows that hold data."""
        return rows_by_period(self.session, periods, "versions")

    def sums(self, periods: Sequence[Period]) -> Iterator[tuple[Period, Row[Any]]]:
        """``window_start`` and the :data:`~app.db.models.SUM_COLUMNS` of every window."""
        return rows_by_period(self.session, periods, "sums")


def rows_by_period(
    session: Session, periods: Sequence[Period], columns: Columns
) -> Iterator[tuple[Period, Row[Any]]]:
    """The rows of the windows in ``periods`` (one statement, in key order; ``columns``:
    their keys with their versions, of the windows that hold data, or with their sums),
    each with every period that holds it (the periods of one segment may overlap)."""
    if not periods:
        return
    series: dict[tuple[int, str], list[Period]] = {}
    params: dict[str, Any] = {}
    for k, p in enumerate(periods):
        series.setdefault((p[0], p[1]), []).append(p)
        params |= dict(zip((f"model{k}", f"segment{k}", f"start{k}", f"end{k}"), p, strict=True))
    rows = session.connection().execute(
        _periods_statement(columns, len(periods)), params, execution_options=BINARY_RESULTS
    )
    for row in rows:
        for p in series[(row.model_id, row.segment)]:
            if p[2] <= row.window_start < p[3]:
                yield p, row


_WA = cast(Table, WindowAggregate.__table__).c
_KEY = (_WA.model_id, _WA.segment, _WA.window_start)
_SUMS = [_WA[name] for name in SUM_COLUMNS]


@lru_cache(maxsize=256)
def _periods_statement(columns: Columns, count: int) -> Select[Any]:
    """The windows of ``count`` periods (parameters ``model<k>``, ``segment<k>``,
    ``start<k>``, ``end<k>``), in key order; built once per shape."""
    periods = or_(
        *(
            and_(
                _WA.model_id == bindparam(f"model{k}"),
                _WA.segment == bindparam(f"segment{k}"),
                _WA.window_start >= bindparam(f"start{k}"),
                _WA.window_start < bindparam(f"end{k}"),
            )
            for k in range(count)
        )
    )
    if columns == "versions":
        return select(*_KEY, _WA.version).where(periods, _WA.version > 0).order_by(*_KEY)
    return select(*_KEY, *_SUMS).where(periods).order_by(*_KEY)
