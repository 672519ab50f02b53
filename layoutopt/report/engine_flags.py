"""Engine command lines for one instance, using only flags the engine version really has.

Each supported engine version has a flag list in ``data/<engine>_<version>_flags.txt`` (one long
flag a line, ``#`` comments carrying the version and the sources). :func:`node_launch` maps a pool's
layout onto that engine's flags for one node of one instance; a layout feature the version lacks
becomes a note (rendered as a comment) instead of an invented flag, and every flag is checked
against the list before it is returned.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.plan import Pool

Engine = Literal["vllm", "sglang"]
ENGINES: tuple[Engine, ...] = ("vllm", "sglang")
# The engine version each generated file targets; its flag list must exist under data/.
ENGINE_VERSIONS: dict[str, str] = {"vllm": "0.13.0", "sglang": "0.5.3"}
ENGINE_PROGRAMS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm", "serve"),
    "sglang": ("python3", "-m", "sglang.launch_server"),
}

# Instance ports start here (the engines' default is 8000 for vLLM, 30000 for SGLang).
BASE_PORT = 8000
# vLLM's NIXL side channel (VLLM_NIXL_SIDE_CHANNEL_PORT, default 5600) must differ per instance
# on one host; instance k uses NIXL_SIDE_CHANNEL_BASE_PORT + (port - BASE_PORT).
NIXL_SIDE_CHANNEL_BASE_PORT = 5600
# Fixed ports of the multi-node rendezvous; any free port works, these are the engines' examples.
RAY_HEAD_PORT = 6379
VLLM_DP_RPC_PORT = 13345
SGLANG_DIST_INIT_PORT = 20000


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EngineFlags(_Frozen):
    """The valid long flags of one engine version and where the list came from."""

    engine: Engine
    version: str
    flags: frozenset[str]
    sources: tuple[str, ...]

    @property
    def file_name(self) -> str:
        return flags_file_name(self.engine, self.version)


class NodeLaunch(_Frozen):
    """What one node of one instance runs: setup commands, then the engine (or only the setup)."""

    env: dict[str, str]
    setup: tuple[tuple[str, ...], ...] = ()
    argv: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()


def flags_file_name(engine: str, version: str) -> str:
    return f"{engine}_{version}_flags.txt"


@lru_cache(maxsize=None)
def load_engine_flags(engine: str, version: str | None = None) -> EngineFlags:
    """Read the flag list of ``engine`` at ``version`` (default: the version layoutopt targets)."""
    if engine not in ENGINE_VERSIONS:
        raise InputError("--engine", engine, f"one of {', '.join(ENGINES)}")
    version = version or ENGINE_VERSIONS[engine]
    path = resources.files("layoutopt.report") / "data" / flags_file_name(engine, version)
    if not path.is_file():
        raise InputError("engine version", f"{engine} {version}", "no flag list for that version")
    flags: set[str] = set()
    sources: list[str] = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if text.startswith("#") and text.lstrip("# ").startswith("http"):
            sources.append(text.lstrip("# "))
        elif text and not text.startswith("#"):
            flags.add(text)
    return EngineFlags(engine=engine, version=version, flags=frozenset(flags), sources=tuple(sources))


def unknown_flags(argv: tuple[str, ...] | list[str], flags: EngineFlags) -> list[str]:
    """The ``--flag`` tokens of ``argv`` (``--flag=value`` included) that the engine lacks."""
    used = [token.split("=", 1)[0] for token in argv if token.startswith("--")]
    return [flag for flag in used if flag not in flags.flags]


def _vllm_precision(pool: Pool) -> tuple[list[str], list[str]]:
    args: list[str] = []
    notes: list[str] = []
    if pool.precision == "fp8":
        args += ["--quantization", "fp8"]
    elif pool.precision == "fp4":
        notes.append("FP4 weights: serve an FP4 (NVFP4/MXFP4) checkpoint; vLLM reads its quantization "
                     "from the checkpoint config and has no flag to quantize to FP4 at load time")
    if pool.kv_precision == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    return args, notes


def _vllm_launch(pool: Pool, model: str, port: int, num_nodes: int, node_rank: int, head: str,
                 gpus_on_node: int, env: dict[str, str]) -> NodeLaunch:
    program = ENGINE_PROGRAMS["vllm"]
    args = ["--port", str(port), "--tensor-parallel-size", str(pool.tp_size),
            "--pipeline-parallel-size", str(pool.pp_size)]
    notes: list[str] = []
    if pool.dcp_size > 1:
        args += ["--decode-context-parallel-size", str(pool.dcp_size)]
    if pool.pcp_size > 1:
        args += ["--prefill-context-parallel-size", str(pool.pcp_size)]
    if pool.dp_size > 1:
        args += ["--data-parallel-size", str(pool.dp_size)]
    if pool.ep_size > 1 and pool.ep_size == pool.tp_size * pool.dp_size:
        args.append("--enable-expert-parallel")
    elif pool.ep_size > 1:
        notes.append(f"the layout splits experts over ep_size={pool.ep_size} ranks with moe_tp_size="
                     f"{pool.layout.moe_tp_size}; vLLM offers only ep = tp x dp = {pool.tp_size * pool.dp_size} "
                     "(--enable-expert-parallel) or no EP, so experts run tensor-parallel here")
    precision_args, precision_notes = _vllm_precision(pool)
    args += precision_args
    notes += precision_notes
    args += ["--max-num-seqs", str(pool.max_batch_size)]
    if pool.role in ("prefill", "decode"):
        kv_role = "kv_producer" if pool.role == "prefill" else "kv_consumer"
        config = {"kv_connector": "NixlConnector", "kv_role": kv_role}
        args += ["--kv-transfer-config", json.dumps(config, separators=(",", ":"))]
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(NIXL_SIDE_CHANNEL_BASE_PORT + port - BASE_PORT)
    if num_nodes == 1:
        return NodeLaunch(env=env, argv=(*program, model, *args), notes=tuple(notes))
    dp_local = pool.dp_size // num_nodes
    dp_spans_nodes = (pool.pp_size == 1 and pool.pcp_size == 1 and pool.dp_size % num_nodes == 0
                      and dp_local * pool.tp_size == gpus_on_node)
    if dp_spans_nodes:
        # vLLM's multi-node data parallel: the head serves the API, the others run headless ranks.
        args += ["--data-parallel-size-local", str(dp_local), "--data-parallel-address", head,
                 "--data-parallel-rpc-port", str(VLLM_DP_RPC_PORT)]
        if node_rank > 0:
            args += ["--headless", "--data-parallel-start-rank", str(node_rank * dp_local)]
        return NodeLaunch(env=env, argv=(*program, model, *args), notes=tuple(notes))
    # Stages or TP groups across nodes: vLLM schedules its workers on a Ray cluster.
    if node_rank > 0:
        join = ("ray", "start", f"--address={head}:{RAY_HEAD_PORT}", "--block")
        return NodeLaunch(env=env, setup=(join,), notes=tuple(notes))
    args += ["--distributed-executor-backend", "ray"]
    return NodeLaunch(env=env, setup=(("ray", "start", "--head", f"--port={RAY_HEAD_PORT}"),),
                      argv=(*program, model, *args), notes=tuple(notes))


def _sglang_launch(pool: Pool, model: str, port: int, num_nodes: int, node_rank: int, head: str,
                   env: dict[str, str]) -> NodeLaunch:
    notes: list[str] = []
    # SGLang's --tp-size counts every GPU of a pipeline stage; DP attention splits them into
    # dp_size attention groups, which is layoutopt's tp x dp.
    args = ["--model-path", model, "--port", str(port), "--tp-size", str(pool.tp_size * pool.dp_size)]
    if pool.pp_size > 1:
        args += ["--pp-size", str(pool.pp_size)]
    if pool.dp_size > 1:
        args += ["--dp-size", str(pool.dp_size), "--enable-dp-attention"]
    if pool.ep_size > 1:
        args += ["--ep-size", str(pool.ep_size)]
    version = ENGINE_VERSIONS["sglang"]
    if pool.dcp_size > 1:
        notes.append(f"decode context parallel dcp_size={pool.dcp_size} is not available in SGLang {version}: "
                     "the KV cache is replicated over the TP group instead of sharded, so fewer sequences fit "
                     f"than the planned batch of {pool.max_batch_size}; re-plan without DCP or use --engine vllm")
    if pool.pcp_size > 1:
        used = pool.gpus_per_instance // pool.pcp_size
        notes.append(f"prefill context parallel pcp_size={pool.pcp_size} is not available in SGLang {version}: "
                     f"the engine uses {used} of the instance's {pool.gpus_per_instance} GPUs and prefill is "
                     "slower than planned; re-plan without PCP or use --engine vllm")
    if pool.precision == "fp8":
        args += ["--quantization", "fp8"]
    elif pool.precision == "fp4":
        notes.append("FP4 weights: serve an FP4 checkpoint; SGLang reads its quantization from the "
                     "checkpoint config")
    if pool.kv_precision == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    args += ["--max-running-requests", str(pool.max_batch_size)]
    if pool.role in ("prefill", "decode"):
        args += ["--disaggregation-mode", pool.role, "--disaggregation-transfer-backend", "nixl"]
    if num_nodes > 1:
        args += ["--dist-init-addr", f"{head}:{SGLANG_DIST_INIT_PORT}", "--nnodes", str(num_nodes),
                 "--node-rank", str(node_rank)]
    return NodeLaunch(env=env, argv=(*ENGINE_PROGRAMS["sglang"], *args), notes=tuple(notes))


def node_launch(engine: str, pool: Pool, *, model: str, port: int, num_nodes: int = 1, node_rank: int = 0,
                head: str = "localhost", gpus_on_node: int | None = None,
                cuda_visible_devices: str | None = None) -> NodeLaunch:
    """The command node ``node_rank`` of one ``pool`` instance runs under ``engine``.

    ``head`` is the address of node 0 (a hostname, or a shell expression such as
    ``${LWS_LEADER_ADDRESS}``); ``gpus_on_node`` is how many GPUs the instance uses on each node.
    """
    flags = load_engine_flags(engine)
    gpus_on_node = gpus_on_node or math.ceil(pool.gpus_per_instance / num_nodes)
    env = {"CUDA_VISIBLE_DEVICES": cuda_visible_devices} if cuda_visible_devices else {}
    if engine == "vllm":
        launch = _vllm_launch(pool, model, port, num_nodes, node_rank, head, gpus_on_node, env)
    else:
        launch = _sglang_launch(pool, model, port, num_nodes, node_rank, head, env)
    bad = unknown_flags(launch.argv or (), flags)
    if bad:
        raise ValueError(f"{engine} {flags.version} has no flag {', '.join(bad)}; see data/{flags.file_name}")
    return launch
