"""promtool accepts the exporter's text exposition of a synthetic snapshot (deploy
tier: it runs promtool; skipped when promtool is not installed)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from unit.exporter.test_collector import _exposition, _model, _snapshot, _window

from app.exporter.rejections import RejectionCounter


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_promtool_accepts_the_exposition() -> None:
    rejections = RejectionCounter()
    rejections.inc("invalid_input")
    windows = [_window(), _window("eu")]
    text = _exposition(_snapshot([_model()], windows, dirty=1), rejections)
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
