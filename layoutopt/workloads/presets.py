"""Built-in workloads: chat, rag, agent, summarization, code (completion), and the default.

Each preset gives lognormal input and output lengths by mean and p90 (tokens), chosen from
published traces and datasets (sources beside each entry). Lengths count the whole prompt the
engine sees (system prompt, history, retrieved context), not only the user's last message.
Prefix-cache hit fractions are assumptions unless a source is named; set your own when you know
it. No preset fixes an arrival rate: without one the optimizer finds the highest rate.
"""

from __future__ import annotations

from layoutopt.errors import unknown_name_error
from layoutopt.workloads.distributions import FixedLength, LognormalLength
from layoutopt.workloads.workload import Workload


def _lognormal(mean: float, p90: float, max_tokens: int | None = None) -> LognormalLength:
    return LognormalLength(mean=mean, p90=p90, max_tokens=max_tokens)


PRESETS: dict[str, Workload] = {
    # Conversational chat. Azure LLM inference trace 2023, "conversation" service (Patel et al.,
    # Splitwise, ISCA 2024): median prompt ~1020 tokens, median output ~129 tokens. Per-turn
    # response means: LMSYS-Chat-1M 215 tokens (Zheng et al. 2023), ShareGPT 338 tokens (vLLM,
    # Kwon et al., SOSP 2023). Chosen: input mean 1400 / p90 2900 (median ~975), output mean
    # 250 / p90 550 (median ~148). Prefix-cache hits from shared system prompts and history:
    # assumed 0.2.
    "chat": Workload(
        name="chat",
        input_tokens=_lognormal(1400, 2900),
        output_tokens=_lognormal(250, 550),
        prefix_cache_hit_fraction=0.2,
    ),
    # Retrieval-augmented generation: question plus retrieved passages, short answers. Mooncake
    # trace of Kimi's long-context service (Qin et al., FAST 2025): mean input 7590, mean output
    # 182 tokens; the seeds' worked example (seeds/002, scenario A) uses 4000 in / 500 out.
    # Chosen: input mean 6000 / p90 11000 (median ~4900), output mean 300 / p90 600.
    # Prefix-cache hits (system prompt, re-retrieved passages): assumed 0.1.
    "rag": Workload(
        name="rag",
        input_tokens=_lognormal(6000, 11000),
        output_tokens=_lognormal(300, 600),
        prefix_cache_hit_fraction=0.1,
    ),
    # Tool-calling agents: each step re-sends the growing context and emits a short tool call.
    # SyFI TraceLab (Univ. of Washington) coding-agent steps: Codex context median ~116k tokens,
    # output mean 415 / p50 184 / p90 939; cached prefix ~95% of each step's input. Self-hosted
    # open models run shorter contexts, so: input mean 32000 / p90 64000 clipped at 128k,
    # output mean 400 / p90 900 (median ~210). Prefix-cache hits: 0.9 (TraceLab, rounded down).
    "agent": Workload(
        name="agent",
        input_tokens=_lognormal(32000, 64000, max_tokens=131072),
        output_tokens=_lognormal(400, 900),
        prefix_cache_hit_fraction=0.9,
    ),
    # Document summarization. arXiv / PubMed summarization datasets (Cohan et al., NAACL 2018):
    # articles average 4938 / 3016 words, abstracts 220 / 203 words, i.e. ~6400 / ~3900 input
    # and ~290 / ~265 output tokens at ~1.3 tokens per word. Chosen: input mean 5000 / p90 9500,
    # output mean 280 / p90 500. Documents differ per request: no prefix-cache hits.
    "summarization": Workload(
        name="summarization",
        input_tokens=_lognormal(5000, 9500),
        output_tokens=_lognormal(280, 500),
        prefix_cache_hit_fraction=0.0,
    ),
    # Code completion (IDE autocomplete). Azure LLM inference trace 2023, "code" service
    # (Splitwise, ISCA 2024): median prompt ~1500 tokens, median output ~13 tokens. Chosen: input
    # mean 2000 / p90 4000 (median ~1480), output mean 28 / p90 63 (median ~15). Successive
    # completions in one file share most of their prompt: assumed 0.3.
    "code": Workload(
        name="code",
        input_tokens=_lognormal(2000, 4000),
        output_tokens=_lognormal(28, 63),
        prefix_cache_hit_fraction=0.3,
    ),
}

DEFAULT_PRESET = "chat"


def preset_workload(name: str) -> Workload:
    """The built-in workload called ``name`` (case-insensitive): one of ``PRESETS``."""
    workload = PRESETS.get(name.strip().lower())
    if workload is None:
        raise unknown_name_error("workload.preset", name, PRESETS)
    return workload


def default_workload() -> Workload:
    """The workload used when none is given: the ``chat`` preset.

    Chat is the most common serving workload, and its numbers come from a published production
    trace (see ``PRESETS``): mean 1400 input / 250 output tokens, p90 2900 / 550, 20% of prompt
    tokens from the prefix cache, rate left to the optimizer.
    """
    return PRESETS[DEFAULT_PRESET]


def workload_from_lengths(isl: int, osl: int, arrival_rate_rps: float | None = None) -> Workload:
    """A workload where every request has ``isl`` input and ``osl`` output tokens (a benchmark's shape)."""
    return Workload(
        name=f"fixed-{isl}x{osl}",
        input_tokens=FixedLength(tokens=isl),
        output_tokens=FixedLength(tokens=osl),
        arrival_rate_rps=arrival_rate_rps,
    )
