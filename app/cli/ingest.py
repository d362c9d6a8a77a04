"""``priorwatch ingest FILE``: scores (labelled or not) from a CSV or Parquet file to a model.

Columns: ``score`` (required), ``label`` (optional: without it every row is
unlabelled), ``timestamp`` and ``segment`` (optional; names case-insensitive).
Rows are grouped by the model's window of their timestamp and by segment,
each group is cut into chunks of at most :data:`CHUNK_ROWS` rows, and each
chunk is logged through the Python client (app/cli/sending.py) with the
group's earliest timestamp as a batch of its own, under an Idempotency-Key
derived from the file's bytes and the chunk (:func:`chunk_key`): sending the
same file again is recognised by the service and counts nothing twice.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
import typer

from app.cli.admin import ADMIN_HINT
from app.cli.service import (
    DEFAULT_RETRY_SECONDS,
    DEFAULT_URL,
    EXIT_USAGE,
    AdminTokenOption,
    RetryOption,
    Service,
    TokenOption,
    UrlOption,
    fail,
    require_token,
)
from app.errors import InvalidInput
from app.metrics.validation import check_scores_labels

TIMESTAMP_COLUMN = "timestamp"
SEGMENT_COLUMN = "segment"
PROGRESS_MIN_ROWS = 100_000
"""Files with at least this many rows show a progress bar while sending."""
CHUNK_ROWS = 1_000_000
"""Rows per batch at most; part of every chunk's Idempotency-Key (:func:`chunk_key`)."""


@dataclass(frozen=True)
class LabelledRows:
    """The rows of an input file: ``scores[i]``, ``labels[i]`` (None: a file
    without labels) and, when the file has those columns, ``timestamps[i]``
    (text) and ``segments[i]`` ("" for none)."""

    scores: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int64] | None
    timestamps: list[str] | None
    segments: list[str] | None


def read_csv_rows(path: Path) -> LabelledRows:
    """The rows of a CSV file (InvalidInput naming the line of the first problem)."""
    from app.csv_input import read_scores, read_text_columns

    scores, labels = read_scores(path)
    text = read_text_columns(path, (TIMESTAMP_COLUMN, SEGMENT_COLUMN))
    return LabelledRows(
        scores,
        None if labels is None else labels.astype(np.int64),
        text.get(TIMESTAMP_COLUMN),
        text.get(SEGMENT_COLUMN),
    )


def _cell_text(value: Any) -> str:
    """A Parquet cell as text: times in ISO 8601, missing values empty."""
    if value is None:
        return ""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def read_parquet_rows(path: Path) -> LabelledRows:
    """The rows of a Parquet file (needs pyarrow; a usage error says so without it)."""
    try:
        parquet: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        fail("reading Parquet needs pyarrow: pip install pyarrow (or convert to CSV)", EXIT_USAGE)
    table = parquet.read_table(path)
    columns = {name.lower(): table.column(name).to_pylist() for name in table.column_names}
    if "score" not in columns:
        raise InvalidInput(
            "header", f"no column named 'score'; the columns found are {table.column_names}"
        )
    labels: npt.NDArray[np.bool_] | None = None
    if "label" in columns:
        scores, labels = check_scores_labels(columns["score"], columns["label"])
    else:  # scores only: checked as scores with any labels
        scores, _ = check_scores_labels(columns["score"], np.zeros(table.num_rows, np.int8))

    def text(name: str) -> list[str] | None:
        values = columns.get(name)
        if values is None:
            return None
        return [_cell_text(v) for v in values]

    return LabelledRows(
        scores,
        None if labels is None else labels.astype(np.int64),
        text(TIMESTAMP_COLUMN),
        text(SEGMENT_COLUMN),
    )


