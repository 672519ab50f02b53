"""``vllm serve`` for one node of one instance (vLLM 0.33.0 and 0.13.0).

Facts read from the vLLM wheels (paths inside the 0.33.0 wheel unless noted):

- Each data-parallel rank runs its own engine core and scheduler (``DPEngineCoreProc``,
  v1/engine/core.py:2281) whose batch limit is ``max_num_seqs`` (v1/core/sched/scheduler.py:131),
  so ``--max-num-seqs`` is the instance's batch divided by ``dp_size``.
- Multi-node data parallel (every rank inside one node): ``--data-parallel-size-local``,
  ``--data-parallel-address``, ``--data-parallel-rpc-port``, and on the other nodes
  ``--headless --data-parallel-start-rank`` (engine/arg_utils.py:1253-1271, entrypoints/common/cli_args.py:445).
- A rank spanning nodes (PP or TP over nodes) runs on a Ray cluster
  (``--distributed-executor-backend ray``, engine/arg_utils.py:1167); with DP as well, the DP
  ranks are Ray placement groups (``--data-parallel-backend ray``, arg_utils.py:1278) and
  ``VLLM_RAY_DP_PACK_STRATEGY=span`` lets one rank span whole nodes (v1/engine/utils.py:727-755;
  the default ``strict`` packs a rank into one node). Ray picks the GPUs it was started with
  (``ray start --num-gpus`` after ``CUDA_VISIBLE_DEVICES``), which keeps every rank on the GPUs
  the plan assigned: the multiprocessing path maps local DP rank r to GPU indices
  [r x world_size, ...) (v1/engine/utils.py:466-473), past a node's last GPU once a rank spans nodes.
  With span vLLM sets ``--data-parallel-size-local`` to 1 itself (engine/arg_utils.py:2527-2532;
  the span placement asserts it and whole nodes per rank, v1/engine/utils.py:743-757).
- Ranks are ordered ExternalDP x DP x PP x PCP x TP (distributed/parallel_state.py:2149; 0.13.0
  :1314) and a PP stage's EP group is that stage's ranks of every DP rank (:2328-2336), while both
  launchers keep a DP rank's GPUs together: DP x PP of a MoE model over several nodes puts every
  PP stage on every node unless a DP rank's TP x PCP fills whole nodes, so layoutopt refuses it
  (``engines.rules`` ``dp_pp_placement``) rather than emit a layout that runs other than planned.
- Every node of an instance takes the same path: multiprocessing DP only where each node runs the
  same number of whole ranks (``--data-parallel-size-local``), else Ray on all of them, whose
  STRICT_PACK fits whole ranks into each node's ``--num-gpus`` (``engines.rules`` ``uneven_nodes``
  refuses a placement that leaves a node part of a rank).
- Expert dispatch and combine default to ``--all2all-backend allgather_reducescatter``
  (config/parallel.py:220; 0.13.0 through VLLM_ALL2ALL_BACKEND, envs.py:1274-1276): with attention
  DP every MoE rank all-gathers all DP ranks' tokens and reduce-scatters the outputs
  (distributed/device_communicators/all2all.py:116-160), which is what the performance model costs
  (EngineProfile.ep_exchange, recorded in Plan.ep_exchange); the command selects a backend only where the model costs another
  (``ep_backend_args``). An EP group across nodes gets a note naming ``deepep_low_latency`` /
  ``deepep_high_throughput`` (config/parallel.py:223-224) as the faster option that needs DeepEP
  and NVSHMEM/IBGDA on the hosts.
- ``--max-num-batched-tokens`` is pinned to the budget the plan was predicted with: unset, vLLM
  picks 16,384, 8,192 or 2,048 by the GPU's memory (engine/arg_utils.py:2973-3006, 3166-3175).
- PCP with DCP (0.33.0, sparse-attention MLA only: ``engines.rules``) names ``--dcp-comm-backend
  ag_rs``, the one the V2 model runner accepts beside PCP (v1/worker/gpu/pcp_manager.py:221-227);
  GLM-5's config hook would otherwise pick a2a (model_executor/models/config.py:114).
- NIXL: ``VLLM_NIXL_SIDE_CHANNEL_HOST`` defaults to localhost (envs.py:1721) and is what the
  handshake listener advertises (nixl/base_scheduler.py:76); under Ray each worker fills in its
  node's IP unless the variable is set (v1/engine/core.py:2733-2739). ``kv_role`` is
  ``kv_producer`` / ``kv_consumer`` (config/kv_transfer.py:11-13; kv_both is deprecated with NIXL,
  nixl/connector.py:97); 0.13.0 accepts the same roles (config/kv_transfer.py:13-14).
"""

