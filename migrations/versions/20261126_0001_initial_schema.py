"""Initial schema: model, api_key, batch, window_aggregate, window_metrics.

Revision ID: 0001
Revises:
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "model",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("window", sa.String(length=8), nullable=False),
        sa.Column("thresholds", _json(), nullable=False),
        sa.Column("pi0", sa.Double(), nullable=False),
        sa.Column("cost_ratio", sa.Double(), nullable=True),
        sa.Column("costs", _json(), nullable=True),
        sa.Column("segments", _json(), nullable=False),
        sa.Column("sla", _json(), nullable=False),
        sa.Column("drift", _json(), nullable=False),
        sa.Column("n_bins", sa.Integer(), nullable=False),
        sa.Column("bin_edges", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.CheckConstraint("n_bins > 0", name=op.f("ck_model_n_bins_positive")),
        sa.CheckConstraint("pi0 > 0 AND pi0 < 1", name=op.f("ck_model_pi0_open_unit")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_model")),
        sa.UniqueConstraint("name", name=op.f("uq_model_name")),
    )
    op.create_table(
        "api_key",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("scopes", _json(), nullable=False),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("revoked_at", _utc(), nullable=True),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["model.id"],
            name=op.f("fk_api_key_model_id_model"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("model_id", "id", name=op.f("pk_api_key")),
    )
    op.create_index("ix_api_key_token_hash", "api_key", ["token_hash"], unique=False)
    op.create_table(
        "batch",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("event_at", _utc(), nullable=False),
        sa.Column("window_start", _utc(), nullable=False),
        sa.Column("segment", sa.String(length=64), nullable=True),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("positives", sa.BigInteger(), nullable=False),
        sa.Column("response", _json(), nullable=False),
        sa.Column("received_at", _utc(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('scores', 'histogram', 'confusion_matrix')",
            name=op.f("ck_batch_kind_known"),
        ),
        sa.CheckConstraint(
            "n > 0 AND positives >= 0 AND positives <= n", name=op.f("ck_batch_counts_valid")
        ),
        sa.ForeignKeyConstraint(
            ["model_id"], ["model.id"], name=op.f("fk_batch_model_id_model"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("model_id", "id", name=op.f("pk_batch")),
        sa.UniqueConstraint(
            "model_id", "idempotency_key", name=op.f("uq_batch_model_id_idempotency_key")
        ),
    )
    op.create_index(
        "ix_batch_model_id_window_start", "batch", ["model_id", "window_start"], unique=False
    )
    op.create_table(
        "window_aggregate",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("segment", sa.String(length=64), nullable=False),
        sa.Column("window_start", _utc(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("positives", sa.BigInteger(), nullable=False),
        sa.Column("hist_positives", sa.LargeBinary(), nullable=True),
        sa.Column("hist_negatives", sa.LargeBinary(), nullable=True),
        sa.Column("confusion", _json(), nullable=False),
        sa.Column("sums_positives", sa.BigInteger(), nullable=True),
        sa.Column("sums_negatives", sa.BigInteger(), nullable=True),
        sa.Column("brier_sum", sa.Double(), nullable=True),
        sa.Column("log_loss_sum", sa.Double(), nullable=True),
        sa.Column("score_sum_positive", sa.Double(), nullable=True),
        sa.Column("score_sum_negative", sa.Double(), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("dirty", sa.Boolean(), nullable=False),
        sa.Column("dirty_since", _utc(), nullable=True),
        sa.Column("lease_expires_at", _utc(), nullable=True),
        sa.Column("created_at", _utc(), nullable=False),
        sa.Column("updated_at", _utc(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["model.id"],
            name=op.f("fk_window_aggregate_model_id_model"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "model_id", "segment", "window_start", name=op.f("pk_window_aggregate")
        ),
    )
    op.create_index(
        "ix_window_aggregate_dirty",
        "window_aggregate",
        ["model_id", "dirty_since"],
        unique=False,
        postgresql_where=sa.text("dirty"),
        sqlite_where=sa.text("dirty"),
    )
    op.create_table(
        "window_metrics",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("segment", sa.String(length=64), nullable=False),
        sa.Column("window_start", _utc(), nullable=False),
        sa.Column("aggregate_version", sa.BigInteger(), nullable=False),
        sa.Column("computed_at", _utc(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("metrics", _json(), nullable=False),
        sa.Column("drift", _json(), nullable=True),
        sa.Column("curves", _json(), nullable=True),
        sa.ForeignKeyConstraint(
            ["model_id", "segment", "window_start"],
            [
                "window_aggregate.model_id",
                "window_aggregate.segment",
                "window_aggregate.window_start",
            ],
            name="fk_window_metrics_window_aggregate",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "model_id", "segment", "window_start", name=op.f("pk_window_metrics")
        ),
    )


def downgrade() -> None:
    op.drop_table("window_metrics")
    op.drop_index(
        "ix_window_aggregate_dirty",
        table_name="window_aggregate",
        postgresql_where=sa.text("dirty"),
        sqlite_where=sa.text("dirty"),
    )
    op.drop_table("window_aggregate")
    op.drop_index("ix_batch_model_id_window_start", table_name="batch")
    op.drop_table("batch")
    op.drop_index("ix_api_key_token_hash", table_name="api_key")
    op.drop_table("api_key")
    op.drop_table("model")
