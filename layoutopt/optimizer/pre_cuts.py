"""Former heuristic pre-cuts of the layout space, off by default.

Earlier versions dropped layouts before the performance model saw them: pipeline parallelism
unless one stage less did not fit, and prefill context parallelism unless the p90 prompt had
16k tokens or more. Both cut plans the model itself rates better (9-12 % for PP on qwen3-32b and
llama-3.1-70b; 96-98 % more requests per dollar with PCP at 8-12k-token prompts under a tight
TTFT). They are kept here, switchable, so tests can show that switching any of them on never improves a
plan within the performance model: ``build_candidate_table(..., pre_cuts=PreCuts(pipeline_needed=True))``.

``DEFAULT_PRE_CUTS`` applies none of them. ``pipeline_needed`` stayed on longest: the
performance model and the discrete-event simulator used to disagree on deep-PP prefill (qwen3-32b
on 16xH100, chat: prefill pools of TP1 PP2 and PP8 at 6 % simulated SLO attainment): the plan's
--max-num-seqs for a PP prefill instance held one step's prompts, while vLLM counts every request
of the pp batches in flight against it (``max_num_seqs``, v1/core/sched/scheduler.py:131 and
:1072; pp batches in flight, config/vllm.py:588 and v1/engine/core.py:708), so the pipeline never
filled. It now holds pp steps' prompts, the simulator's router weighs a pipeline's pp-fold
throughput, and that plan meets its SLO in simulation (``benchmarks/sim_prefill_layouts.py``
compares PP 2, 4 and 8 prefill; ``tests/test_simulator_optimizer.py`` simulates that plan). Then
solve time held it: without the cut, qwen3-32b on 683xH100+683xH200+682xB200 timed out at a 29 %
gap, until the solver's Dinkelbach stopped proving its seeding step and bounded its improving
steps (``solver``): optimal (1.99 %) in 3.1 s of deterministic time. Measured on 2 CPUs before
that (cut on -> off): deepseek-v3 on '$400/h' 73 -> 85 candidates, both optimal; qwen3-32b on
32xH100 5,259 -> 5,301 req/$; llama-3.1-70b on 16xH100 2,189 -> 2,300 req/$.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict

from layoutopt.optimizer.filters import FilterContext
from layoutopt.optimizer.space import Proposal, ProposalColumns
from layoutopt.perf_model import memory

# The old PCP threshold: p90 prompt tokens below which PCP was not proposed.
FORMER_PCP_MIN_PROMPT_TOKENS = 16_384


class PreCuts(BaseModel):
    """Which former heuristics to apply (all off: every allowed layout is a candidate)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pipeline_needed: bool = False
    pcp_long_prompts_only: bool = False

    def filters(self) -> list[tuple[str, object]]:
        chosen = []
        if self.pipeline_needed:
            chosen.append(("pipeline needed", pipeline_needed))
        if self.pcp_long_prompts_only:
            chosen.append(("PCP for long prompts only", pcp_long_prompts_only))
        return chosen

    def masks(self) -> dict[str, object]:
        """The chosen cuts over all proposals of one GPU type (``filters.STRUCTURAL_MASKS``)."""
        return {name: PRE_CUT_MASKS[name] for name, _ in self.filters()}


def pipeline_needed(ctx: FilterContext, p: Proposal) -> str | None:
    """Heuristic: keep pp > 1 only when half as many stages would not fit (the memory-fit floor of
    ``memory.MIN_KV_SEQUENCES_PER_RANK`` sequences per scheduler)."""
    layout = p.layout
    if layout.pp_size == 1:
        return None
    shallower = layout.model_copy(update={"pp_size": layout.pp_size // 2})
    if ctx.max_batch(p, shallower) // layout.dp_size >= memory.MIN_KV_SEQUENCES_PER_RANK:
        return f"{layout.short_name()}: pp {layout.pp_size // 2} already fits"
    return None


def pcp_long_prompts_only(ctx: FilterContext, p: Proposal) -> str | None:
    """Heuristic: PCP only when the p90 prompt has ``FORMER_PCP_MIN_PROMPT_TOKENS`` tokens or more."""
    if p.layout.pcp_size > 1 and ctx.p90_input_tokens < FORMER_PCP_MIN_PROMPT_TOKENS:
        return f"{p.layout.short_name()}: p90 prompt {ctx.p90_input_tokens:.0f} tokens"
    return None


def pipeline_needed_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    pp = c.degree("pp_size")
    drops = np.zeros(len(c), dtype=bool)
    rows = np.flatnonzero(alive & (pp > 1))
    shallower = c.layouts(rows) | {"pp_size": pp[rows] // 2}
    drops[rows] = memory.fits_sequences(ctx.model, c.gpu, shallower, ctx.context_tokens_of(c)[rows], ctx.engine)
    return drops


def pcp_long_prompts_only_drops(ctx: FilterContext, c: ProposalColumns, alive: np.ndarray) -> np.ndarray:
    return (c.degree("pcp_size") > 1) & (ctx.p90_input_tokens < FORMER_PCP_MIN_PROMPT_TOKENS)


PRE_CUT_MASKS = {"pipeline needed": pipeline_needed_drops, "PCP for long prompts only": pcp_long_prompts_only_drops}

# The cuts ``build_candidate_table`` applies when none are given: none (see the module docstring).
DEFAULT_PRE_CUTS = PreCuts()
