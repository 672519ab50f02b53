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


def test_a_launch_floor_shared_by_a_step_never_makes_a_prompt_cost_less_than_nothing():
    # vLLM on B200 runs prompt steps above 1,024 tokens eagerly (a per-step floor, paid once however many
    # prompts share the step); the sharing penalty prices the rest, so every prompt's average added step
    # time stays >= 0. It went negative when the penalty also counted the floor's sharing, and the
    # stacked TPOT ceilings took the log of a negative variance.
    from layoutopt.perf_model.colocated_bounds import colocated_tpot_ceilings_rps
    from layoutopt.perf_model.load_colocated import _colocated_tau
    from layoutopt.perf_model.load_colocated import QUANTILES

    costs = phase_costs(get_model("qwen3-8b"), get_gpu("B200"), Layout(weight_precision="fp8", kv_precision="fp8"),
                        "colocated", preset_workload("chat"), "vllm", None, allow_cross_domain=True)
    assert costs.prompt_floor_s is not None and costs.prompt_floor_s.max() > 0
    n = np.geomspace(1, 1.05 * costs.max_batch_size, 60)  # up to ~5 prompts a step at the top
    tau, rate, d, extra, effective = _colocated_tau(costs, n, 249.0, None)
    assert (effective >= 0).all() and (tau >= d).all() and np.isfinite(rate).all()
    with np.errstate(invalid="raise"):
        ceiling, = colocated_tpot_ceilings_rps([costs], QUANTILES, {0.9: 1.0}, {0.9: 0.03}, 32, 12)
    assert ceiling > 0
