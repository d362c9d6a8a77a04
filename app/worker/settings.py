"""Worker settings, from the environment (prefix ``PRIORWATCH_WORKER_``).

The database comes from the service's settings (``PRIORWATCH_DATABASE_URL``,
:class:`app.config.Settings`); these are the worker's own knobs, e.g.
``PRIORWATCH_WORKER_LEASE_SECONDS=10``.
"""

from __future__ import annotations

from typing import Self

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings

from app.config import settings_config


class WorkerSettings(BaseSettings):
    """How a worker polls, holds and retries (docs/worker.md explains each bound)."""

    model_config = settings_config("PRIORWATCH_WORKER_")

    poll_interval_seconds: float = Field(
        default=0.25,
        gt=0,
        le=60,
        description="sleep between two looks at an empty queue",
    )
    lease_seconds: float = Field(
        default=15.0,
        gt=0,
        description="how long a claim is exclusive; a killed worker's window is "
        "taken over after at most this plus one poll interval",
    )
    backoff_initial_seconds: float = Field(
        default=0.1, gt=0, description="first wait after a database error"
    )
    backoff_max_seconds: float = Field(
        default=5.0, gt=0, description="longest wait between two retries while the database is down"
    )
    settle_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="claim a window only once its oldest waiting change is this old, so "
        "that one computation folds the deltas of this span (a window under steady "
        "traffic is refreshed about once per settle interval)",
    )
    claim_group_size: int = Field(
        default=8,
        ge=1,
        le=64,
        description="most windows one claim takes, computed one by one and stored in one "
        "transaction (a claim takes at most half of the claimable windows, at least one, "
        "so that workers share a short queue)",
    )
    detail_interval_seconds: float = Field(
        default=300.0,
        ge=0,
        description="longest lag of a window's detail tier (curves, ops_* and curve-area "
        "intervals) behind its data while the window is open: other refreshes compute "
        "the summary only; a closed window gets one full refresh; 0: every refresh is full",
    )
    detail_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description="most of the worker's computing time that detail refreshes may take "
        "while it is behind: past it, a detail due by its time alone is deferred (a "
        "summary refresh and a new due time) so that new data does not wait behind "
        "details; closed windows and a short queue are not affected; 1: no bound",
    )
    reference_cache_mb: float = Field(
        default=256.0,
        ge=0,
        description="most memory (MiB) the worker's cache of summed drift references "
        "holds, least recently used dropped first; 0: every reference is read again",
    )
    batch_retention_hours: float = Field(
        default=168.0,
        ge=24,
        description="batch rows (which hold the idempotency keys) older than this are "
        "deleted by the worker's housekeeping; a replay is recognised at least this long",
    )
    housekeeping_interval_seconds: float = Field(
        default=300.0, gt=0, description="how often a worker runs its housekeeping"
    )
    ops_node_dir: str = Field(
        default="",
        description="directory where workers keep the OPS reference curves (82 MB, "
        "memory-mapped: 0.2-0.3 s of CPU to build at each start) and the interpolation "
        "nodes of AUC-PR and the lift area (0.1-0.3 s of CPU each, a few per prior): the "
        "workers of a machine share them and a restarted worker reads them instead of "
        "building them; empty: each process builds its own",
    )
    warm_up: bool = Field(
        default=True,
        description="build the OPS reference curves and the prior-free table a summary reads "
        "before the first claim, so that no lease is spent on one-off start-up work",
    )

    @model_validator(mode="after")
    def _backoff_ordered(self) -> Self:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must be >= backoff_initial_seconds")
        return self
