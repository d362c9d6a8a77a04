"""A window's label-free estimate as stored and shown (docs/estimation.md).

The window's unlabelled histogram against the labelled histograms of its
drift reference (the same reference the drift verdict uses, of the same
segment): the estimated prior with its interval and adjusted count, every
metric at it, the fit test and verdict from :mod:`app.estimation`, and, once
the window also holds labelled rows, ``error``: estimated minus labelled, per
metric, the estimate's track record (null, with a reason in the window's
``reasons``, where those labels cannot be the scored rows': :func:`error_withheld`).

:func:`guarded_estimate_document` is what the window computation calls: an
estimate that fails (a numerical corner case, a bug) leaves the estimate null
with a reason and never fails the window's labelled result.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from app.drift.histograms import WindowHistograms
from app.errors import InvalidInput
from app.estimation import MixtureReference, estimate_window
from app.services.models.config import ModelConfig

Counts = npt.NDArray[np.int64]

log = logging.getLogger("priorwatch.estimate")

ESTIMATE_FAILED = "the label-free estimate failed"
"""Start of the window's ``reasons["estimate"]`` when computing the estimate raised."""
NO_REFERENCE = "the drift reference holds no score histograms"
"""Default ``reasons["estimate"]`` of a window with unlabelled rows and no reference histograms."""


class UnusableReference(InvalidInput):
    """The drift reference cannot identify a prior (a class missing, both classes alike)."""


def guarded_estimate_document(
    model: ModelConfig,
    unlabelled: Counts | None,
    reference: tuple[Counts, Counts] | None,
    labelled: Mapping[str, float | None] | None,
    *,
    no_reference: str | None = None,
) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`estimate_document`, and why it is None where the window has unlabelled rows.

    Parameters
    ----------
    model, unlabelled, reference, labelled
        As :func:`estimate_document`.
    no_reference : str, optional
        The reason when ``reference`` is None, where the caller knows it (no
        reference period configured, the period holds no data yet, ...);
        :data:`NO_REFERENCE` otherwise.

    Returns
    -------
    estimate : dict or None
        As :func:`estimate_document`; None when it raised.
    reason : str or None
        Why ``estimate`` is None although the window holds unlabelled rows: no
        usable reference (``no_reference``, or the reference's own defect), or
        ``"the label-free estimate failed (<exception>)"`` when it raised
        (logged with its traceback). None when there is an estimate, or no
        unlabelled row to estimate from.
    """
    if unlabelled is None or not unlabelled.any():
        return None, None
    if reference is None:
        return None, no_reference or NO_REFERENCE
    try:
        return estimate_document(model, unlabelled, reference, labelled), None
    except UnusableReference as exc:
        return None, str(exc)
    except Exception as exc:  # any failure of the estimate must leave the labelled result
        log.exception("label-free estimate of a window of model %s failed", model.id)
        return None, f"{ESTIMATE_FAILED} ({type(exc).__name__}: {str(exc)[:200]})"


def estimate_document(
    model: ModelConfig,
    unlabelled: Counts | None,
    reference: tuple[Counts, Counts] | None,
    labelled: Mapping[str, float | None] | None,
) -> dict[str, Any] | None:
    """The ``estimate`` of a window, or None when there is nothing to estimate from.

    Parameters
    ----------
    model : ModelConfig
        Thresholds, pi0, cost ratio, bin edges and drift settings (alpha,
        minimum prior effect, minimum class count).
    unlabelled : int64 array of shape (n_bins,) or None
        The window's rows without labels per bin.
    reference : (positives, negatives) int64 arrays of shape (n_bins,), or None
        The labelled histograms of the window's drift reference (the sum of
        the reference period's windows of the same segment).
    labelled : mapping or None
        The window's labelled metrics (as stored), for ``error``; None when
        the window has no labelled rows or its error is withheld
        (:func:`error_withheld`).

    Returns
    -------
    dict or None
        :meth:`~app.estimation.LabelFreeEstimate.to_document` plus ``error``
        (``{metric: estimated - labelled}`` over the metrics both define, or
        None without labelled rows). None when the window has no unlabelled
        rows or no reference.

    Raises
    ------
    UnusableReference
        The reference cannot identify a prior (a class missing from its
        histograms, or both classes scored alike).
    """
    if unlabelled is None or not unlabelled.any() or reference is None:
        return None
    try:
        mixture = MixtureReference.from_histograms(
            WindowHistograms(reference[0], reference[1], model.bin_edges)
        )
    except InvalidInput as exc:
        why = f"cannot identify a prior ({exc.reason})"
        raise UnusableReference("drift reference", why) from exc
    estimate = estimate_window(
        mixture,
        unlabelled,
        thresholds=model.thresholds,
        pi0=model.pi0,
        cost_ratio=model.cost_ratio,
        settings=model.drift_settings(),
    )
    document = estimate.to_document()
    document["error"] = None if labelled is None else estimate_error(estimate.metrics, labelled)
    return document


ERROR_REASON_KEY = "estimate.error"
"""Key of the window's ``reasons`` entry that says why the estimate's ``error`` is null."""

MORE_LABELLED_REASON = (
    "the window holds more labelled rows than unlabelled ones: its labels cannot all be "
    "those of the scored rows, so the estimate is not compared with them"
)
"""Reason of a null ``error`` in a window with more labelled than unlabelled rows."""


MATURE = 0.95
"""Completeness (labelled rows / scored rows) from which the labelled rows are taken
as the window when the window is not completed (docs/maturity.md)."""

IMMATURE_REASON = (
    "fewer than 95% of the scored rows are labelled and the window is not completed "
    "({why}): its labelled rows are a biased sample of it, so the estimate is not "
    "compared with them"
)
"""Reason of a null ``error`` in a window neither mature nor completed."""


def error_withheld(n_labelled: int, n_unlabelled: int, not_completed: str | None) -> str | None:
    """Why the estimate's ``error`` is not computed for a window holding both, or None.

    ``error`` means something only where the labelled rows are the labels of
    the scored (unlabelled) rows: more labelled rows than unlabelled ones
    proves that some are not. A completed window (``not_completed`` None) is
    compared with its completed metrics; a window that is not (``not_completed``:
    why) with its labelled ones, and only when at least :data:`MATURE` of its
    scored rows are labelled: fewer are a sample biased by the order in which
    labels arrive.

    >>> error_withheld(5_000, 1_000, None) == MORE_LABELLED_REASON
    True
    >>> error_withheld(500, 1_000, None) is None, error_withheld(960, 1_000, "no-labels") is None
    (True, True)
    >>> error_withheld(500, 1_000, "assumption-none")[:30]
    'fewer than 95% of the scored r'
    """
    if n_labelled > n_unlabelled:
        return MORE_LABELLED_REASON
    if not_completed is not None and n_labelled < MATURE * n_unlabelled:
        return IMMATURE_REASON.format(why=not_completed)
    return None


def estimate_error(
    estimated: Mapping[str, float | None], labelled: Mapping[str, float | None]
) -> dict[str, float]:
    """Estimated minus labelled value of every metric both define.

    >>> estimate_error({"f1": 0.5, "auc_pr": None, "prior": 0.25}, {"f1": 0.25, "prior": None})
    {'f1': 0.25}
    """
    out = {}
    for name, value in estimated.items():
        truth = labelled.get(name)
        if value is not None and truth is not None:
            out[name] = value - truth
    return out
