"""The worker's C allocator thresholds (app/worker/allocator.py), in fresh processes:
what they change is the state of a process's allocator, which a test process shares."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

FAULTS = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    from app.worker.allocator import tune_allocator
    tuned = tune_allocator() if sys.argv[1] == "tuned" else None
    def temporaries():
        for _ in range(20):
            alive = [np.ones(1 << 17) for _ in range(8)]  # 8 MB of 1 MB temporaries
            del alive
    temporaries()  # the first heap growth is paid once either way
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    temporaries()
    print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def page_faults(mode: str) -> tuple[str, int]:
    """(what tune_allocator returned, minor page faults of 20 rounds of eight 1 MB
    temporaries alive at once)."""
    out = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tuned_temporaries_reuse_the_heap_instead_of_faulting_in_fresh_pages() -> None:
    untuned, faults_untuned = page_faults("default")
    tuned, faults_tuned = page_faults("tuned")
    assert (untuned, tuned) == ("None", "True")
    # untuned, glibc's thresholds follow the freed 1 MB blocks (mmap 1 MB, trim 2 MB):
    # the 8 MB each round leaves free at the heap's top are returned to the system,
    # and the next round faults its 2,048 pages in again
    assert faults_untuned >= 20 * 1_500
    assert faults_tuned < 1_000
