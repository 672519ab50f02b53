"""``python3 -m sglang.launch_server`` for one node of one instance (SGLang 0.5.23 and 0.5.3).

Facts read from the SGLang wheels (paths inside the 0.5.23 wheel unless noted):

- The server binds ``--host`` 127.0.0.1 by default (srt/arg_groups/fields/serving.py:65), so the
  launch files pass ``--host 0.0.0.0``.
- ``--tp-size`` counts every GPU of a pipeline stage; attention data parallel splits them into
  groups: 0.5.23 names it ``--attn-dp-size`` (fields/parallel.py:81; ``--enable-dp-attention`` is
  deprecated, srt/server_args.py:416-424), 0.5.3 ``--dp-size N --enable-dp-attention``.
- ``--max-running-requests`` is the whole server's limit, divided over the attention-DP ranks
  (srt/model_executor/pool_configurator.py:956).
- ``--mem-fraction-static`` is the fraction of GPU memory for weights and the KV pool
  (fields/schedule.py:27); activations and the runtime sit outside it.
- PD disaggregation: ``--disaggregation-mode prefill|decode`` (fields/disagg.py:55), the
  transfer backend (fields/disagg.py:65, choices in arg_groups/choices.py:122), and a bootstrap
  server on each prefill server at ``--disaggregation-bootstrap-port`` (default 8998,
  fields/disagg.py:81). The address a server advertises comes from ``SGLANG_HOST_IP``
  (srt/utils/network.py:417) before any interface probing.
- PD servers get one explicit ``--page-size`` (fields/schedule.py:143; 0.5.3 server_args.py:1540): the
  NIXL transfer reads the decode's KV slots with the prefill's page size (disaggregation/nixl/conn.py:1312;
  0.5.3 nixl/conn.py:405) and 0.5.23's decode refuses another one at the handshake
  (disaggregation/common/conn.py:1320). The value is what SGLang would resolve on that GPU for that model
  (layoutopt/engines/page_size.py), so the servers run as they would unset.
- A Llama 4 server of 0.5.3 asserts ``--attention-backend`` in {fa3, aiter, triton} before it picks
  a default (server_args.py:786-791), so its launch names one (layoutopt/engines/attention_backend.py:
  fa3 on Hopper, aiter on AMD, triton elsewhere); 0.5.23 picks one itself.
- Decode context parallel is ``--dcp-size`` in 0.5.23 (fields/parallel.py:52); 0.5.3 has none.
- Multi-node: ``--dist-init-addr``, ``--nnodes``, ``--node-rank`` (fields/parallel.py:32-44).
  PP ranks are outermost over the nodes: with nnodes_per_pp_rank = nnodes // pp_size each stage
  takes nnodes / pp whole nodes, or each node pp / nnodes whole stages (entrypoints/engine.py:2045-2077;
  0.5.3 engine.py:782-793, data_parallel_controller.py:267-277), and a node's GPU for (pp_rank,
  tp_rank) is base_gpu_id + (pp_rank % pp_per_node) x tp_per_node + (tp_rank % tp_per_node) x
  gpu_id_step (engine.py:935-939, data_parallel_controller.py:747-751; 0.5.3 engine.py:797-801),
  so a stage's attention-DP and EP ranks share only that stage's nodes, as the plan places them:
  DEP and TP16 stages over whole nodes run with PP after them too, with the default
  ``--base-gpu-id 0 --gpu-id-step 1`` on every node. ``(tp_size x pp_size) % nnodes`` must be 0
  (arg_groups/validation_hook.py:179; 0.5.3 server_args.py:2904-2906), which whole-node instances
  meet. 0.5.23 refuses ``--dp-size`` replicas with ``--nnodes`` > 1 (validation_hook.py:199-202)
  and takes attention DP as ``--attn-dp-size``; 0.5.3 allows ``--dp-size`` across nodes only with
  ``--enable-dp-attention`` (server_args.py:2915-2917).
- ``--moe-a2a-backend`` defaults to ``none`` (fields/exec_.py:836-869; 0.5.3 server_args.py:315):
  with attention DP every rank gathers all DP ranks' tokens (srt/layers/dp_attention.py:661-755)
  and reduce-scatters the MoE output back, which is what the performance model costs
  (EngineProfile.ep_exchange ``dp_gather``); a plan whose profile costs the all-to-all
  (Plan.ep_exchange ``alltoall``) gets ``--moe-a2a-backend deepep``, one costing vLLM's
  all-gather/reduce-scatter is refused (no such backend). An EP group across nodes gets a note
  naming ``deepep`` as the faster option that needs DeepEP and NVSHMEM/IBGDA on the hosts.
"""

