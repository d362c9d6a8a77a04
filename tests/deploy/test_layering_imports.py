"""The layering rules of tests/unit/test_layering.py, checked in fresh interpreters
(deploy tier: each check starts a Python process).

Each interpreter imports every module of a package and lists ``sys.modules``:
this catches what a third-party import drags in, which the import graph read
with :mod:`ast` cannot see.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest
from unit.test_layering import (
    CLIENT,
    EXPORTER,
    METRICS_COMPUTATION,
    REPO,
    RULES,
    STORAGE,
    WEB,
    Rule,
    _in,
    _package_modules,
)


@cache
def _loaded_by_importing(package: str) -> frozenset[str]:
    """``sys.modules`` of a fresh interpreter after importing every module of ``package``."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {_package_modules(package)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return frozenset(json.loads(out.stdout))


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_importing_package_loads_nothing_forbidden(rule: Rule) -> None:
    loaded = _loaded_by_importing(rule.package)
    assert rule.package in loaded
    offenders = sorted(m for m in loaded if _in(m, rule.forbidden) and not _in(m, (rule.package,)))
    assert not offenders, f"importing {rule.package} loads {offenders[:20]}"


def test_the_collector_does_not_load_the_metrics_core() -> None:
    loaded = _loaded_by_importing("app.exporter.collector")
    assert "app.exporter.collector" in loaded
    assert "app.metrics.labeling" in loaded  # the metric names, for the SLA gauges
    assert not [m for m in loaded if _in(m, METRICS_COMPUTATION)]


def test_the_metrics_package_is_lazy_and_keeps_its_entry_point() -> None:
    """``from app.metrics import evaluate`` is the function, whatever was imported before."""
    code = (
        "import sys\n"
        "import app.metrics.labeling\n"
        "lazy = 'app.metrics.evaluate' not in sys.modules\n"
        "import app.metrics.evaluate\n"
        "from app.metrics import evaluate\n"
        "print(lazy, callable(evaluate), evaluate([0.2, 0.8], [0, 1])['recall'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "True", "1.0"]


def test_importing_the_client_loads_nothing_of_the_server() -> None:
    modules = sorted(f"priorwatch_client.{p.stem}" for p in CLIENT.glob("*.py"))
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert "priorwatch_client.client" in loaded
    server = ("app", "migrations", "scipy", "pydantic", *STORAGE, *WEB, *EXPORTER)
    assert not sorted(m for m in loaded if _in(m, server))
