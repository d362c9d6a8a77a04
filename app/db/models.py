"""The tables (SQLAlchemy 2 typed models). Alembic owns the schema: see migrations/.

Every table's primary key leads with the model (``model_id``), so the schema
can be distributed by model (e.g. Citus) without redesign. Timestamps end in
``_at`` and are timezone-aware UTC.

Segments: a batch may name one of the model's registered segments. Window
aggregates exist per segment and for all traffic; the all-traffic aggregate
uses the reserved segment key :data:`ALL_SEGMENTS` (``"*"``, shown as
``segment: null`` in the API). Segment names are slugs, so ``"*"`` sorts
before every one of them: rows are always locked in ``segment`` order.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base
from app.db.types import Float64Array, Int32Array, Int64Array, JSONDocument, UTCDateTime

ALL_SEGMENTS = "*"
"""Segment key of the all-traffic aggregate of a window."""
ALL_SEGMENTS_LABEL = "all"
"""How the all-traffic aggregate is named outside storage (the ``segment`` label
in /metrics); no registered segment may take this name."""

BATCH_KINDS = ("scores", "histogram", "confusion_matrix")
"""What a batch carried: raw scores and labels, per-bin counts, or one confusion matrix."""


class Model(Base):
    """A monitored binary classifier and its monitoring settings.

    ``thresholds``, ``window``, ``n_bins`` and ``bin_edges`` are fixed at
    creation: the stored histograms and per-threshold counts are only
    meaningful over the edges they were counted on (docs/api.md, "Models").
    """

    __tablename__ = "model"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str | None] = mapped_column(Text)
    window: Mapped[str] = mapped_column(String(8))
    """Window length: one of app.timegrid.WINDOW_LENGTHS ("5m" ... "1w")."""
    thresholds: Mapped[list[float]] = mapped_column(JSONDocument)
    """Decision thresholds; thresholds[0] is the primary one. Each is an exact bin edge."""
    pi0: Mapped[float] = mapped_column(Double)
    """Reference prior agreed with the client (SLA prior), in (0, 1)."""
    cost_ratio: Mapped[float | None] = mapped_column(Double)
    """r_C = C_FN / (C_FN + C_FP); derived from ``costs`` when those were given."""
    costs: Mapped[dict[str, float] | None] = mapped_column(JSONDocument)
    """Unit costs {"tp", "fp", "fn", "tn"} when registered that way, else null."""
    segments: Mapped[list[str]] = mapped_column(JSONDocument)
    """Registered segment names; batches may only name one of these."""
    sla: Mapped[list[dict[str, Any]]] = mapped_column(JSONDocument)
    """SLA objectives: [{"metric": name as in evaluate, "op": ">=" | "<=", "target": float}]."""
    drift: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    """Drift settings: {"reference": {"from", "to"} | {"trailing_windows"} | null,
    "alpha", "min_prior_effect", "min_likelihood_effect", "min_class_count",
    "test_bins"} (the fields of app.drift.settings.DriftSettings plus the reference)."""
    n_bins: Mapped[int] = mapped_column(Integer)
    retention: Mapped[str | None] = mapped_column(String(16))
    """How long windows are kept after they end ("90d"; app/services/refresh/retention.py), or
    null: kept forever. The worker's housekeeping deletes older windows."""
    label_missingness: Mapped[str] = mapped_column(String(8), server_default="none")
    """How labels arrive: "class", "score" or "none" (docs/maturity.md); a partially
    labelled window is completed under it, except under "none"."""
    label_horizon: Mapped[str | None] = mapped_column(String(16))
    """How long after a window its labels are expected complete ("90d"), or null."""
    exposition: Mapped[str | list[str] | None] = mapped_column(JSONDocument)
    """Which series /metrics writes of its windows: "compact", "full", a list of the
    trimmed families written whole (app/exporter/exposition.py), or null: the service's
    default (PRIORWATCH_METRICS_EXPOSITION)."""
    bin_edges: Mapped[npt.NDArray[np.float64]] = mapped_column(Float64Array)
    """float64, shape (n_bins + 1,): bin j is [edges[j], edges[j+1]), the last one closed."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        CheckConstraint("pi0 > 0 AND pi0 < 1", name="pi0_open_unit"),
        CheckConstraint("n_bins > 0", name="n_bins_positive"),
        # a deleted model's id is never given again (SQLite would reuse the largest):
        # what is keyed by model id in a cache can never be taken for another model's
        {"sqlite_autoincrement": True},
    )

    @property
    def primary_threshold(self) -> float:
        return float(self.thresholds[0])


class ApiKey(Base):
    """A bearer token of one model with scopes ``ingest`` and/or ``read``.

    Only the SHA-256 of the token is stored; ``prefix`` is its first characters,
    shown in listings so that a user can tell keys apart.
    """

    __tablename__ = "api_key"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("model.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    token_hash: Mapped[str] = mapped_column(String(64))
    """Hex SHA-256 of the token."""
    prefix: Mapped[str] = mapped_column(String(16))
    scopes: Mapped[list[str]] = mapped_column(JSONDocument)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_api_key_token_hash", "token_hash"),)


class Batch(Base):
    """Record of one accepted batch; never rewritten.

    ``idempotency_key`` is unique per model; ``request_hash`` (SHA-256 of the
    request body) tells a replay from a conflicting reuse, and ``response`` is
    the body answered the first time, replayed verbatim. The worker's
    housekeeping deletes rows older than the idempotency retention
    (app/worker/housekeeping.py); the counts live on in the window aggregates.
    """

    __tablename__ = "batch"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("model.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    """One of BATCH_KINDS."""
    event_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """The batch's ``timestamp`` (event time); it chose the window."""
    window_start: Mapped[datetime] = mapped_column(UTCDateTime)
    segment: Mapped[str | None] = mapped_column(String(64))
    """The registered segment the batch named, or null (all traffic only)."""
    n: Mapped[int] = mapped_column(BigInteger)
    """Labelled rows (examples) in the batch (0 for a batch of unlabelled scores)."""
    positives: Mapped[int] = mapped_column(BigInteger)
    """Rows with label 1."""
    unlabelled: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    """Rows without a label (scores only), counted apart from ``n``."""
    response: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        UniqueConstraint("model_id", "idempotency_key"),
        Index("ix_batch_model_id_window_start", "model_id", "window_start"),
        Index("ix_batch_received_at", "received_at"),
        CheckConstraint("kind IN ('scores', 'histogram', 'confusion_matrix')", name="kind_known"),
        CheckConstraint(
            "n >= 0 AND positives >= 0 AND positives <= n AND unlabelled >= 0"
            " AND n + unlabelled > 0",
            name="counts_valid",
        ),
    )


