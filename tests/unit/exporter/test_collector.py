"""The exporter's families from a synthetic snapshot (no database): names, labels,
omissions, and a text exposition that the prometheus parser accepts (promtool's check
is in tests/deploy/test_exporter_promtool.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from app.db.models import ALL_SEGMENTS
from app.db.queue import QueueStats
from app.exporter import names
from app.exporter.collector import _pack, _unpack
from app.exporter.names import FAMILIES
from app.exporter.reads import LatestWindow, ModelRow, ResultStamp, Snapshot, _objectives
from app.exporter.rejections import RejectionCounter
from app.exporter.series import families
from app.exporter.text import sample_lines
from app.sla.objectives import Objective

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
START = datetime(2026, 11, 26, 10, 0, tzinfo=UTC)
F1_OBJECTIVE = Objective("calibrated_f1", ">=", 0.6)
BRIER_OBJECTIVE = Objective("brier", "<=", 0.1)
RECALL_OBJECTIVE = Objective("recall", ">=", 0.5)
UNSURE_OBJECTIVE = Objective(  # interval (0.6, 0.8) straddles
    "calibrated_f1", ">=", 0.65, id="calibrated_f1_stretch"
)


def _model(**overrides: Any) -> ModelRow:
    values: dict[str, Any] = {
        "id": 1,
        "name": "fraud",
        "window": "1h",
        "segments": frozenset({"eu", "us", "all"}),
        "objectives": (F1_OBJECTIVE, BRIER_OBJECTIVE, RECALL_OBJECTIVE, UNSURE_OBJECTIVE),
        "batches": 12,
        "rows": 3456,
    }
    values.update(overrides)
    return ModelRow(**values)


def _window(segment: str = ALL_SEGMENTS, model_id: int = 1, **overrides: Any) -> LatestWindow:
    values: dict[str, Any] = {
        "key": ResultStamp(model_id, segment, START, NOW, 3),
        "n": 1000,
        "positives": 40,
        "metrics": {
            "calibrated_f1": 0.7,
            "brier": 0.2,
            "recall": None,
            "f1": float("nan"),
            "prior": 0.04,
            "f1@t=0.3": 0.5,
        },
        "intervals": {"calibrated_f1": {"lower": 0.6, "upper": 0.8, "level": 0.95}},
        "reasons": {"recall": "insufficient_data"},
        "drift": {
            "verdict": "likelihood",
            "prior": {"flag": False, "p_value": 0.4, "effect": 0.01},
            "likelihood": {"flag": True, "p_value": 1e-5, "effect": 0.3},
        },
    }
    values.update(overrides)
    return LatestWindow(**values)


def _snapshot(
    models: Iterable[ModelRow] = (), windows: Iterable[LatestWindow] = (), dirty: int = 0
) -> Snapshot:
    oldest = datetime(2026, 11, 26, 11, 59, 30, tzinfo=UTC) if dirty else None
    return Snapshot(tuple(models), tuple(windows), QueueStats(dirty, 0, oldest, NOW))


class _Fixed(Collector):
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        yield from families(self.snapshot)


def _exposition(snapshot: Snapshot, rejections: RejectionCounter | None = None) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(snapshot))
    if rejections is not None:
        registry.register(rejections)
    return generate_latest(registry).decode()


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.timestamp is None
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, key  # no duplicate series
            out[key] = s.value
    return out


def _get(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def test_window_values_intervals_and_omissions() -> None:
    text = _exposition(_snapshot([_model()], [_window()]))
    s = _samples(text)
    m = {"model": "fraud", "segment": "all"}
    assert _get(s, names.WINDOW_METRIC, **m, metric="calibrated_f1") == 0.7
    assert _get(s, names.WINDOW_METRIC, **m, metric="f1@t=0.3") == 0.5
    # None and NaN are omitted, never exported
    assert _get(s, names.WINDOW_METRIC, **m, metric="recall") is None
    assert _get(s, names.WINDOW_METRIC, **m, metric="f1") is None
    assert "NaN" not in text
    assert _get(s, names.WINDOW_METRIC_LOWER, **m, metric="calibrated_f1") == 0.6
    assert _get(s, names.WINDOW_METRIC_UPPER, **m, metric="calibrated_f1") == 0.8
    assert _get(s, names.WINDOW_EXAMPLES, **m, **{"class": "positive"}) == 40
    assert _get(s, names.WINDOW_EXAMPLES, **m, **{"class": "negative"}) == 960
    assert _get(s, names.WINDOW_END, **m) == datetime(2026, 11, 26, 11, tzinfo=UTC).timestamp()


def test_drift_and_sla_gauges() -> None:
    s = _samples(_exposition(_snapshot([_model()], [_window()])))
    m = {"model": "fraud", "segment": "all"}
    assert _get(s, names.DRIFT_FLAG, **m, kind="prior") == 0
    assert _get(s, names.DRIFT_FLAG, **m, kind="likelihood") == 1
    assert _get(s, names.DRIFT_P_VALUE, **m, kind="likelihood") == 1e-5
    assert _get(s, names.DRIFT_EFFECT, **m, kind="prior") == 0.01
    f1 = {"objective": "calibrated_f1_ge"}  # a window's series: the objective's id only
    brier = {"objective": "brier_le"}
    recall = {"objective": "recall_ge"}
    assert _get(s, names.SLA_MET, **m, **f1) == 1
    assert _get(s, names.SLA_MET, **m, **brier) == 0
    assert _get(s, names.SLA_MET, **m, **recall) is None  # insufficient data
    unsure = {"objective": "calibrated_f1_stretch"}
    assert _get(s, names.SLA_MET, **m, **unsure) == 0.5  # inconclusive
    for labels, metric, op, target in (
        (f1, "calibrated_f1", ">=", 0.6),
        (brier, "brier", "<=", 0.1),
        (recall, "recall", ">=", 0.5),
    ):  # the target names the objective's metric and op
        assert _get(s, names.SLA_TARGET, model="fraud", **labels, metric=metric, op=op) == target


def test_objective_labels_do_not_change_with_the_target() -> None:
    """A new target keeps the series (labels without the target); an explicit id wins."""
    moved = Objective("calibrated_f1", ">=", 0.75)
    named = Objective("calibrated_f1", ">=", 0.75, id="f1-floor")
    window = _window()
    labels = {}
    for objective in (F1_OBJECTIVE, moved, named):
        model = _model(objectives=(objective,))
        s = _samples(_exposition(_snapshot([model], [window])))
        (key,) = [k for k in s if k[0] == names.SLA_TARGET]
        labels[objective] = dict(key[1])
        assert s[key] == objective.target
    assert (
        labels[F1_OBJECTIVE]
        == labels[moved]
        == {
            "model": "fraud",
            "objective": "calibrated_f1_ge",
            "metric": "calibrated_f1",
            "op": ">=",
        }
    )
    assert labels[named]["objective"] == "f1-floor"


def test_reference_window_has_no_drift_samples() -> None:
    window = _window(drift={"verdict": "reference"})
    s = _samples(_exposition(_snapshot([_model()], [window])))
    assert not [k for k in s if k[0].startswith("priorwatch_drift_")]
    undecided = _window(drift={"verdict": "insufficient_data", "prior": {"flag": None}})
    s = _samples(_exposition(_snapshot([_model()], [undecided])))
    assert not [k for k in s if k[0].startswith("priorwatch_drift_")]


def test_labels_come_from_registered_names_only() -> None:
    model = _model(segments=frozenset({"eu", "all"}))
    windows = [
        _window(ALL_SEGMENTS),
        _window("eu"),
        _window("us"),  # no longer registered
        _window("all"),  # a registered segment named like the all-traffic label
        _window("eu", model_id=99),  # no such model
    ]
    s = _samples(_exposition(_snapshot([model], windows)))
    series = {dict(labels)["segment"] for name, labels in s if name == names.WINDOW_END}
    assert series == {"all", "eu"}
    assert _get(s, names.WINDOW_EXAMPLES, model="fraud", segment="all", **{"class": "positive"})


def test_counters_and_queue() -> None:
    models = [_model(unfolded=7), _model(id=2, name="churn", objectives=(), batches=0, rows=0)]
    rejections = RejectionCounter()
    for reason in ("invalid_input", "invalid_input", "model_not_found"):
        rejections.inc(reason)
    text = _exposition(_snapshot(models, dirty=3), rejections)
    s = _samples(text)
    assert _get(s, "priorwatch_batches_ingested_total", model="fraud") == 12
    assert _get(s, "priorwatch_predictions_ingested_total", model="fraud") == 3456
    assert _get(s, "priorwatch_batches_ingested_total", model="churn") == 0
    assert _get(s, "priorwatch_unfolded_deltas", model="fraud") == 7
    assert _get(s, "priorwatch_unfolded_deltas", model="churn") == 0
    assert _get(s, "priorwatch_batches_rejected_total", reason="invalid_input") == 2
    assert _get(s, "priorwatch_batches_rejected_total", reason="model_not_found") == 1
    assert _get(s, names.DIRTY_WINDOWS) == 3
    assert _get(s, names.WORKER_LAG) == 30.0
    assert "_created" not in text
    # no window yet: no window gauges, but every family is declared
    assert not [k for k in s if k[0] == names.WINDOW_METRIC]
    declared = {f.name for f in text_string_to_metric_families(text)}
    others = (*names.STREAK_FAMILIES, *names.ESTIMATE_FAMILIES, *names.MATURITY_FAMILIES)
    others = (*others, names.DATABASE_UP_FAMILY)
    extra = {f.name for f in others}  # written by other collectors or by the Exporter
    extra.add(names.UNFOLDED_DELTAS_LIMIT)  # a setting: the exporter's process registry
    assert {n.removesuffix("_total") for n in names.EXPOSED_NAMES} - extra <= declared


def test_empty_queue_has_zero_lag() -> None:
    s = _samples(_exposition(_snapshot()))
    assert _get(s, names.DIRTY_WINDOWS) == 0
    assert _get(s, names.WORKER_LAG) == 0


def test_exposed_names_follow_prometheus_conventions() -> None:
    assert len(set(names.EXPOSED_NAMES)) == len(names.EXPOSED_NAMES) == 33
    for name in names.EXPOSED_NAMES:
        assert name.startswith(names.PREFIX)
        assert name == name.lower()
    counters = {f.name for f in families(_snapshot([_model()])) if f.type == "counter"}
    assert {f"{c}_total" for c in counters} == {
        n for n in names.EXPOSED_NAMES if n.endswith("_total")
    } - {"priorwatch_batches_rejected_total"}


def test_repeated_objective_ids_of_older_settings_stay_distinct_series() -> None:
    """Settings stored before ids had to be unique: two objectives on the same metric
    and op must not write the same series twice (Prometheus would refuse the scrape)."""
    docs = [
        {"metric": "recall", "op": ">=", "target": 0.5},
        {"metric": "recall", "op": ">=", "target": 0.8},
    ]
    objectives = _objectives(1, "fraud", docs)
    assert [o.id for o in objectives] == ["recall_ge", "recall_ge-2"]
    s = _samples(_exposition(_snapshot([_model(objectives=objectives)], [_window()])))
    targets = {dict(k[1])["objective"]: v for k, v in s.items() if k[0] == names.SLA_TARGET}
    assert targets == {"recall_ge": 0.5, "recall_ge-2": 0.8}


def test_a_cached_window_unpacks_to_its_families_lines() -> None:
    spec = next(f for f in FAMILIES if f.name == names.WINDOW_METRIC)
    odd = sample_lines(spec, [(("m\nx", "all", "f1"), 0.5), (("m", "all", "mcc"), 0.25)])
    texts = ["", odd, "", "", "a 1", ""]
    assert _unpack(_pack(texts)) == [text.encode() for text in texts]
    assert len(_pack([odd * 40])) < len(odd * 40) / 4
