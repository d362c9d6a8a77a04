"""The label-free estimates in the exposition: read from stored results at scrape time.

Per (model, segment), two stored windows (each the latest with a fresh
result among those that qualify):

* the latest window **with unlabelled rows** gives ``priorwatch_window_estimate``
  (``metric="prior"`` and every estimated metric), the prior's interval, the
  label-free verdict as flags and p-values, ``priorwatch_estimate_reliable``
  and the end of that window;
* the latest window **with unlabelled and labelled rows** gives
  ``priorwatch_estimate_error`` (estimated minus labelled, per metric): the
  estimate's track record once labels arrive.

The labelled families of :mod:`app.exporter.collector` come from the latest
window with labelled rows, so a window of unlabelled scores never hides them.
One statement per scrape; nothing is computed, every value was stored by the
worker (``window_metrics.estimate``). Undefined values are omitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.db.scrape import latest_estimates
from app.exporter import names
from app.exporter.names import ESTIMATE_FAMILIES, FamilySpec
from app.exporter.part import ExpositionOf, StoredPartCollector, whole
from app.exporter.reads import ModelRow, Shard, json_document
from app.exporter.series import add_named, segment_label
from app.exporter.text import Series
from app.timegrid import window_length

ESTIMATE_KINDS: tuple[str, ...] = ("prior", "likelihood")
"""``kind`` label values of the label-free flags and p-values."""


@dataclass(frozen=True)
class StoredEstimate:
    """The stored estimate of one window."""

    model_id: int
    segment: str
    start: datetime
    document: Mapping[str, Any]


def read_estimates(
    session: Session, shard: Shard | None = None
) -> tuple[list[StoredEstimate], list[StoredEstimate]]:
    """Per (model, segment) of the models of ``shard``: the latest stored estimate, and
    the latest with an error.

    One statement (the two selections of the module docstring, UNION ALL).
    """
    out: tuple[list[StoredEstimate], list[StoredEstimate]] = ([], [])
    for role, model_id, segment, start, text in latest_estimates(session, shard):
        document = json_document(text)
        if isinstance(document, Mapping):
            out[int(role)].append(StoredEstimate(int(model_id), segment, start, document))
    return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _metric_samples(
    out: list[tuple[tuple[str, ...], float]],
    labels: tuple[str, str],
    values: Any,
    kept: frozenset[str] | None = None,
) -> None:
    """A sample per defined value of ``values`` (if a mapping) whose name is ``kept``
    (None: every one)."""
    if isinstance(values, Mapping):
        add_named(out, labels, values, kept)


def estimate_series(
    models: Iterable[ModelRow],
    estimates: Iterable[StoredEstimate],
    errors: Iterable[StoredEstimate],
    exposition_of: ExpositionOf = whole,
) -> Series:
    """The samples of :data:`~app.exporter.names.ESTIMATE_FAMILIES` that ``exposition_of``
    their model writes (pure)."""
    out: Series = {spec.name: [] for spec in ESTIMATE_FAMILIES}
    by_id = {m.id: m for m in models}

    def exposed(stored: StoredEstimate) -> tuple[ModelRow, tuple[str, str]] | None:
        model = by_id.get(stored.model_id)
        segment = None if model is None else segment_label(model, stored.segment)
        return None if model is None or segment is None else (model, (model.name, segment))

    for stored in sorted(estimates, key=lambda e: (e.model_id, e.segment)):
        found = exposed(stored)
        if found is None:
            continue
        model, labels = found
        kept = exposition_of(model).kept
        doc = stored.document
        prior, fit = _mapping(doc.get("prior")), _mapping(doc.get("fit"))
        estimated = kept(names.WINDOW_ESTIMATE)
        _metric_samples(
            out[names.WINDOW_ESTIMATE], labels, {"prior": prior.get("value")}, estimated
        )
        _metric_samples(out[names.WINDOW_ESTIMATE], labels, doc.get("metrics"), estimated)
        for family, bound in (
            (names.WINDOW_ESTIMATE_LOWER, "lower"),
            (names.WINDOW_ESTIMATE_UPPER, "upper"),
        ):
            _metric_samples(out[family], labels, {"prior": prior.get(bound)}, kept(family))
        end = stored.start + window_length(model.window)
        out[names.ESTIMATE_END].append((labels, end.timestamp()))
        if fit.get("status") == "ok":
            for kind in ESTIMATE_KINDS:
                flag = 1.0 if fit.get("verdict") == kind else 0.0
                out[names.ESTIMATE_FLAG].append(((*labels, kind), flag))
        p_values = {"prior": prior.get("p_value"), "likelihood": fit.get("p_value")}
        _metric_samples(out[names.ESTIMATE_P_VALUE], labels, p_values)
        if isinstance(doc.get("reliable"), bool):
            out[names.ESTIMATE_RELIABLE].append((labels, 1.0 if doc["reliable"] else 0.0))
    for stored in sorted(errors, key=lambda e: (e.model_id, e.segment)):
        found = exposed(stored)
        if found is not None:
            kept_errors = exposition_of(found[0]).kept(names.ESTIMATE_ERROR)
            error = stored.document.get("error")
            _metric_samples(out[names.ESTIMATE_ERROR], found[1], error, kept_errors)
    return out


class EstimateCollector(StoredPartCollector):
    """Yields :data:`~app.exporter.names.ESTIMATE_FAMILIES` per scrape.

    ``GET /metrics`` writes them with the window families: the window
    collector calls :meth:`read` in its own session (one more statement).

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per :meth:`collect`; it is only read from, then closed.
    """

    specs: tuple[FamilySpec, ...] = ESTIMATE_FAMILIES

    def read(
        self,
        session: Session,
        models: tuple[ModelRow, ...],
        shard: Shard | None = None,
        exposition_of: ExpositionOf = whole,
    ) -> Series:
        """The samples of :attr:`specs`, by family, read in ``session``."""
        return estimate_series(models, *read_estimates(session, shard), exposition_of)
