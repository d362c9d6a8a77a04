"""The SLA report as CSV (``Accept: text/csv``).

Rendered from the report's JSON documents (``SlaReport.to_dict()``, one per
segment), as the HTML page is: one row per window and objective, report
after report (the ``segment`` column tells them apart); undefined values are
empty cells.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

CSV_COLUMNS: tuple[str, ...] = (
    "window_start",
    "window_end",
    "segment",
    "n",
    "prior",
    "objective",
    "metric",
    "evaluated_as",
    "op",
    "target",
    "value",
    "lower",
    "upper",
    "evidence",
    "rule",
    "status",
    "reason",
)
"""Columns of the CSV report, one row per (window, objective)."""


def _number(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def reports_to_csv(*reports: Mapping[str, Any]) -> str:
    """The reports (``SlaReport.to_dict()``) as one CSV (RFC 4180, header :data:`CSV_COLUMNS`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for report in reports:
        rules = [o["rule"] for o in report["objectives"]]
        for w in report["windows"]:
            for r, rule in zip(w["objectives"], rules, strict=True):
                writer.writerow(
                    [
                        w["start"],
                        w["end"],
                        w["segment"] or "",
                        w["n"],
                        _number(w["prior"]),
                        r["objective"],
                        r["metric"],
                        r["evaluated_as"],
                        r["op"],
                        repr(r["target"]),
                        _number(r["value"]),
                        _number(r["lower"]),
                        _number(r["upper"]),
                        r["evidence"],
                        rule,
                        r["status"],
                        r["reason"] or "",
                    ]
                )
    return out.getvalue()
