"""Ceilings on the counts a batch adds: nothing stored can overflow, nothing read can.

Three ceilings, one per sum a batch increases:

* :data:`MAX_BATCH_COUNT` (2^40): the examples of one batch (so every count
  in it: a histogram bin, a confusion cell). Checked while parsing.
* :data:`MAX_WINDOW_COUNT` (2^53, the largest count exact in float64): the
  examples of one window aggregate (so its every bin and cell, each a part
  of it). Checked at ingest against the stored aggregate plus its unfolded
  deltas (a plain read, no lock: app/db/queries.py ``ExampleTotals``); the
  deltas' sum, a scan of every delta waiting, a process reads at most every
  :data:`UNFOLDED_TOTAL_TTL_SECONDS` per window (so the cost of a batch does
  not grow with the backlog the worker has yet to fold).
* :data:`MAX_MODEL_COUNT` (2^62): the examples of one model over all its
  windows (the ``priorwatch_batch_rows_total``-style totals of the exporter).
  Checked at ingest against the sum of the model's all-traffic windows: its
  unfolded deltas, read with the window's, plus its folded aggregates, one
  row per window, which a process reads at most every
  :data:`FOLDED_TOTAL_TTL_SECONDS` per model (so the cost of a batch does not
  grow with the model's history; app/services/ingest/batch.py).

The gap between the per-batch ceiling and the stored type (int64, 2^63) is
headroom: the ingest check is a plain read, blind to the batches being
stored at the same moment, and it would take 2^22 (four million) such
concurrent batches of the largest size to pass int64 from a full window. The
same headroom covers a folded model total up to
:data:`FOLDED_TOTAL_TTL_SECONDS` old (the batches folded since then are
missed: four million batches of the largest size in that time), and the
unfolded deltas' sums up to :data:`UNFOLDED_TOTAL_TTL_SECONDS` old (the
batches stored since then are missed, this process's own included; the
batches folded since then count twice, which only refuses earlier). A
window or a model may so pass its ceiling by the batches of those few
seconds, never int64. A batch
that would pass a ceiling is refused whole (422 naming the limit); nothing
of it is stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.errors import InvalidInput

MAX_BATCH_COUNT = 2**40
"""Most examples in one batch (about 1.1e12)."""
MAX_WINDOW_COUNT = 2**53
"""Most examples in one window aggregate (all traffic or a segment)."""
MAX_MODEL_COUNT = 2**62
"""Most examples of one model over all its windows."""
FOLDED_TOTAL_TTL_SECONDS = 10.0
"""How long a process reuses a model's folded example total for the model ceiling."""
UNFOLDED_TOTAL_TTL_SECONDS = 1.0
"""How long a process reuses a window's (and its model's) unfolded deltas' sums."""


def check_batch_total(field: str, total: int) -> None:
    """Refuse an empty batch, or one of more than :data:`MAX_BATCH_COUNT` examples."""
    if total == 0:
        raise InvalidInput(field, "is empty: the batch must count at least one example")
    if total > MAX_BATCH_COUNT:
        raise InvalidInput(
            field, f"counts {total} examples; the limit is 2^40 = {MAX_BATCH_COUNT} per batch"
        )


def check_batch_counts(field: str, largest: int) -> None:
    """Refuse a count (bin, cell) above :data:`MAX_BATCH_COUNT`."""
    if largest > MAX_BATCH_COUNT:
        raise InvalidInput(field, f"counts must not exceed 2^40 = {MAX_BATCH_COUNT} per batch")


def window_room(added: int, unfolded: int = 0) -> int:
    """Most examples a window aggregate may hold besides ``unfolded`` examples of its
    deltas for a batch of ``added`` examples to fit (negative: none can).

    >>> window_room(10, 5) == MAX_WINDOW_COUNT - 15
    True
    """
    return MAX_WINDOW_COUNT - added - unfolded


def model_has_room(added: int, model_total: float) -> bool:
    """Whether a batch of ``added`` examples fits in a model holding ``model_total``."""
    return int(model_total) + added <= MAX_MODEL_COUNT


def check_room(
    field: str, added: int, stored_window_counts: Iterable[int], model_total: float
) -> None:
    """Refuse a batch of ``added`` examples that would pass a window's or the model's ceiling.

    Parameters
    ----------
    field : str
        The field named in the refusal (the batch's data field).
    added : int
        Examples in the batch.
    stored_window_counts : iterable of int
        Examples already in each window aggregate the batch goes to.
    model_total : float
        Examples already stored for the model (all traffic, every window;
        a float sum, see :class:`app.db.queries.ExampleTotals`).
    """
    fullest = max(stored_window_counts, default=0)
    if fullest > window_room(added):
        raise InvalidInput(
            field,
            f"would bring its window to {fullest + added} examples; the limit is "
            f"2^53 = {MAX_WINDOW_COUNT} per window ({MAX_WINDOW_COUNT - fullest} left)",
        )
    stored = int(model_total)
    if not model_has_room(added, model_total):
        raise InvalidInput(
            field,
            f"would bring the model to {stored + added} examples; the limit is "
            f"2^62 = {MAX_MODEL_COUNT} per model ({max(0, MAX_MODEL_COUNT - stored)} left)",
        )


INT64_MAX = 2**63 - 1
"""Largest count the stored types (int64) and the histogram arrays hold."""


class CountOverflow(ValueError):
    """Windows merged on the fly (a reference period, a coarser granularity) would
    count more examples than int64 holds."""


def check_merged_total(total: int) -> None:
    """Raise :class:`CountOverflow` when merged windows count more than :data:`INT64_MAX`.

    Every bin and cell of a merge is a part of its total, so no array sum of
    the merge can wrap around once the total fits.
    """
    if total > INT64_MAX:
        raise CountOverflow(f"merged windows count {total} examples, more than 2^63 - 1")
