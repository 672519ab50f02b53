"""The colocated sharing penalty (``load_colocated._sharing_penalty``), from running sums over
pairs sorted by length, equals its definition evaluated pair by pair."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model.costs import phase_costs
from layoutopt.perf_model.load_colocated import _sharing_penalty
from layoutopt.plan import Layout
from layoutopt.workloads.presets import preset_workload


def _penalty_by_definition(tokens, weights, extra, budget, per_step):
    """E[W(L1 + L2) - W(L1) - W(L2); L1 + L2 <= budget] x E[(k - 1)^+] / E[k], W linear between
    the length bins and beyond the last, pair by pair."""
    out = np.zeros(len(extra))
    for row in range(len(extra)):
        w_of = extra[row]
        gap = 0.0
        for a in range(len(tokens)):
            for b in range(len(tokens)):
                total = tokens[a] + tokens[b]
                if total > budget[row]:
                    continue
                i = min(max(int(np.searchsorted(tokens, total)) - 1, 0), len(tokens) - 2)
                frac = (total - tokens[i]) / (tokens[i + 1] - tokens[i])
                w_total = w_of[i] * (1 - frac) + w_of[i + 1] * frac
                gap += weights[a] * weights[b] * (w_total - w_of[a] - w_of[b])
        mu = max(per_step[row], 1e-12)
        out[row] = gap * (1.0 - (1.0 - np.exp(-mu)) / mu)
    return out


@settings(max_examples=25, deadline=None)
@given(preset=st.sampled_from(["chat", "rag", "code"]), scale=st.floats(0.1, 3.0),
       batches=st.lists(st.floats(0.001, 600.0), min_size=1, max_size=6))
def test_sharing_penalty_matches_its_definition(preset, scale, batches):
    costs = phase_costs(get_model("qwen3-32b"), get_gpu("H100"), Layout(tp_size=2, weight_precision="fp8"),
                        "colocated", preset_workload(preset))
    n = np.asarray(batches)
    extra = costs.prompt_extra_at(n) * scale
    per_step = n / max(costs.output_tokens_mean - 1.0, 1.0)
    got = _sharing_penalty(costs, n, extra, per_step)
    want = _penalty_by_definition(costs.input_tokens, costs.input_weights, extra,
                                  np.maximum(costs.chunk_tokens - n, 0.0), per_step)
    # The gap is a small difference of W values: compare at the scale of W (rounding cancels).
    assert np.allclose(got, want, rtol=0.0, atol=1e-10 * max(float(np.abs(extra).max()), 1e-12))
    assert np.abs(want).max() > 1e-6 * np.abs(extra).max() or n.max() < 1.0  # a real penalty was compared
