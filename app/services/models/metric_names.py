"""The metric names a window can report: exactly the keys of ``evaluate``."""

from __future__ import annotations

from functools import lru_cache

from app.errors import InvalidInput
from app.metrics.evaluate import evaluate

# A tiny fixed sample with every optional setting on, so that every key appears.
_SCORES = (0.05, 0.2, 0.35, 0.45, 0.55, 0.65, 0.8, 0.95)
_LABELS = (0, 0, 1, 0, 1, 0, 1, 1)


@lru_cache(maxsize=1)
def metric_names() -> frozenset[str]:
    """Every key of :func:`app.metrics.evaluate` with pi0 and cost_ratio given."""
    return frozenset(evaluate(_SCORES, _LABELS, threshold=0.5, pi0=0.3, cost_ratio=0.5))


def check_metric_name(name: str) -> str:
    """``name`` if it is a metric of ``evaluate``, else :class:`InvalidInput`."""
    if name not in metric_names():
        raise InvalidInput("metric", f"{name!r} is not a metric name of evaluate (docs/api.md)")
    return name
