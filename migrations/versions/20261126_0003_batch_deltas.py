"""Append, then fold: batch_delta table; exact sums and batch count on window_aggregate.

Existing aggregates keep their sums; their ``batches`` count is rebuilt from
the batch rows, and their exact sums are derived from the stored floats at
their first fold.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def _utc() -> sa.DateTime:
    return sa.DateTime(timezone=True)


_BACKFILL_BATCHES = """
UPDATE window_aggregate SET batches = (
    SELECT count(*) FROM batch b
    WHERE b.model_id = window_aggregate.model_id
      AND b.window_start = window_aggregate.window_start
      AND (window_aggregate.segment = '*' OR b.segment = window_aggregate.segment)
)
"""


def upgrade() -> None:
    op.create_table(
        "batch_delta",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("segment", sa.String(length=64), nullable=False),
        sa.Column("window_start", _utc(), nullable=False),
        sa.Column("batch_id", sa.Uuid(), nullable=False),
        sa.Column("received_at", _utc(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("positives", sa.BigInteger(), nullable=False),
        sa.Column("confusion", sa.LargeBinary(), nullable=False),
        sa.Column("bins", sa.LargeBinary(), nullable=True),
        sa.Column("bin_positives", sa.LargeBinary(), nullable=True),
        sa.Column("bin_negatives", sa.LargeBinary(), nullable=True),
        sa.Column("sums", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["model.id"],
            name=op.f("fk_batch_delta_model_id_model"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "model_id", "segment", "window_start", "batch_id", name=op.f("pk_batch_delta")
        ),
    )
    op.create_index("ix_batch_delta_received_at", "batch_delta", ["received_at"])
    op.create_index("ix_batch_received_at", "batch", ["received_at"])
    with op.batch_alter_table("window_aggregate") as batch:
        batch.add_column(sa.Column("exact_sums", _json(), nullable=True))
        batch.add_column(
            sa.Column("batches", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    op.execute(_BACKFILL_BATCHES)


def downgrade() -> None:
    # Unfolded deltas cannot be expressed in the old schema: fold them first
    # (run the worker until the queue is empty), then downgrade.
    with op.batch_alter_table("window_aggregate") as batch:
        batch.drop_column("batches")
        batch.drop_column("exact_sums")
    op.drop_index("ix_batch_received_at", table_name="batch")
    op.drop_index("ix_batch_delta_received_at", table_name="batch_delta")
    op.drop_table("batch_delta")
