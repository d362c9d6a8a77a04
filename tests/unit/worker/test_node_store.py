"""The OPS node directory shared by workers: same bytes as building, built once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from app.metrics.dbt import dbt_reference
from app.metrics.ops_scoring import ScoringReference
from app.worker.node_store import NodeDirectory

DBT = dbt_reference(4, 200, 11)


def test_nodes_read_from_the_directory_are_the_built_ones(tmp_path: Path) -> None:
    plain = ScoringReference(DBT)
    writer, reader = ScoringReference(DBT), ScoringReference(DBT)
    writer.store_nodes_in(NodeDirectory(tmp_path, DBT))
    reader.store_nodes_in(NodeDirectory(tmp_path, DBT))
    rng = np.random.default_rng(5)
    for prior in rng.uniform(0.01, 0.6, 5):
        for area in ("auc_pr", "auc_lift"):
            expected = plain.interpolated_values(area, prior)
            assert np.array_equal(writer.interpolated_values(area, prior), expected)
            files = sorted(tmp_path.glob("*.npy"))
            assert np.array_equal(reader.interpolated_values(area, prior), expected)
            assert sorted(tmp_path.glob("*.npy")) == files  # the reader built nothing
    assert files


def test_a_node_of_another_reference_is_not_read(tmp_path: Path) -> None:
    other = dbt_reference(4, 200, 12)
    first, second = NodeDirectory(tmp_path, DBT), NodeDirectory(tmp_path, other)
    assert first.path("auc_pr", 3) != second.path("auc_pr", 3)
    first.node("auc_pr", 3, lambda: np.ones(200))
    assert np.array_equal(second.node("auc_pr", 3, lambda: np.zeros(200)), np.zeros(200))


def test_a_damaged_file_is_built_again(tmp_path: Path) -> None:
    store = NodeDirectory(tmp_path, DBT)
    store.path("auc_lift", -2).parent.mkdir(exist_ok=True)
    store.path("auc_lift", -2).write_bytes(b"not a node")
    node = store.node("auc_lift", -2, lambda: np.full(200, 0.5))
    assert np.array_equal(node, np.full(200, 0.5))
    assert np.array_equal(np.load(store.path("auc_lift", -2)), node)


def test_an_unusable_directory_falls_back_to_building(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = NodeDirectory(blocker / "nodes", DBT)  # under a file: cannot be created
    assert np.array_equal(store.node("auc_pr", 0, lambda: np.ones(200)), np.ones(200))
    assert np.array_equal(store.node("auc_pr", 1, lambda: np.zeros(200)), np.zeros(200))


def _build_counted(directory: str, marks: str) -> float:
    def build() -> np.ndarray:
        with open(marks, "a") as out:
            out.write("built\n")
        return np.full(200, 2.0)

    return float(NodeDirectory(Path(directory), DBT).node("auc_pr", 7, build)[0])


@pytest.mark.parametrize("processes", [4])
def test_concurrent_processes_build_a_node_once(tmp_path: Path, processes: int) -> None:
    marks = tmp_path / "marks"
    nodes = tmp_path / "nodes"
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        got = pool.starmap(_build_counted, [(str(nodes), str(marks))] * processes)
    assert got == [2.0] * processes
    assert marks.read_text().splitlines() == ["built"]
