"""vLLM launches pin --max-cudagraph-capture-size where vLLM's default would graph fewer prompt tokens than
the plan's numbers assume (report/vllm_launch._capture_size)."""

from __future__ import annotations

from layoutopt.plan import Pool
from layoutopt.report.node_launch import NodeContext
from layoutopt.report.vllm_launch import _capture_size


def _pool(role: str, batch: int, dp: int = 1) -> Pool:
    return Pool.model_construct(role=role, gpu="B200", dp_size=dp, max_batch_size=batch)


def test_capture_size_is_pinned_only_where_the_default_graphs_less():
    ctx = NodeContext.model_construct(graphed_prompt_tokens=1024, step_token_budget=8192)
    assert _capture_size(_pool("colocated", 64), ctx) == 1024      # default: min(2 x 64, 1024) = 128
    assert _capture_size(_pool("colocated", 512), ctx) is None     # default already 1024
    assert _capture_size(_pool("prefill", 8), ctx) == 1024
    assert _capture_size(_pool("colocated", 1024, dp=4), ctx) == 1024  # 256 sequences per DP rank
    assert _capture_size(_pool("decode", 8), ctx) is None          # no prompt steps
    small_budget = NodeContext.model_construct(graphed_prompt_tokens=1024, step_token_budget=512)
    assert _capture_size(_pool("colocated", 64), small_budget) == 512
    assert _capture_size(_pool("colocated", 64), NodeContext.model_construct(graphed_prompt_tokens=None,
                                                                              step_token_budget=8192)) is None
