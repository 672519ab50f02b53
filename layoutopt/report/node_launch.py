"""What one node of one instance runs: the engine command for a pool's layout, per engine version.

:func:`node_launch` maps a pool onto the flags of the chosen engine release
(:mod:`layoutopt.report.vllm_launch`, :mod:`layoutopt.report.sglang_launch`); a layout feature the
version lacks becomes a note (rendered as a comment) instead of an invented flag, and every flag
is checked against the version's flag list before it is returned.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from layoutopt.plan import Pool
from layoutopt.report.engine_flags import EngineRelease, as_release, bad_choices, load_engine_flags, unknown_flags

# Instance ports start here (vLLM's default is 8000; SGLang's 30000, set explicitly with --port).
BASE_PORT = 8000
# vLLM's NIXL side channel: each DP rank listens on VLLM_NIXL_SIDE_CHANNEL_PORT + its DP rank
# (vllm 0.33.0 distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py:77-79, with
# data_parallel_index = data_parallel_rank at config/parallel.py:1048; vllm 0.13.0
# nixl_connector.py:462-464). Instances on one host get ranges that do not overlap.
NIXL_SIDE_CHANNEL_BASE_PORT = 5600
# SGLang's prefill bootstrap server (default 8998: sglang 0.5.23 arg_groups/fields/disagg.py:81);
# prefill instance k uses 8998 + k so that several share a host.
BOOTSTRAP_BASE_PORT = 8998
# Rendezvous ports of multi-node instances (Ray head, vLLM DP RPC, SGLang dist-init); instance k
# adds k so that heads sharing a node do not collide.
RAY_HEAD_PORT = 6379
VLLM_DP_RPC_PORT = 13345
SGLANG_DIST_INIT_PORT = 20000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NodeContext(_Frozen):
    """Where and how one node of one instance runs (every value already validated)."""

    release: EngineRelease
    model: str = Field(description="checkpoint id the engine serves")
    online_quantization: str | None = Field(default=None, description="--quantization value of the engine's "
                                            "load-time quantization (e.g. fp8_per_tensor), None for a checkpoint "
                                            "stored at the pool's precision")
    port: int = BASE_PORT
    num_nodes: int = 1
    node_rank: int = 0
    head: str = Field(default="127.0.0.1", description="address of node 0, or a shell expansion")
    gpus_on_node: int
    node_gpus: tuple[int, ...] = Field(default=(), description="GPUs the instance uses on each of its nodes, in "
                                       "node-rank order (empty: gpus_on_node on every node)")
    cuda_visible_devices: str | None = None
    advertise_host: str = Field(default="127.0.0.1",
                                description="address other instances reach this node at (a shell expansion)")
    side_channel_port: int = NIXL_SIDE_CHANNEL_BASE_PORT
    bootstrap_port: int = BOOTSTRAP_BASE_PORT
    instance_index: int = 0
    gpu_memory_utilization: float = 0.9
    mem_fraction_static: float = 0.85
    step_token_budget: int | None = Field(default=None, description="tokens per scheduler step to pin "
                                          "(deployment.step_token_budget); None leaves the engine's default")
    ep_exchange: str | None = Field(default=None, description="the EP exchange the plan's numbers cost "
                                    "(Plan.ep_exchange); None: the engine's built-in profile's")
    graphed_prompt_tokens: int | None = Field(default=None, description="vLLM: the largest step, in tokens, the "
                                              "plan's numbers replay from a CUDA graph (deployment."
                                              "graphed_prompt_tokens); None leaves the engine's default")
    attention_backend: str | None = Field(default=None, description="--attention-backend to name "
                                          "(deployment.attention_backend); None leaves the engine's choice")
    page_size: int | None = Field(default=None, description="SGLang --page-size of a prefill or decode server "
                                  "(deployment.page_size); None leaves the engine's default")
    kv_cache_dtype: str | None = Field(default=None, description="--kv-cache-dtype of a 16-bit KV cache the "
                                       "engine would otherwise change (deployment.kv_cache_dtype)")
    # In a pod the device plugin picks the GPUs; bare-metal scripts pin them.
    in_pod: bool = False


class NodeLaunch(_Frozen):
    """What one node of one instance runs: setup commands, then the engine (or only the setup)."""

    env: dict[str, str]
    setup: tuple[tuple[str, ...], ...] = ()
    argv: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()


# The DeepEP backends, which send each token only to the ranks of its routed experts: what the command
# selects where a profile costs that all-to-all (EngineProfile.ep_exchange 'alltoall'), else what the
# cross-node note offers instead of the engine's default (no flag: vLLM --all2all-backend
# allgather_reducescatter, config/parallel.py:220-235 in 0.33.0; SGLang --moe-a2a-backend none,
# arg_groups/fields/exec_.py:836-869 in 0.5.23). vLLM: high-throughput for prefill, low-latency for
# decode (config/parallel.py:223-224); SGLang --moe-a2a-backend deepep with --deepep-mode.
DEEPEP_FLAGS: dict[str, dict[str, str]] = {
    "vllm": {"prefill": "--all2all-backend deepep_high_throughput", "decode": "--all2all-backend deepep_low_latency"},
    "sglang": {"prefill": "--moe-a2a-backend deepep", "decode": "--moe-a2a-backend deepep"},
}
_DEFAULT_EXCHANGE_WORDS = {
    "vllm": "vLLM's default --all2all-backend allgather_reducescatter all-gathers every DP rank's tokens to all "
            "{ranks} MoE ranks and reduce-scatters the expert outputs back",
    "sglang": "SGLang's default --moe-a2a-backend none gathers every DP rank's tokens to all {ranks} MoE ranks "
              "(an all-reduce of the summed buffer on prompt steps, an all-gather on decode steps) and "
              "reduce-scatters the expert outputs back",
}


# The exchange each engine runs without a backend flag (its built-in profile costs it, see
# tests/test_ep_exchange.py), and where its backends are listed: an exchange neither that nor the
# DeepEP all-to-all has no backend in the engine.
DEFAULT_EXCHANGE = {"vllm": "allgather_reducescatter", "sglang": "dp_gather"}
BACKEND_SOURCE = {"vllm": "vllm/config/parallel.py:220-235 in 0.33.0 (--all2all-backend)",
                  "sglang": "sglang/srt/arg_groups/fields/exec_.py:836-869 in 0.5.23 (--moe-a2a-backend)"}


def ep_exchange(engine: str, recorded: str | None = None) -> str:
    """The EP exchange the plan's numbers cost: ``recorded`` (``Plan.ep_exchange``), else what the
    engine's built-in profile costs (plans of schema 1 record none; every profile of one engine has
    the same, see tests)."""
    if recorded is not None:
        return recorded
    from layoutopt.perf_model.calibration import get_engine_profile

    return get_engine_profile(engine).ep_exchange


def uses_ep_exchange(pool: Pool) -> bool:
    """Whether the pool's attention-DP ranks feed expert-parallel MoE layers (the exchange runs)."""
    return pool.ep_size > 1 and pool.dp_size > 1