from __future__ import annotations

import json
import math

from layoutopt.plan import Pool
from layoutopt.report.engine_flags import ENGINE_PROGRAMS, EngineFlags
from layoutopt.report.node_launch import (
    RAY_HEAD_PORT, VLLM_DP_RPC_PORT, NodeContext, NodeLaunch, cross_node_ep_note, ep_backend_args,
)


def max_num_seqs_per_rank(pool: Pool) -> int:
    """``--max-num-seqs``: vLLM's limit applies to each DP rank's scheduler."""
    return max(1, math.ceil(pool.max_batch_size / pool.dp_size))


def _capture_size(pool: Pool, ctx: NodeContext) -> int | None:
    """``--max-cudagraph-capture-size`` where vLLM's default, min(2 x max_num_seqs, its ceiling) (vllm 0.33.0
    config/vllm.py:2460-2470), would graph fewer tokens than the plan's numbers assume
    (deployment.graphed_prompt_tokens), capped by the step budget as vLLM caps it (:2552); None otherwise,
    and for decode pools (their steps carry no prompt tokens; their decode batches stay within the default)."""
    if not ctx.graphed_prompt_tokens or pool.role == "decode":
        return None
    wanted = ctx.graphed_prompt_tokens
    if ctx.step_token_budget is not None:
        wanted = min(wanted, ctx.step_token_budget)
    return wanted if 2 * max_num_seqs_per_rank(pool) < wanted else None


def _layout_args(pool: Pool, flags: EngineFlags, notes: list[str]) -> list[str]:
    args = ["--tensor-parallel-size", str(pool.tp_size), "--pipeline-parallel-size", str(pool.pp_size)]
    if pool.dcp_size > 1:
        args += ["--decode-context-parallel-size", str(pool.dcp_size)]
    if pool.pcp_size > 1:
        args += ["--prefill-context-parallel-size", str(pool.pcp_size)]
        if pool.dcp_size > 1 and "--dcp-comm-backend" in flags.flags:
            # The model runner's PCP + DCP needs ag_rs (0.33.0 v1/worker/gpu/pcp_manager.py:221-227), and
            # a model's config hook may default to another (GLM-5: a2a, model_executor/models/config.py:114).
            args += ["--dcp-comm-backend", "ag_rs"]
    if pool.dp_size > 1:
        args += ["--data-parallel-size", str(pool.dp_size)]
    if pool.ep_size > 1 and pool.ep_size == pool.tp_size * pool.dp_size:
        args.append("--enable-expert-parallel")
    elif pool.ep_size > 1:
        notes.append(f"the layout splits experts over ep_size={pool.ep_size} ranks with moe_tp_size="
                     f"{pool.layout.moe_tp_size}; vLLM offers only ep = tp x dp = {pool.tp_size * pool.dp_size} "
                     "(--enable-expert-parallel) or no EP, so experts run tensor-parallel here")
    return args


