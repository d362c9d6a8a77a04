"""app.main.settle_garbage_collection: what ``priorwatch serve`` does to the collector."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.main import FULL_COLLECTION_EVERY, settle_garbage_collection


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_start_up_objects_are_frozen_and_full_collections_spaced() -> None:
    gc.unfreeze()
    young, middle, _ = gc.get_threshold()
    kept = [object(), {"start-up": [1, 2]}]  # tracked objects alive at start-up
    settle_garbage_collection()
    assert gc.get_freeze_count() > 0
    assert not any(o is kept[1] for o in gc.get_objects())  # out of every generation
    assert gc.get_threshold() == (young, middle, FULL_COLLECTION_EVERY)
    later: list[list[int]] = [[]]
    assert any(o is later for o in gc.get_objects())  # later objects are collected as usual
