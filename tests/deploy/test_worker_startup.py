"""A worker's start-up (docs/worker.md) in a fresh process (deploy tier).

The warm-up builds the OPS reference curves and the sorted ROC-AUC values a
summary reads, no more: nodes depend on the priors of the windows, unknown at
start, and the detail's OPRC tables wait for the first detail; scipy (special,
stats, optimize, integrate) stays unimported (only some windows need it, on
first use).
"""

from __future__ import annotations

import subprocess
import sys

STARTUP = (
    "import sys\n"
    "from app.metrics.ops_scoring import scoring_reference\n"
    "from app.worker.runner import warm_up\n"
    "warm_up()\n"
    "ref = scoring_reference()\n"
    "lazy = ('scipy',)\n"
    "print(sorted(m for m in sys.modules if m.startswith(lazy)))\n"
    "print(sorted(ref._sorted), len(ref._alpha_sorted), len(ref._nodes))\n"
)


def _start_up() -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", STARTUP], capture_output=True, text=True, check=True
    )
    return result.stdout.splitlines()


def test_worker_start_up_leaves_scipy_unimported() -> None:
    assert _start_up()[0] == "[]"


def test_worker_warm_up_builds_what_a_summary_reads_only() -> None:
    assert _start_up()[1] == "['auc_roc'] 0 0"


COMMAND_IMPORTS = (
    "import sys\n"
    "import app.cli\n"
    "from app.cli.startup import load_settings, load_worker_settings, prepare_schema_or_exit\n"
    "import app.db.migrate, app.worker.runner\n"
    "lazy = ('alembic', 'httpx', 'mako', 'priorwatch_client', 'scipy')\n"
    "print(sorted(m for m in sys.modules if m.startswith(lazy)))\n"
)
"""What ``priorwatch worker`` imports before its first claim (app/cli/__init__.py)."""


def test_the_worker_command_starts_without_alembic_the_http_client_or_scipy() -> None:
    """The schema check reads the revisions without Alembic (app/db/revisions.py)."""
    result = subprocess.run(
        [sys.executable, "-c", COMMAND_IMPORTS], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
