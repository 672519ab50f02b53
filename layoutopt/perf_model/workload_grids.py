"""What the step tables take from the workload alone and from the batch limit alone, computed once
and shared read-only by every candidate's tables (:mod:`layoutopt.perf_model.costs`).

- the quantile grids of the prompt and output lengths (bins dense in the tail, where p90/p99
  TTFT live), their moments, and the anchor lengths of the colocated mixed steps;
- the decode batch grid up to a batch limit, with ``np.gradient``'s coefficients on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from layoutopt.perf_model.memo import identity_memo
from layoutopt.perf_model.grids import geometric_grid, sorted_unique
from layoutopt.workloads.workload import Workload

# Quantile bins of the prompt-length distribution: dense in the tail, where p90/p99 TTFT live.
_BIN_EDGES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.0)
_DECODE_GRID_POINTS = 20
# Colocated: decode batches and prompt lengths at which a prompt's mixed steps are evaluated; other
# values interpolate linearly (lengths: piecewise, to follow the roofline's kink on MoE models).
_MIXED_BATCH_ANCHORS = 4
_MIXED_LENGTH_ANCHORS = 5


def length_grid(dist) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, weights) representing a length distribution by quantile bins, merged when equal."""
    tokens, weights = _length_grid_cached(type(dist), dist.model_dump_json())
    return tokens.copy(), weights.copy()


@lru_cache(maxsize=256)
def _length_grid_cached(kind: type, dumped: str) -> tuple[np.ndarray, np.ndarray]:
    dist = kind.model_validate_json(dumped)
    edges = np.asarray(_BIN_EDGES)
    mids = 0.5 * (edges[1:] + edges[:-1])
    tokens = np.array([max(dist.quantile_tokens(float(q)), 1.0) for q in mids])
    weights = np.diff(edges)
    unique, inverse = np.unique(np.round(tokens), return_inverse=True)
    merged = np.zeros(len(unique))
    np.add.at(merged, inverse, weights)
    # Keep the distribution's mean: rescale the grid so sum(w t) = mean.
    scale = dist.mean_tokens / float((unique * merged).sum())
    return np.maximum(unique * scale, 1.0), merged / merged.sum()


_FINE_QUANTILES = 2000


@lru_cache(maxsize=256)
def _fine_moments(dist) -> tuple[float, ...]:
    """E[L^0..4] of a length distribution on a fine quantile grid (the tail that bins truncate)."""
    q = (np.arange(_FINE_QUANTILES) + 0.5) / _FINE_QUANTILES
    tokens = np.array([max(dist.quantile_tokens(float(x)), 1.0) for x in q])
    tokens *= dist.mean_tokens / tokens.mean()
    return tuple(float((tokens**k).mean()) for k in range(5))


def output_moments(workload: Workload) -> tuple[float, float, float]:
    """(E[O], E[O^2] / E[O], E[1 / max(O - 1, 1)]) of the output length, from its quantile grid."""
    tokens, weights = length_grid(workload.output_tokens)
    mean = float((tokens * weights).sum())
    return mean, float((tokens**2 * weights).sum()) / mean, float((weights / np.maximum(tokens - 1.0, 1.0)).sum())


def reservation_scv(workload: Workload) -> float:
    """scv of R = prompt + output tokens over sequences in the batch (each weighted by its output)."""
    p, pw = length_grid(workload.input_tokens)
    o, ow = length_grid(workload.output_tokens)
    p1, p2 = float((p * pw).sum()), float((p**2 * pw).sum())
    o1, o2, o3 = (float((o**k * ow).sum()) for k in (1, 2, 3))
    mean = p1 + o2 / o1
    second = p2 + 2.0 * p1 * o2 / o1 + o3 / o1
    return max(second / mean**2 - 1.0, 0.0)


@dataclass(frozen=True)
class WorkloadTerms:
    """What every candidate's tables take from the workload alone (read-only arrays)."""

    tokens: np.ndarray
    weights: np.ndarray
    uncached: np.ndarray
    hit: float
    mean_input: float
    mean_uncached: float
    input_var: float
    output_moments: tuple[float, float, float]
    output_steps: np.ndarray
    output_weights: np.ndarray
    reservation_scv: float
    input_moments: tuple[float, ...]
    median_index: int
    # Colocated mixed steps: the anchor lengths' new and cached tokens, and the interpolation
    # from the anchors to every length.
    anchor_new_tokens: np.ndarray
    anchor_cached_tokens: np.ndarray
    to_lengths: "Interpolation"


