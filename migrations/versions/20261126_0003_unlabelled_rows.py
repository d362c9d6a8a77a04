"""Unlabelled rows: counts on batch and window_aggregate, the histogram, the stored estimate.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26

A batch may carry scores without labels. ``batch.unlabelled`` counts those
rows (``n`` stays the labelled rows, now possibly 0); a window aggregate adds
them to ``n_unlabelled`` and ``hist_unlabelled``; ``window_metrics.estimate``
holds the worker's label-free estimate. Existing rows get 0 unlabelled rows
and no estimate.
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

OLD_COUNTS = "n > 0 AND positives >= 0 AND positives <= n"
NEW_COUNTS = (
    "n >= 0 AND positives >= 0 AND positives <= n AND unlabelled >= 0 AND n + unlabelled > 0"
)


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("batch") as batch:
        batch.add_column(
            sa.Column("unlabelled", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
        batch.drop_constraint(op.f("ck_batch_counts_valid"), type_="check")
        batch.create_check_constraint(op.f("ck_batch_counts_valid"), NEW_COUNTS)
    with op.batch_alter_table("window_aggregate") as batch:
        batch.add_column(
            sa.Column("n_unlabelled", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(sa.Column("hist_unlabelled", sa.LargeBinary(), nullable=True))
    with op.batch_alter_table("window_metrics") as batch:
        batch.add_column(sa.Column("estimate", _json(), nullable=True))


def downgrade() -> None:
    # Unlabelled-only batches cannot be represented in the old schema: they go.
    op.execute("DELETE FROM batch WHERE n = 0")
    op.execute(
        "DELETE FROM window_metrics WHERE EXISTS (SELECT 1 FROM window_aggregate a"
        " WHERE a.model_id = window_metrics.model_id AND a.segment = window_metrics.segment"
        " AND a.window_start = window_metrics.window_start AND a.n = 0)"
    )
    op.execute("DELETE FROM window_aggregate WHERE n = 0")
    with op.batch_alter_table("window_metrics") as batch:
        batch.drop_column("estimate")
    with op.batch_alter_table("window_aggregate") as batch:
        batch.drop_column("hist_unlabelled")
        batch.drop_column("n_unlabelled")
    with op.batch_alter_table("batch") as batch:
        batch.drop_constraint(op.f("ck_batch_counts_valid"), type_="check")
        batch.create_check_constraint(op.f("ck_batch_counts_valid"), OLD_COUNTS)
        batch.drop_column("unlabelled")
