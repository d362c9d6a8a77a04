"""Text tables of metrics and rows for the terminal (the command line and the demo)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

UNDEFINED = "undefined"
"""How a metric that is undefined (``None``) is shown in the table."""


def format_metrics(result: Mapping[str, float | None], as_json: bool) -> str:
    """Render ``evaluate``'s mapping as an aligned two-column table or as JSON.

    Parameters
    ----------
    result : mapping of metric name to float or None
    as_json : bool
        ``True``: a JSON object, undefined metrics as ``null``. ``False``: one
        line per metric, names left-aligned, values right-aligned with six
        decimals, undefined metrics as ``undefined``.

    Examples
    --------
    >>> print(format_metrics({"f1": 0.5, "mcc": None}, as_json=False))
    f1   0.500000
    mcc undefined
    """
    if as_json:
        return json.dumps(dict(result), indent=2, allow_nan=False)
    if not result:
        return ""
    cells = {name: UNDEFINED if v is None else f"{v:.6f}" for name, v in result.items()}
    name_width = max(map(len, cells))
    value_width = max(map(len, cells.values()))
    return "\n".join(f"{n:<{name_width}} {v:>{value_width}}" for n, v in cells.items())


def format_number(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals; ``-`` when it is undefined (``None``)."""
    return "-" if value is None else f"{value:.{digits}f}"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """An aligned text table: a header line, a rule, one line per row.

    The first column is left-aligned, the others right-aligned; columns are
    two spaces apart.

    Examples
    --------
    >>> print(format_table(["name", "n"], [["a", "10"], ["bb", "2"]]))
    name   n
    ----  --
    a     10
    bb     2
    """
    body = [list(r) for r in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = ["-" * w for w in widths]
    return "\n".join([line(headers), line(rule), *(line(r) for r in body)])
