"""Set-up shared by the benchmarks in bench/ (imported as ``_common``: each
script runs as ``python bench/bench_<area>.py``, so bench/ is on sys.path).

* :func:`per_call`: median wall time of a call;
* :func:`postgres_database`: a scratch PostgreSQL database (the same helper as
  the tests', :mod:`app.db.scratch`), or ``None`` when the server is
  unreachable (the benchmark then skips its PostgreSQL part).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from app.db.scratch import ServerUnavailable, scratch_postgres_database


def per_call(func: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``func()`` over ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


@contextmanager
def postgres_database(
    skipped: str = "PostgreSQL unreachable ({reason}): skipped",
) -> Iterator[str | None]:
    """A new, empty database on the tests' server (PRIORWATCH_TEST_POSTGRES_URL), dropped after.

    Yields its URL, or ``None`` after printing ``skipped`` (formatted with the
    server's ``reason``) when the server cannot be reached.
    """
    try:
        with scratch_postgres_database("priorwatch_bench") as url:
            yield url
    except ServerUnavailable as exc:  # raised before the yield only
        print(skipped.format(reason=exc.reason))
        yield None
