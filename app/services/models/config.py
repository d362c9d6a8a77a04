"""A plain, immutable snapshot of one model's settings, detached from the session."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from app.drift.settings import DriftSettings
from app.metrics.binning import check_bin_edges

if TYPE_CHECKING:
    from app.db.models import Model


@dataclass(frozen=True, eq=False)
class ModelConfig:
    """What ingestion and window computation need to know about a model.

    Attributes
    ----------
    id, name : the model's key and URL name.
    window : window length name ("5m" ... "1w").
    thresholds : decision thresholds, primary first; each is an exact bin edge.
    pi0 : reference prior in (0, 1).
    cost_ratio : r_C in (0, 1), or None.
    segments : registered segment names.
    sla : SLA objectives [{"metric", "op", "target"}].
    drift : drift settings document (see :class:`app.db.models.Model`).
    bin_edges : float64, shape (n_bins + 1,); bin j is [edges[j], edges[j+1]).
        Checked once here (:func:`app.metrics.binning.check_bin_edges`), so that a
        batch is binned without checking them again.
    updated_at : when the settings were last changed (None if not read from a row).
    retention : how long windows are kept after they end ("90d"), or None: forever.
    label_missingness : how labels arrive, "class", "score" or "none" (docs/maturity.md).
    label_horizon : how long after a window its labels are expected complete, or None.
    """

    id: int
    name: str
    window: str
    thresholds: tuple[float, ...]
    pi0: float
    cost_ratio: float | None
    segments: frozenset[str]
    sla: tuple[dict[str, Any], ...]
    drift: dict[str, Any]
    bin_edges: npt.NDArray[np.float64]
    updated_at: datetime | None = None
    retention: str | None = None
    label_missingness: str = "none"
    label_horizon: str | None = None

    def __post_init__(self) -> None:
        check_bin_edges(self.bin_edges)

    @classmethod
    def from_row(cls, model: Model) -> ModelConfig:
        edges = np.array(model.bin_edges, dtype=np.float64)
        edges.setflags(write=False)
        return cls(
            id=model.id,
            name=model.name,
            window=model.window,
            thresholds=tuple(float(t) for t in model.thresholds),
            pi0=float(model.pi0),
            cost_ratio=None if model.cost_ratio is None else float(model.cost_ratio),
            segments=frozenset(model.segments),
            sla=tuple(dict(o) for o in model.sla),
            drift=dict(model.drift),
            bin_edges=edges,
            updated_at=model.updated_at,
            retention=model.retention,
            label_missingness=model.label_missingness,
            label_horizon=model.label_horizon,
        )

    @property
    def primary_threshold(self) -> float:
        return self.thresholds[0]

    @property
    def n_bins(self) -> int:
        return int(self.bin_edges.size - 1)

    def drift_settings(self) -> DriftSettings:
        """The drift test settings (the reference period is in ``drift["reference"]``)."""
        names = (
            "alpha",
            "min_prior_effect",
            "min_likelihood_effect",
            "min_class_count",
            "test_bins",
        )
        return DriftSettings(**{k: self.drift[k] for k in names if k in self.drift})
