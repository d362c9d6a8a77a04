"""Reading ``score,label`` CSV files for ``priorwatch evaluate`` and ``ingest``.

The file has a header row naming a ``score`` and a ``label`` column, in any
order (other columns are ignored, names are case-insensitive); ``ingest``
also reads files without a ``label`` column (scores only). A fast
vectorised parse handles well-formed files; any problem triggers a
line-by-line pass that reports the first offending line.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.errors import InvalidInput

SCORE_COLUMN = "score"
LABEL_COLUMN = "label"
_ENCODING = "utf-8-sig"


def _columns(path: Path, *, label_required: bool) -> tuple[int, int | None, int]:
    """Indices of the score and label columns (None: no label column, when allowed),
    and the number of header fields."""
    with path.open(newline="", encoding=_ENCODING) as fh:
        header = next(csv.reader(fh), None)
    if not header:
        raise InvalidInput("header", "line 1: the file is empty; expected 'score,label' columns")
    names = [h.strip().lower() for h in header]
    required = (SCORE_COLUMN, LABEL_COLUMN) if label_required else (SCORE_COLUMN,)
    missing = [c for c in required if c not in names]
    if missing:
        raise InvalidInput(
            "header",
            f"line 1: no column named {', '.join(map(repr, missing))}; "
            f"the header found is {','.join(header)!r}",
        )
    i_label = names.index(LABEL_COLUMN) if LABEL_COLUMN in names else None
    return names.index(SCORE_COLUMN), i_label, len(names)


def read_text_columns(path: Path | str, names: tuple[str, ...]) -> dict[str, list[str]]:
    """The raw text of the optional columns ``names`` present in the header.

    Names match case-insensitively; a column absent from the header is
    absent from the result. Call it after :func:`read_scores_labels` (which
    has checked the rows): ``result[name][i]`` is the cell of data row i
    (blank lines skipped), stripped.
    """
    p = Path(path)
    with p.open(newline="", encoding=_ENCODING) as fh:
        reader = csv.reader(fh)
        header = [h.strip().lower() for h in next(reader, [])]
        wanted = {name: header.index(name) for name in names if name in header}
        columns: dict[str, list[str]] = {name: [] for name in wanted}
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            for name, i in wanted.items():
                columns[name].append(row[i].strip())
    return columns


def _parse_slowly(
    path: Path, i_score: int, i_label: int | None, width: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8] | None]:
    """Line-by-line parse: the arrays, or InvalidInput naming the first bad line."""
    scores: list[float] = []
    labels: list[int] = []
    with path.open(newline="", encoding=_ENCODING) as fh:
        reader = csv.reader(fh)
        next(reader)
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if len(row) != width:
                raise InvalidInput(
                    "file", f"line {line}: {len(row)} fields, the header has {width}"
                )
            try:
                s = float(row[i_score])
            except ValueError:
                raise InvalidInput(
                    "score", f"line {line}: {row[i_score]!r} is not a number"
                ) from None
            if not (np.isfinite(s) and 0.0 <= s <= 1.0):
                raise InvalidInput("score", f"line {line}: {row[i_score]!r} is outside [0, 1]")
            scores.append(s)
            if i_label is None:
                continue
            try:
                y = float(row[i_label])
            except ValueError:
                y = float("nan")
            if y not in (0.0, 1.0):
                raise InvalidInput("label", f"line {line}: {row[i_label]!r} is not 0 or 1")
            labels.append(int(y))
    if not scores:
        raise InvalidInput("file", "has a header but no data rows")
    array = np.asarray(scores, dtype=np.float64)
    return array, None if i_label is None else np.asarray(labels, dtype=np.int8)


def read_scores_labels(path: Path | str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Scores and labels from a CSV file with ``score`` and ``label`` columns.

    Returns
    -------
    scores : ndarray of float64, shape (n,)
        ``scores[i]`` is the score on data row i, in [0, 1].
    labels : ndarray of int8, shape (n,)
        ``labels[i]`` is 1 when the example of data row i is an actual positive.

    Raises
    ------
    InvalidInput
        Missing columns (field ``header``), a malformed row (``file``), a score
        that is not a number in [0, 1] (``score``) or a label other than 0/1
        (``label``); the reason starts with the line number.
    """
    scores, labels = _read(Path(path), label_required=True)
    assert labels is not None
    return scores, labels


def read_scores(path: Path | str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8] | None]:
    """Like :func:`read_scores_labels`, but the ``label`` column is optional.

    Without one, ``labels`` is None: the file holds scores whose labels are
    not known (unlabelled rows, for the label-free estimates).
    """
    return _read(Path(path), label_required=False)


def _read(
    p: Path, *, label_required: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8] | None]:
    i_score, i_label, width = _columns(p, label_required=label_required)
    usecols = (i_score,) if i_label is None else (i_score, i_label)
    try:
        with warnings.catch_warnings():
            # a header-only file is reported by the line-by-line pass below
            warnings.filterwarnings("ignore", "loadtxt: input contained no data", UserWarning)
            data = np.loadtxt(
                p,
                delimiter=",",
                skiprows=1,
                usecols=usecols,
                dtype=np.float64,
                ndmin=2,
                encoding=_ENCODING,
            )
    except ValueError:
        return _parse_slowly(p, i_score, i_label, width)
    scores = data[:, 0]
    labels = None if i_label is None else data[:, 1]
    valid_scores = np.isfinite(scores) & (scores >= 0.0) & (scores <= 1.0)
    valid_labels = labels is None or bool(np.isin(labels, (0.0, 1.0)).all())
    if scores.size == 0 or not (valid_scores.all() and valid_labels):
        return _parse_slowly(p, i_score, i_label, width)
    return np.ascontiguousarray(scores), None if labels is None else labels.astype(np.int8)
