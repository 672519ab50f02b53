"""The memory fit and the layout rules over many layouts at once (``memory.fits_sequences``,
``memory.layouts_pass_check``) agree with the per-layout functions on every layout of the space,
also at context lengths on the edge of fitting, where a float computed in another order would
flip the answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from layoutopt.errors import LayoutError
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.hardware_catalog.schemas import PRECISIONS
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.space import enumerate_proposals, proposal_columns
from layoutopt.perf_model import memory
from layoutopt.perf_model.calibration import get_engine_profile
from layoutopt.plan import Layout

ROLES = ["prefill", "decode", "colocated"]
# MLA MoE, dense GQA, sliding-window MoE with MXFP4 experts, linear-attention hybrid MoE, INT4 MoE
MODELS = ("deepseek-v3", "llama-3.1-70b", "gpt-oss-120b", "qwen3.5-35b-a3b", "kimi-k2.5", "llama-3.1-8b")


def _space(model_name: str, gpu_name: str):
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    columns = proposal_columns(model, gpu, ROLES, "auto")
    layouts, seen = [], set()  # each layout of the space once
    for i in range(len(columns)):
        key = columns.layout_key(i)
        if key not in seen:
            seen.add(key)
            layouts.append(columns.layout(i))
    arrays = {f: np.array([getattr(layout, f) for layout in layouts]) for f in Layout.model_fields}
    return model, gpu, layouts, arrays


def _grid_layouts() -> list[Layout]:
    """Layouts the enumeration never proposes too: TP 3 and 6, PP past the layers, DCP past the
    KV heads, EP on dense models, stages past the NVLink domain, every precision."""
    layouts = []
    for tp, pp, dp, dcp, pcp, weight in itertools.product((1, 2, 3, 4, 6, 8, 16, 64), (1, 4, 128), (1, 2, 4),
                                                          (1, 2, 8), (1, 4), PRECISIONS):
        for ep in {1, tp * dp}:
            try:
                layouts.append(Layout(tp_size=tp, pp_size=pp, ep_size=ep, dp_size=dp, dcp_size=dcp, pcp_size=pcp,
                                      weight_precision=weight, kv_precision="bf16"))
            except ValueError:
                continue
    return layouts


@pytest.mark.parametrize("model_name", MODELS + ("qwen3-32b", "mixtral-8x7b"))
@pytest.mark.parametrize("gpu_name", ["H100", "MI300X", "L40S"])
@pytest.mark.parametrize("cross", [False, True])
def test_layout_rules_over_columns_equal_check_layout(model_name, gpu_name, cross):
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    layouts = _grid_layouts()
    expected = []
    for layout in layouts:
        try:
            memory.check_layout(model, gpu, layout, allow_cross_domain=cross)
            expected.append(True)
        except LayoutError:
            expected.append(False)
    arrays = {f: np.array([getattr(layout, f) for layout in layouts]) for f in Layout.model_fields}
    assert memory.layouts_pass_check(model, gpu, arrays, allow_cross_domain=cross).tolist() == expected
    assert True in expected and False in expected


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("model_name", MODELS)
def test_fit_over_columns_equals_max_batch_size(model_name, engine):
    gpu_name = {"vllm": "H100", "sglang": "B200", "trtllm": "MI300X"}[engine]
    model, gpu, layouts, arrays = _space(model_name, gpu_name)
    for context_tokens in (1_000.0, 40_000.0, 900_000.0):
        for sequences in (1, memory.MIN_KV_SEQUENCES_PER_RANK):
            expected = [memory.max_batch_size(model, gpu, layout, context_tokens, engine) // layout.dp_size
                        >= sequences for layout in layouts]
            assert memory.fits_sequences(model, gpu, arrays, context_tokens, engine, sequences).tolist() == expected
    # One context per layout, a float step around the longest context at which one sequence (and
    # MIN_KV_SEQUENCES_PER_RANK per rank) fits: the answer flips there, so the two agree only if every
    # byte count is the same float.
    for sequences in (1, memory.MIN_KV_SEQUENCES_PER_RANK):
        _check_edges(model, gpu, layouts, engine, sequences)


def _check_edges(model, gpu, layouts, engine, sequences: int) -> None:
    edges, fits = [], []
    window = float(model.sliding_window_tokens or 0)
    for layout in layouts:
        def per_sequence(tokens: float) -> float:
            return memory.memory_breakdown(model, gpu, layout, tokens, engine).kv_bytes_per_sequence
        capacity = memory.memory_breakdown(model, gpu, layout, 1.0, engine).kv_capacity_bytes / sequences
        # KV per sequence is linear below the sliding window and beyond it: solve in the right piece.
        far = window + 1e6
        edge = far + (capacity - per_sequence(far)) / (per_sequence(far + 1e6) - per_sequence(far)) * 1e6
        if edge < window or not window:
            edge = 1.0 + (capacity - per_sequence(1.0)) / (per_sequence(2.0) - per_sequence(1.0))
        if capacity <= 0 or not np.isfinite(edge) or edge <= 0:
            continue
        for tokens in (np.nextafter(edge, 0.0), edge, np.nextafter(edge, np.inf), edge * 1.0001, edge * 0.9999):
            edges.append((layout, float(tokens)))
            fits.append(memory.max_batch_size(model, gpu, layout, float(tokens), engine) // layout.dp_size
                        >= sequences)
    assert edges and True in fits and False in fits
    picked = {f: np.array([getattr(layout, f) for layout, _ in edges]) for f in Layout.model_fields}
    tokens = np.array([t for _, t in edges])
    assert memory.fits_sequences(model, gpu, picked, tokens, engine, sequences).tolist() == fits


def test_fit_over_columns_takes_a_profile_object():
    model, gpu, layouts, arrays = _space("qwen3.5-35b-a3b", "H100")
    profile = get_engine_profile("sglang").model_copy(update={"max_num_batched_tokens": 4096})
    expected = [memory.max_batch_size(model, gpu, layout, 30_000.0, profile) // layout.dp_size
                >= memory.MIN_KV_SEQUENCES_PER_RANK for layout in layouts]
    assert memory.fits_sequences(model, gpu, arrays, 30_000.0, profile).tolist() == expected


@pytest.mark.parametrize("model_name,gpu_name,precision", [("deepseek-v3", "GB200", "auto"), ("qwen3-32b", "L4", "fp8"),
                                                           ("gpt-oss-120b", "MI300X", "auto")])
def test_proposal_columns_are_the_enumeration(model_name, gpu_name, precision):
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    columns = proposal_columns(model, gpu, ROLES, precision)
    proposals = list(enumerate_proposals(model, [gpu], ROLES, precision))
    assert [columns.proposal(i) for i in range(len(columns))] == proposals
    assert (columns.gpus_per_instance == [p.layout.gpus_per_instance for p in proposals]).all()
    assert (columns.gpus_per_stage == [p.layout.gpus_per_stage for p in proposals]).all()
    assert len(proposal_columns(model, gpu, [], precision)) == 0
