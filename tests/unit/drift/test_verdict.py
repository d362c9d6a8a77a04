"""The drift verdict entry point: verdict logic, JSON shape, input checks."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.drift import VERDICTS, DriftSettings, WindowHistograms, drift_verdict
from app.drift.simulation import BinormalStream
from app.errors import InvalidInput
from app.metrics.binning import default_bin_edges

EDGES = default_bin_edges((0.5,), n_bins=1_000)
STABLE = BinormalStream(EDGES, mu_positive=0.0, mu_negative=-2.5)
MOVED = BinormalStream(EDGES, mu_positive=-0.6, mu_negative=-2.5)


@pytest.fixture(scope="module")
def reference() -> WindowHistograms:
    return STABLE.window(np.random.default_rng(1), n=100_000, prior=0.1)


@pytest.mark.parametrize(
    ("stream", "prior", "verdict"),
    [
        (STABLE, 0.1, "none"),
        (STABLE, 0.03, "prior"),
        (MOVED, 0.1, "likelihood"),
        (MOVED, 0.03, "both"),
    ],
)
def test_verdict_names_what_moved(
    reference: WindowHistograms, stream: BinormalStream, prior: float, verdict: str
) -> None:
    window = stream.window(np.random.default_rng(2), n=20_000, prior=prior)
    result = drift_verdict(reference, window, threshold=0.5)
    assert result.verdict == verdict
    assert result.prior.flag is (verdict in ("prior", "both"))
    assert result.likelihood.flag is (verdict in ("likelihood", "both"))


def test_to_dict_is_the_contract_shape_and_valid_json(reference: WindowHistograms) -> None:
    window = MOVED.window(np.random.default_rng(3), n=20_000, prior=0.03)
    d = drift_verdict(reference, window, threshold=0.5).to_dict()
    assert d["verdict"] in VERDICTS
    assert {"p_value", "effect"} <= d["prior"].keys()
    assert {"p_value", "effect", "per_class"} <= d["likelihood"].keys()
    assert set(d["likelihood"]["per_class"]) == {"positive", "negative"}
    assert set(d["attribution"]) == {"auc_pr", "precision", "f1"}
    for part in d["attribution"].values():
        assert {"total", "prior", "likelihood"} <= part.keys()
    assert d["prior"]["effect"] == pytest.approx(abs(d["prior"]["change"]))
    per_class = d["likelihood"]["per_class"]
    assert d["likelihood"]["effect"] == max(c["psi"] for c in per_class.values())
    text = json.dumps(d, allow_nan=False)  # no nan, no numpy types
    assert json.loads(text) == d


def test_small_window_tests_what_it_can(reference: WindowHistograms) -> None:
    window = WindowHistograms(
        np.bincount([900, 950], minlength=EDGES.size - 1),
        np.bincount(np.arange(100, 600, 10), minlength=EDGES.size - 1),
        EDGES,
    )
    result = drift_verdict(reference, window, threshold=0.5)
    assert result.prior.status == "ok"
    assert result.likelihood.positive.status == "insufficient_data"
    assert result.likelihood.negative.status == "ok"
    assert result.verdict in ("none", "prior", "likelihood", "both")
    assert result.attribution["auc_pr"].to_dict()["total"] is None


def test_nothing_testable_raises_no_flag_and_says_why() -> None:
    thin = WindowHistograms([1, 2], [3, 4], [0.0, 0.5, 1.0])
    result = drift_verdict(thin, thin, threshold=0.5)
    assert (result.verdict, result.status) == ("none", "insufficient_data")
    assert result.to_dict()["status"] == "insufficient_data"
    assert result.to_dict()["prior"]["p_value"] is None


def test_default_settings_are_the_documented_ones(reference: WindowHistograms) -> None:
    window = STABLE.window(np.random.default_rng(4), n=20_000, prior=0.1)
    assert (
        drift_verdict(reference, window, threshold=0.5).to_dict()
        == drift_verdict(reference, window, threshold=0.5, settings=DriftSettings()).to_dict()
    )
    s = DriftSettings()
    assert (s.alpha, s.min_class_count) == (0.01, 30)


def test_edges_must_match(reference: WindowHistograms) -> None:
    other = WindowHistograms([50, 50], [500, 500], [0.0, 0.5, 1.0])
    with pytest.raises(InvalidInput) as err:
        drift_verdict(reference, other, threshold=0.5)
    assert err.value.field == "window.edges"
