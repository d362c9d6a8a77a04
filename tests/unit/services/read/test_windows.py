"""The window document's ``reasons``: why a document shown as null is null."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.services.read.windows import (
    DETAIL_PENDING,
    NO_LABELLED_DETAIL,
    NO_SCORE_HISTOGRAMS,
    WindowView,
)

START = datetime(2026, 11, 26, tzinfo=UTC)
NOW = START + timedelta(hours=2)


def _view(**fields: object) -> WindowView:
    base: dict[str, object] = {
        "start": START,
        "end": START + timedelta(hours=1),
        "segment": None,
        "granularity": "1h",
        "n": 100,
        "positives": 10,
        "status": "fresh",
        "reasons": {"mcc": "insufficient_data"},
        "computed_at": NOW,
        "aggregate_version": 3,
    }
    base.update(fields)
    return WindowView(**base)  # type: ignore[arg-type]


def test_a_summary_alone_says_its_detail_is_pending() -> None:
    shown = _view().to_dict(with_curves=True)
    assert shown["detail"] is None and shown["curves"] is None
    assert shown["reasons"] == {
        "mcc": "insufficient_data",
        "detail": DETAIL_PENDING,
        "curves": DETAIL_PENDING,
    }
    assert "curves" not in _view().to_dict()["reasons"]  # the list shows no curves


def test_a_computed_detail_needs_no_reason() -> None:
    view = _view(detail_version=3, detail_computed_at=NOW, curves={"roc": {}})
    assert view.to_dict(with_curves=True)["reasons"] == {"mcc": "insufficient_data"}
    matrices_only = _view(detail_version=3, detail_computed_at=NOW)
    assert matrices_only.to_dict(with_curves=True)["reasons"]["curves"] == NO_SCORE_HISTOGRAMS


def test_unlabelled_rows_only_and_pending_windows() -> None:
    scored = _view(n=0, positives=0, reasons={}, n_unlabelled=50)
    assert scored.to_dict()["reasons"] == {"detail": NO_LABELLED_DETAIL}
    pending = _view(status="pending", computed_at=None, reasons={})
    assert pending.to_dict(with_curves=True)["reasons"] == {}  # status says why
    assert _view().reasons == {"mcc": "insufficient_data"}  # the stored map is unchanged
