"""Worker: claim fencing token on window_aggregate; intervals, reasons, error on window_metrics.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("window_aggregate") as batch:
        batch.add_column(
            sa.Column("claim_attempt", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    with op.batch_alter_table("window_metrics") as batch:
        batch.add_column(sa.Column("intervals", _json(), nullable=True))
        batch.add_column(sa.Column("reasons", _json(), nullable=True))
        batch.add_column(sa.Column("error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("window_metrics") as batch:
        batch.drop_column("error")
        batch.drop_column("reasons")
        batch.drop_column("intervals")
    with op.batch_alter_table("window_aggregate") as batch:
        batch.drop_column("claim_attempt")