SUM_COLUMNS: tuple[str, ...] = (
    "n",
    "positives",
    "hist_positives",
    "hist_negatives",
    "confusion",
    "sums_positives",
    "sums_negatives",
    "brier_sum",
    "log_loss_sum",
    "score_sum_positive",
    "score_sum_negative",
    "hist_unlabelled",
)
"""The columns of :class:`WindowAggregate` that hold a window's sums (what the window
model reads of a row: ``app.services.windows.aggregate_row.AggregateRow``; a unit test
holds the two equal)."""


class WindowAggregate(Base):
    """Everything one window of one segment received, as exact sums.

    Every field is a sum over the window's batches, so windows merge exactly
    (hour -> day -> week) and batches may arrive in any order.

    Coverage: ``n``/``positives`` count every labelled row; rows without labels
    are only in ``n_unlabelled``/``hist_unlabelled``. The histograms count rows
    of ``scores`` and ``histogram`` batches; the probability sums only rows of
    ``scores`` batches and of ``histogram`` batches that carry sums (their
    ``sums_positives + sums_negatives`` says how many); ``confusion[0]``
    (primary threshold) covers every row, the other thresholds only the rows
    with histograms (a ``confusion_matrix`` batch is counted at the primary
    threshold alone).

    Worker protocol (app/db/queue.py): a batch never writes this row; it
    appends a :class:`BatchDelta`. A window is waiting when it has unfolded
    deltas or ``dirty`` is set (a drift reference or the model's settings
    changed; ``dirty_since`` keeps the first such change). A worker claims
    the row with ``SELECT ... FOR UPDATE SKIP LOCKED`` and a lease, computes
    on these sums plus the deltas it read, and in one fenced transaction
    folds exactly those deltas into the row (``version`` + 1, the deltas
    deleted) and stores the result with the new ``version``.
    """

    __tablename__ = "window_aggregate"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("model.id", ondelete="CASCADE"), primary_key=True
    )
    segment: Mapped[str] = mapped_column(String(64), primary_key=True)
    """A registered segment, or ALL_SEGMENTS ("*") for all traffic."""
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)
    positives: Mapped[int] = mapped_column(BigInteger, default=0)
    hist_positives: Mapped[npt.NDArray[np.int64] | None] = mapped_column(Int64Array)
    """int64, shape (n_bins,): actual positives with a score in bin j; null until a
    batch with scores or a histogram arrives."""
    hist_negatives: Mapped[npt.NDArray[np.int64] | None] = mapped_column(Int64Array)
    """int64, shape (n_bins,): actual negatives with a score in bin j."""
    n_unlabelled: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    """Rows without labels (not in ``n``); labels for the same predictions may
    arrive later as labelled rows."""
    hist_unlabelled: Mapped[npt.NDArray[np.int64] | None] = mapped_column(Int64Array)
    """int64, shape (n_bins,): rows without labels with a score in bin j; null until
    a batch with unlabelled rows arrives."""
    confusion: Mapped[list[dict[str, float]]] = mapped_column(JSONDocument)
    """[{"threshold", "tp", "fp", "fn", "tn"}] in the order of model.thresholds."""
    sums_positives: Mapped[int | None] = mapped_column(BigInteger)
    """ProbabilitySums.positives: positives covered by the sums below (null: none)."""
    sums_negatives: Mapped[int | None] = mapped_column(BigInteger)
    brier_sum: Mapped[float | None] = mapped_column(Double)
    log_loss_sum: Mapped[float | None] = mapped_column(Double)
    score_sum_positive: Mapped[float | None] = mapped_column(Double)
    score_sum_negative: Mapped[float | None] = mapped_column(Double)
    exact_sums: Mapped[dict[str, str] | None] = mapped_column(JSONDocument)
    """The four score sums above as exact fixed-point integers (decimal strings,
    app/services/windows/deltas.py): folding adds these, so the floats above are the same
    whatever the order and grouping of the folds. Null until a fold sets it."""
    batches: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    """Batches folded into this aggregate (the exporter's ingestion counters)."""
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    dirty: Mapped[bool] = mapped_column(Boolean, default=False)
    dirty_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """Optional worker lease: a claimer skips dirty rows whose lease has not expired."""
    claim_attempt: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    """Fencing token: every worker claim increments it; a worker may complete the window
    only while it holds the latest attempt (app/db/queue.py)."""
    detail_due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the stored result's detail tier (curves, ``ops_*`` and curve-area intervals)
    is due for a full refresh; null when it is current. The window is claimable from
    then on, even without new data (app/services/refresh/tiers.py)."""
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (
        Index(
            "ix_window_aggregate_detail_due_at",
            "detail_due_at",
            postgresql_where=text("detail_due_at IS NOT NULL"),
            sqlite_where=text("detail_due_at IS NOT NULL"),
        ),
        Index(
            "ix_window_aggregate_dirty",
            "model_id",
            "dirty_since",
            postgresql_where=text("dirty"),
            sqlite_where=text("dirty"),
        ),
    )


class BatchDelta(Base):
    """What one batch adds to one window aggregate, until the worker folds it in.

    A batch appends one delta per aggregate it counts in (all traffic, and its
    segment's): an insert into this table, which no other batch's insert
    waits for. The worker folds a window's deltas into its aggregate and
    deletes them in the same transaction (app/db/queue.py), so the table
    holds only the unfolded ones. Histograms are sparse: ``bins`` lists the
    bins where the batch has a score (ascending), ``bin_positives``,
    ``bin_negatives`` and ``bin_unlabelled`` the counts there.
    """

    __tablename__ = "batch_delta"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("model.id", ondelete="CASCADE"), primary_key=True
    )
    segment: Mapped[str] = mapped_column(String(64), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    batch_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    n: Mapped[int] = mapped_column(BigInteger)
    positives: Mapped[int] = mapped_column(BigInteger)
    confusion: Mapped[npt.NDArray[np.int64]] = mapped_column(Int64Array)
    """int64, 4 per model threshold (tp, fp, fn, tn); -1 where the batch does not
    tell the matrix at that threshold (a confusion-matrix batch)."""
    bins: Mapped[npt.NDArray[np.int32] | None] = mapped_column(Int32Array)
    """int32 indices of the non-empty bins; null for a confusion-matrix batch."""
    bin_positives: Mapped[npt.NDArray[np.int64] | None] = mapped_column(Int64Array)
    bin_negatives: Mapped[npt.NDArray[np.int64] | None] = mapped_column(Int64Array)
    n_unlabelled: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    """Rows without labels (not in ``n``)."""
    bin_unlabelled: Mapped[npt.NDArray[np.int64] | None] = mapped_column(Int64Array)
    """int64 rows without labels in the bins of ``bins``; null without unlabelled rows."""
    sums: Mapped[npt.NDArray[np.float64] | None] = mapped_column(Float64Array)
    """float64 (positives, negatives, brier, log loss, score sum of positives, of
    negatives) of a scores batch; null otherwise."""

    __table_args__ = (Index("ix_batch_delta_received_at", "received_at"),)


class QuarantinedDelta(Base):
    """A delta the worker could not fold, set aside instead of blocking its window.

    The worker folds a claimed window's deltas one by one when folding them
    together fails (an overflow, a malformed row: input that ingestion's
    checks should have refused); each delta that cannot be folded moves
    here, out of ``batch_delta``, in the claim's transaction, and the others
    are folded (app/services/refresh/groups.py). Rows are kept until their
    window (past the model's retention) or their model is deleted: the exporter counts them
    (``priorwatch_deltas_quarantined_total``) and still counts their batches
    and rows as accepted. docs/operations.md says what to do with them.
    """

    __tablename__ = "quarantined_delta"

    model_id: Mapped[int] = mapped_column(
        ForeignKey("model.id", ondelete="CASCADE"), primary_key=True
    )
    segment: Mapped[str] = mapped_column(String(64), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    batch_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime)
    """When the batch was accepted (the delta's ``received_at``)."""
    quarantined_at: Mapped[datetime] = mapped_column(UTCDateTime)
    n: Mapped[int] = mapped_column(BigInteger)
    """The delta's labelled rows, missing from the window's counts."""
    n_unlabelled: Mapped[int] = mapped_column(BigInteger)
    """The delta's rows without labels, missing from the window's counts."""
    reason: Mapped[str] = mapped_column(Text)
    """Why it could not be folded (the exception's type and message)."""


class WindowMetrics(Base):
    """What the worker computed for one aggregate, and from which version of it."""

    __tablename__ = "window_metrics"

    model_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    segment: Mapped[str] = mapped_column(String(64), primary_key=True)
    window_start: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    aggregate_version: Mapped[int] = mapped_column(BigInteger)
    computed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16))
    """A :class:`app.statuses.StoredStatus` value."""
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONDocument)
    drift: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    curves: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    intervals: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    """Intervals {metric: {"lower", "upper", "level"}} (app/services/windows/compute.py)."""
    estimate: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    """The label-free estimate from the unlabelled rows (docs/estimation.md); null
    without unlabelled rows or without a drift reference."""
    reasons: Mapped[dict[str, str] | None] = mapped_column(JSONDocument)
    """Why each None metric is None: "insufficient_data" or the formula's undefined case."""
    maturity: Mapped[dict[str, Any] | None] = mapped_column(JSONDocument)
    """The completed window of a partially labelled window (docs/maturity.md); null
    with a reason under ``reasons["maturity"]`` where it has a cause."""
    error: Mapped[str | None] = mapped_column(Text)
    """Status "error": what failed (the window is not retried until its aggregate changes)."""
    detail_version: Mapped[int | None] = mapped_column(BigInteger)
    """The aggregate version the detail tier (``curves`` and the detail intervals) was
    computed from: ``aggregate_version`` after a full refresh, older after a summary
    refresh, which carries the previous detail over; null without detail."""
    detail_computed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    """When the detail tier was computed."""

    __table_args__ = (
        ForeignKeyConstraint(
            ["model_id", "segment", "window_start"],
            [
                "window_aggregate.model_id",
                "window_aggregate.segment",
                "window_aggregate.window_start",
            ],
            ondelete="CASCADE",
            name="fk_window_metrics_window_aggregate",
        ),
    )


WA = WindowAggregate
"""Short name of :class:`WindowAggregate` for the query code's long statements."""
WM = WindowMetrics
"""Short name of :class:`WindowMetrics` for the query code's long statements."""
