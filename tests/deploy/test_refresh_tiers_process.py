"""A window's detail phase (app/services/refresh/tiers.py) is the same in another
interpreter (deploy tier: it starts a Python process)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

from app.services.refresh.tiers import detail_phase

T0 = datetime(2026, 11, 26, 10, tzinfo=UTC)


def test_the_phase_does_not_depend_on_the_process() -> None:
    """A hash of the key's text, not Python's salted ``hash``: another interpreter agrees."""
    code = (
        "from datetime import datetime, UTC; from app.services.refresh.tiers import detail_phase; "
        "print(repr(detail_phase(7, 'seg-3', datetime(2026, 11, 26, 10, tzinfo=UTC))))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(other.stdout) == detail_phase(7, "seg-3", T0)
