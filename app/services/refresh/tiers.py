"""Tiered refresh: when a window's refresh computes the detail tier too.

Every refresh computes the summary (counts, metrics, drift verdict,
label-free estimate); the detail (curves and every interval: the labeling
metrics' credible intervals, the ``ops_*`` and curve-area intervals; most
of the cost) is computed by a **full** refresh only when it is
due, and carried over from the last full refresh otherwise
(:mod:`app.services.refresh.document`).

The detail is due when

* the worker is not behind: its claim took fewer windows than its group
  size, so fewer than twice the group size were waiting. Tiers only matter
  under a backlog; with a short queue every refresh is full, and a user
  who posts a batch reads curves and intervals of it at once;
* the window has closed (its end has passed) and its due time has passed.
  Under a backlog a closed window's refresh is first a summary
  (**summary first**), which makes its detail due at the claim's time, so
  its detail is claimed behind the data that was waiting then: a backlog of
  closed windows gets every summary before the details, and every detail
  follows within the time the queue takes to reach it. The budget does not
  defer a closed window's detail, so a closed window's final data gets
  exactly one full refresh;
* its due time ``window_aggregate.detail_due_at`` has passed. A summary
  refresh sets it to the earliest of the time already set, its own time
  plus the window's **detail delay** and the window's end (so the detail
  lags the data by at most ``detail_interval_seconds``); a full refresh
  clears it. The delay is between half the interval and the whole of it,
  at a point fixed by the window's key (:func:`detail_phase`);
  The claim query treats a due time like a waiting change, so a window
  becomes claimable at its due time without a new batch;
* ``detail_interval_seconds`` is 0 (every refresh is full, as before tiers).

A detail due by its time alone is **deferred** while the worker's details
took more than their share of its computing time
(:mod:`app.services.refresh.budget`): the refresh is a summary and sets a new
due time, a delay after its own time, as if the detail had just been
computed. So under a load that the worker can only just follow, the
details run at the rate their share allows and new data does not wait
behind them; a closed window and a short queue still get full refreshes.

A fleet's windows all open at the same boundary: under that backlog their
first refreshes are summaries, all within the time the backlog takes to
drain. With the same delay for every window, their details would then fall
due together, within that same time, and the next backlog would be one of
full refreshes only. The key's phase spreads them over the second half of
the interval instead, and keeps them spread over the following cycles: a
window's delay is the same every time, but its refreshes are not in step
with the other windows'. The phase is a hash of the key, so every worker
and every restart give a window the same delay.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta


def detail_due(
    *,
    now: datetime,
    window_end: datetime,
    detail_due_at: datetime | None,
    detail_interval_seconds: float,
    backlog: bool = True,
    budget_allows: bool = True,
) -> bool:
    """Whether the refresh claimed at ``now`` computes the detail tier (a full refresh).

    Parameters
    ----------
    now : datetime
        The claim's database time.
    window_end : datetime
        The end of the window (start plus the model's window length).
    detail_due_at : datetime or None
        The window's due time (None: no detail is due before the window ends;
        a closed window then gets its summary first).
    detail_interval_seconds : float
        The worker setting; 0 makes every refresh full.
    backlog : bool
        The claim took a whole group (more windows were waiting); False makes
        the refresh full.
    budget_allows : bool
        The worker's detail budget has room (:mod:`app.services.refresh.budget`);
        False defers a detail due by its time alone (not a closed window's).
    """
    if not backlog or detail_interval_seconds <= 0:
        return True
    overdue = detail_due_at is not None and detail_due_at <= now
    return overdue and (budget_allows or now >= window_end)


DETAIL_SPREAD = 0.5
"""The share of the detail interval over which the windows' delays spread: a
window's delay lies in ``(1 - DETAIL_SPREAD, 1]`` times the interval."""


def detail_phase(model_id: int, segment: str, window_start: datetime) -> float:
    """The window's phase in [0, 1): a hash of its key, the same in every process.

    Python's ``hash`` of a string changes with each process, so the key's text
    goes through BLAKE2b; its first 8 bytes are read as a fraction.
    """
    text = f"{model_id}\x1f{segment}\x1f{window_start.isoformat()}".encode()
    digest = hashlib.blake2b(text, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


def next_detail_due(
    *,
    now: datetime,
    window_end: datetime,
    detail_due_at: datetime | None,
    detail_interval_seconds: float,
    phase: float,
) -> datetime:
    """The due time stored by a summary refresh at ``now`` (module docstring).

    The earliest of the due time already set, ``now`` plus the window's delay
    and the window's end: the detail lags the data by at most the interval
    after the first change it does not include, and refreshes of a busy
    window do not postpone it. ``phase`` (:func:`detail_phase`, in [0, 1))
    sets the delay: the interval times ``1 - DETAIL_SPREAD * phase``. A due
    time already passed belongs to a deferred detail and is replaced. A
    closed window's detail is due at ``now``: behind every change that
    waited before this claim, ahead of every later one (summary first).
    """
    if now >= window_end:
        return now
    delay = detail_interval_seconds * (1.0 - DETAIL_SPREAD * phase)
    due = min(now + timedelta(seconds=delay), window_end)
    if detail_due_at is None or detail_due_at <= now:
        return due
    return min(due, detail_due_at)
