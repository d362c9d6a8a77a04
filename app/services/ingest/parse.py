"""Turn a raw batch body into validated counts, without per-element Python work.

Two parsers, one meaning:

- fast path (the common raw batch): simdjson validates the whole document and
  converts the ``scores`` and ``labels`` arrays straight to float64/int64
  buffers in C, with no Python object per element (bench/bench_ingest.py);
- general path: orjson, then one numpy conversion per array. It handles
  everything the fast path declines (nested or non-numeric arrays, labels
  written as 1.0 or true, histograms, malformed JSON, repeated keys), so the
  fast path only ever takes documents whose meaning is unambiguous. A key
  repeated in any object is refused on this path (app/services/ingest/json_keys.py),
  so both parsers give the same answer.

Histogram batches give each class densely or in the sparse form of
:mod:`app.services.ingest.sparse`, optionally with score sums.

Validation of scores and labels is :func:`app.metrics.validation.
check_scores_labels` (one place decides). Every error is
:class:`InvalidInput` naming the field, or :class:`MalformedBody`; nothing
here touches the database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import simdjson

from app.config import Settings
from app.db.models import BATCH_KINDS
from app.errors import InvalidInput, MalformedBody
from app.metrics.binning import Counts, checked_histogram_counts
from app.metrics.confusion import ConfusionCounts
from app.metrics.probability import ProbabilitySums
from app.metrics.validation import check_scores_labels
from app.services.ingest.json_keys import check_unique_keys, duplicated_key
from app.services.ingest.sparse import integer_array, parse_score_sums, parse_sparse_counts
from app.services.models.config import ModelConfig
from app.services.models.retention import parse_retention
from app.services.windows.limits import MAX_BATCH_COUNT, check_batch_counts, check_batch_total
from app.timegrid import EXAMPLE, parse_instant, shown, window_start

BATCH_FIELDS = frozenset(
    {"timestamp", "segment", "scores", "labels", "histogram", "confusion_matrix"}
)
HISTOGRAM_FIELDS = frozenset({"positives", "negatives", "sums", "unlabelled"})
"""Keys of a histogram batch's object."""


@dataclass(frozen=True, eq=False)
class ParsedBatch:
    """One validated batch, reduced to the sums a window aggregate stores.

    Attributes
    ----------
    kind : "scores", "histogram" or "confusion_matrix".
    event_at : event time (UTC); ``window_start`` is the start of its window.
    segment : a registered segment, or None.
    n, positives : labelled rows and rows with label 1.
    hist_positives, hist_negatives : int64, shape (n_bins,), or None for a
        confusion-matrix batch; element j counts the class's rows in bin j.
    confusion : one entry per model threshold (primary first): the exact
        matrix at that threshold, or None where the batch does not tell it
        (a confusion-matrix batch only knows the primary threshold).
    sums : per-example probability sums (scores batches, and histogram batches
        that carry ``sums``), else None.
    unlabelled : int64, shape (n_bins,), or None: rows without labels per bin
        (``scores`` without ``labels``, or a histogram's ``unlabelled``).
    n_unlabelled : rows without labels (not counted in ``n``).
    late_labels : labelled histogram rows older than the backfill age, within the
        model's ``label_horizon``: accepted only for a window that holds
        unlabelled rows (app/services/ingest/batch.py checks it).
    """

    kind: str
    event_at: datetime
    window_start: datetime
    segment: str | None
    n: int
    positives: int
    hist_positives: Counts | None
    hist_negatives: Counts | None
    confusion: tuple[ConfusionCounts | None, ...]
    sums: ProbabilitySums | None
    unlabelled: Counts | None = None
    n_unlabelled: int = 0
    late_labels: bool = False


def _has_exactly_two(body: bytes, char: bytes) -> bool:
    first = body.find(char)
    second = body.find(char, first + 1) if first >= 0 else -1
    return second >= 0 and body.find(char, second + 1) < 0  # find() is memchr-fast


