"""Tiered refresh: the detail stamp on window_metrics, the detail due time on window_aggregate.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

A summary refresh keeps the previous detail tier (curves, ``ops_*`` and
curve-area intervals) and ``window_metrics.detail_version`` /
``detail_computed_at`` say which aggregate version it was computed from and
when; ``window_aggregate.detail_due_at`` is when the window is due for a full
refresh (indexed: the claim query reads it). Every result stored before was a
full one: its detail stamp is its own version and time (results with status
``error`` have no detail), and no detail is due.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_window_aggregate_detail_due_at"


def upgrade() -> None:
    with op.batch_alter_table("window_aggregate") as batch:
        batch.add_column(sa.Column("detail_due_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        INDEX,
        "window_aggregate",
        ["detail_due_at"],
        unique=False,
        postgresql_where=sa.text("detail_due_at IS NOT NULL"),
        sqlite_where=sa.text("detail_due_at IS NOT NULL"),
    )
    with op.batch_alter_table("window_metrics") as batch:
        batch.add_column(sa.Column("detail_version", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("detail_computed_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(
        "UPDATE window_metrics SET detail_version = aggregate_version,"
        " detail_computed_at = computed_at WHERE status <> 'error'"
    )


def downgrade() -> None:
    with op.batch_alter_table("window_metrics") as batch:
        batch.drop_column("detail_computed_at")
        batch.drop_column("detail_version")
    op.drop_index(INDEX, table_name="window_aggregate")
    with op.batch_alter_table("window_aggregate") as batch:
        batch.drop_column("detail_due_at")
