"""Seeded binormal-logit streams of per-class histograms (and per-example scores,
:func:`binormal_scores`, :func:`shifted_logit_scores`), for tests, benches and docs.

The score of an example of class y is ``sigmoid(z)`` with logit
``z ~ Normal(mu_y, sd_y)``. Binned on fixed edges, the histogram of n such
examples is exactly multinomial over the bins' probabilities, so a window of
any size costs one binomial draw (how many positives) and two multinomial
draws, whatever n.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from app.drift.histograms import FloatArray, WindowHistograms
from app.errors import InvalidInput
from app.metrics.binning import check_bin_edges
from app.metrics.validation import check_probability


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
    from scipy import special  # on first use: scipy.special is not a start-up import

    cdf = special.ndtr((z - mu) / sd)  # scipy.stats.norm.cdf(z, mu, sd), same values
    p = np.diff(cdf)
    return np.asarray(p / p.sum(), dtype=np.float64)


def binormal_scores(
    rng: np.random.Generator, n: int, prior: float, s: float, temper: float = 1.0
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Per-example calibrated binormal-logit scores, optionally tempered.

    Labels are Bernoulli(``prior``); the log-odds of a score is Normal(m_y, s²)
    in class y with m_0 = logit(prior) − s²/2 and m_1 = m_0 + s², which makes
    ``sigmoid(log-odds)`` the true probability of class 1. The log-odds are
    then multiplied by ``temper`` (1: calibrated; above 1: over-confident).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness (labels first, then the log-odds).
    n : int
        Number of examples.
    prior : float in (0, 1)
        Probability of class 1.
    s : float
        Standard deviation of the log-odds in each class.
    temper : float
        Factor applied to the log-odds.

    Returns
    -------
    scores : array of float64, shape (n,)
        ``scores[i]`` is example i's score in (0, 1).
    labels : array of bool, shape (n,)
        ``labels[i]`` is True when example i is of class 1.
    """
    y = rng.random(n) < prior
    m0 = np.log(prior / (1 - prior)) - s * s / 2
    logit = temper * (rng.normal(m0, s, n) + s * s * y)
    return 1.0 / (1.0 + np.exp(-logit)), y


def shifted_logit_scores(
    rng: np.random.Generator, n: int, prior: float, *, separation: float, offset: float
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Per-example scores whose logit is Normal(offset, 1), shifted by ``separation``
    for class 1 (not calibrated: the test-data sampler of the service's tests).

    Parameters
    ----------
    rng : numpy.random.Generator
        Source of randomness (labels first, then the logits).
    n : int
        Number of examples.
    prior : float in [0, 1]
        Probability of class 1.
    separation : float
        Logit mean of class 1 minus that of class 0.
    offset : float
        Logit mean of class 0.

    Returns
    -------
    scores : array of float64, shape (n,)
        ``scores[i] = sigmoid(z_i + separation * labels[i] + offset)``, z_i ~ N(0, 1).
    labels : array of bool, shape (n,)
        ``labels[i]`` is True when example i is of class 1.

    Examples
    --------
    >>> s, y = shifted_logit_scores(np.random.default_rng(0), 5, 0.5, separation=2.0, offset=-1.0)
    >>> s.shape, y.dtype.name, bool(((0 < s) & (s < 1)).all())
    ((5,), 'bool', True)
    """
    labels = rng.random(n) < prior
    logits = rng.normal(size=n) + separation * labels + offset
    return 1.0 / (1.0 + np.exp(-logits)), labels


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
