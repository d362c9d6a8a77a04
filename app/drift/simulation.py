"""Seeded binormal-logit streams of per-class histograms, for tests, benches and docs.

The score of an example of class y is ``sigmoid(z)`` with logit
``z ~ Normal(mu_y, sd_y)``. Binned on fixed edges, the histogram of n such
examples is exactly multinomial over the bins' probabilities, so a window of
any size costs one binomial draw (how many positives) and two multinomial
draws, whatever n.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from app.drift.histograms import FloatArray, WindowHistograms
from app.metrics._validation import InvalidInput, check_probability
from app.metrics.binning import check_bin_edges


def binormal_bin_probabilities(edges: FloatArray, mu: float, sd: float = 1.0) -> FloatArray:
    """Probability of each bin for a score ``sigmoid(z)``, ``z ~ Normal(mu, sd)``.

    Parameters
    ----------
    edges : array of shape (J + 1,)
        Bin edges from 0.0 to 1.0.
    mu, sd : float
        Mean and standard deviation of the logit.

    Returns
    -------
    array of shape (J,)
        Element j is ``P(edges[j] <= score < edges[j+1])``; they sum to 1.
    """
    if not (np.isfinite(sd) and sd > 0):
        raise InvalidInput("sd", f"is {sd!r}, must be > 0")
    with np.errstate(divide="ignore"):
        z = np.log(edges) - np.log1p(-edges)
    cdf = stats.norm.cdf(z, loc=mu, scale=sd)
    p = np.diff(cdf)
    return np.asarray(p / p.sum(), dtype=np.float64)


@dataclass(frozen=True, slots=True, eq=False)
class BinormalStream:
    """A classifier whose logit is Normal(mu_y, sd_y) in class y, binned on ``edges``.

    The bins' probabilities are computed once; each window then costs one
    binomial and two multinomial draws, whatever its size.

    Parameters
    ----------
    edges : array of shape (J + 1,)
        Bin edges from 0.0 to 1.0.
    mu_positive, mu_negative, sd_positive, sd_negative : float
        Logit distribution of each class.

    Examples
    --------
    >>> stream = BinormalStream(np.linspace(0, 1, 11), mu_positive=1.0, mu_negative=-2.0)
    >>> w = stream.window(np.random.default_rng(0), n=1000, prior=0.1)
    >>> w.n
    1000.0
    """

    edges: FloatArray
    mu_positive: float
    mu_negative: float
    sd_positive: float = 1.0
    sd_negative: float = 1.0
    p_positive: FloatArray = field(init=False)
    p_negative: FloatArray = field(init=False)

    def __post_init__(self) -> None:
        edges = check_bin_edges(self.edges)
        object.__setattr__(self, "edges", edges)
        p_pos = binormal_bin_probabilities(edges, self.mu_positive, self.sd_positive)
        p_neg = binormal_bin_probabilities(edges, self.mu_negative, self.sd_negative)
        object.__setattr__(self, "p_positive", p_pos)
        object.__setattr__(self, "p_negative", p_neg)

    def window(self, rng: np.random.Generator, *, n: int, prior: float) -> WindowHistograms:
        """Histograms of one window of ``n`` examples, Binomial(n, prior) of them positive.

        ``rng`` is the only source of randomness.
        """
        pi = check_probability("prior", prior, open_interval=False)
        n_pos = int(rng.binomial(n, pi))
        return WindowHistograms(
            rng.multinomial(n_pos, self.p_positive),
            rng.multinomial(n - n_pos, self.p_negative),
            self.edges,
        )
