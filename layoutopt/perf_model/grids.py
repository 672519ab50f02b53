"""Geometric grids the load models ask for again and again, built once (read-only arrays).

``np.geomspace`` costs tens of microseconds, as much as the arithmetic on its result; the search
evaluates thousands of candidates whose grids share their ends (a batch limit, a rate fraction).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=8192)
def geometric_grid(start: float, stop: float, num: int) -> np.ndarray:
    """``np.geomspace(start, stop, num)``, the same numbers, shared and read-only."""
    grid = _geomspace(start, stop, num)
    grid.setflags(write=False)
    return grid


def _geomspace(start: float, stop: float, num: int) -> np.ndarray:
    """``np.geomspace(start, stop, num)`` for positive ends: numpy's own operations (``logspace``
    over ``linspace`` of the ends' log10, the ends set exactly) without its argument handling,
    which costs five times the arithmetic (tests/test_grids.py checks the numbers are numpy's)."""
    if not (start > 0 and stop > 0 and num >= 2):
        return np.geomspace(start, stop, num)
    log_start, log_stop = np.log10(np.float64(start)), np.log10(np.float64(stop))
    div = num - 1
    delta = log_stop - log_start
    exponents = np.arange(0, num, dtype=float)
    step = delta / div
    exponents = exponents / div * delta if step == 0 else exponents * step
    exponents += log_start
    exponents[-1] = log_stop
    grid = np.power(np.array([10.0]), exponents)
    grid[0], grid[-1] = start, stop
    return grid


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of an ascending (non-decreasing) array, without its sort."""
    if len(values) < 2:
        return values.copy()
    keep = np.empty(len(values), dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