def ep_exchange_problem(engine: str, recorded: str | None) -> str | None:
    """Why ``engine`` cannot run the exchange the plan's numbers cost, or None when it can."""
    exchange = ep_exchange(engine, recorded)
    if exchange == "alltoall" or exchange == DEFAULT_EXCHANGE[engine]:
        return None
    return (f"the plan's numbers cost the {exchange} EP exchange, which {engine} has no backend for: it runs "
            f"{DEFAULT_EXCHANGE[engine]} by default or the DeepEP all-to-all ({DEEPEP_FLAGS[engine]['decode']}; "
            f"{BACKEND_SOURCE[engine]})")


def ep_backend_args(engine: str, pool: Pool, recorded: str | None = None) -> list[str]:
    """The flags selecting the EP exchange the model costs, for a layout whose attention-DP ranks feed
    expert-parallel MoE layers (nothing where the engine's default is the costed one)."""
    if not uses_ep_exchange(pool) or ep_exchange(engine, recorded) != "alltoall":
        return []
    return DEEPEP_FLAGS[engine]["prefill" if pool.role == "prefill" else "decode"].split()


def cross_node_ep_note(engine: str, pool: Pool, recorded: str | None = None) -> str:
    """The note of an EP group across nodes: which exchange the plan's numbers cost (the one the command
    runs) and what could run faster, left to the user because it needs more than the image."""
    ranks = pool.tp_size * pool.dp_size
    head = f"expert parallelism over {pool.ep_size} ranks spans nodes: "
    if pool.dp_size <= 1:
        # vLLM dispatches only with attention DP (fused_moe/config.py:1035-1038 in 0.33.0).
        backend = (" (vLLM runs no dispatch without attention DP, whatever --all2all-backend says)"
                   if engine == "vllm" else "")
        return head + (f"without attention DP every one of the {ranks} TP ranks holds all tokens, so the expert "
                       "outputs are all-reduced over the TP group across the NICs, which is what the plan's numbers "
                       f"cost{backend}")
    exchange = ep_exchange(engine, recorded)
    if exchange == "alltoall":
        return head + ("the plan's numbers cost a DeepEP-style all-to-all of the routed tokens, selected above; it "
                       "needs DeepEP with NVSHMEM/IBGDA working on every host")
    role = "prefill" if pool.role == "prefill" else "decode"
    return head + (_DEFAULT_EXCHANGE_WORDS[engine].format(ranks=ranks) + ", over the NICs; the plan's numbers "
                   f"cost exactly that. {DEEPEP_FLAGS[engine][role]} sends each token only to the ranks of its "
                   "routed experts and may be faster at this size, but it needs DeepEP with NVSHMEM/IBGDA set up "
                   "on every host (the engines' images build DeepEP; the hosts' RDMA and GPU driver setup is not "
                   "checked here), so the plan does not count on it")


def node_launch(engine: str | EngineRelease, pool: Pool, context: NodeContext | None = None, **changes) -> NodeLaunch:
    """The command node ``context.node_rank`` of one ``pool`` instance runs under ``engine``."""
    from layoutopt.report.sglang_launch import sglang_node
    from layoutopt.report.vllm_launch import vllm_node

    release = as_release(engine)
    if context is None:
        changes.setdefault("gpus_on_node", max(1, pool.gpus_per_instance // changes.get("num_nodes", 1)))
        changes.setdefault("model", "m")
        context = NodeContext(release=release, **changes)
    else:
        context = context.model_copy(update={"release": release, **changes})
    flags = load_engine_flags(release.engine, release.version)
    launch = vllm_node(pool, context, flags) if release.engine == "vllm" else sglang_node(pool, context, flags)
    bad = unknown_flags(launch.argv or (), flags)
    if bad:
        raise ValueError(f"{release.spec} has no flag {', '.join(bad)}; see {flags.file_name}")
    wrong = bad_choices(launch.argv or (), flags)
    if wrong:
        raise ValueError(f"{release.spec}: {', '.join(wrong)} is not one of the flag's choices; see {flags.file_name}")
    return launch
