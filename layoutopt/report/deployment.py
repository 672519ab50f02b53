"""A plan checked and resolved for deployment: the one place emit's writers get their values from.

:func:`prepare` rejects what ``simulate`` rejects (unknown model, GPU or engine, degrees that break
the layout rules, another ``schema_version``, duplicate instance ids) and every plan field that
would reach a script or a manifest without matching a strict pattern. It resolves the checkpoint
each pool serves, the engines' memory fractions from the performance model's memory budget, and
refuses a pool whose KV cache would hold only a few sequences per scheduler.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.engines.attention_backend import required_attention_backend
from layoutopt.engines.kv_cache_dtype import explicit_kv_cache_dtype
from layoutopt.engines.loader import load_engine_data
from layoutopt.errors import InputError, LayoutoptError
from layoutopt.plan import READABLE_SCHEMA_VERSIONS, Plan, Pool
from layoutopt.report import names
from layoutopt.report.checkpoints import Served, served_checkpoint
from layoutopt.report.engine_flags import EngineRelease, as_release



class PoolDeployment(BaseModel):
    """What the writers need to know about one pool beyond the plan."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    served: Served
    gpu_memory_utilization: float
    mem_fraction_static: float
    kv_sequences: int
    step_token_budget: int = Field(description="tokens per scheduler step the performance model planned with "
                                   "(vLLM --max-num-batched-tokens, SGLang --chunked-prefill-size)")
    ep_exchange: str | None = Field(default=None, description="the EP exchange the plan's numbers cost "
                                    "(Plan.ep_exchange; None: the engine's built-in)")
    graphed_prompt_tokens: int | None = Field(default=None, description="vLLM: the largest step the performance "
                                              "model replays from a CUDA graph (graphed_prompt_tokens)")
    attention_backend: str | None = Field(default=None, description="--attention-backend the engine needs named "
                                          "(engines.attention_backend; None: the engine picks its own)")
    page_size: int | None = Field(default=None, description="SGLang --page-size of a prefill or decode pool: one "
                                  "value for every such pool of the plan (None: the engine's own choice)")
    kv_cache_dtype: str | None = Field(default=None, description="--kv-cache-dtype a 16-bit KV cache needs named "
                                       "(engines.kv_cache_dtype; None: the engine keeps it unasked)")
    notes: tuple[str, ...] = ()


def _model_spec(plan: Plan):
    from layoutopt.model_catalog.catalog import get_model

    try:
        return get_model(plan.model)
    except LayoutoptError as error:
        raise InputError("plan.model", plan.model, "a catalog model or a readable config.json",
                         str(error)) from None


def _gpu(pool_index: int, pool: Pool):
    from layoutopt.hardware_catalog.catalog import get_gpu

    names.gpu_name(pool.gpu, f"plan.pools[{pool_index}].gpu")
    try:
        return get_gpu(pool.gpu)
    except LayoutoptError as error:
        raise InputError(f"plan.pools[{pool_index}].gpu", pool.gpu, "a GPU of the catalog", str(error)) from None


def _check_degrees(index: int, pool: Pool, model, gpu) -> None:
    from layoutopt.perf_model.memory import check_layout

    try:
        layout = pool.layout
    except ValueError as error:
        raise InputError(f"plan.pools[{index}]", pool.layout_name if hasattr(pool, "layout_name") else pool.role,
                         "degrees that satisfy the layout rules", str(error)) from None
    if pool.gpus_per_instance != layout.gpus_per_instance:
        raise InputError(f"plan.pools[{index}].gpus_per_instance", pool.gpus_per_instance,
                         f"tp x pp x pcp x dp = {layout.gpus_per_instance}")
    try:
        check_layout(model, gpu, layout, allow_cross_domain=True)
    except LayoutoptError as error:
        raise InputError(f"plan.pools[{index}]", layout.short_name(), "a layout the model can run", str(error)) from None


