"""Step-time sources the event loop asks, in seconds.

The simulator needs four numbers per engine step and never calls the performance model inside
its event loop: :class:`StepTimes` is the protocol; :class:`LinearStepTimes` is a synthetic source
for tests and hand checks; :class:`TabulatedStepTimes` interpolates tables precomputed from the
performance model (see :mod:`layoutopt.simulator.perf_tables`).

Definitions shared by every source:

- a *prefill step* computes ``new_tokens`` prompt tokens spread over ``num_sequences`` prompts,
  each of which already holds ``context_tokens`` earlier tokens (prefix-cache hits or earlier
  chunks of the same prompt);
- a *decode step* produces one token for each of ``batch_size`` sequences whose mean context is
  ``context_tokens``;
- a *mixed step* (chunked prefill on a colocated instance) does both in one forward pass: chunks
  of ``prefill_sequences`` prompts, ``prefill_tokens`` in all, each prompt already holding
  ``prefill_context_tokens`` tokens on average, plus one token for each of ``decode_batch``
  sequences.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


class StepTimes(Protocol):
    """Seconds per engine step; see the module docstring for the meaning of each argument."""

    def prefill_step_s(self, new_tokens: int, num_sequences: int, context_tokens: float) -> float: ...

    def decode_step_s(self, batch_size: int, context_tokens: float) -> float: ...

    def mixed_step_s(self, prefill_tokens: int, prefill_context_tokens: float, prefill_sequences: int,
                     decode_batch: int, decode_context_tokens: float) -> float: ...


@dataclass(frozen=True)
class LinearStepTimes:
    """Synthetic step times, linear in tokens: easy to check by hand.

    prefill = overhead + new_tokens x prefill_s_per_token;
    decode = decode_base_s + batch x decode_s_per_sequence + batch x context x decode_s_per_context_token;
    mixed = prefill part + decode part - one overhead (a single forward pass).
    """

    prefill_s_per_token: float = 1e-4
    step_overhead_s: float = 0.0
    decode_base_s: float = 0.02
    decode_s_per_sequence: float = 0.0
    decode_s_per_context_token: float = 0.0

    def prefill_step_s(self, new_tokens: int, num_sequences: int, context_tokens: float) -> float:
        return self.step_overhead_s + new_tokens * self.prefill_s_per_token

    def decode_step_s(self, batch_size: int, context_tokens: float) -> float:
        return (self.decode_base_s + batch_size * self.decode_s_per_sequence
                + batch_size * context_tokens * self.decode_s_per_context_token)

    def mixed_step_s(self, prefill_tokens: int, prefill_context_tokens: float, prefill_sequences: int,
                     decode_batch: int, decode_context_tokens: float) -> float:
        return (prefill_tokens * self.prefill_s_per_token
                + self.decode_step_s(decode_batch, decode_context_tokens))


def _bracket(grid: Sequence[float], x: float) -> tuple[int, float]:
    """Index i and weight w so that x ~ grid[i] (1 - w) + grid[i + 1] w, clamped to the grid."""
    last = len(grid) - 1
    if last == 0 or x <= grid[0]:
        return 0, 0.0
    if x >= grid[last]:
        return last - 1, 1.0
    i = bisect_right(grid, x) - 1
    return i, (x - grid[i]) / (grid[i + 1] - grid[i])


class Table1D:
    """Piecewise-linear y(x) on an increasing grid, clamped at both ends."""

    __slots__ = ("grid", "values")

    def __init__(self, grid: np.ndarray, values: np.ndarray):
        if len(grid) != len(values) or len(grid) < 1 or np.any(np.diff(grid) <= 0):
            raise ValueError("Table1D needs an increasing grid and one value per grid point")
        self.grid = [float(g) for g in grid]
        self.values = [float(v) for v in values]

    def __call__(self, x: float) -> float:
        i, w = _bracket(self.grid, x)
        if len(self.values) == 1:
            return self.values[0]
        return self.values[i] * (1.0 - w) + self.values[i + 1] * w


class Table2D:
    """Bilinear z(x, y) on two increasing grids, clamped.

    When the x grid is 1, 2, ..., N (decode batch sizes), an integer x indexes its row directly.
    """

    __slots__ = ("x_grid", "y_grid", "rows", "unit_x")

    def __init__(self, x_grid: np.ndarray, y_grid: np.ndarray, values: np.ndarray):
        if values.shape != (len(x_grid), len(y_grid)):
            raise ValueError(f"Table2D values have shape {values.shape}, grids need {(len(x_grid), len(y_grid))}")
        self.x_grid = [float(g) for g in x_grid]
        self.y_grid = [float(g) for g in y_grid]
        # One extra column/row so that index i + 1 always exists for single-point grids.
        padded = np.pad(np.asarray(values, dtype=float), ((0, 1), (0, 1)), mode="edge")
        self.rows = padded.tolist()
        self.unit_x = bool(np.array_equal(x_grid, np.arange(1, len(x_grid) + 1)))

    def __call__(self, x: float, y: float) -> float:
        j, v = _bracket(self.y_grid, y)
        if self.unit_x and type(x) is int and 1 <= x <= len(self.x_grid):
            row = self.rows[x - 1]
            return row[j] * (1.0 - v) + row[j + 1] * v
        i, u = _bracket(self.x_grid, x)
        r0, r1 = self.rows[i], self.rows[i + 1]
        low = r0[j] * (1.0 - v) + r0[j + 1] * v
        high = r1[j] * (1.0 - v) + r1[j + 1] * v
        return low * (1.0 - u) + high * u


class Table3D:
    """Trilinear interpolation as two bilinear tables per slice of the first axis."""

    __slots__ = ("x_grid", "slices")

    def __init__(self, x_grid: np.ndarray, y_grid: np.ndarray, z_grid: np.ndarray, values: np.ndarray):
        if values.shape != (len(x_grid), len(y_grid), len(z_grid)):
            raise ValueError(f"Table3D values have shape {values.shape}")
        self.x_grid = [float(g) for g in x_grid]
        self.slices = [Table2D(y_grid, z_grid, values[i]) for i in range(len(x_grid))]
        self.slices.append(self.slices[-1])

    def __call__(self, x: float, y: float, z: float) -> float:
        i, u = _bracket(self.x_grid, x)
        low = self.slices[i](y, z)
        return low if u == 0.0 else low * (1.0 - u) + self.slices[i + 1](y, z) * u


@dataclass(frozen=True)
class TabulatedStepTimes:
    """Step times interpolated from tables built once per instance type.

    ``prefill`` is indexed by (tokens per sequence, sequences, context per sequence);
    ``decode`` by (batch size, mean context); ``mixed`` by (prefill tokens, decode batch, mean
    decode context) for one fresh chunk. A mixed step of several prompts, or of chunks with
    earlier context, swaps the single fresh chunk's prefill cost for the batched prefill cost of
    those chunks (attention is per prompt, not over all the step's prompt tokens together).
    """

    prefill: Table3D
    decode: Table2D
    mixed: Table3D

    def prefill_step_s(self, new_tokens: int, num_sequences: int, context_tokens: float) -> float:
        return self.prefill(new_tokens / num_sequences, num_sequences, context_tokens)

    def decode_step_s(self, batch_size: int, context_tokens: float) -> float:
        return self.decode(batch_size, context_tokens)

    def mixed_step_s(self, prefill_tokens: int, prefill_context_tokens: float, prefill_sequences: int,
                     decode_batch: int, decode_context_tokens: float) -> float:
        base = self.mixed(prefill_tokens, decode_batch, decode_context_tokens)
        if prefill_context_tokens <= 0 and prefill_sequences == 1:
            return base
        one_fresh_chunk = self.prefill(prefill_tokens, 1, 0.0)
        these_chunks = self.prefill(prefill_tokens / prefill_sequences, prefill_sequences, prefill_context_tokens)
        return base - one_fresh_chunk + these_chunks
