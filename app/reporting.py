"""Text renderings of a metric mapping for the command line."""

from __future__ import annotations

import json
from collections.abc import Mapping

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
