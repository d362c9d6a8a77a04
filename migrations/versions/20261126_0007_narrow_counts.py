"""Counts stored narrowed: the downgrade widens them back to raw int64.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26

From this revision the service stores every array of int64 counts (the
window histograms, the deltas' bin counts and confusion cells) in the
narrowest width that holds its largest count, after an 8-byte marker and
one byte of width (app/db/types.py, ``encode_counts``): a histogram of 10,000
bins with counts under 256 takes 10 KB instead of 80 KB, which every fold
reads and writes. The schema does not change. The upgrade rewrites nothing:
the service reads both forms, and a row is narrowed by its next write.

The downgrade rewrites every narrowed value back to raw little-endian int64
bytes, the only form a release before this revision reads, so that one can
run on the database again. It reads and writes the rows in key order, 500 at
a time. The marker is 8 bytes of 0xff: -1 as an int64, which no raw array of
counts starts with.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MARKER = b"\xff" * 8
WIDTHS = {1: "<u1", 2: "<u2", 4: "<u4", 8: "<i8"}
PAGE = 500

COUNT_COLUMNS = {
    "window_aggregate": (
        ("model_id", "segment", "window_start"),
        ("hist_positives", "hist_negatives", "hist_unlabelled"),
    ),
    "batch_delta": (
        ("model_id", "segment", "window_start", "batch_id"),
        ("confusion", "bin_positives", "bin_negatives", "bin_unlabelled"),
    ),
}
"""Each table with int64 count arrays: its key, then those columns."""


def upgrade() -> None:
    """Nothing to rewrite: raw values read as before and are narrowed when next written."""


def _widened(value: bytes | None) -> bytes | None:
    """Raw ``<i8`` bytes of a narrowed value; any other value as it is.

    The form is read here, not through ``app.db.types``: this downgrade must
    keep reading the form of revision 0007 whatever the service writes later.
    """
    if value is None or not value.startswith(MARKER):
        return value
    counts = np.frombuffer(value, dtype=WIDTHS[value[len(MARKER)]], offset=len(MARKER) + 1)
    return counts.astype("<i8").tobytes()


def downgrade() -> None:
    bind = op.get_bind()
    for name, (key, columns) in COUNT_COLUMNS.items():
        table = sa.table(
            name,
            *(sa.column(k) for k in key),
            *(sa.column(c, sa.LargeBinary()) for c in columns),
        )
        keys = [table.c[k] for k in key]
        read = sa.select(*keys, *(table.c[c] for c in columns)).order_by(*keys).limit(PAGE)
        write = (
            sa.update(table)
            .where(*(table.c[k] == sa.bindparam(f"k_{k}") for k in key))
            .values({c: sa.bindparam(f"v_{c}", type_=sa.LargeBinary()) for c in columns})
        )
        after: tuple[object, ...] | None = None
        while True:
            page = read if after is None else read.where(sa.tuple_(*keys) > sa.tuple_(*after))
            rows = bind.execute(page).all()
            if not rows:
                break
            changed = []
            for row in rows:
                stored = row[len(key) :]
                wide = [_widened(v) for v in stored]
                if any(w is not v for w, v in zip(wide, stored, strict=True)):
                    params = {f"k_{k}": v for k, v in zip(key, row, strict=False)}
                    changed.append(
                        params | {f"v_{c}": w for c, w in zip(columns, wide, strict=True)}
                    )
            if changed:
                bind.execute(write, changed)
            after = tuple(rows[-1][: len(key)])