from __future__ import annotations

from layoutopt.plan import Pool
from layoutopt.report.engine_flags import ENGINE_PROGRAMS, EngineFlags
from layoutopt.report.node_launch import (
    SGLANG_DIST_INIT_PORT, NodeContext, NodeLaunch, cross_node_ep_note, ep_backend_args,
)


def _parallel_args(pool: Pool, ctx: NodeContext, flags: EngineFlags, notes: list[str]) -> list[str]:
    args = ["--tp-size", str(pool.tp_size * pool.dp_size)]
    if pool.pp_size > 1:
        args += ["--pp-size", str(pool.pp_size)]
    if pool.dp_size > 1:
        if "--attn-dp-size" in flags.flags:
            args += ["--attn-dp-size", str(pool.dp_size)]
        else:
            args += ["--dp-size", str(pool.dp_size), "--enable-dp-attention"]
    if pool.ep_size > 1:
        args += ["--ep-size", str(pool.ep_size), *ep_backend_args("sglang", pool, ctx.ep_exchange)]
    version = ctx.release.version
    if pool.dcp_size > 1:
        if "--dcp-size" in flags.flags:
            args += ["--dcp-size", str(pool.dcp_size)]
        else:
            notes.append(f"decode context parallel dcp_size={pool.dcp_size} is not available in SGLang {version}: "
                         "the KV cache is replicated over the TP group instead of sharded, so fewer sequences fit "
                         f"than the planned batch of {pool.max_batch_size}; re-plan without DCP or use --engine vllm")
    if pool.pcp_size > 1:
        used = pool.gpus_per_instance // pool.pcp_size
        notes.append(f"prefill context parallel pcp_size={pool.pcp_size} is not mapped onto SGLang {version}: "
                     f"the engine uses {used} of the instance's {pool.gpus_per_instance} GPUs and prefill is "
                     "slower than planned; re-plan without PCP or use --engine vllm")
    return args


def sglang_node(pool: Pool, ctx: NodeContext, flags: EngineFlags) -> NodeLaunch:
    notes: list[str] = []
    env: dict[str, str] = {}
    if ctx.cuda_visible_devices and not ctx.in_pod:
        env["CUDA_VISIBLE_DEVICES"] = ctx.cuda_visible_devices
    args = ["--model-path", ctx.model, "--host", "0.0.0.0", "--port", str(ctx.port),
            *_parallel_args(pool, ctx, flags, notes)]
    if ctx.online_quantization is not None:
        args += ["--quantization", ctx.online_quantization]
    if pool.kv_precision == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    if ctx.attention_backend is not None:
        # A model the release starts only with a named backend (0.5.3 Llama 4, server_args.py:786-791).
        args += ["--attention-backend", ctx.attention_backend]
    args += ["--max-running-requests", str(pool.max_batch_size),
             "--mem-fraction-static", f"{ctx.mem_fraction_static:.2f}"]
    if ctx.step_token_budget is not None:
        # The instance's budget: SGLang divides it over attention-DP ranks itself, as the model does
        # (0.5.23 arg_groups/parallel_hook.py:327-331); unset it follows the GPU's memory
        # (arg_groups/memory_hook.py:89-170).
        args += ["--chunked-prefill-size", str(ctx.step_token_budget)]
    if pool.role in ("prefill", "decode"):
        env["SGLANG_HOST_IP"] = ctx.advertise_host
        args += ["--disaggregation-mode", pool.role, "--disaggregation-transfer-backend", "nixl"]
        if ctx.page_size is not None:
            # One page size on both sides: NIXL reads the decode's KV slots with the prefill's
            # (deployment.disaggregated_page_sizes).
            args += ["--page-size", str(ctx.page_size)]
        if pool.role == "prefill":
            args += ["--disaggregation-bootstrap-port", str(ctx.bootstrap_port)]
    if pool.ep_size > 1 and pool.layout.gpus_per_stage > ctx.gpus_on_node and ctx.node_rank == 0:
        notes.append(cross_node_ep_note("sglang", pool, ctx.ep_exchange))
    if ctx.num_nodes > 1:
        args += ["--dist-init-addr", f"{ctx.head}:{SGLANG_DIST_INIT_PORT + ctx.instance_index}",
                 "--nnodes", str(ctx.num_nodes), "--node-rank", str(ctx.node_rank)]
    return NodeLaunch(env=env, argv=(*ENGINE_PROGRAMS["sglang"], *args), notes=tuple(notes))
