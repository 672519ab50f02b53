"""The stacked decode tables and prompt extras are exactly each layout's own: the search bounds
thousands of layouts from them and prunes on the bounds, so any drift could change which proposals
are evaluated."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.perf_model import calibration, costs, memory, stacked_tables, step
from layoutopt.perf_model.workload_grids import workload_terms
from layoutopt.plan import Layout
from layoutopt.workloads.presets import preset_workload

DEGREES = (1, 2, 4, 8, 16)
PRECISIONS = (("bf16", "bf16"), ("fp8", "bf16"), ("fp8", "fp8"), ("fp4", "fp8"))


def _random_layouts(model, gpu, count: int, seed: int) -> list[Layout]:
    """Up to ``count`` distinct layouts that fit ``gpu``: every kind of degree, DCP and PCP included."""
    rng = np.random.default_rng(seed)
    found: dict[str, Layout] = {}
    for _ in range(count * 40):
        tp, dp, pp = (int(rng.choice(DEGREES)) for _ in range(3))
        dcp = int(rng.choice([d for d in DEGREES if tp % d == 0]))
        pcp = int(rng.choice((1, 1, 1, 2)))
        ep = int(rng.choice([e for e in DEGREES if (tp * dp) % e == 0])) if model.num_moe_layers else 1
        weight, kv = PRECISIONS[int(rng.integers(len(PRECISIONS)))]
        try:
            layout = Layout(tp_size=tp, dp_size=dp, pp_size=pp, ep_size=ep, dcp_size=dcp, pcp_size=pcp,
                            weight_precision=weight, kv_precision=kv)
            memory.check_layout(model, gpu, layout, allow_cross_domain=True)
        except (ValueError, LayoutError):
            continue
        found.setdefault(layout.model_dump_json(), layout)
        if len(found) == count:
            break
    return list(found.values())


CASES = [("deepseek-v3", "GB200", "vllm"), ("deepseek-v3", "H100", "sglang"), ("deepseek-v3", "B200", "trtllm"),
         ("glm-5", "B200", "vllm"),
         ("gpt-oss-120b", "H100", "vllm"), ("qwen3.5-35b-a3b", "MI300X", "vllm"), ("qwen3-32b", "L4", "trtllm"),
         ("llama-3.1-70b", "H200", "vllm"), ("llama-3.1-70b", "B200", "vllm")]


@pytest.mark.parametrize("model_name,gpu_name,engine", CASES)
def test_stacked_decode_tables_are_each_layouts_own(model_name, gpu_name, engine):
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    profile = calibration.resolve_engine(engine, gpu)
    terms = workload_terms(preset_workload("chat"))
    context = terms.mean_input + terms.output_moments[1] / 2.0
    layouts = _random_layouts(model, gpu, 40, seed=len(model_name) + len(gpu_name))
    members = []
    for layout in layouts:
        grid = stacked_tables.decode_grid_of(model, gpu, layout, profile, context)
        if grid is not None:
            members.append((layout, grid))
    assert len(members) >= 8
    first = costs.forward_coefficients(model, gpu, members[0][0], profile, None)
    members = [m for m in members if stacked_tables.stackable(
        costs.forward_coefficients(model, gpu, m[0], profile, None), first)]
    assert {(m[0].dcp_size > 1, m[0].pcp_size > 1, m[0].pp_size > 1) for m in members} >= {(False, False, False)}
    tables = stacked_tables.stacked_decode_tables(model, gpu, [m[0] for m in members], profile,
                                                  [m[1] for m in members], context)
    for (layout, grid), table in zip(members, tables):
        own = step.decode_step_time_array(model, gpu, layout, grid.values[:, None], np.array([[context, 2 * context]]),
                                          profile)
        assert np.array_equal(table, own), layout
    stacked_tables.prompt_extras.clear()
    extras = stacked_tables.stacked_prompt_extras(model, gpu, [m[0] for m in members], profile, terms,
                                                  [m[1] for m in members], [t[:, 0] for t in tables], context)
    for (layout, grid), table, (batches, extra) in zip(members, tables, extras):
        own_batches, own_extra = costs._prompt_extra(model, gpu, layout, profile, terms, grid, table[:, 0], context)
        assert np.array_equal(batches, own_batches) and np.array_equal(extra, own_extra), layout


def test_prefetched_phase_costs_are_the_computed_ones():
    """``phase_costs`` after ``prefetch_step_tables`` gives the tables it computes without it (B200's
    vLLM profile has a launch floor: the extras without it are prefetched too)."""
    model, gpu, workload = get_model("deepseek-v3"), get_gpu("B200"), preset_workload("chat")
    profile = calibration.resolve_engine("vllm", gpu)
    terms = workload_terms(workload)
    context = terms.mean_input + terms.output_moments[1] / 2.0
    layouts = [layout for layout in _random_layouts(model, gpu, 40, seed=3)
               if stacked_tables.decode_grid_of(model, gpu, layout, profile, context) is not None]
    jobs = [(gpu, layout, role, None) for layout, role in itertools.product(layouts, ("decode", "colocated"))]

    def tables():
        costs._phase_costs.cache_clear()
        costs._decode_tables.clear()
        stacked_tables.prompt_extras.clear()
        return [(c.decode_step_s, c.decode_seq_spread_s, c.prompt_extra_s, c.prompt_floor_s)
                for c in (costs.phase_costs(model, g, lay, role, workload, "vllm", None, allow_cross_domain=True)
                          for g, lay, role, _ in jobs)]

    alone = tables()
    costs._phase_costs.cache_clear()
    costs._decode_tables.clear()
    stacked_tables.prompt_extras.clear()
    stacked_tables.prefetch_step_tables(model, jobs, workload, "vllm", allow_cross_domain=True)
    assert stacked_tables.has_launch_floor(profile)
    assert len(costs._decode_tables) >= len(layouts) // 2 and len(stacked_tables.prompt_extras) >= len(layouts)
    prefetched = [(c.decode_step_s, c.decode_seq_spread_s, c.prompt_extra_s, c.prompt_floor_s)
                  for c in (costs.phase_costs(model, g, lay, role, workload, "vllm", None, allow_cross_domain=True)
                            for g, lay, role, _ in jobs)]
    for a, b in zip(alone, prefetched):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert any(a[3] is not None for a in alone)
