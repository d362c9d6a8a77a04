"""The engines' JSON serializer (app.db.types.json_text): orjson's text holding the
standard library's JSON value for every document, the standard library's own text
where orjson would differ (non-finite floats, types orjson refuses)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import orjson
import pytest
from builders import model_config, sample, sums_of

from app.db.types import json_text
from app.services.windows.compute import compute_window_result


def documents(seed: int) -> dict[str, Any]:
    """The stored documents of a full window result (a real computation)."""
    model = model_config()
    scores, labels = sample(np.random.default_rng(seed), 3_000, 0.1)
    full = compute_window_result(model, sums_of(scores, labels, model), None)
    return {
        "metrics": full.metrics,
        "reasons": full.reasons,
        "intervals": full.intervals,
        "drift": full.drift,
        "estimate": full.estimate,
        "curves": full.curves,
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_windows_documents_keep_their_json_values(seed: int) -> None:
    for name, document in documents(seed).items():
        text = json_text(document)
        assert json.loads(text) == json.loads(json.dumps(document)), name
        assert text == orjson.dumps(document).decode(), name  # orjson's text, not the fallback


@pytest.mark.parametrize(
    "value",
    [
        {"prior": math.nan},
        {"curve": [0.5, None, [math.inf]]},  # null beside a non-finite float, nested
        [(-math.inf, 1.0)],
        {"x": np.float64(0.25)},  # orjson refuses numpy scalars
        {1: "a"},  # and keys that are not strings
        {"big": 2**70},  # and integers past 64 bits
    ],
)
def test_what_orjson_would_write_otherwise_is_the_standard_librarys_text(value: Any) -> None:
    assert json_text(value) == json.dumps(value)


def test_nulls_and_finite_values_stay_with_orjson() -> None:
    value = {"auc_roc": 0.5, "f1": None, "curve": [1e-05, None, 1e16], "verdict": "none"}
    text = json_text(value)
    assert json.loads(text) == value
    assert text.startswith('{"auc_roc":0.5,"f1":null,"curve":[')  # orjson's: no spaces
