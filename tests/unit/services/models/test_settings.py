"""Request schemas: thresholds, costs, drift settings, fixed fields."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from pydantic import ValidationError

from app.drift.settings import DriftSettings
from app.services.models.settings import DriftConfig, DriftReference, ModelCreate, ModelUpdate


def test_threshold_forms() -> None:
    assert ModelCreate(name="m", pi0=0.1).all_thresholds() == [0.5]
    assert ModelCreate(name="m", pi0=0.1, threshold=0.3).all_thresholds() == [0.3]
    assert ModelCreate(name="m", pi0=0.1, thresholds=[0.3, 0.6]).all_thresholds() == [0.3, 0.6]
    assert ModelCreate(
        name="m", pi0=0.1, threshold=0.3, thresholds=[0.3, 0.6]
    ).all_thresholds() == [0.3, 0.6]
    with pytest.raises(ValidationError, match="threshold must equal"):
        ModelCreate(name="m", pi0=0.1, threshold=0.4, thresholds=[0.3])


def test_unit_costs_give_the_cost_ratio() -> None:
    m = ModelCreate.model_validate(
        {"name": "m", "pi0": 0.1, "costs": {"c_tp": -1, "c_fp": 2, "c_fn": 5, "c_tn": 0}}
    )
    assert m.costs is not None and m.costs.to_unit_costs().cost_ratio == pytest.approx(6 / 8)
    with pytest.raises(ValidationError, match="c_fp"):
        ModelCreate.model_validate(
            {"name": "m", "pi0": 0.1, "costs": {"c_tp": 0, "c_fp": 0, "c_fn": 5, "c_tn": 1}}
        )
    with pytest.raises(ValidationError, match="not both"):
        ModelCreate.model_validate(
            {
                "name": "m",
                "pi0": 0.1,
                "cost_ratio": 0.2,
                "costs": {"c_tp": 0, "c_fp": 1, "c_fn": 1, "c_tn": 0},
            }
        )


def test_drift_defaults_are_those_of_the_drift_module() -> None:
    doc = DriftConfig().to_document()
    assert doc.pop("reference") is None
    assert doc == asdict(DriftSettings())
    assert DriftConfig(alpha=0.05).to_drift_settings() == DriftSettings(alpha=0.05)
    with pytest.raises(ValidationError, match="min_class_count"):
        DriftConfig(min_class_count=0)


def test_drift_reference_forms() -> None:
    period = DriftReference.model_validate(
        {"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}
    )
    assert period.model_dump(mode="json", by_alias=True) == {
        "from": "2026-01-01T00:00:00Z",
        "to": "2026-01-02T00:00:00Z",
        "trailing_windows": None,
    }
    assert DriftReference(trailing_windows=24).trailing_windows == 24
    for bad in (
        {},
        {"from": "2026-01-01T00:00:00Z"},
        {"trailing_windows": 3, "to": "2026-01-02T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "9999-12-31T23:00:00-05:00"},
    ):
        with pytest.raises(ValidationError):
            DriftReference.model_validate(bad)
    # no offset: UTC, as everywhere in the API (app.timegrid)
    naive = DriftReference.model_validate({"from": "2026-01-01T00:00:00", "to": "2026-01-02"})
    assert naive.model_dump(mode="json", by_alias=True)["to"] == "2026-01-02T00:00:00Z"


def test_update_tracks_the_fields_sent() -> None:
    u = ModelUpdate.model_validate({"pi0": 0.2, "cost_ratio": None})
    assert u.model_fields_set == {"pi0", "cost_ratio"}
    with pytest.raises(ValidationError):
        ModelUpdate.model_validate({"unknown": 1})


def test_segment_names_are_distinct_and_not_reserved() -> None:
    assert ModelCreate(name="m", pi0=0.1, segments=["eu", "us"]).segments == ["eu", "us"]
    with pytest.raises(ValidationError, match="distinct"):
        ModelCreate(name="m", pi0=0.1, segments=["eu", "eu"])
    with pytest.raises(ValidationError, match="reserved"):
        ModelCreate(name="m", pi0=0.1, segments=["eu", "all"])
    with pytest.raises(ValidationError, match="reserved"):
        ModelUpdate(segments=["all"])


def test_exposition_is_a_preset_or_a_list_of_trimmed_families() -> None:
    lower, upper = "priorwatch_window_metric_lower", "priorwatch_window_metric_upper"
    assert ModelCreate(name="m", pi0=0.1).exposition is None  # the service's default
    assert ModelUpdate.model_validate({"exposition": "full"}).exposition == "full"
    listed = ModelUpdate.model_validate({"exposition": [upper, lower, upper]})
    assert listed.exposition == [lower, upper]
    for bad in ("everything", [], ["priorwatch_drift_flag"], [lower] * 10):
        with pytest.raises(ValidationError, match="exposition"):
            ModelUpdate.model_validate({"exposition": bad})
