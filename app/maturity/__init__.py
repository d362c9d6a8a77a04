"""Label maturity: the whole window's metrics while its labels trickle in (docs/maturity.md).

Pure (numpy and scipy; no I/O). :func:`complete` splits a window's rows still
waiting for their label between the classes under a stated assumption on how
labels arrive (the summary tier: under a millisecond on 10,000 bins);
:func:`completed_metrics` computes every metric of the completed histograms
through the metric registry; :func:`completion_intervals` gives their
intervals by a parametric bootstrap (the detail tier), and
:func:`merged_completion_intervals` those of a sum of completed windows.
"""

from app.maturity.completion import (
    ASSUMPTIONS,
    CONFUSION_MATRIX_ROWS,
    LABELS_EXCEED_SCORES,
    MIN_LABELLED,
    NO_LABELS,
    NO_SCORES,
    ONE_CLASS_LABELLED,
    SAME_CLASS_SCORES,
    Assumption,
    CompletedPrior,
    Completion,
    CompletionFit,
    NoCompletion,
    bins_of_thresholds,
    complete,
)
from app.maturity.intervals import completion_intervals, merged_completion_intervals
from app.maturity.metrics import NOT_COMPLETABLE, completed_metrics

__all__ = [
    "ASSUMPTIONS",
    "CONFUSION_MATRIX_ROWS",
    "LABELS_EXCEED_SCORES",
    "MIN_LABELLED",
    "NOT_COMPLETABLE",
    "NO_LABELS",
    "NO_SCORES",
    "ONE_CLASS_LABELLED",
    "SAME_CLASS_SCORES",
    "Assumption",
    "CompletedPrior",
    "Completion",
    "CompletionFit",
    "NoCompletion",
    "bins_of_thresholds",
    "complete",
    "completed_metrics",
    "completion_intervals",
    "merged_completion_intervals",
]