def check_plan(plan: Plan, release: EngineRelease) -> None:
    """Raise InputError for a plan emit must not write files for."""
    if plan.schema_version not in READABLE_SCHEMA_VERSIONS:
        raise InputError("plan.schema_version", plan.schema_version,
                         f"one of {', '.join(map(str, READABLE_SCHEMA_VERSIONS))} (the plan schemas this layoutopt reads)")
    if not plan.pools or plan.totals is None:
        raise InputError("plan", plan.status, "a plan with pools (the solver found none)")
    plan_engine = plan.engine.partition("==")[0].strip().lower()
    if plan_engine not in ("vllm", "sglang"):
        raise InputError("plan.engine", plan.engine, "vllm or sglang (the engines layoutopt writes launch files for)")
    seen: set[str] = set()
    for k, placed in enumerate(plan.placement):
        names.instance_id(placed.instance_id, f"plan.placement[{k}].instance_id")
        for node in [placed.node, *placed.nodes]:
            names.host_name(node, f"plan.placement[{k}].node")
        key = names.dns_name(placed.instance_id)
        if key in seen:
            raise InputError(f"plan.placement[{k}].instance_id", placed.instance_id, "an id no other instance has")
        seen.add(key)
        if placed.pool_index is not None and placed.pool_index >= len(plan.pools):
            raise InputError(f"plan.placement[{k}].pool_index", placed.pool_index, f"below {len(plan.pools)}")
    _check_ep_exchange(plan, release)
    if plan.placement and len(plan.placement) != sum(p.instances for p in plan.pools):
        raise InputError("plan.placement", f"{len(plan.placement)} instances",
                         f"one per instance of the pools: {sum(p.instances for p in plan.pools)}")


def _check_ep_exchange(plan: Plan, release: EngineRelease) -> None:
    """Refuse a plan whose EP pools cost an exchange the engine has no backend for."""
    from layoutopt.report.node_launch import ep_exchange_problem, uses_ep_exchange

    problem = ep_exchange_problem(release.engine, plan.ep_exchange)
    pools = [f"{p.role} {p.layout.short_name()}" for p in plan.pools if uses_ep_exchange(p)]
    if problem and pools:
        raise InputError("plan.ep_exchange", plan.ep_exchange, f"an EP exchange {release.spec} runs",
                         f"{problem}; the pools {', '.join(pools)} use it. Emit with --engine of the profile the "
                         f"plan was solved with, or re-plan with --engine {release.engine}")


def check_engine_rules(plan: Plan, release: EngineRelease, model, gpus: list) -> None:
    """Raise InputError when a pool breaks a rule of the engine release (with the rule's source):
    such launch files would fail at start-up or in the KV handshake."""
    from layoutopt.engines.plan_rules import plan_rule_violations

    found = plan_rule_violations(release.spec, plan, model, gpus)
    if found:
        raise InputError("plan.pools", "; ".join(f"{p.role} {p.layout.short_name()}" for p in plan.pools),
                         f"layouts {release.spec} can run", "; ".join(str(v) for v in found)
                         + f"; re-plan with solve --engine {release.spec}, which never proposes them")


def _context_tokens(plan: Plan, role: str) -> float | None:
    """Tokens one sequence holds at the plan's long requests, as the optimizer's memory filter counts them."""
    from layoutopt.optimizer.enumeration import FIT_QUANTILE
    from layoutopt.report.plan_inputs import plan_workload

    workload = plan_workload(plan)
    if workload is None:
        return None
    tokens = workload.input_tokens.quantile_tokens(FIT_QUANTILE)
    if role != "prefill":
        tokens += workload.output_tokens.quantile_tokens(FIT_QUANTILE)
    return tokens


def _memory(plan: Plan, index: int, pool: Pool, model, gpu, release: EngineRelease) -> tuple[float, float, int, list[str]]:
    from layoutopt.perf_model.memory import MIN_KV_SEQUENCES_PER_RANK, memory_breakdown

    context = _context_tokens(plan, pool.role)
    notes: list[str] = []
    mem = memory_breakdown(model, gpu, pool.layout, context or 1.0, engine=release.engine)
    utilization = mem.usable_bytes / gpu.memory_bytes
    # SGLang's static fraction covers weights and the KV pool; activations and the runtime sit outside.
    static = (mem.weights_bytes + max(mem.kv_capacity_bytes, 0.0)) / gpu.memory_bytes
    if context is None:
        return utilization, static, pool.max_batch_size, ["the plan records no workload: the KV cache was not "
                                                          "checked against its request lengths"]
    per_rank = mem.max_batch_size // pool.dp_size
    where = f"plan.pools[{index}]"
    if per_rank < MIN_KV_SEQUENCES_PER_RANK:
        raise InputError(where, f"{pool.role} {pool.gpu} {pool.layout.short_name()}",
                         f"a layout whose KV cache holds at least {MIN_KV_SEQUENCES_PER_RANK} sequences per scheduler",
                         f"at gpu-memory-utilization {utilization:.2f} one DP rank holds {per_rank} sequences of "
                         f"{context:.0f} tokens ({mem.kv_capacity_bytes / 2**30:.1f} GiB of KV per GPU after "
                         f"{mem.weights_bytes / 2**30:.1f} GiB of weights); re-plan with more GPUs per instance "
                         "or lower precision")
    if mem.max_batch_size < pool.max_batch_size:
        notes.append(f"the planned batch of {pool.max_batch_size} exceeds the {mem.max_batch_size} sequences of "
                     f"{context:.0f} tokens that fit in KV cache; the engine queues or preempts the rest")
    return utilization, static, mem.max_batch_size, notes


