"""The backpressure alert's promtool unit tests (deploy/prometheus/tests/backpressure.test.yml)
fail against a broken rule (mutation tests; promtool itself runs every unit test file
in tests/deploy/test_deploy_prometheus.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_deploy_prometheus import PROMETHEUS_DIR, RULES, _promtool, needs_promtool

UNIT_TESTS = PROMETHEUS_DIR / "tests" / "backpressure.test.yml"


def _run(tmp_path: Path, old: str, new: str) -> str:
    """promtool's verdict on the unit tests against the rules with ``old`` replaced."""
    text = RULES.read_text()
    assert text.count(old) == 1, f"mutation target {old!r} must occur once"
    (tmp_path / "rules").mkdir(parents=True)
    (tmp_path / "rules" / RULES.name).write_text(text.replace(old, new))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / UNIT_TESTS.name).write_text(UNIT_TESTS.read_text())
    result = _promtool("test", "rules", str(tmp_path / "tests" / UNIT_TESTS.name))
    return "passed" if result.returncode == 0 else result.stdout + result.stderr


@needs_promtool
@pytest.mark.parametrize(
    ("old", "new"),
    [
        # replicas summed instead of collapsed: two replicas double the count
        ("max by (model) (priorwatch_unfolded_deltas)",
         "sum by (model) (priorwatch_unfolded_deltas)"),
        # a replica without a bound (0) taken as a bound of 0: pages for nothing
        ("group_left\n          min(priorwatch_unfolded_deltas_limit > 0)",
         "group_left\n          min(priorwatch_unfolded_deltas_limit)"),
        # the largest bound instead of the smallest: silent while one replica refuses
        ("group_left\n          min(priorwatch_unfolded_deltas_limit > 0)",
         "group_left\n          max(priorwatch_unfolded_deltas_limit > 0)"),
        # the warning at 90 % of the bound: too late
        ("0.8 * min(", "0.9 * min("),
    ],
    ids=["replicas-summed", "no-bound-as-zero", "largest-bound", "warning-late"],
)  # fmt: skip
def test_the_unit_tests_catch_a_broken_backpressure_rule(
    tmp_path: Path, old: str, new: str
) -> None:
    assert _run(tmp_path / "as-shipped", old, old) == "passed"
    assert "FAILED" in _run(tmp_path / "mutated", old, new)
