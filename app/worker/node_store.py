"""A directory of OPS reference curves and interpolation nodes shared by the workers
of one machine.

The OPS of AUC-PR and of the lift area interpolates, per reference curve,
between nodes on a grid of logit(prior) (:mod:`app.metrics.ops_scoring`); a
node costs 0.1-0.3 s of CPU and a fleet's windows need a few around each of
their priors. Without a store every worker process builds them again, on
every start: two workers draining a backlog both build the same ones.

:class:`NodeDirectory` keeps them as ``.npy`` files
(``PRIORWATCH_WORKER_OPS_NODE_DIR``, off by default), and beside them the
sorted ROC-AUC values of the curves that the warm-up builds (node
``sorted-auc_roc``, 0.03 s). A node is built by one
process at a time (an exclusive ``flock`` on its own lock file: a second
worker that needs it waits, then reads it) and written atomically (a
temporary file, then a rename), so a reader never sees part of one. The
file's name holds the reference's parameters and a fingerprint of its first
curves, so a node is never read for another reference. The values read are
the bytes that were built: the OPS is the same with or without the store.
Any error of the file system (read-only, full, missing) falls back to
building the node in memory, with one warning.

:class:`CurveDirectory` keeps the reference curves themselves there the same
way (:func:`app.metrics.dbt.dbt_reference`): building them costs every worker
0.2-0.3 s of CPU at start, and 82 MB of its memory. The file (alpha and recall
as one float64 array of shape (2, G, 2^d + 1)) is memory-mapped read-only, so
the workers of a machine share its pages, and a start reads it in a few
milliseconds. Its name holds the reference's parameters; a file whose curves'
roots are not the generator's first draws for its seed
(:func:`app.metrics.dbt.root_draws_match`: written by a numpy that draws
otherwise, or damaged) is built and written again.
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
from typing import BinaryIO, TypeVar

import numpy as np
import numpy.typing as npt

from app.metrics.dbt import DBTReference, root_draws_match

Array = npt.NDArray[np.float64]

log = logging.getLogger("priorwatch.worker")

FORMAT = 1
"""Part of every file name: a change of the node's definition changes it."""

CURVES_FORMAT = 1
"""Part of a curve file's name: a change of the file's layout changes it."""

T = TypeVar("T")


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
            return _shared(self.path(area, index), self._read, build, _save)
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


class CurveDirectory:
    """Reference curves in ``directory`` (created if missing; module docstring), the
    :class:`app.metrics.dbt.CurveStore` of a worker."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, depth: int, n_curves: int, seed: int) -> Path:
        return self.directory / f"curves-v{CURVES_FORMAT}-d{depth}-g{n_curves}-s{seed}.npy"

    def reference(
        self, depth: int, n_curves: int, seed: int, build: Callable[[], DBTReference]
    ) -> DBTReference:
        """The stored reference, else ``build()``, stored for the others."""

        def read(path: Path) -> DBTReference | None:
            with contextlib.suppress(FileNotFoundError, ValueError):
                curves = np.load(path, mmap_mode="r", allow_pickle=False)
                if curves.dtype == np.float64 and curves.shape == (2, n_curves, (1 << depth) + 1):
                    ref = DBTReference(
                        alpha=np.asarray(curves[0]),
                        tpr=np.asarray(curves[1]),
                        depth=depth,
                        seed=seed,
                    )
                    if root_draws_match(ref, seed):
                        return ref
            return None

        try:
            return _shared(self.path(depth, n_curves, seed), read, build, _save_curves)
        except OSError as exc:
            log.warning(
                "OPS node directory %s unusable, reference curves built in memory: %s",
                self.directory,
                exc,
            )
            return build()


def _save(node: Array, out: BinaryIO) -> None:
    np.save(out, node, allow_pickle=False)


def _save_curves(ref: DBTReference, out: BinaryIO) -> None:
    """Alpha and recall as one array of shape (2, G, 2^d + 1), without stacking a copy."""
    header = {"descr": "<f8", "fortran_order": False, "shape": (2, *ref.alpha.shape)}
    np.lib.format.write_array_header_1_0(out, header)
    out.write(np.ascontiguousarray(ref.alpha, "<f8").data)
    out.write(np.ascontiguousarray(ref.tpr, "<f8").data)


def _shared(
    path: Path,
    read: Callable[[Path], T | None],
    build: Callable[[], T],
    save: Callable[[T, BinaryIO], None],
) -> T:
    """What ``read(path)`` finds, else ``build()`` saved to ``path`` by one process at a
    time (the others wait, then read it) and atomically (a temporary file, renamed)."""
    found = read(path)
    if found is not None:
        return found
    path.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(path.with_suffix(".lock")):
        found = read(path)  # built by another process while this one waited
        if found is not None:
            return found
        value = build()
        fd, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                save(value, out)
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return value


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` (released when the file closes)."""
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