def step_token_budget(release: EngineRelease, gpu) -> int:
    """The scheduler's token budget per step that the performance model assumed for this engine and
    GPU generation (its profile's ``max_num_batched_tokens``).

    Emit pins it on the command line, because both engines pick their default from the GPU's
    memory: vLLM 0.33.0 takes 16,384 tokens for the API server from 160 GiB of device memory up
    (B200, MI300X), 8,192 from 70 GiB (H100, H200; not A100) and 2,048 below
    (vllm/engine/arg_utils.py:2973-3006, applied when the flag is unset at 3166-3175); SGLang
    0.5.23 takes 8,192 below 160 GiB (H100, H200) and 16,384 from there (B200, MI300), 4,096 or
    2,048 on small GPUs (sglang/srt/arg_groups/memory_hook.py:89-170). Left to those defaults,
    an engine can run with a budget the plan's latencies were not predicted for.
    """
    from layoutopt.perf_model.calibration import resolve_engine

    return int(resolve_engine(release.engine, gpu).max_num_batched_tokens)


def graphed_prompt_tokens(release: EngineRelease, gpu) -> int | None:
    """vLLM: the largest step, in tokens per rank, the performance model replays from a CUDA graph (its
    profile's ``graphed_prompt_tokens``), which the launch pins with ``--max-cudagraph-capture-size`` where
    vLLM's default would capture less: min(2 x max_num_seqs, 512; 1024 on data-center Blackwell) (vllm 0.33.0
    config/vllm.py:2460-2470), so a pool with a small batch would otherwise run its prompt steps eagerly.
    None for the other engines (their prompt steps run eagerly by default, as their profiles say)."""
    from layoutopt.perf_model.calibration import resolve_engine

    if release.engine != "vllm":
        return None
    return int(resolve_engine(release.engine, gpu).graphed_prompt_tokens) or None


def disaggregated_page_sizes(plan: Plan, release: EngineRelease, model, gpus: list) -> list[int | None]:
    """Per pool, the ``--page-size`` an SGLang prefill or decode pool is launched with (None for the others).

    SGLang's NIXL transfer reads the decode's KV slots with the prefill's page size (0.5.23
    disaggregation/nixl/conn.py:1312; 0.5.3 nixl/conn.py:405) and 0.5.23's decode refuses another page
    size at the handshake (disaggregation/common/conn.py:1320). Left unset, each server derives it from
    its attention backend, and the backend from the GPU, the model and (for the Qwen3.5 hybrids on
    SM100) the server's role. So every prefill and decode pool gets the one value SGLang would resolve
    there (engines/page_size.py, from the engine data): the launch runs as it would have, but both
    sides say it. A plan whose pools would resolve different values is refused (the pair rules refuse
    mixed GPU generations before that).
    """
    from layoutopt.engines.page_size import sglang_page_size  # looked up at call time (tests replace it)

    sizes: list[int | None] = [None] * len(plan.pools)
    if release.engine != "sglang":
        return sizes
    found = {}
    for index, pool in enumerate(plan.pools):
        if pool.role not in ("prefill", "decode"):
            continue
        page = sglang_page_size(release.spec, model, gpus[index])
        found[index] = page
        sizes[index] = page.tokens if page is not None else None
    values = {page.tokens if page is not None else None for page in found.values()}
    if len(values) > 1:
        raise InputError("plan.pools", "; ".join(f"{plan.pools[i].role} {plan.pools[i].gpu}" for i in found),
                         f"prefill and decode pools {release.spec} pages alike",
                         "SGLang's NIXL KV transfer needs one page size on both sides, and these pools resolve "
                         + ", ".join(f"{plan.pools[i].role} {plan.pools[i].gpu}: {page or 'decided on the host'}"
                                     for i, page in found.items())
                         + f"; re-plan with solve --engine {release.spec}")
    return sizes


