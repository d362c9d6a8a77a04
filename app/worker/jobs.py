"""The loop's job source backed by the database queue (one session per job step).

Besides windows, it runs the housekeeping: every ``housekeeping_interval_seconds``,
before a claim, batch rows older than the idempotency retention are deleted
(app/db/retention.py), in transactions of at most :data:`HOUSEKEEPING_BATCH`
rows. Folded deltas need no housekeeping: the fold deletes them.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from sqlalchemy.orm import Session, sessionmaker

from app.db.queue import database_now
from app.db.retention import delete_batches_received_before
from app.db.session import write_transaction
from app.services.window_refresh import (
    ClaimedWindow,
    Outcome,
    ReferenceCache,
    claim_window,
    refresh_claimed,
    release_claimed,
)

log = logging.getLogger("priorwatch.worker")

HOUSEKEEPING_BATCH = 5_000
"""Most batch rows one housekeeping transaction deletes."""


class DatabaseJobs:
    """Claims waiting windows, refreshes them, releases them on stop; keeps house.

    Parameters
    ----------
    session_factory : sessionmaker
    lease_seconds : float
        Exclusive hold of a claimed window (app/worker/settings.py).
    batch_retention_hours : float
        Age after which a batch row (its idempotency key) is deleted.
    housekeeping_interval_seconds : float
        Time between two housekeeping runs of this worker.
    settle_seconds : float
        Claim a window only once its oldest waiting change is this old.
    detail_interval_seconds : float
        Longest lag of an open window's detail tier behind its data (0: every
        refresh is full; app/services/refresh_tier.py).
    """

    def __init__(
        self,
        session_factory: sessionmaker[Session],
        *,
        lease_seconds: float,
        batch_retention_hours: float = 168.0,
        housekeeping_interval_seconds: float = 300.0,
        settle_seconds: float = 0.0,
        detail_interval_seconds: float = 0.0,
    ) -> None:
        self.session_factory = session_factory
        self.lease_seconds = lease_seconds
        self.batch_retention = timedelta(hours=batch_retention_hours)
        self.housekeeping_interval_seconds = housekeeping_interval_seconds
        self.settle_seconds = settle_seconds
        self.detail_interval_seconds = detail_interval_seconds
        self.cache = ReferenceCache()
        self.outcomes: dict[Outcome, int] = dict.fromkeys(Outcome, 0)
        self._next_housekeeping = time.monotonic()
        self.batches_deleted = 0

    def housekeeping(self) -> int:
        """Delete the batch rows older than the retention; returns how many."""
        deleted = 0
        while True:
            with self.session_factory() as session, write_transaction(session):
                cutoff = database_now(session) - self.batch_retention
                done = delete_batches_received_before(session, cutoff, limit=HOUSEKEEPING_BATCH)
            deleted += done
            if done < HOUSEKEEPING_BATCH:
                break
        if deleted:
            log.info("housekeeping: %d batch rows past the retention deleted", deleted)
        self.batches_deleted += deleted
        return deleted

    def claim(self) -> ClaimedWindow | None:
        if time.monotonic() >= self._next_housekeeping:
            self._next_housekeeping = time.monotonic() + self.housekeeping_interval_seconds
            self.housekeeping()
        with self.session_factory() as session:
            return claim_window(
                session, lease_seconds=self.lease_seconds, settle_seconds=self.settle_seconds
            )

    def run(self, job: ClaimedWindow) -> None:
        with self.session_factory() as session:
            outcome = refresh_claimed(
                session, job, self.cache, detail_interval_seconds=self.detail_interval_seconds
            )
        self.outcomes[outcome] += 1

    def release(self, job: ClaimedWindow) -> None:
        with self.session_factory() as session:
            release_claimed(session, job)
