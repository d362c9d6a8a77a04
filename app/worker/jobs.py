"""The loop's job source backed by the database queue (one session per job step)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from app.services.window_refresh import (
    ClaimedWindow,
    Outcome,
    ReferenceCache,
    claim_window,
    refresh_claimed,
    release_claimed,
)


class DatabaseJobs:
    """Claims dirty windows, refreshes them, releases them on stop.

    Parameters
    ----------
    session_factory : sessionmaker
    lease_seconds : float
        Exclusive hold of a claimed window (app/worker/settings.py).
    """

    def __init__(self, session_factory: sessionmaker[Session], *, lease_seconds: float) -> None:
        self.session_factory = session_factory
        self.lease_seconds = lease_seconds
        self.cache = ReferenceCache()
        self.outcomes: dict[Outcome, int] = dict.fromkeys(Outcome, 0)

    def claim(self) -> ClaimedWindow | None:
        with self.session_factory() as session:
            return claim_window(session, lease_seconds=self.lease_seconds)

    def run(self, job: ClaimedWindow) -> None:
        with self.session_factory() as session:
            outcome = refresh_claimed(session, job, self.cache)
        self.outcomes[outcome] += 1

    def release(self, job: ClaimedWindow) -> None:
        with self.session_factory() as session:
            release_claimed(session, job)
