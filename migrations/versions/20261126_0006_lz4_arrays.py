"""Array columns compressed with lz4 on PostgreSQL.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

The numpy arrays stored as ``bytea`` (the window histograms above all, 80 KB
each at 10,000 bins) are rewritten by every fold, and PostgreSQL compresses
every large value it stores: ``lz4`` costs several times less server CPU
than the default ``pglz``, for larger values (docs/worker.md, "Housekeeping
and storage"). The service's connections ask for ``lz4`` as their session
default already (app/db/session.py); this sets it on the array columns
themselves, so that any connection writing them uses it. Where the server
has no lz4 (before PostgreSQL 14, or built without it), and on SQLite,
nothing changes. Values stored before stay as they are and readable (each
value records its own method); a value gets ``lz4`` when it is next
written. The downgrade gives the columns back to the server's default
method; values written with ``lz4`` meanwhile stay readable.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.runtime.migration")

ARRAY_COLUMNS = {
    "window_aggregate": ("hist_positives", "hist_negatives", "hist_unlabelled"),
    "batch_delta": (
        "confusion",
        "bins",
        "bin_positives",
        "bin_negatives",
        "bin_unlabelled",
        "sums",
    ),
    "model": ("bin_edges",),
}
"""Every ``bytea`` column of the schema (app/db/types.py arrays)."""


def _set_compression(method: str) -> None:
    for table, columns in ARRAY_COLUMNS.items():
        op.execute(
            f"ALTER TABLE {table} "
            + ", ".join(f"ALTER COLUMN {c} SET COMPRESSION {method}" for c in columns)
        )


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    if bind.dialect.server_version_info < (14,):
        log.info("PostgreSQL before 14 has only pglz: the array columns keep it")
        return
    savepoint = bind.begin_nested()
    try:
        _set_compression("lz4")
    except sa.exc.DBAPIError as exc:  # a server built without lz4
        savepoint.rollback()
        log.warning("lz4 is not available (%s): the array columns keep pglz", exc.orig)
        return
    savepoint.commit()


def downgrade() -> None:
    """Back to the server's default method (``default_toast_compression``: pglz unless
    configured otherwise), as before the upgrade."""
    bind = op.get_bind()
    if bind.dialect.name == "postgresql" and bind.dialect.server_version_info >= (14,):
        _set_compression("DEFAULT")
