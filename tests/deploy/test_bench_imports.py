"""Every benchmark script still imports (bench/ follows the code it measures).

Each script is imported in a fresh interpreter from bench/ (as ``make bench``
runs it), without running its ``__main__`` part: a moved or renamed module
fails here instead of in the next benchmark run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(p.stem for p in BENCH.glob("*.py"))


def test_every_benchmark_is_found() -> None:
    assert "bench_ingest" in SCRIPTS and "bench_maturity" in SCRIPTS and len(SCRIPTS) > 10


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_benchmark_imports(script: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {script}"],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
