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
    grid = np.geomspace(start, stop, num)
    grid.setflags(write=False)
    return grid
