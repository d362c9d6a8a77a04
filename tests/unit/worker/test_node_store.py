"""The OPS node and curve directory shared by workers: same bytes as building, built once."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from app.metrics.dbt import DBTReference, dbt_reference, sample_dbt
from app.metrics.ops_scoring import ScoringReference
from app.worker.node_store import CurveDirectory, NodeDirectory

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


def _built(depth: int, n_curves: int, seed: int) -> Callable[[], DBTReference]:
    return lambda: sample_dbt(n_curves, depth, np.random.default_rng(seed))


def test_curves_read_from_the_directory_are_the_built_bytes_mapped_read_only(
    tmp_path: Path,
) -> None:
    built = _built(4, 300, 21)()
    written = CurveDirectory(tmp_path).reference(4, 300, 21, lambda: built)
    assert written is built
    read = CurveDirectory(tmp_path).reference(4, 300, 21, lambda: pytest.fail("built again"))
    for got, expected in ((read.alpha, built.alpha), (read.tpr, built.tpr)):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.tobytes() == expected.tobytes()
        assert isinstance(got.base, np.memmap) and not got.flags.writeable
    assert (read.depth, read.seed) == (4, 21)


def test_dbt_reference_asks_the_store_for_a_reference_not_built_yet(tmp_path: Path) -> None:
    asked = []

    class Store:
        def reference(
            self, depth: int, n_curves: int, seed: int, build: Callable[[], DBTReference]
        ) -> DBTReference:
            asked.append((depth, n_curves, seed))
            return CurveDirectory(tmp_path).reference(depth, n_curves, seed, build)

    first = dbt_reference(3, 77, 31, store=Store())
    assert dbt_reference(3, 77, 31, store=Store()) is first and dbt_reference(3, 77, 31) is first
    assert asked == [(3, 77, 31)]
    expected = sample_dbt(77, 3, np.random.default_rng(31))
    assert np.array_equal(first.alpha, expected.alpha) and np.array_equal(first.tpr, expected.tpr)
    assert not first.alpha.flags.writeable and not first.tpr.flags.writeable


@pytest.mark.parametrize("damage", ["other seed", "truncated", "not an array"])
def test_a_curve_file_not_of_its_name_is_built_again(tmp_path: Path, damage: str) -> None:
    store = CurveDirectory(tmp_path)
    path = store.path(4, 300, 21)
    if damage == "other seed":  # e.g. a numpy that draws otherwise
        CurveDirectory(tmp_path / "other").reference(4, 300, 22, _built(4, 300, 22))
        (tmp_path / "other" / store.path(4, 300, 22).name).rename(path)
    elif damage == "truncated":
        store.reference(4, 300, 21, _built(4, 300, 21))
        path.write_bytes(path.read_bytes()[:-8])
    else:
        path.write_bytes(b"not curves")
    got = store.reference(4, 300, 21, _built(4, 300, 21))
    expected = _built(4, 300, 21)()
    assert np.array_equal(got.alpha, expected.alpha) and np.array_equal(got.tpr, expected.tpr)
    assert np.array_equal(np.load(path)[1], expected.tpr)  # written again


def test_an_unusable_curve_directory_falls_back_to_building(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    got = CurveDirectory(blocker / "nodes").reference(3, 40, 5, _built(3, 40, 5))
    assert np.array_equal(got.alpha, _built(3, 40, 5)().alpha)


def _curves_counted(directory: str, marks: str) -> float:
    def build() -> DBTReference:
        with open(marks, "a") as out:
            out.write("built\n")
        return _built(4, 300, 21)()

    return float(CurveDirectory(Path(directory)).reference(4, 300, 21, build).alpha.sum())


def test_concurrent_processes_build_the_curves_once(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        got = pool.starmap(_curves_counted, [(str(tmp_path / "nodes"), str(marks))] * 3)
    assert got == [float(_built(4, 300, 21)().alpha.sum())] * 3
    assert marks.read_text().splitlines() == ["built"]
