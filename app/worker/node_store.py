"""A directory of OPS interpolation nodes shared by the workers of one machine.

The OPS of AUC-PR and of the lift area interpolates, per reference curve,
between nodes on a grid of logit(prior) (:mod:`app.metrics.ops_scoring`); a
node costs 0.1-0.3 s of CPU and a fleet's windows need a few around each of
their priors. Without a store every worker process builds them again, on
every start: two workers draining a backlog both build the same ones.

:class:`NodeDirectory` keeps them as ``.npy`` files
(``PRIORWATCH_WORKER_OPS_NODE_DIR``, off by default). A node is built by one
process at a time (an exclusive ``flock`` on its own lock file: a second
worker that needs it waits, then reads it) and written atomically (a
temporary file, then a rename), so a reader never sees part of one. The
file's name holds the reference's parameters and a fingerprint of its first
curves, so a node is never read for another reference. The values read are
the bytes that were built: the OPS is the same with or without the store.
Any error of the file system (read-only, full, missing) falls back to
building the node in memory, with one warning.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.metrics.dbt import DBTReference

Array = npt.NDArray[np.float64]

log = logging.getLogger("priorwatch.worker")

FORMAT = 1
"""Part of every file name: a change of the node's definition changes it."""


def reference_fingerprint(dbt: DBTReference) -> str:
    """A short hash of the shape and of the first curves of ``dbt`` (their rates' bytes)."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(repr((dbt.tpr.shape, dbt.alpha.shape)).encode())
    digest.update(np.ascontiguousarray(dbt.tpr[:4]).tobytes())
    digest.update(np.ascontiguousarray(dbt.alpha[:4]).tobytes())
    return digest.hexdigest()


class NodeDirectory:
    """Nodes of one reference in ``directory`` (created if missing; module docstring).

    Parameters
    ----------
    directory : Path
    dbt : DBTReference
        The reference whose nodes are kept (its fingerprint names the files).
    """

    def __init__(self, directory: Path, dbt: DBTReference) -> None:
        self.directory = directory
        self.prefix = f"v{FORMAT}-{reference_fingerprint(dbt)}"
        self.size = dbt.n_curves
        self._failed = False

    def path(self, area: str, index: int) -> Path:
        return self.directory / f"{self.prefix}-{area}-{index}.npy"

    def node(self, area: str, index: int, build: Callable[[], Array]) -> Array:
        """The stored node (``area``, ``index``), else ``build()``, stored for the others."""
        if self._failed:
            return build()
        try:
            return self._shared(self.path(area, index), build)
        except OSError as exc:
            self._failed = True
            log.warning(
                "OPS node directory %s unusable, nodes built in memory: %s", self.directory, exc
            )
            return build()

    def _read(self, path: Path) -> Array | None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            node = np.load(path, allow_pickle=False)
            if node.dtype == np.float64 and node.shape == (self.size,):
                return np.asarray(node)
        return None

    def _shared(self, path: Path, build: Callable[[], Array]) -> Array:
        node = self._read(path)
        if node is not None:
            return node
        self.directory.mkdir(parents=True, exist_ok=True)
        with _exclusive(path.with_suffix(".lock")):
            node = self._read(path)  # built by another process while this one waited
            if node is not None:
                return node
            node = build()
            fd, temporary = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    np.save(out, node, allow_pickle=False)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            return node


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (released when the file closes)."""
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
