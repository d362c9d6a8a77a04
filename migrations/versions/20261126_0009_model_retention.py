"""The model setting ``retention``: how long its windows are kept.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

A nullable duration text ("90d") on ``model``; null (every existing model)
keeps every window, as before. The worker's housekeeping deletes the windows
older than it (app/services/retention.py). The column is added and dropped in
place (``recreate="never"``; SQLite drops columns since 3.35): no copy of the
table every other one refers to.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.add_column(sa.Column("retention", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.drop_column("retention")
