"""Register, read and update monitored models.

Fixed at creation (docs/api.md, "Models"): the window length, the
thresholds and the bins. Stored histograms and per-threshold confusion
counts are sums over the bin edges and thresholds they were counted with;
changing either would silently mix incompatible counts, so an update that
changes them is refused (register a new model instead). Everything else
(pi0, costs, segments, SLA, drift settings, description) may change at any
time: it only affects how stored windows are evaluated and which segments
are accepted from then on.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import queries
from app.db import retention as db_retention
from app.db.models import Model
from app.db.queue import invalidate_windows
from app.db.session import write_transaction
from app.errors import InvalidInput, ModelAlreadyExists, ModelNotFound
from app.metrics.binning import default_bin_edges
from app.services.models.auth_cache import AUTH_CACHE
from app.services.models.metric_names import check_metric_name
from app.services.models.retention import check_label_horizon, check_retention
from app.services.models.settings import ModelCreate, ModelPublic, ModelUpdate, SlaObjective
from app.sla.objectives import Objective


def _check_sla(objectives: Sequence[SlaObjective]) -> list[dict[str, Any]]:
    out = []
    ids: set[str] = set()
    for i, objective in enumerate(objectives):
        try:
            check_metric_name(objective.metric)
        except InvalidInput as exc:
            raise InvalidInput(f"sla.{i}.metric", exc.reason) from None
        doc = objective.model_dump(mode="json", exclude_none=True)
        objective_id = Objective.from_document(doc).id
        if objective_id in ids:
            raise InvalidInput(
                f"sla.{i}.id",
                f"objective id {objective_id!r} is already used by another objective "
                "of this model: give each objective on the same metric and op its own id",
            )
        ids.add(objective_id)
        out.append(doc)
    return out


def _stored_exposition(value: str | Sequence[str] | None) -> str | list[str] | None:
    """The ``exposition`` setting as stored: a preset, the families listed, or null."""
    return value if value is None or isinstance(value, str) else list(value)


def _cost_ratio(data: ModelCreate | ModelUpdate) -> tuple[float | None, dict[str, float] | None]:
    if data.costs is not None:
        return data.costs.to_unit_costs().cost_ratio, data.costs.model_dump()
    return data.cost_ratio, None


def get_model(session: Session, name: str) -> Model:
    model = queries.get_model_by_name(session, name)
    if model is None:
        raise ModelNotFound(f"no model named {name!r}")
    return model


def create_model(session: Session, data: ModelCreate, now: datetime) -> Model:
    """Register ``data`` as a new model and commit. Bin edges are computed here, once."""
    thresholds = data.all_thresholds()
    edges = default_bin_edges(thresholds, n_bins=data.n_bins)
    cost_ratio, costs = _cost_ratio(data)
    model = Model(
        name=data.name,
        description=data.description,
        window=data.window,
        thresholds=thresholds,
        pi0=data.pi0,
        cost_ratio=cost_ratio,
        costs=costs,
        segments=list(data.segments),
        sla=_check_sla(data.sla),
        drift=data.drift.to_document(),
        n_bins=int(edges.size - 1),
        retention=check_retention(data.retention, data.window),
        label_missingness=data.label_missingness,
        label_horizon=check_label_horizon(data.label_horizon),
        exposition=_stored_exposition(data.exposition),
        bin_edges=edges,
        created_at=now,
        updated_at=now,
    )
    try:
        with write_transaction(session):
            if queries.get_model_by_name(session, data.name) is not None:
                raise ModelAlreadyExists(f"a model named {data.name!r} already exists")
            session.add(model)
    except IntegrityError:
        raise ModelAlreadyExists(f"a model named {data.name!r} already exists") from None
    return model


def _refuse_changes(model: Model, data: ModelUpdate) -> None:
    sent = data.model_fields_set
    fixed: dict[str, Any] = {
        "name": model.name,
        "window": model.window,
        "threshold": model.thresholds[0],
        "thresholds": list(model.thresholds),
        "n_bins": model.n_bins,
    }
    for field, current in fixed.items():
        if field in sent and getattr(data, field) != current:
            raise InvalidInput(
                field,
                f"is fixed at creation (currently {current!r}): the stored histograms and "
                "counts depend on it; register a new model to change it",
            )


RECOMPUTE_ON_CHANGE = frozenset(
    {"pi0", "cost_ratio", "costs", "drift", "label_missingness", "label_horizon"}
)
"""Settings that stored window results depend on (app/db/queue.py invalidates them)."""


def update_model(session: Session, model: Model, data: ModelUpdate, now: datetime) -> Model:
    """Apply the fields present in ``data`` and commit.

    One write transaction (``BEGIN IMMEDIATE`` on SQLite, the model row locked
    on PostgreSQL): the row is re-read under the lock, so concurrent updates
    and the embedded worker cannot make the read-then-write fail or lose a field.
    """
    model_id, name = model.id, model.name  # read before the transaction may expire them
    with write_transaction(session):
        if db_retention.lock_model(session, model_id) is None:  # deleted meanwhile
            raise ModelNotFound(f"no model named {name!r}")
        _apply_update(session, model, data, now)
    AUTH_CACHE.clear()  # batches see the new settings at once (app/services/models/auth_cache.py)
    return model


def _apply_update(session: Session, model: Model, data: ModelUpdate, now: datetime) -> None:
    _refuse_changes(model, data)
    sent = data.model_fields_set
    if "description" in sent:
        model.description = data.description
    if "pi0" in sent:
        if data.pi0 is None:
            raise InvalidInput("pi0", "must be a number in (0, 1)")
        model.pi0 = data.pi0
    if "costs" in sent or "cost_ratio" in sent:
        model.cost_ratio, model.costs = _cost_ratio(data)
    if "segments" in sent:
        model.segments = list(data.segments or [])
    if "sla" in sent:
        model.sla = _check_sla(data.sla or [])
    if "drift" in sent:
        if data.drift is None:
            raise InvalidInput("drift", "must be an object (send {} for the defaults)")
        model.drift = data.drift.to_document()
    if "retention" in sent:
        model.retention = check_retention(data.retention, model.window)
    if "label_missingness" in sent:
        if data.label_missingness is None:
            raise InvalidInput("label_missingness", "must be class, score or none")
        model.label_missingness = data.label_missingness
    if "label_horizon" in sent:
        model.label_horizon = check_label_horizon(data.label_horizon)
    if "exposition" in sent:  # null: the service's default again
        model.exposition = _stored_exposition(data.exposition)
    model.updated_at = now
    if sent & RECOMPUTE_ON_CHANGE:
        # stored window results depend on these: the worker recomputes them
        invalidate_windows(session, model.id, now=now, detail_due=True)


def delete_model(session: Session, model: Model) -> None:
    """Delete ``model`` with every row of it (windows, results, deltas, batches, keys)
    and commit; ModelNotFound when another request deleted it first.

    A worker holding some of its windows is fenced out when it completes
    (app/db/retention.py). Other processes' caches answer for it no longer:
    each use of a cached key or model is checked against the database
    (app/services/models/auth_cache.py), and a batch that raced the deletion answers
    404 (app/services/ingest/batch.py).
    """
    model_id, name = model.id, model.name  # read before the transaction may expire them
    with write_transaction(session):
        if not db_retention.delete_model(session, model_id):
            raise ModelNotFound(f"no model named {name!r}")
    AUTH_CACHE.clear()  # after the commit: a lookup racing with it cannot re-cache it


MODELS_PAGE_MAX = 1000
"""Most models one ``GET /v1/models`` answers (``limit``; default 100)."""


def list_models(
    session: Session, *, cursor: str | None = None, limit: int = MODELS_PAGE_MAX
) -> tuple[Sequence[Model], str | None]:
    """One page of the models by name, and the cursor of the next page (None: last page).

    The cursor is opaque to clients: the last name of the page, base64url-encoded. The
    next page starts after that name (a keyset), so models registered or deleted between
    two calls neither repeat nor hide the others.
    """
    after = _decode_cursor(cursor) if cursor is not None else None
    rows = queries.list_models(session, after=after, limit=limit + 1)
    page = rows[:limit]
    more = len(rows) > limit
    return page, _encode_cursor(page[-1].name) if more else None


def _encode_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> str:
    """The name a cursor of :func:`_encode_cursor` carries (InvalidInput otherwise).

    >>> _decode_cursor(_encode_cursor("fraud-scorer"))
    'fraud-scorer'
    """
    try:
        name = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except ValueError:
        name = ""
    if not name or _encode_cursor(name) != cursor:
        raise InvalidInput("cursor", "is not a cursor of GET /v1/models: pass its `next` value")
    return name


def to_public(model: Model) -> ModelPublic:
    return ModelPublic(
        name=model.name,
        description=model.description,
        window=model.window,
        threshold=float(model.thresholds[0]),
        thresholds=[float(t) for t in model.thresholds],
        pi0=model.pi0,
        cost_ratio=model.cost_ratio,
        costs=model.costs,
        segments=list(model.segments),
        sla=list(model.sla),
        drift=dict(model.drift),
        n_bins=model.n_bins,
        retention=model.retention,
        label_missingness=model.label_missingness,
        label_horizon=model.label_horizon,
        exposition=model.exposition,
        created_at=model.created_at,
        updated_at=model.updated_at,
    )


def bin_edges_list(model: Model) -> list[float]:
    """The model's edges as JSON floats (shortest repr round-trips exactly)."""
    return [float(e) for e in np.asarray(model.bin_edges, dtype=np.float64)]
