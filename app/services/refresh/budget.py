"""The share of a worker's computing time that detail refreshes may take while it is behind.

At fleet scale the detail tier (curves and intervals) costs several times a
summary: on the fleet benchmark's windows about 30 ms against 7 ms of worker
CPU. Under a continuous load every open window falls due for its detail
once per ``detail_interval_seconds``, and 11,000 windows at the default
300 s ask for more detail work than two cores can give, so new data would
wait behind details. The budget keeps the summary first: a worker accounts
the computing time of its refreshes, full and summary, with an exponential
decay (a half-life of :data:`HALF_LIFE_SECONDS`), and while details took
more than ``share`` of it, a due detail of a window claimed under a backlog
is deferred (a summary refresh, with a new due time: app/services/refresh/tiers.py).
Without a backlog, or for a window that has closed, nothing changes: those
refreshes are full whatever the budget. Details then run at the rate the
share allows, and their stamp in the read model tells how old each is.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from app.services.windows.compute import Tier

HALF_LIFE_SECONDS = 60.0
"""How fast past refreshes stop counting: their weight halves every minute."""


class DetailBudget:
    """Decayed computing time of one worker's full and summary refreshes.

    Parameters
    ----------
    share : float
        In (0, 1]: the most of the computing time details may take under a
        backlog; 1 never defers a detail.
    clock : callable
        Monotonic seconds (injected in tests).
    """

    def __init__(self, share: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = share
        self.clock = clock
        self.detail_seconds = 0.0
        self.total_seconds = 0.0
        self._at = clock()

    def _decay(self) -> None:
        now = self.clock()
        weight = math.exp2(-(now - self._at) / HALF_LIFE_SECONDS)
        self.detail_seconds *= weight
        self.total_seconds *= weight
        self._at = now

    def allows(self) -> bool:
        """Whether a detail fits: details took at most ``share`` of the decayed time."""
        self._decay()
        return self.share >= 1.0 or self.detail_seconds <= self.share * self.total_seconds

    def record(self, seconds: float, tier: Tier) -> None:
        """Account one refresh's computing time (a full refresh's as detail time)."""
        self._decay()
        self.total_seconds += seconds
        if tier is Tier.FULL:
            self.detail_seconds += seconds