def vllm_node(pool: Pool, ctx: NodeContext, flags: EngineFlags) -> NodeLaunch:
    notes: list[str] = []
    env: dict[str, str] = {}
    if ctx.cuda_visible_devices and not ctx.in_pod:
        env["CUDA_VISIBLE_DEVICES"] = ctx.cuda_visible_devices
    args = ["--host", "0.0.0.0", "--port", str(ctx.port), *_layout_args(pool, flags, notes)]
    if ctx.online_quantization is not None:
        args += ["--quantization", ctx.online_quantization]
    if pool.kv_precision == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    elif ctx.kv_cache_dtype is not None:
        # A 16-bit KV cache the model's config hook would make FP8 (engines.kv_cache_dtype).
        args += ["--kv-cache-dtype", ctx.kv_cache_dtype]
    args += ["--max-num-seqs", str(max_num_seqs_per_rank(pool)),
             "--gpu-memory-utilization", f"{ctx.gpu_memory_utilization:.2f}"]
    if ctx.step_token_budget is not None:
        # Per DP rank (each rank's scheduler has its own budget), as the performance model counts it.
        args += ["--max-num-batched-tokens", str(ctx.step_token_budget)]
    capture = _capture_size(pool, ctx)
    if capture is not None:
        args += ["--max-cudagraph-capture-size", str(capture)]
    if pool.role in ("prefill", "decode"):
        kv_role = "kv_producer" if pool.role == "prefill" else "kv_consumer"
        config = {"kv_connector": "NixlConnector", "kv_role": kv_role}
        args += ["--kv-transfer-config", json.dumps(config, separators=(",", ":"))]
        env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = ctx.advertise_host
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(ctx.side_channel_port)
    args += ep_backend_args("vllm", pool, ctx.ep_exchange)
    if pool.ep_size > 1 and pool.layout.gpus_per_stage > ctx.gpus_on_node and ctx.node_rank == 0:
        notes.append(cross_node_ep_note("vllm", pool, ctx.ep_exchange))
    program = (*ENGINE_PROGRAMS["vllm"], ctx.model)
    if ctx.num_nodes == 1:
        return NodeLaunch(env=env, argv=(*program, *args), notes=tuple(notes))
    rank_gpus = pool.tp_size * pool.pp_size * pool.pcp_size
    dp_local = pool.dp_size // ctx.num_nodes
    # Every node decides alike: multiprocessing DP only where each node runs the same number of whole ranks.
    if rank_gpus <= ctx.gpus_on_node and pool.dp_size % ctx.num_nodes == 0 and all(
            dp_local * rank_gpus == gpus for gpus in (ctx.node_gpus or (ctx.gpus_on_node,))):
        # Multi-node data parallel: the head serves the API, the other nodes run headless ranks.
        args += ["--data-parallel-size-local", str(dp_local), "--data-parallel-address", ctx.head,
                 "--data-parallel-rpc-port", str(VLLM_DP_RPC_PORT + ctx.instance_index)]
        if ctx.node_rank > 0:
            args += ["--headless", "--data-parallel-start-rank", str(ctx.node_rank * dp_local)]
        return NodeLaunch(env=env, argv=(*program, *args), notes=tuple(notes))
    # A rank spans nodes: the workers run on a Ray cluster of the instance's nodes.
    ray_port = RAY_HEAD_PORT + ctx.instance_index
    gpus = f"--num-gpus={ctx.gpus_on_node}"
    if ctx.node_rank > 0:
        join = ("ray", "start", f"--address={ctx.head}:{ray_port}", gpus, "--block")
        return NodeLaunch(env=env, setup=(join,), notes=tuple(notes))
    args += ["--distributed-executor-backend", "ray"]
    if pool.dp_size > 1:
        args += ["--data-parallel-backend", "ray"]
        if rank_gpus > ctx.gpus_on_node:
            env["VLLM_RAY_DP_PACK_STRATEGY"] = "span"
            if rank_gpus % ctx.gpus_on_node:
                notes.append(f"vLLM's span packing needs a DP rank of whole nodes: {rank_gpus} GPUs per rank is "
                             f"not a multiple of the {ctx.gpus_on_node} GPUs used per node")
    head = ("ray", "start", "--head", f"--port={ray_port}", gpus)
    return NodeLaunch(env=env, setup=(head,), argv=(*program, *args), notes=tuple(notes))
