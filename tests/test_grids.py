"""grids: the geometric grids and sorted uniques the load models share are numpy's own numbers."""

from __future__ import annotations

import numpy as np
import pytest

from layoutopt.perf_model.grids import _geomspace, geometric_grid, sorted_unique
from layoutopt.perf_model.links import nvlink
from layoutopt.hardware_catalog.catalog import get_gpu


@pytest.mark.parametrize("start", [1.0, 1e-3, 1e-4, 0.37])
@pytest.mark.parametrize("num", [2, 4, 20, 24, 33])
def test_geomspace_is_numpys_bit_for_bit(start, num):
    rng = np.random.default_rng(num)
    stops = np.concatenate([np.arange(1.0, 3000.0, 7.0), rng.uniform(0.5, 1e6, 400), [start]])
    for stop in stops:
        assert np.array_equal(_geomspace(start, float(stop), num), np.geomspace(start, float(stop), num)), stop


def test_geometric_grid_is_read_only_and_shared():
    grid = geometric_grid(1.0, 517.0, 20)
    assert grid is geometric_grid(1.0, 517.0, 20) and not grid.flags.writeable


def test_geomspace_falls_back_to_numpy_outside_its_fast_path():
    assert np.array_equal(_geomspace(-1.0, -100.0, 5), np.geomspace(-1.0, -100.0, 5))
    assert np.array_equal(_geomspace(3.0, 9.0, 1), np.geomspace(3.0, 9.0, 1))


def test_sorted_unique_is_numpys_unique_on_ascending_arrays():
    rng = np.random.default_rng(0)
    for size in (0, 1, 2, 5, 40):
        values = np.sort(np.round(rng.uniform(0, 10, size)))
        assert np.array_equal(sorted_unique(values), np.unique(values))
    assert np.array_equal(sorted_unique(np.round(np.geomspace(1.0, 40.0, 20))),
                          np.unique(np.round(np.geomspace(1.0, 40.0, 20))))


def test_nvlink_is_one_object_per_gpu_with_the_same_numbers():
    gpu = get_gpu("H100")
    assert nvlink(gpu) is nvlink(gpu)
    other = gpu.model_copy(update={"scaleup_gb_per_s": gpu.scaleup_gb_per_s / 2})
    assert nvlink(other).bandwidth_gb_per_s == gpu.scaleup_gb_per_s / 2
