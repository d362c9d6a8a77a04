"""The C allocator's thresholds for a worker process (glibc's ``mallopt``).

A worker's computations allocate numpy temporaries of 0.1 to a few MB, several
alive at once (the OPS nodes' blocks of reference curves, the bootstrap's
rows). glibc serves a block above its mmap threshold with a fresh ``mmap``,
and returns the free memory at the heap's top to the system past its trim
threshold; both thresholds start at 128 KB and follow the largest mmapped
block freed so far, if it is at most 32 MB (trim: twice it). A worker's speed
therefore depended on what it happened to free first: building the OPS
reference curves through a 20 MB buffer raised the thresholds to 20 and
40 MB; through a 41 MB one (the build of app/metrics/dbt.py since it works
by blocks) it did not, the thresholds followed the 1 MB temporaries, and the
memory of every group of temporaries was returned and faulted in again: the
same numpy code ran 2-2.5 times slower (an AUC-PR node 0.13 s against 0.05 s,
the OPS of a summary likewise). :func:`tune_allocator` sets at start the
values glibc reaches by itself after freeing a 32 MB block: blocks up to
32 MB come from the heap, and up to 64 MB of free memory at its top is kept
(the rest is returned). It is a no-op where the C library has no ``mallopt``.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger("priorwatch.worker")

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""``mallopt`` parameters (glibc's malloc.h)."""

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Allocations from this size up are mmapped: glibc's own ceiling of its dynamic threshold."""

TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES
"""Free memory at the heap's top kept before it is returned (glibc: twice the mmap threshold)."""


def tune_allocator() -> bool:
    """Set glibc's mmap and trim thresholds (module docstring); whether they were set."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: its C library's
    except (OSError, AttributeError):  # a C library without mallopt (not glibc)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    if not done:
        log.warning("the C allocator's thresholds could not be set (mallopt refused them)")
    return done
