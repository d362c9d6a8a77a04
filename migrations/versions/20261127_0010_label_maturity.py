"""Label maturity: the model settings ``label_missingness`` and ``label_horizon``,
and the completed window of a partially labelled window (``window_metrics.maturity``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27

Every existing model gets ``label_missingness`` "none": its windows are read as
before (the labelled rows are the window) until its owner chooses "class" or
"score"; new models default to "class" (app/services/models/settings.py).
``label_horizon`` is null (not set). ``window_metrics.maturity`` is null until
the worker computes a window again (docs/maturity.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.add_column(
            sa.Column(
                "label_missingness", sa.String(length=8), nullable=False, server_default="none"
            )
        )
        batch.add_column(sa.Column("label_horizon", sa.String(length=16), nullable=True))
    with op.batch_alter_table("window_metrics", recreate="never") as batch:
        batch.add_column(sa.Column("maturity", _json(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("window_metrics", recreate="never") as batch:
        batch.drop_column("maturity")
    with op.batch_alter_table("model", recreate="never") as batch:
        batch.drop_column("label_horizon")
        batch.drop_column("label_missingness")
