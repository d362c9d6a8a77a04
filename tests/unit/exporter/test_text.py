"""The direct text writer produces exactly what prometheus_client's encoder produces."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from app.db.queue import QueueStats
from app.exporter.names import FAMILIES
from app.exporter.reads import LatestWindow, ModelRow, ResultStamp, Snapshot
from app.exporter.series import families, series
from app.exporter.text import (
    escape_label_value,
    format_value,
    render_families,
    render_series,
    sample_lines,
)
from app.sla.objectives import Objective

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)


def _snapshot() -> Snapshot:
    models = (
        ModelRow(1, "fraud", "1h", frozenset({"eu", "us"}), (Objective("f1", ">=", 0.5),), 3, 30),
        ModelRow(2, "churn", "1d", frozenset(), (), 0, 0),
    )
    metrics = {
        "f1": 0.25,
        "calibrated_f1": 1 / 3,
        "tiny": 1e-300,
        "huge": 1.5e300,
        "integer": 7,
        'odd"name\\with\nescapes': 0.5,
        "undefined": None,
    }
    windows = tuple(
        LatestWindow(
            ResultStamp(1, segment, datetime(2026, 11, 26, h, tzinfo=UTC), NOW, 1),
            n=100 + h,
            positives=10,
            metrics=metrics,
            intervals={"calibrated_f1": {"lower": 0.1, "upper": 0.5}},
            reasons={},
            drift={"prior": {"flag": True, "p_value": 1e-12, "effect": 0.02}},
        )
        for h, segment in ((1, "*"), (2, "eu"), (3, "us"))
    )
    return Snapshot(models, windows, QueueStats(2, 1, datetime(2026, 11, 26, 11, tzinfo=UTC), NOW))


class _Families(Collector):
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from families(self.snapshot)


def _parsed(
    text: str,
) -> dict[str, tuple[str, str, set[tuple[str, tuple[tuple[str, str], ...], float]]]]:
    out = {}
    for family in text_string_to_metric_families(text):
        samples = {(s.name, tuple(sorted(s.labels.items())), s.value) for s in family.samples}
        out[family.name] = (family.type, family.documentation, samples)
    return out


def test_direct_text_equals_prometheus_client_encoding() -> None:
    snapshot = _snapshot()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(snapshot))
    reference = generate_latest(registry).decode()
    direct = render_series(FAMILIES, series(snapshot))
    assert _parsed(direct) == _parsed(reference)
    assert len(_parsed(direct)["priorwatch_window_metric"][2]) == 3 * 6
    assert direct.endswith("\n") and "\n\n" not in direct


def test_blocks_assemble_in_family_order() -> None:
    snapshot = _snapshot()
    samples = series(snapshot)
    parts = {
        spec.name: [
            sample_lines(spec, samples[spec.name][:2]),
            "",
            sample_lines(spec, samples[spec.name][2:]),
        ]
        for spec in FAMILIES
    }
    assert _parsed(render_families(FAMILIES, parts)) == _parsed(render_series(FAMILIES, samples))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.1, "0.1"),
        (1e-05, "1e-05"),
        (12.0, "12.0"),
        (math.inf, "+Inf"),
        (-math.inf, "-Inf"),
        (math.nan, "NaN"),
    ],
)
def test_format_value(value: float, text: str) -> None:
    assert format_value(value) == text
    assert float(text) == value or math.isnan(value)


def test_escape_label_value() -> None:
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
