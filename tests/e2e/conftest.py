"""End-to-end fixtures: real ``priorwatch`` processes, always killed, logs shown on failure."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from _e2e_support import Processes

PROCESSES = pytest.StashKey[Processes]()


@pytest.fixture
def processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Processes]:
    """Start ``priorwatch`` processes in ``tmp_path``; whatever still runs is killed after."""
    group = Processes(tmp_path)
    request.node.stash[PROCESSES] = group
    try:
        yield group
    finally:
        group.kill_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, None]:
    """On a failure, add each process's log tail to the report."""
    outcome = yield
    report = outcome.get_result()
    group = item.stash.get(PROCESSES, None)
    if report.failed and group is not None:
        for process in group.started:
            report.sections.append((f"log of {process.name}", process.log()))
