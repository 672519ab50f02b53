"""Every efficiency, overhead and physical constant of the performance model, with its source.

Two kinds live here:

- ``EngineProfile``: what differs between serving engines (vLLM, SGLang, TensorRT-LLM), loaded
  from ``data/engine_profiles.yaml`` and meant to be refit against
  ``reference/measurements/h100_sxm.csv`` (globally per engine, never per model): the per-step
  physics (efficiencies, overheads) and the load layer's constants (the rounds a closed-loop
  benchmark averages its first burst over, per-request overhead) alike, each profile with one
  provenance line.
- Module constants: facts of links, collectives and runtimes that do not depend on the engine.

Source keys in brackets resolve in ``reference/hardware_and_models.md``; ``[estimate]`` marks an
engineering estimate without a primary source.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from layoutopt.errors import unknown_name_error
from layoutopt.io_safe import load_package_yaml

ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm")


# Largest Hopper-equivalent memory_efficiency a profile may carry: 0.98 (the model's cap on the product)
# over the smallest hbm_scale of a generation with fitted profiles (Blackwell 0.814), rounded up.
MAX_MEMORY_EFFICIENCY = 1.2


class EngineProfile(BaseModel):
    """Calibration constants of one serving engine (see ``data/engine_profiles.yaml``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    generation: str = Field(default="hopper", description="GPU generation the constants were fitted on; the "
                            "efficiencies are Hopper-equivalent either way (data/generations.yaml scales them)")
    gemm_efficiency: float = Field(gt=0, le=1, description="achieved / peak dense FLOPs on large GEMMs")
    gemm_half_efficiency_tokens: float = Field(
        ge=0, description="GEMM rows at which efficiency is half the large-GEMM value (tile waste)"
    )
    attention_efficiency: float = Field(gt=0, le=1, description="prefill flash-attention FLOPs efficiency")
    memory_efficiency: float = Field(gt=0, le=MAX_MEMORY_EFFICIENCY, description="achieved / peak HBM bandwidth, "
                                     "streaming reads, Hopper-equivalent: the model uses it x the generation's "
                                     "hbm_scale (capped at 0.98), so it exceeds 1 on a generation whose kernels "
                                     "reach less of their peak than Hopper's (Blackwell's scale 0.814)")
    step_overhead_ms: float = Field(ge=0, description="per forward step: scheduler, sampling, launch")
    layer_overhead_us: float = Field(ge=0, description="per layer per step, not hidden by CUDA graphs")
    eager_layer_launch_us: float = Field(default=0.0, ge=0, description="host time to launch one layer's kernels "
                                         "in a step the engine runs without a CUDA graph (one that carries prompt "
                                         "tokens): such a step lasts at least layers x this, however little GPU "
                                         "work it holds (0: the engine graphs or compiles those steps too)")
    eager_mla_layer_launch_us: float = Field(default=0.0, ge=0, description="host time an MLA attention layer "
                                             "adds to eager_layer_launch_us in such a step: its context path "
                                             "launches the latent down-projections, their norms, the latent "
                                             "up-projection that expands keys and values and the rotary split "
                                             "as separate ops where a GQA layer runs one fused QKV GEMM and one "
                                             "attention op")
    graphed_prompt_tokens: int = Field(default=0, ge=0, description="the largest step, in tokens per rank, the "
                                       "engine replays from a CUDA graph while it carries prompt tokens (vLLM's "
                                       "piecewise graphs up to max_cudagraph_capture_size); larger steps, and every "
                                       "step carrying prompt tokens when 0 (TensorRT-LLM's default, vLLM's "
                                       "cudagraph_mode FULL_DECODE_ONLY), run eagerly and pay eager_layer_launch_us. "
                                       "A launch setting, not fitted")
    allreduce_latency_us: float = Field(ge=0, description="fixed cost of one all-reduce")
    alltoall_latency_us: float = Field(ge=0, description="fixed cost of one EP dispatch or combine, whichever "
                                       "collective runs it (ep_exchange)")
    ep_exchange: Literal["allgather_reducescatter", "dp_gather", "alltoall"] = Field(
        default="allgather_reducescatter", description="how the engine's default launch moves tokens to and from "
        "the experts when attention DP feeds expert parallelism (compute.moe_exchange_time_s): "
        "'allgather_reducescatter' every MoE rank all-gathers all DP ranks' tokens and reduce-scatters the expert "
        "outputs back (vLLM's default --all2all-backend, TensorRT-LLM without MNNVL or DeepEP); 'dp_gather' the "
        "same, with SGLang's all-reduce of the summed buffer on steps carrying prompt tokens; 'alltoall' a "
        "DeepEP-style all-to-all of the routed tokens only (engines' DeepEP backends, opt-in)")
    ep_dispatch_quantized: bool = Field(default=False, description="the dispatch moves hidden states at the "
                                        "experts' activation precision (FP8/FP4 models quantize before the "
                                        "gather), not in BF16; the combine is BF16 either way")
    moe_imbalance: float = Field(ge=1, description="hot-expert max/mean load per expert-parallel rank at large "
                                 "batches (finite-batch sampling noise is added on top)")
    moe_kernel_overhead_us: float = Field(default=8.0, ge=0, description="per MoE layer per step [estimate until fitted]: router, "
                                          "top-k, permute and un-permute kernel launches")
    grouped_gemm_efficiency: float = Field(default=1.0, gt=0, le=1, description="fraction of the dense GEMM "
                                           "efficiency the routed experts' grouped GEMMs reach (ragged rows per "
                                           "expert, per-expert tiles and scales, gate/up and down as separate "
                                           "launches) [estimate until fitted]")
    max_num_batched_tokens: int = Field(gt=0, description="token budget of one scheduler step (chunked prefill); "
                                                         "activation memory is sized for it")
    runtime_reserve_gib: float = Field(ge=0, description="memory per GPU outside weights, activations and KV that "
                                       "the engine's KV budget subtracts (see kv_memory_policy)")
    kv_memory_policy: Literal["utilization", "static_fraction", "fixed_reserve"] = Field(
        default="fixed_reserve", description="how the engine sizes its KV cache (perf_model/memory.py): "
        "'utilization' (vLLM) gpu_memory_fraction x HBM minus the profiled peak (weights, activations, "
        "runtime_reserve_gib); 'static_fraction' (SGLang) mem_fraction_static x HBM minus weights, the fraction "
        "from SGLang's own default rule; 'fixed_reserve' gpu_memory_fraction x HBM minus weights, activations "
        "and runtime_reserve_gib (engines whose policy is not modelled from source)")
    gpu_memory_fraction: float = Field(default=0.9, gt=0, le=1, description="share of HBM the engine budgets "
                                       "(vLLM --gpu-memory-utilization); unused by 'static_fraction'")
    nccl_buffer_gib: float = Field(ge=0, description="communicator buffers per GPU of a multi-GPU instance")
    closed_loop_cohort_fraction: float = Field(default=0.0, ge=0, description="f in prompts ahead = f (N - 1)^alpha: "
                                               "prompts of a closed-loop run prefilled before a new one, on top "
                                               "of the first burst (closed_loop_rounds); fitted for vLLM and "
                                               "TensorRT-LLM with alpha 0; 0 for SGLang, whose rows do not ask for it")
    closed_loop_cohort_exponent: float = Field(default=1.0, ge=0, le=1, description="alpha: 0 constant cohort, "
                                               "1 whole rounds")
    prefill_first: bool = Field(default=False, description="the scheduler runs a prefill batch alone whenever "
                                "prompts wait (no prefill chunks inside decode steps): a colocated closed loop "
                                "then moves as one wave (closed_loop.py)")
    closed_loop_rank_groups: bool = Field(default=False, description="in a closed loop with attention DP, "
                                          "prompts arrive in groups of one per rank that share a lockstep step "
                                          "(the engine spreads each fetched group of requests over the ranks and "
                                          "a rank's step takes one prompt; closed_loop.colocated_closed_loop)")
    attention_dp_balance_timeout_iters: int | None = Field(
        default=None, ge=0, description="TensorRT-LLM attention_dp_config with enable_balance: true: its "
        "timeout_iters, the iterations context requests are held while some attention-DP rank has none "
        "(closed_loop.attention_dp_balance_wait_steps); None: no balancing (TensorRT-LLM's default, "
        "AttentionDpConfig.enable_balance False). A launch setting, not fitted")
    attention_dp_batching_wait_iters: int = Field(
        default=10, ge=0, description="attention_dp_config.batching_wait_iters with balancing on: iterations "
        "context requests are held once every rank has one (TensorRT-LLM's default 10, llmapi/llm_args.py "
        "AttentionDpConfig)")
    batch_wait_timeout_iters: int = Field(
        default=0, ge=0, description="TensorRT-LLM batch_wait_timeout_iters: iterations a context request is held "
        "while generation requests run and the step's tokens stay below batch_wait_max_tokens_ratio x "
        "max_num_tokens (PyExecutor._waiting_requests; not with attention DP; "
        "closed_loop.batch_wait_steps). 0: no waiting (TensorRT-LLM's default). A launch setting, not fitted")
    batch_wait_max_tokens_ratio: float = Field(
        default=0.0, ge=0, le=1, description="TensorRT-LLM batch_wait_max_tokens_ratio: the share of "
        "max_num_tokens whose scheduled tokens (prompts and generation tokens) release held context requests "
        "at once (default 0)")
    scheduler_recv_interval: int = Field(
        default=1, ge=1, description="SGLang --scheduler-recv-interval N: the scheduler takes new requests once "
        "N decode iterations have run since it last did (a prefill iteration counts 1000, so it takes them at "
        "once after one; SchedulerRecvSkipper, sglang/srt/managers/scheduler_recv_skipper.py:26-38 in 0.5.9, "
        "managers/scheduler_components/recv_skipper.py:58-70 in 0.5.23), so a request that arrives while only "
        "decode runs waits (N - 1) / 2 more decode steps on average (closed_loop.recv_wait_s). 1: every "
        "iteration (SGLang's default, and every launch layoutopt writes). A launch setting, not fitted")
    closed_loop_rounds: float = Field(default=10.0, ge=1, description="rounds of a closed-loop benchmark the "
                                      "first burst (all clients start at once) is averaged over: mean TTFT = "
                                      "steady + (first-round TTFT - steady) / rounds (closed_loop.py)")
    request_overhead_ms: float = Field(ge=0, description="per request, off the GPU: API server, tokenizer, "
                                                         "first-token detokenization and streaming")
    disagg_overhead_ms: float = Field(default=0.0, ge=0, description="per request of a disaggregated deployment, "
                                      "on top of request_overhead_ms, off the GPU: the router's hop to the prefill "
                                      "worker, the prefill queue's messages and the decode worker taking the "
                                      "request over once its KV has arrived (the KV transfer itself is costed by "
                                      "kv_transfer.py)")
    carried_constants: tuple[str, ...] = Field(default=(), description="constants this profile takes from the "
                                               "engine's fit on another GPU generation because its own rows cannot "
                                               "identify them; leave-one-GPU-out resets them to their defaults")
    source: str = Field(description="provenance of the numbers")

    @field_validator("carried_constants")
    @classmethod
    def _carried_are_constants(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        fields = cls.model_fields
        unknown = [n for n in names if n not in fields or fields[n].is_required() or n == "carried_constants"]
        if unknown:
            raise ValueError(f"carried_constants {unknown} are not constants with a default; allowed: "
                             + ", ".join(n for n, f in fields.items() if not f.is_required()
                                         and n != "carried_constants"))
        return names

    def request_overhead_s(self, role: str) -> float:
        """Seconds a request of an instance in ``role`` spends off the GPU before its first token: the
        request overhead where its prompt is prefilled (colocated or prefill), plus the disaggregated
        path's at a prefill instance; none at a decode instance (it comes after the prefill's)."""
        if role == "decode":
            return 0.0
        return (self.request_overhead_ms + (self.disagg_overhead_ms if role == "prefill" else 0.0)) * 1e-3


@lru_cache(maxsize=1)
def _load_profiles() -> dict[tuple[str, str], EngineProfile]:
    """(engine, generation) -> profile; a YAML key ``vllm@blackwell`` is vLLM fitted on Blackwell,
    a plain ``vllm`` the engine's reference (Hopper) profile."""
    text = resources.files("layoutopt.perf_model").joinpath("data/engine_profiles.yaml").read_text()
    raw = load_package_yaml(text)
    out = {}
    for key, fields in raw.items():
        name, _, generation = key.partition("@")
        profile = EngineProfile(name=name, **({"generation": generation} if generation else {}), **fields)
        out[(name, profile.generation)] = profile
    return out


def get_engine_profile(engine: str, generation: str | None = None) -> EngineProfile:
    """The calibration of ``engine`` ('vllm', 'sglang', 'trtllm') for a GPU ``generation``: the
    profile fitted on that generation when there is one, else the engine's Hopper profile (the
    generation scales carry it over). Unknown engines raise InputError."""
    profiles = _load_profiles()
    # A versioned reference ('vllm==0.13.0') uses its engine's profile: the version selects the
    # engine rules and flags (``layoutopt.engines``), not the performance model.
    engine = engine.partition("==")[0].strip()
    name = engine if (engine, "hopper") in profiles else engine.lower()
    if (name, "hopper") not in profiles:
        raise unknown_name_error("engine", engine, list_engines())
    return profiles.get((name, generation or "hopper")) or profiles[(name, "hopper")]


def without_carried(profile: EngineProfile) -> EngineProfile:
    """``profile`` with the constants it carried from another generation's fit (``carried_constants``)
    back at their defaults: what its own generation's rows alone support."""
    if not profile.carried_constants:
        return profile
    fields = EngineProfile.model_fields
    return profile.model_copy(update={name: fields[name].default for name in profile.carried_constants}
                              | {"carried_constants": ()})


# An engine by name ('vllm', 'sglang', 'trtllm') or a profile object (e.g. a trial while fitting).
EngineLike = str | EngineProfile


def resolve_engine(engine: EngineLike, gpu=None) -> EngineProfile:
    """A profile given by name (the one for ``gpu``'s generation when given), or the profile itself
    (trial and user profiles apply as they are, on any GPU)."""
    if isinstance(engine, EngineProfile):
        return engine
    return get_engine_profile(engine, getattr(gpu, "generation", None))


def list_engines() -> list[str]:
    return sorted({name for name, _ in _load_profiles()})


def list_profiles() -> list[EngineProfile]:
    """Every built-in profile, by engine then generation."""
    return [p for _, p in sorted(_load_profiles().items())]


# ---------------------------------------------------------------------------------------------
# Numeric formats of activations and runtime buffers.

# Activations, all-reduce payloads and EP dispatch/combine travel in BF16 (2 bytes per value).
ACTIVATION_BYTES_PER_VALUE = 2.0
# Routing metadata every dispatched token carries with it: per chosen expert an int32 id and an FP32
# weight (vLLM's dispatch gathers topk_ids and topk_weights with the hidden states:
# vllm 0.33.0 distributed/device_communicators/all2all.py:116-140).
DISPATCH_ROUTING_BYTES_PER_CHOICE = 8.0
# Sampler logits are FP32 [estimate: vLLM/SGLang upcast logits before sampling].
LOGIT_BYTES_PER_VALUE = 4.0
# Sequences per step the sampler buffer is sized for: vLLM's default max_num_seqs (256) [estimate].
SAMPLER_MAX_NUM_SEQS = 256
# Hidden-size vectors read or written per token per layer outside weight GEMMs (residual add,
# two norms, rotary, attention output, GEMM inputs/outputs) [estimate: count of elementwise ops].
ACTIVATION_IO_HIDDEN_VECTORS_PER_LAYER = 10.0
# Peak live activations per token during the profiling forward pass, in hidden-size vectors, on top
# of the FFN's gate/up output (2 x intermediate / tp) [estimate: residual, normed input, q/k/v, out].
ACTIVATION_PEAK_HIDDEN_VECTORS = 4.0
# Gated DeltaNet prefill (chunked algorithm) costs more FLOPs per token than the recurrent step the
# model spec counts; chunk size 64 makes it about this multiple [estimate: fla chunk_gated_delta_rule].
LINEAR_ATTENTION_PREFILL_FLOPS_MULTIPLE = 2.0

# ---------------------------------------------------------------------------------------------
# Links and collectives.

# Fraction of a link's per-direction line rate that large collectives reach.
# nvlink: NCCL maintainer, ~20% protocol overhead -> ~370 of 450 GB/s on H100 for ring and
#   non-all-reduce collectives [NCCL212]; A100 231.6/300 = 0.77 [AZ-A100]; GB200 ring 0.76 [AZ-GB200].
#   (NVLS all-reduce reaches 479 GB/s busbw on H100 [AZ-H100]; engines' custom kernels do not use it
#   for most message sizes, so the ring figure is the conservative choice.)
# network: 46-48 GB/s per 400 Gb/s NDR NIC through NCCL = 0.92-0.96 [NCCL290].
# pcie: Gen5 x16 peer-to-peer through a switch [estimate].
LINK_EFFICIENCY: dict[str, float] = {"nvlink": 0.82, "pcie": 0.80, "network": 0.94}
# All-reduce on NVSwitch runs NVLS (in-switch reduction) and beats the line rate in bus-bandwidth
# terms: 478.9 GB/s on 8 x H100 [AZ-H100], 480.0 on 8 x H200 [AZ-H200], both of 450 -> 1.064
# [NCCL212: "NVLS all-reduce peak busbw ~480 GB/s"]. A100 (no NVLS) reaches 0.77 [AZ-A100]: the
# model overestimates its large all-reduces by that ratio.
ALLREDUCE_LINK_EFFICIENCY: dict[str, float] = {"nvlink": 478.9 / 450.0, "pcie": 0.80, "network": 0.94}
# One-way latency of one hop [estimate: NVSwitch ~1 us, PCIe switch ~2 us, IB NDR HCA+switch ~5 us].
LINK_LATENCY_US: dict[str, float] = {"nvlink": 1.0, "pcie": 2.0, "network": 5.0}

# Message-size dependence of collective bandwidth. Measured H100 8-GPU NCCL all-reduce bus
# bandwidth (NVLS, NCCL 2.18.5) [AZ-H100]: message bytes -> busbw GB/s.
H100_ALLREDUCE_BUSBW_GB_PER_S: tuple[tuple[float, float], ...] = (
    (2.0**20, 43.7),
    (8 * 2.0**20, 172.0),
    (64 * 2.0**20, 362.0),
    (512 * 2.0**20, 438.0),
    (8 * 2.0**30, 478.9),
)
# NCCL's own fixed cost per all-reduce, removed from the measurements above so the curve describes
# bandwidth only (the engine's latency is added separately) [estimate: ~20 us NCCL launch + sync].
NCCL_ALLREDUCE_LATENCY_US = 20.0
_RING_FACTOR_8_GPUS = 2.0 * 7 / 8


def _bandwidth_saturation_table() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(log message bytes, fraction of the asymptotic bandwidth) derived from the H100 curve."""
    logs, effective = [], []
    for message_bytes, busbw in H100_ALLREDUCE_BUSBW_GB_PER_S:
        time_s = message_bytes * _RING_FACTOR_8_GPUS / (busbw * 1e9)
        bandwidth_only_s = time_s - NCCL_ALLREDUCE_LATENCY_US * 1e-6
        logs.append(math.log(message_bytes))
        effective.append(message_bytes * _RING_FACTOR_8_GPUS / bandwidth_only_s)
    top = effective[-1]
    return tuple(logs), tuple(e / top for e in effective)


# Fraction of the asymptotic collective bandwidth a message of a given size reaches (log-linear in
# message size between the measured points, flat outside them). Derived, not fitted.
BANDWIDTH_SATURATION_LOG_BYTES, BANDWIDTH_SATURATION_FRACTION = _bandwidth_saturation_table()