def parse_timestamp(text: str, row: int) -> datetime:
    """An ISO 8601 time; without an offset it is UTC (as the service reads batch times)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            TIMESTAMP_COLUMN, f"data row {row + 1}: {text!r} is not an ISO 8601 time"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@dataclass(frozen=True)
class Group:
    """The rows of one window and segment, and the earliest time among them."""

    rows: npt.NDArray[np.intp]
    timestamp: datetime | None
    segment: str | None


def group_rows(rows: LabelledRows, window: str) -> list[Group]:
    """Rows grouped by (window of their timestamp, segment), oldest window first.

    Rows without a timestamp column form groups with ``timestamp=None`` (the
    service then uses the time it receives them); an empty segment cell is
    the all-traffic segment (None). Each distinct timestamp text is parsed once.
    """
    from app.timegrid import window_start

    n = rows.scores.size
    if rows.timestamps is None:
        moments: list[datetime | None] = [None]
        time_code = np.zeros(n, dtype=np.intp)
    else:
        texts, first_row, time_code = np.unique(
            np.asarray(rows.timestamps, dtype=str), return_index=True, return_inverse=True
        )
        moments = [parse_timestamp(str(t), int(i)) for t, i in zip(texts, first_row, strict=True)]
    starts = [None if m is None else window_start(m, window) for m in moments]
    segment_names, segment_code = np.unique(
        np.asarray(rows.segments if rows.segments is not None else [""] * n, dtype=str),
        return_inverse=True,
    )
    groups: dict[tuple[datetime | None, str], list[npt.NDArray[np.intp]]] = {}
    pair_code = time_code.astype(np.int64) * segment_names.size + segment_code
    codes, inverse = np.unique(pair_code, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(codes.size + 1))
    earliest: dict[tuple[datetime | None, str], datetime | None] = {}
    for k, code in enumerate(codes):
        t, g = divmod(int(code), segment_names.size)
        key = (starts[t], str(segment_names[g]))
        groups.setdefault(key, []).append(order[bounds[k] : bounds[k + 1]])
        moment = moments[t]
        known = earliest.get(key)
        earliest[key] = (
            moment if known is None or (moment is not None and moment < known) else known
        )
    result = [
        Group(np.sort(np.concatenate(parts)), earliest[key], key[1] or None)
        for key, parts in groups.items()
    ]
    oldest = datetime.min.replace(tzinfo=UTC)
    result.sort(key=lambda g: (g.timestamp or oldest, g.segment or ""))
    return result


def file_digest(path: Path) -> str:
    """The SHA-256 of the file's bytes, in hex."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def chunk_key(digest: str, model: str, index: int) -> str:
    """The Idempotency-Key of chunk ``index`` of the file of SHA-256 ``digest``.

    The same file sent to the same model again gives the same keys, so the
    service recognises every chunk as already stored (docs/cli.md, "ingest").
    """
    return f"ingest:{model}:{digest}:{CHUNK_ROWS}:{index}"


def chunks(groups: list[Group]) -> list[tuple[Group, npt.NDArray[np.intp]]]:
    """Each group's rows cut into runs of at most :data:`CHUNK_ROWS`, in file order."""
    return [
        (g, g.rows[i : i + CHUNK_ROWS]) for g in groups for i in range(0, g.rows.size, CHUNK_ROWS)
    ]


def ingest_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="CSV (or Parquet) with score[,label,timestamp,segment] columns",
            exists=True,
            dir_okay=False,
            readable=True,
        ),
    ],
    model: Annotated[str, typer.Option("--model", help="the model's name")],
    url: UrlOption = DEFAULT_URL,
    token: TokenOption = None,
    admin_token: AdminTokenOption = None,
    retry_seconds: RetryOption = DEFAULT_RETRY_SECONDS,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="send with fresh Idempotency-Keys: counted again if sent before"
        ),
    ] = False,
) -> None:
    """Send the scores of FILE to MODEL (a key with the ingest scope); once per file.

    Without a label column the rows are unlabelled (label-free estimates).
    Sending the same file again counts nothing twice, unless --force.
    """
    from app.cli.sending import sending, sent_before

    key = require_token(
        token or admin_token, f"pass --token (a key with ingest scope), or {ADMIN_HINT}"
    )
    try:
        if file.suffix.lower() in (".parquet", ".pq"):
            rows = read_parquet_rows(file)
        else:
            rows = read_csv_rows(file)
        window = Service(url, key).get_json(f"/v1/models/{model}")["window"]
        groups = group_rows(rows, window)
    except InvalidInput as exc:
        raise typer.BadParameter(exc.reason, param_hint=exc.field) from exc
    digest = file_digest(file)
    n, pieces = rows.scores.size, chunks(groups)
    with (
        sending(url, key, model, retry_seconds) as client,
        typer.progressbar(
            length=n, label="sending", hidden=n < PROGRESS_MIN_ROWS, file=sys.stderr
        ) as bar,
    ):
        for index, (g, part) in enumerate(pieces):
            batch_key = None if force else chunk_key(digest, model, index)
            at, segment, scores = g.timestamp, g.segment, rows.scores[part]
            if rows.labels is None:
                client.log_scores(scores, at, segment, idempotency_key=batch_key)
            else:
                client.log(scores, rows.labels[part], at, segment, idempotency_key=batch_key)
            bar.update(part.size)
        known = sent_before(client)
    kind = "unlabelled" if rows.labels is None else "labelled"
    typer.echo(
        f"sent {n:,} {kind} rows of {file.name} to {model} in {len(pieces)} chunks "
        f"({len(groups)} window/segment groups)"
    )
    if known:
        typer.echo(
            f"{len(known)} of them ({sum(b.rows for b in known):,} rows) were sent before "
            "at another time: not counted again (--force sends them anew)",
            err=True,
        )
