"""The model setting ``retention``: how long its windows are kept.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

A nullable duration text ("90d") on ``model``; null (every existing model)
keeps every window, as before. The worker's housekeeping deletes the windows
older than it (app/services/retention.py).

On SQLite the upgrade also copies ``model`` into a table with AUTOINCREMENT
ids: a deleted model's id is never given again (SQLite would give the largest
one again), so nothing keyed by a model id (a worker's reference cache, a
stale claim) can be taken for another model's. The migration connection does
not enforce foreign keys, so the copy leaves the rows referring to ``model``
alone. The downgrade drops the column in place (SQLite 3.35+) and keeps
AUTOINCREMENT.
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
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "model",
        recreate="always" if sqlite else "never",
        table_kwargs={"sqlite_autoincrement": True},
    ) as batch:
        batch.add_column(sa.Column("retention", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.drop_column("retention")