def _check_chunk_pages(release: EngineRelease, index: int, pool, model, gpu, page_size: int | None,
                       budget: int) -> None:
    """An SGLang prefill or colocated server with attention DP runs ``--chunked-prefill-size`` // DP
    tokens per rank and refuses to start unless that is a whole number of KV pages (fact
    ``chunked_prefill_page_multiple``)."""
    from layoutopt.engines.page_size import sglang_page_size  # looked up at call time (tests replace it)

    if release.engine != "sglang" or pool.role == "decode" or pool.dp_size == 1:
        return
    fact = load_engine_data(release.engine, release.version).fact("chunked_prefill_page_multiple")
    if fact is None:
        return
    if page_size is None:
        resolved = sglang_page_size(release.spec, model, gpu)
        page_size = resolved.tokens if resolved is not None else None
    if page_size is not None and (budget // pool.dp_size) % page_size:
        raise InputError(f"plan.pools[{index}].dp_size", pool.dp_size,
                         "attention DP that leaves each rank whole KV pages of its chunk",
                         f"SGLang {release.version} splits the {budget}-token chunk over {pool.dp_size} attention-DP "
                         f"ranks ({budget // pool.dp_size} tokens each), which must be a multiple of the "
                         f"{page_size}-token page size on {pool.gpu} ({fact.source})")


def prepare(plan: Plan, engine: str | EngineRelease, model_id: str | None,
            checkpoints: tuple[str, ...] = ()) -> tuple[EngineRelease, list[PoolDeployment]]:
    """The engine release and, per pool, what it serves and its memory settings."""
    from layoutopt.model_catalog.checkpoints import with_user_checkpoints

    release = as_release(engine)
    check_plan(plan, release)
    if model_id is not None:
        names.model_id(model_id)
    model = _model_spec(plan)
    if model_id is not None and model_id.lower() != (model.hf_id or "").lower():
        # --model-id names the checkpoint of every pool: layoutopt assumes it stores each pool's precision.
        checkpoints = (*checkpoints, *(f"{p.precision}={model_id}" for p in plan.pools))
    model = with_user_checkpoints(model, tuple(checkpoints))
    base = model.hf_id or model_id
    if base is None:
        raise InputError("--model-id", None, "the HuggingFace id to serve: the plan's model is a config.json "
                         f"({plan.model}), and vllm serve / sglang need a model id, not the file")
    names.model_id(base, "model hf_id")
    gpus = [_gpu(index, pool) for index, pool in enumerate(plan.pools)]
    for index, pool in enumerate(plan.pools):
        _check_degrees(index, pool, model, gpus[index])
    check_engine_rules(plan, release, model, gpus)
    page_sizes = disaggregated_page_sizes(plan, release, model, gpus)
    pools: list[PoolDeployment] = []
    for index, pool in enumerate(plan.pools):
        gpu = gpus[index]
        budget = step_token_budget(release, gpu)
        _check_chunk_pages(release, index, pool, model, gpu, page_sizes[index], budget)
        served = served_checkpoint(release.spec, model, base, gpu, pool.precision, model_id)
        names.model_id(served.hf_id, "checkpoint id")
        utilization, static, fits, notes = _memory(plan, index, pool, model, gpu, release)
        if served.note:
            notes.append(served.note)
        if release.engine == "sglang" and pool.role in ("prefill", "decode") and page_sizes[index] is None:
            notes.append(f"no --page-size: {model.name} on {pool.gpu} pages KV as SGLang {release.version} decides "
                         "on the host (a DeepSeek sparse-attention model on ROCm), the same way on every "
                         "prefill and decode server of this GPU")
        pools.append(PoolDeployment(served=served, gpu_memory_utilization=math.floor(utilization * 100 + 1e-6) / 100,
                                    mem_fraction_static=math.floor(static * 100 + 1e-6) / 100, kv_sequences=fits,
                                    step_token_budget=budget, ep_exchange=plan.ep_exchange,
                                    graphed_prompt_tokens=graphed_prompt_tokens(release, gpu),
                                    page_size=page_sizes[index],
                                    attention_backend=required_attention_backend(release.spec, model, gpu, pool.dcp_size),
                                    kv_cache_dtype=explicit_kv_cache_dtype(release.spec, model, gpu, pool.kv_precision),
                                    notes=tuple(notes)))
    return release, pools