def read_only(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@identity_memo
@lru_cache(maxsize=256)
def workload_terms(workload: Workload) -> WorkloadTerms:
    tokens, weights = length_grid(workload.input_tokens)
    hit = workload.prefix_cache_hit_fraction
    uncached = np.maximum(tokens * (1.0 - hit), 1.0)
    mean_input = float((tokens * weights).sum())
    output_tokens, output_weights = length_grid(workload.output_tokens)
    picks = np.unique(np.linspace(0, len(tokens) - 1, min(_MIXED_LENGTH_ANCHORS, len(tokens))).round().astype(int))
    lengths = tokens[picks]
    rounded, cached = np.round(lengths), np.round(lengths * hit)
    return WorkloadTerms(
        tokens=read_only(tokens), weights=read_only(weights), uncached=read_only(uncached), hit=hit,
        mean_input=mean_input, mean_uncached=float((uncached * weights).sum()),
        input_var=float(((tokens - mean_input) ** 2 * weights).sum()), output_moments=output_moments(workload),
        output_steps=read_only(np.maximum(output_tokens - 1.0, 1.0)), output_weights=read_only(output_weights),
        reservation_scv=reservation_scv(workload),
        input_moments=tuple(m * (1.0 - hit) ** k for k, m in enumerate(_fine_moments(workload.input_tokens))),
        median_index=min(len(tokens) - 1, int(np.searchsorted(np.cumsum(weights), 0.5))),
        anchor_new_tokens=read_only(np.maximum(rounded - cached, 1.0)), anchor_cached_tokens=read_only(cached),
        to_lengths=Interpolation(tokens, lengths))


@dataclass(frozen=True, eq=False)
class Interpolation:
    """``np.interp(x, xp, fp)`` for fixed ``x`` and ``xp`` (ascending, within ``xp``'s range) over
    the rows of ``fp``, with numpy's operations: ``fp[j]`` where ``x`` is an anchor (or the last),
    else ``slope_j (x - xp[j]) + fp[j]`` with ``slope_j = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j])``."""

    x: np.ndarray
    xp: np.ndarray

    def __post_init__(self):
        last = len(self.xp) - 1
        j = np.minimum(np.searchsorted(self.xp, self.x, side="right") - 1, last)
        on_anchor = (j == last) | (self.xp[j] == self.x)
        following = np.minimum(j + 1, last)
        span = np.where(on_anchor, 1.0, self.xp[following] - self.xp[j])
        for name, value in (("j", j), ("following", following), ("on_anchor", on_anchor), ("span", span),
                            ("offset", self.x - self.xp[j])):
            object.__setattr__(self, name, read_only(value))

    def __call__(self, fp: np.ndarray) -> np.ndarray:
        left = fp[:, self.j]
        slope = (fp[:, self.following] - left) / self.span
        return np.where(self.on_anchor, left, slope * self.offset + left)


@dataclass(frozen=True)
class DecodeGrid:
    """The decode batch grid up to a batch limit, and ``np.gradient``'s coefficients on it."""

    batches: np.ndarray               # int64
    values: np.ndarray                # the same as floats
    mixed_batches: np.ndarray         # colocated: decode batches of the mixed-step anchors (int64)
    uniform_step: float | None        # the spacing when it is constant (np.gradient's scalar case)
    interior: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    edges: tuple[float, float]

    def gradient(self, f: np.ndarray) -> np.ndarray:
        """``np.gradient(f, self.values)``, the same operations in the same order."""
        if len(f) < 2:
            return f.copy()
        out = np.empty_like(f)
        if self.uniform_step is not None:
            out[1:-1] = (f[2:] - f[:-2]) / (2.0 * self.uniform_step)
        else:
            a, b, c = self.interior
            out[1:-1] = a * f[:-2] + b * f[1:-1] + c * f[2:]
        out[0] = (f[1] - f[0]) / self.edges[0]
        out[-1] = (f[-1] - f[-2]) / self.edges[1]
        return out


@lru_cache(maxsize=4096)
def decode_batch_grid(batch_cap: int) -> DecodeGrid:
    batches = sorted_unique(np.round(geometric_grid(1.0, float(batch_cap), _DECODE_GRID_POINTS))).astype(np.int64)
    values = batches.astype(float)
    uniform = interior = None
    edges = (1.0, 1.0)
    if len(values) > 1:
        dx = np.diff(values)
        if (dx == dx[0]).all():
            uniform = dx[0]
            edges = (uniform, uniform)
        else:
            dx1, dx2 = dx[0:-1], dx[1:]
            interior = (-(dx2) / (dx1 * (dx1 + dx2)), (dx2 - dx1) / (dx1 * dx2), dx1 / (dx2 * (dx1 + dx2)))
            edges = (dx[0], dx[-1])
    mixed = sorted_unique(np.round(geometric_grid(1.0, float(batches[-1]), _MIXED_BATCH_ANCHORS))).astype(np.int64)
    return DecodeGrid(read_only(batches), read_only(values), read_only(mixed), uniform, interior, edges)
