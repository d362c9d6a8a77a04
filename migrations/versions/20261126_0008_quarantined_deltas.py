"""The dead-letter table of deltas the worker could not fold.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

A delta whose fold fails (an overflow or a malformed row) is moved from
``batch_delta`` to ``quarantined_delta`` with the reason, and the window's
other deltas are folded without it (app/services/window_refresh.py), instead
of the whole claimed group being rolled back and retried forever. The
upgrade creates the empty table (no batch mode needed: nothing is altered);
the downgrade drops it with its rows (a release before this revision has
nowhere to keep them).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quarantined_delta",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("segment", sa.String(length=64), nullable=False),
        sa.Column("window_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("batch_id", sa.Uuid(), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("quarantined_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("n_unlabelled", sa.BigInteger(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["model.id"],
            name=op.f("fk_quarantined_delta_model_id_model"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "model_id", "segment", "window_start", "batch_id", name=op.f("pk_quarantined_delta")
        ),
    )


def downgrade() -> None:
    op.drop_table("quarantined_delta")
