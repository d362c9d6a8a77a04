"""Seeded partially labelled windows, for tests, benches and docs.

A fully labelled window (:class:`app.drift.simulation.BinormalStream`) has its
labels delivered so far drawn per bin and class: each of the window's
positives in bin b is labelled with probability ``positive_rate[b]`` and each
negative with ``negative_rate[b]``, independently. Rates that depend on the
class only give ``class`` data; rates that depend on the bin only give
``score`` data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.drift.histograms import FloatArray, WindowHistograms
from app.errors import InvalidInput


@dataclass(frozen=True, eq=False)
class MaturingWindow:
    """One window seen twice: as its producer sends it so far, and with every label.

    Attributes
    ----------
    unlabelled : array of shape (J,)
        u: every scored row per bin.
    positives, negatives : array of shape (J,)
        p, q: the rows labelled so far.
    full : WindowHistograms
        The window's per-class histograms once every label has arrived.
    """

    unlabelled: FloatArray
    positives: FloatArray
    negatives: FloatArray
    full: WindowHistograms


def deliver_labels(
    rng: np.random.Generator,
    full: WindowHistograms,
    positive_rate: float | npt.ArrayLike,
    negative_rate: float | npt.ArrayLike,
) -> MaturingWindow:
    """Deliver some of a window's labels, at a rate per bin and class.

    Parameters
    ----------
    rng : numpy.random.Generator
        The only source of randomness.
    full : WindowHistograms
        The window with every label.
    positive_rate, negative_rate : float or array of shape (J,)
        Probability that a positive / negative of bin b is labelled so far.

    Returns
    -------
    MaturingWindow

    Examples
    --------
    >>> full = WindowHistograms([0, 10, 30], [50, 10, 0], [0.0, 0.3, 0.6, 1.0])
    >>> w = deliver_labels(np.random.default_rng(0), full, 1.0, 0.0)
    >>> w.unlabelled.tolist(), w.positives.tolist(), w.negatives.tolist()
    ([50.0, 20.0, 30.0], [0.0, 10.0, 30.0], [0.0, 0.0, 0.0])
    """
    rates = []
    for name, rate in (("positive_rate", positive_rate), ("negative_rate", negative_rate)):
        r = np.broadcast_to(np.asarray(rate, dtype=np.float64), full.positives.shape)
        if not np.all((r >= 0.0) & (r <= 1.0)):
            raise InvalidInput(name, "must be probabilities in [0, 1]")
        rates.append(r)
    pos = rng.binomial(full.positives.astype(np.int64), rates[0]).astype(np.float64)
    neg = rng.binomial(full.negatives.astype(np.int64), rates[1]).astype(np.float64)
    return MaturingWindow(full.positives + full.negatives, pos, neg, full)


def class_rates(prior: float, completeness: float, ratio: float = 3.5) -> tuple[float, float]:
    """Label rates (positives, negatives) with positives ``ratio`` times as fast, for a
    window at ``prior`` to reach ``completeness``; the positives' rate capped at 1.

    Examples
    --------
    >>> [round(r, 6) for r in class_rates(0.1, 0.2, ratio=3.0)]
    [0.5, 0.166667]
    """
    negative = completeness / (ratio * prior + 1.0 - prior)
    if ratio * negative <= 1.0:
        return ratio * negative, negative
    return 1.0, (completeness - prior) / (1.0 - prior)