POOLED_PARSERS = 2
"""Idle simdjson parsers kept for reuse. A parser keeps the buffers of the
largest document it parsed; reusing one spares a new parser's first touch of
them (about a quarter of the parse time of a 100k-row body on the
development machine). The parse holds the GIL, so two cover the requests of
a process; more at once create more, dropped when returned."""

POOLED_PARSER_MAX_BYTES = 4 * 1024 * 1024
"""A parser that read a larger body is dropped, not pooled: a parser holds
about three times the size of the largest body it read (about 13 MB for a
4 MB body), so the pool holds at most about 26 MB."""

_IDLE_PARSERS: list[simdjson.Parser] = []  # list.pop/append are atomic: no lock needed


def _fast_scores_document(body: bytes) -> dict[str, Any] | None:
    """The document with ``scores``/``labels`` as numpy arrays, or None to use orjson.

    Taken only when the body is a JSON object whose only arrays are flat
    ``scores`` (numbers) and ``labels`` (integers) and whose other values are
    scalars: exactly two ``[`` in the body (a ``[`` inside a string also
    declines), which rules out nested arrays that simdjson would flatten; and
    whose keys are all distinct (duplicates are refused by the general path).
    """
    if not _has_exactly_two(body, b"["):
        return None
    try:
        parser = _IDLE_PARSERS.pop()
    except IndexError:
        parser = simdjson.Parser()
    out = _scores_arrays(parser, body)
    # the document is gone with _scores_arrays' frame: the parser is free again
    if len(body) <= POOLED_PARSER_MAX_BYTES and len(_IDLE_PARSERS) < POOLED_PARSERS:
        _IDLE_PARSERS.append(parser)
    return out


def _scores_arrays(parser: simdjson.Parser, body: bytes) -> dict[str, Any] | None:
    """:func:`_fast_scores_document` with ``parser``. What it returns holds no
    simdjson object (plain values and arrays with their own buffers), so the
    parser can be reused once it returns."""
    try:
        doc = parser.parse(body)
        if not isinstance(doc, simdjson.Object):
            return None
        keys = list(doc.keys())  # every key as written, duplicates included
        if duplicated_key(keys) is not None:
            return None  # the general path refuses it (app/services/ingest/json_keys.py)
        out: dict[str, Any] = {}
        for key in keys:  # items() would unbox the arrays into lists
            value = doc[key]
            nested = isinstance(value, simdjson.Object | simdjson.Array)
            if nested and key not in ("scores", "labels"):
                return None
            out[key] = value
        scores, labels = out.get("scores"), out.get("labels")
        if not (isinstance(scores, simdjson.Array) and isinstance(labels, simdjson.Array)):
            return None
        out["scores"] = np.frombuffer(scores.as_buffer(of_type="d"), dtype=np.float64)
        out["labels"] = np.frombuffer(labels.as_buffer(of_type="i"), dtype=np.int64)
    except (ValueError, TypeError, RuntimeError):  # malformed or not plain numbers: orjson decides
        return None
    return out


def load_document(body: bytes) -> dict[str, Any]:
    """Parse a body that may carry ``scores``/``labels`` (as lists or numpy arrays)."""
    fast = _fast_scores_document(body)
    return fast if fast is not None else load_json_object(body)


