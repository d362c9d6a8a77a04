"""Set-up shared by the benchmarks in bench/ (imported as ``_common``: each
script runs as ``python bench/bench_<area>.py``, so bench/ is on sys.path).

* :func:`per_call`: median wall time of a call; :func:`batch_body`: the JSON
  body of a batch of scores and labels (prevalence 0.1);
* :func:`postgres_database`: a scratch PostgreSQL database (the same helper as
  the tests', :mod:`app.db.scratch`), or ``None`` when the server is
  unreachable (the benchmark then skips its PostgreSQL part);
  :func:`migrated_postgres_database`: the same, migrated to head;
  :func:`model_on`: the settings, an engine, a session factory and one registered
  model on a database; :func:`ingest_once`: one batch through the service's
  ingestion, in a session of its own;
* :func:`worker_processes`: real ``priorwatch worker`` processes, warmed up,
  stopped after; :func:`cpu_seconds`: a process's CPU time (Linux /proc);
* :func:`waiting_windows` and :func:`wait_drained`: the worker queue read
  with plain SQL on ``window_aggregate`` and ``batch_delta`` (a window waits
  while it has unfolded deltas or its dirty mark).
"""

from __future__ import annotations

import compileall
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path

import numpy as np
import orjson
import sqlalchemy as sa
from sqlalchemy.orm import Session, sessionmaker

import app
from app.config import Settings
from app.db.migrate import upgrade_to_head
from app.db.scratch import ServerUnavailable, scratch_postgres_database
from app.db.session import make_engine, make_session_factory
from app.services.models.config import ModelConfig
from app.services.models.registry import create_model
from app.services.models.settings import ModelCreate


def per_call(func: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``func()`` over ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def batch_body(rng: np.random.Generator, rows: int, at: datetime, **fields: object) -> bytes:
    """A batch body: ``rows`` labels (10% positives), scores that separate the
    classes, event time ``at``, plus ``fields`` (e.g. ``segment``)."""
    labels = (rng.random(rows) < 0.1).astype(int)
    scores = 1.0 / (1.0 + np.exp(-rng.normal(-2.0 + 2.5 * labels, 1.0)))
    return orjson.dumps(
        {
            "timestamp": at.isoformat(),
            **fields,
            "scores": scores.tolist(),
            "labels": labels.tolist(),
        }
    )


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


@contextmanager
def migrated_postgres_database(
    skipped: str = "PostgreSQL unreachable ({reason}): skipped",
) -> Iterator[str | None]:
    """:func:`postgres_database` migrated to head (``None`` when unreachable)."""
    with postgres_database(skipped) as url:
        if url is not None:
            upgrade_to_head(url)
        yield url


def model_on(
    url: str, spec: dict[str, object], at: datetime
) -> tuple[Settings, sa.Engine, sessionmaker[Session], ModelConfig]:
    """The service's settings on ``url``, an engine and its session factory, and the
    model ``spec`` registered at ``at``."""
    settings = Settings(_env_file=None, database_url=url)  # type: ignore[call-arg]
    engine = make_engine(url, settings)
    factory = make_session_factory(engine)
    with factory() as session:
        row = create_model(session, ModelCreate.model_validate(spec), at)
        return settings, engine, factory, ModelConfig.from_row(row)


def ingest_once(
    factory: sessionmaker[Session],
    model: ModelConfig,
    body: bytes,
    settings: Settings,
    at: datetime,
) -> None:
    """Ingest ``body`` for ``model`` as the API does, in a session of its own, under a new
    idempotency key, received at ``at``."""
    from app.services.ingest.batch import ingest_batch  # the service's ingestion, on use

    with factory() as session:
        ingest_batch(
            session, model, body, idempotency_key=uuid.uuid4().hex, settings=settings, now=at
        )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def worker_processes(
    url: str,
    count: int,
    logdir: Path,
    timeout_seconds: float = 300.0,
    env: dict[str, str] | None = None,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` ``priorwatch worker`` processes on ``url`` (the app's bytecode compiled
    first), yielded once each logged "worker ready" (after its warm-up); stopped with
    SIGTERM after (killed if one does not stop within ``timeout_seconds``). Their logs
    go to ``logdir``; ``env`` adds to this process's environment (e.g.
    ``PRIORWATCH_WORKER_*`` settings)."""
    exe = Path(sys.executable).with_name("priorwatch")
    env = {**os.environ, **(env or {}), "PRIORWATCH_DATABASE_URL": url}
    # The workers start as from an installed package, whose modules pip compiled at
    # install: an editable install under PYTHONDONTWRITEBYTECODE (as on the CI machine)
    # would compile the app's modules from source at every start (about 0.13 s of CPU).
    compileall.compile_dir(Path(app.__file__).parent, quiet=1)
    procs: list[subprocess.Popen[bytes]] = []
    with ExitStack() as stack:
        logs = []
        for i in range(count):
            log = stack.enter_context((logdir / f"worker-{count}-{i}.log").open("w+"))
            logs.append(Path(log.name))
            procs.append(
                subprocess.Popen([str(exe), "worker"], env=env, cwd=logdir, stderr=log, stdout=log)
            )
        try:
            deadline = time.monotonic() + timeout_seconds
            for log_path, proc in zip(logs, procs, strict=True):
                while "worker ready" not in log_path.read_text():
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"a worker did not start: see {log_path}")
                    time.sleep(0.02)
            yield procs
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout_seconds)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


WAITING_WINDOWS = sa.text(
    "SELECT count(*) FROM window_aggregate AS wa WHERE wa.dirty OR EXISTS "
    "(SELECT 1 FROM batch_delta AS d WHERE d.model_id = wa.model_id "
    "AND d.segment = wa.segment AND d.window_start = wa.window_start)"
)
ANY_WAITING = sa.text(
    "SELECT EXISTS (SELECT 1 FROM batch_delta) OR EXISTS "
    "(SELECT 1 FROM window_aggregate WHERE dirty)"
)


def waiting_windows(engine: sa.Engine) -> int:
    """Windows waiting for the worker: with unfolded deltas or the dirty mark."""
    with engine.connect() as conn:
        return int(conn.execute(WAITING_WINDOWS).scalar_one())


def wait_drained(
    engine: sa.Engine,
    timeout_seconds: float = 300.0,
    poll_seconds: float = 0.01,
    on_poll: Callable[[], object] | None = None,
) -> None:
    """Wait (bounded) until no window waits for the worker; SystemExit on timeout.

    ``on_poll`` is called after each look at a queue still waiting (progress,
    samples)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        with engine.connect() as conn:
            if not conn.execute(ANY_WAITING).scalar_one():
                return
        if time.monotonic() > deadline:
            raise SystemExit(f"the queue did not drain within {timeout_seconds:.0f} s")
        if on_poll is not None:
            on_poll()
        time.sleep(poll_seconds)
