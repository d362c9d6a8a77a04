"""The base of the collectors whose families are read per scrape from stored results.

Such a collector is both a :class:`prometheus_client.registry.Collector` (its
:meth:`StoredPartCollector.collect` serves any registry) and a part of
``GET /metrics`` (:class:`app.exporter.collector.WindowResultsCollector`
calls its :meth:`StoredPartCollector.read` in its own session, with the
models it already read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from app.exporter.exposition import FULL, Exposition
from app.exporter.names import FamilySpec
from app.exporter.reads import ModelRow, Shard, read_models
from app.exporter.text import Series

ExpositionOf = Callable[[ModelRow], Exposition]
"""The exposition of a model's series (app/exporter/exposition.py)."""


def whole(_model: ModelRow) -> Exposition:
    """Every series of every model (:meth:`StoredPartCollector.collect`)."""
    return FULL


class StoredPartCollector(Collector):
    """Gauge families :attr:`specs`, their samples read by :meth:`read`.

    Parameters
    ----------
    session_factory : callable returning a Session
        A new session per :meth:`collect`; it is only read from, then closed.
    """

    specs: tuple[FamilySpec, ...] = ()

    def __init__(self, session_factory: Callable[[], Session]) -> None:
        self._session_factory = session_factory

    def read(
        self,
        session: Session,
        models: tuple[ModelRow, ...],
        shard: Shard | None = None,
        exposition_of: ExpositionOf = whole,
    ) -> Series:
        """The samples of :attr:`specs`, by family name, read in ``session``: those of
        ``models``, the models of ``shard`` (None: every model), only the series
        ``exposition_of`` each model writes (left out as they are read, never built)."""
        raise NotImplementedError

    def collect(self) -> Iterator[Metric]:
        with self._session_factory() as session:
            try:
                samples = self.read(session, read_models(session))
            finally:
                session.rollback()
        for spec in self.specs:
            family = GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
            for labels, value in samples[spec.name]:
                family.add_metric(labels, value)
            yield family

    def describe(self) -> Iterable[Metric]:
        """Nothing: the families are only known at scrape time (no check at register)."""
        return ()