def load_json_object(body: bytes) -> dict[str, Any]:
    """Parse ``body`` as a JSON object (:class:`MalformedBody` otherwise).

    A key repeated in any object is :class:`~app.services.ingest.json_keys.DuplicateKey`.
    """
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedBody(f"the body is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise MalformedBody("the body must be a JSON object")
    check_unique_keys(body)
    return doc


def parse_timestamp(
    value: Any, *, now: datetime, settings: Settings, max_age: timedelta | None = None
) -> datetime:
    """The event time, within the accepted backfill/skew range.

    An ISO 8601 string (a time without an offset is taken as UTC) or a number
    of seconds since the Unix epoch, read by :func:`app.timegrid.
    parse_instant` like every date of the API. ``max_age``: the oldest accepted
    age (default the backfill age; :func:`label_backfill_age` for labels).
    """
    if value is None:
        raise InvalidInput(
            "timestamp",
            f"is required: an ISO 8601 string, e.g. {shown(EXAMPLE, in_query=False)}, "
            "or epoch seconds",
        )
    ts = parse_instant(value, "timestamp")
    if ts > now + settings.future_skew:
        raise InvalidInput(
            "timestamp",
            f"is more than {settings.future_skew_seconds:g} s in the future",
        )
    oldest = settings.backfill_max_age if max_age is None else max_age
    if ts < now - oldest:
        raise InvalidInput(
            "timestamp",
            f"is older than the accepted backfill age of {oldest / timedelta(days=1):g} days",
        )
    return ts


def label_backfill_age(model: ModelConfig, settings: Settings) -> timedelta:
    """How old labelled rows of a window holding unlabelled rows may be: the longer of
    the backfill age and the model's ``label_horizon`` (docs/maturity.md)."""
    if model.label_horizon is None:
        return settings.backfill_max_age
    return max(settings.backfill_max_age, parse_retention(model.label_horizon, "label_horizon"))


def scores_labels_arrays(
    doc: dict[str, Any], *, max_rows: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """``doc["scores"]`` and ``doc["labels"]`` as validated arrays.

    Returns
    -------
    scores : float64, shape (n,), finite, in [0, 1]
    labels : bool, shape (n,); True marks an actual positive.
    """
    raw_scores, raw_labels = doc.get("scores"), doc.get("labels")
    for name, raw in (("scores", raw_scores), ("labels", raw_labels)):
        if raw is None:
            raise InvalidInput(name, "is required")
        if not isinstance(raw, list | np.ndarray):
            raise InvalidInput(name, "must be an array")
        if len(raw) > max_rows:
            raise InvalidInput(name, f"has {len(raw)} rows; the limit is {max_rows} per request")
    # One conversion per array, dtype inferred: a string, null or huge integer in
    # the JSON gives a non-numeric dtype instead of being parsed or coerced.
    arrays = {}
    for name, raw in (("scores", raw_scores), ("labels", raw_labels)):
        try:
            arrays[name] = raw if isinstance(raw, np.ndarray) else np.array(raw)
        except (TypeError, ValueError):  # ragged nested arrays
            raise InvalidInput(name, "must be a flat array of numbers") from None
    scores, labels = arrays["scores"], arrays["labels"]
    if scores.dtype.kind not in "iuf":
        raise InvalidInput("scores", "must be an array of numbers")
    return check_scores_labels(scores, labels)


def unlabelled_scores_array(doc: dict[str, Any], *, max_rows: int) -> npt.NDArray[np.float64]:
    """``doc["scores"]`` of a batch without labels, validated as labelled scores are."""
    raw = doc.get("scores")
    size = len(raw) if isinstance(raw, list | np.ndarray) else 0
    no_labels = np.zeros(size, dtype=np.int64)  # only the scores can be wrong
    scores, _ = scores_labels_arrays({"scores": raw, "labels": no_labels}, max_rows=max_rows)
    return scores


def _count_array(field: str, raw: Any, size: int) -> Counts:
    if not isinstance(raw, list):
        raise InvalidInput(field, "must be an array of counts")
    if len(raw) != size:
        raise InvalidInput(field, f"has {len(raw)} bins; the model has {size} (GET .../bins)")
    counts = integer_array(field, raw, "non-negative integers")
    if counts.size:
        check_batch_counts(field, int(counts.max()))
    if counts.size and counts.min() < 0:
        raise InvalidInput(field, f"element {int(np.argmin(counts))} is negative")
    return counts


def _class_counts(field: str, raw: Any, size: int) -> Counts:
    """One class of a histogram batch: dense (an array) or sparse (an object)."""
    if isinstance(raw, dict):
        return parse_sparse_counts(field, raw, size, max_count=MAX_BATCH_COUNT)
    return _count_array(field, raw, size)


def _confusion_from_histograms(
    model: ModelConfig, pos: Counts, neg: Counts
) -> tuple[ConfusionCounts, ...]:
    # Exact: every threshold is a bin edge, so score >= t is every bin from the
    # first edge >= t up. The same matrices as the histogram curve's
    # confusion_at (tests/unit/services/ingest/test_sparse_binning.py), without building the
    # curve (0.13 ms for 10,000 bins, most of a small batch's parse).
    positives, negatives = int(pos.sum()), int(neg.sum())
    matrices = []
    for t in model.thresholds:
        first = int(np.searchsorted(model.bin_edges, t, side="left"))
        tp, fp = int(pos[first:].sum()), int(neg[first:].sum())
        matrices.append(
            ConfusionCounts(float(tp), float(fp), float(positives - tp), float(negatives - fp))
        )
    return tuple(matrices)


def _parse_confusion_matrix(raw: Any) -> ConfusionCounts:
    if not isinstance(raw, dict):
        raise InvalidInput("confusion_matrix", 'must be an object {"tp", "fp", "fn", "tn"}')
    unknown = sorted(set(raw) - {"tp", "fp", "fn", "tn"})
    if unknown:
        raise InvalidInput(f"confusion_matrix.{unknown[0]}", "unknown field")
    values = {}
    for name in ("tp", "fp", "fn", "tn"):
        v = raw.get(name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidInput(f"confusion_matrix.{name}", "must be a non-negative integer")
        values[name] = v
    check_batch_total("confusion_matrix", sum(values.values()))
    return ConfusionCounts(*(float(values[k]) for k in ("tp", "fp", "fn", "tn")))


@dataclass(frozen=True)
class _Content:
    """What a batch of one kind counts: the fields of :class:`ParsedBatch` its kind sets."""

    confusion: tuple[ConfusionCounts | None, ...]
    n: int = 0
    positives: int = 0
    hist_positives: Counts | None = None
    hist_negatives: Counts | None = None
    sums: ProbabilitySums | None = None
    unlabelled: Counts | None = None


def _unknown(model: ModelConfig) -> tuple[None, ...]:
    """A matrix per threshold, none of them known."""
    return (None,) * len(model.thresholds)


def _scores_batch(doc: dict[str, Any], model: ModelConfig, settings: Settings) -> _Content:
    """``scores`` with ``labels``, or ``scores`` alone (rows without labels)."""
    if "labels" not in doc:
        scores = unlabelled_scores_array(doc, max_rows=settings.max_batch_rows)
        no_labels = np.zeros(scores.size, dtype=np.bool_)
        _, unlabelled = checked_histogram_counts(scores, no_labels, model.bin_edges)
        return _Content(_unknown(model), unlabelled=unlabelled)
    s, y = scores_labels_arrays(doc, max_rows=settings.max_batch_rows)
    pos, neg = checked_histogram_counts(s, y, model.bin_edges)
    return _Content(
        confusion=_confusion_from_histograms(model, pos, neg),
        n=int(s.size),
        positives=int(np.count_nonzero(y)),
        hist_positives=pos,
        hist_negatives=neg,
        sums=ProbabilitySums.from_predictions(s, y),
    )


def _histogram_batch(doc: dict[str, Any], model: ModelConfig, _settings: Settings) -> _Content:
    """``histogram``: per-class counts per bin (dense or sparse), unlabelled counts, or
    both, with optional score sums."""
    raw = doc["histogram"]
    keys = set(raw) if isinstance(raw, dict) else set()
    labelled = {"positives", "negatives"}
    if not keys or len(keys & labelled) == 1 or keys.isdisjoint(labelled | {"unlabelled"}):
        raise InvalidInput(
            "histogram",
            'must be an object {"positives": [...], "negatives": [...]}, '
            '{"unlabelled": [...]} or all three',
        )
    unknown_keys = sorted(keys - HISTOGRAM_FIELDS)
    if unknown_keys:
        raise InvalidInput(f"histogram.{unknown_keys[0]}", "unknown field")
    if "sums" in keys and not labelled <= keys:
        raise InvalidInput("histogram.sums", "needs positives and negatives")
    pos = neg = unlabelled = None
    if labelled <= keys:
        pos = _class_counts("histogram.positives", raw["positives"], model.n_bins)
        neg = _class_counts("histogram.negatives", raw["negatives"], model.n_bins)
    if "unlabelled" in keys:
        unlabelled = _class_counts("histogram.unlabelled", raw["unlabelled"], model.n_bins)
    # every count is at most 2^40, so the int64 sums below cannot overflow
    check_batch_total(
        "histogram", sum(int(c.sum()) for c in (pos, neg, unlabelled) if c is not None)
    )
    if pos is None or neg is None:
        return _Content(_unknown(model), unlabelled=unlabelled)
    positives = int(pos.sum())
    n = positives + int(neg.sum())
    sums = parse_score_sums(raw["sums"], positives, n - positives) if "sums" in raw else None
    confusion = _confusion_from_histograms(model, pos, neg)
    return _Content(confusion, n, positives, pos, neg, sums, unlabelled)


def _confusion_matrix_batch(
    doc: dict[str, Any], model: ModelConfig, _settings: Settings
) -> _Content:
    """``confusion_matrix``: the matrix at the model's primary threshold."""
    cm = _parse_confusion_matrix(doc["confusion_matrix"])
    confusion = (cm, *_unknown(model)[1:])
    return _Content(confusion, n=int(cm.n), positives=int(cm.positives))


_PARSERS: dict[str, Callable[[dict[str, Any], ModelConfig, Settings], _Content]] = {
    "scores": _scores_batch,
    "histogram": _histogram_batch,
    "confusion_matrix": _confusion_matrix_batch,
}
"""The parser of each batch kind (:data:`app.db.models.BATCH_KINDS`)."""


def _segment(doc: dict[str, Any], model: ModelConfig) -> str | None:
    segment = doc.get("segment")
    if segment is not None and (not isinstance(segment, str) or segment not in model.segments):
        registered = ", ".join(sorted(model.segments)) or "none"
        raise InvalidInput("segment", f"{segment!r} is not a registered segment ({registered})")
    return segment


def _kind(doc: dict[str, Any]) -> str:
    kinds = [k for k in BATCH_KINDS if k in doc]
    if "labels" in doc and "scores" not in doc:
        kinds.append("scores")
    if len(kinds) != 1:
        raise InvalidInput(
            "body", "give exactly one of scores (+ labels), histogram or confusion_matrix"
        )
    return kinds[0]


def parse_batch(body: bytes, model: ModelConfig, settings: Settings, now: datetime) -> ParsedBatch:
    """Validate a batch body for ``model`` and reduce it to window sums.

    Parameters
    ----------
    body : bytes
        The raw JSON request body.
    model : ModelConfig
        The model the batch is for (edges, thresholds, segments, window).
    settings : Settings
        Row limit, backfill age and future skew.
    now : datetime
        The current time (UTC), injected for testability.

    Raises
    ------
    MalformedBody
        Not JSON, or not a JSON object.
    InvalidInput
        Any invalid field, named.
    """
    doc = load_document(body)
    unknown = sorted(set(doc) - BATCH_FIELDS)
    if unknown:
        raise InvalidInput(unknown[0], "unknown field")
    oldest = label_backfill_age(model, settings)
    event_at = parse_timestamp(doc.get("timestamp"), now=now, settings=settings, max_age=oldest)
    segment = _segment(doc, model)
    kind = _kind(doc)
    content = _PARSERS[kind](doc, model, settings)
    late = event_at < now - settings.backfill_max_age
    if late and (content.hist_positives is None or content.unlabelled is not None):
        parse_timestamp(
            doc["timestamp"], now=now, settings=settings
        )  # only labelled score rows come late
    return ParsedBatch(
        kind=kind,
        event_at=event_at,
        window_start=window_start(event_at, model.window),
        segment=segment,
        n=content.n,
        positives=content.positives,
        hist_positives=content.hist_positives,
        hist_negatives=content.hist_negatives,
        confusion=content.confusion,
        sums=content.sums,
        unlabelled=content.unlabelled,
        n_unlabelled=0 if content.unlabelled is None else int(content.unlabelled.sum()),
        late_labels=late,
    )
