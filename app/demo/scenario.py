"""The traffic of ``priorwatch simulate``: a fraud-like model over a day of windows.

Scores are binormal in the logit: a legitimate transaction's logit is
Normal(``negative_mean``, ``spread``), a fraud's Normal(``positive_mean``,
``spread``), so P(s|y) is fixed by the two means and each phase changes
exactly one thing:

- ``stable``: fraud rate ``prior`` (about 1%), the drift reference;
- ``fraud wave``: only the fraud rate rises (x4): a pure prior shift, the
  model is as good as before;
- ``return``: back to the stable traffic;
- ``degradation``: the fraud rate is back to normal but the frauds' scores
  move towards the legitimate ones (fraudsters adapted): P(s|y) shifts.

Everything is pure and seeded (``rng``); :mod:`app.cli.simulate` sends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

STABLE = "stable"
WAVE = "fraud wave"
RETURN = "return"
DEGRADATION = "degradation"


@dataclass(frozen=True)
class Phase:
    """Consecutive windows with the same traffic."""

    name: str
    windows: int
    prior: float
    positive_mean: float


@dataclass(frozen=True)
class Scenario:
    """The phases, the rows per window and the legitimate class's score law."""

    phases: tuple[Phase, ...]
    rows_per_window: int
    batches_per_window: int
    negative_mean: float = -3.5
    spread: float = 1.2

    @property
    def windows(self) -> int:
        return sum(p.windows for p in self.phases)

    @property
    def reference_windows(self) -> int:
        """The leading stable windows: the drift reference period."""
        return self.phases[0].windows

    def phase_of(self, offset: int) -> Phase:
        """The phase of the window ``offset`` windows after the first."""
        if offset < 0:
            raise IndexError(offset)
        for phase in self.phases:
            if offset < phase.windows:
                return phase
            offset -= phase.windows
        raise IndexError(offset)


def fraud_scenario(
    *,
    prior: float = 0.01,
    wave_factor: float = 4.0,
    rows_per_window: int = 20_000,
    batches_per_window: int = 4,
    positive_mean: float = 0.5,
    degraded_positive_mean: float = -1.5,
) -> Scenario:
    """The default day: 8 stable hours, a 6-hour fraud wave, 4 hours back to
    normal, 6 hours of degradation (24 windows)."""
    return Scenario(
        phases=(
            Phase(STABLE, 8, prior, positive_mean),
            Phase(WAVE, 6, prior * wave_factor, positive_mean),
            Phase(RETURN, 4, prior, positive_mean),
            Phase(DEGRADATION, 6, prior, degraded_positive_mean),
        ),
        rows_per_window=rows_per_window,
        batches_per_window=batches_per_window,
    )


@dataclass(frozen=True)
class Batch:
    """One batch of labelled scores of one window."""

    offset: int
    """Window index from the scenario's first window."""
    phase: str
    timestamp: datetime
    scores: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int64]


def first_window_start(now: datetime, length: timedelta, windows: int) -> datetime:
    """Start of the first of ``windows`` back-filled windows, the last of which ends
    at the start of the window containing ``now`` (so every window is complete).

    ``now`` must be timezone-aware; windows start at multiples of ``length``
    from the Unix epoch, as the service counts them.
    """
    epoch = datetime(1970, 1, 1, tzinfo=now.tzinfo)
    current = epoch + ((now - epoch) // length) * length
    return current - windows * length


def sample(
    rng: np.random.Generator, n: int, prior: float, positive_mean: float, scenario: Scenario
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """``n`` examples: labels Bernoulli(``prior``), scores the sigmoid of the class's logit."""
    labels = (rng.random(n) < prior).astype(np.int64)
    means = np.where(labels == 1, positive_mean, scenario.negative_mean)
    logits = means + scenario.spread * rng.standard_normal(n)
    return 1.0 / (1.0 + np.exp(-logits)), labels


def batches(
    scenario: Scenario, rng: np.random.Generator, first: datetime, length: timedelta
) -> Iterator[Batch]:
    """Every batch of the scenario, window by window, spread evenly inside each window.

    Window ``k`` starts at ``first + k * length``; its rows are split into
    ``batches_per_window`` batches (sizes differ by at most one).
    """
    per_batch = np.array_split(np.arange(scenario.rows_per_window), scenario.batches_per_window)
    step = length / scenario.batches_per_window
    for offset in range(scenario.windows):
        phase = scenario.phase_of(offset)
        start = first + offset * length
        for b, rows in enumerate(per_batch):
            scores, labels = sample(rng, rows.size, phase.prior, phase.positive_mean, scenario)
            yield Batch(offset, phase.name, start + b * step, scores, labels)
