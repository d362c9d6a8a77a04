"""The model setting ``exposition``: which series ``GET /metrics`` writes of its windows.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27

Null (every existing model): the service's default, ``PRIORWATCH_METRICS_EXPOSITION``
(compact unless set). Else ``"compact"``, ``"full"`` or a list of the trimmed families
written whole (docs/reading.md, "Compact by default").
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.add_column(sa.Column("exposition", json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.drop_column("exposition")
