"""What each engine version's rules say, in words, with their sources (``layoutopt catalog engines``)."""

from __future__ import annotations

from typing import Any

from layoutopt.engines.loader import available_versions, load_engine_data
from layoutopt.engines.ref import DEFAULT_VERSIONS, ENGINE_NAMES, EngineRef, parse_engine_ref
from layoutopt.engines.rules import RuleSummary, engine_notes
from layoutopt.engines.schema import EngineData
from layoutopt.model_catalog.checkpoints import DATA_FILE as CHECKPOINTS_FILE

_PD_TP = {"decode_multiple_of_prefill": "decode TP must be a multiple of prefill TP",
          "either_divides": "prefill and decode TP: one must divide the other"}


def _kinds(value: list[str]) -> str:
    return ", ".join(k.upper() for k in value) or "no attention implementation"


def rule_summaries(engine: "str | EngineRef") -> list[RuleSummary]:
    """One line per rule with the value this version's source gives it."""
    ref = parse_engine_ref(engine)
    if not ref.has_data:
        return []
    data = load_engine_data(ref.name, ref.version)
    rows: list[RuleSummary] = []

    def add(rule: str, fact_name: str, text) -> None:
        fact = data.fact(fact_name)
        if fact is not None:
            rows.append(RuleSummary(rule=rule, summary=text(fact.value), source=fact.source))

    add("model_unsupported", "model_architectures", lambda v: f"the model's architecture is one of the {len(v)} "
        "this release implements")
    add("pd_tp_divisibility", "pd_tp_rule", lambda v: _PD_TP.get(v, v))
    add("pd_pp_mismatch", "pd_pp_rule", lambda v: {"decode_equal_or_one": "decode PP must equal prefill PP or be 1",
                                                    "decode_divides_prefill": "decode PP must divide prefill PP"}.get(v, v))
    add("pd_kv_cache_dtype", "pd_kv_cache_dtype", lambda v: "prefill and decode keep one KV cache dtype")
    add("pd_checkpoint", "pd_checkpoint", lambda v: "prefill and decode load one checkpoint (weight precisions "
        "from different checkpoints cannot pair)")
    add("pd_attention_backend", "pd_attention_backend",
        lambda v: "prefill and decode on one GPU generation (same default attention backend)")
    add("pp_kv_connector", "pp_kv_connector", lambda v: "PP > 1 with the NIXL connector: " + ", ".join(
        f"{role} {'allowed' if ok else 'refused'}" for role, ok in v.items()))
    add("pp_kv_connector", "pp_kv_connector_linear_attention",
        lambda v: "PP > 1 with the NIXL connector refuses Mamba/SSM hybrids")
    add("pp_kv_connector", "pp_kv_connector_hybrid_attention",
        lambda v: "PP > 1 with the NIXL connector refuses sliding-window models (" + ", ".join(
            f"{kind.replace('_', ' ')} {'allowed' if ok else 'refused'}" for kind, ok in v.items()) + ")")
    add("checkpoint_unavailable", "online_quantization_fp8",
        lambda v: f"FP8 weights from a 16-bit checkpoint at load time: --quantization {v}")
    add("checkpoint_unavailable", "fp8_online_refused",
        lambda v: "--quantization fp8 refuses a 16-bit checkpoint (online FP8 has its own name)")
    add("checkpoint_unavailable", "online_quantization_mxfp4",
        lambda v: f"MXFP4 weights from a 16-bit checkpoint at load time: --quantization {v}")
    add("checkpoint_unavailable", "online_quantization_fp4_moe_only",
        lambda v: f"online NVFP4 (--quantization {v}) covers MoE experts only: FP4 plans need an NVFP4 checkpoint")
    add("checkpoint_unavailable", "online_quantization_min_capability",
        lambda v: f"online quantization loads from compute capability {v / 10:.1f}")
    add("multi_node_launch", "multi_node_dp_flags",
        lambda v: "DP ranks across nodes (one launch per node): " + " ".join(v))
    add("multi_node_launch", "multi_node_pp_flags",
        lambda v: "an instance across nodes (PP over Ray, or one launch per node): " + " ".join(v))
    add("multi_node_launch", "multi_node_flags",
        lambda v: "an instance across nodes (one launch per node): " + " ".join(v))
    rows.append(RuleSummary(rule="checkpoint_unavailable", summary=(
        "any other weight precision needs a checkpoint of it: the model's release, a catalog variant "
        "(models.yaml), the pre-quantized ids with sources, or the user's --checkpoint PRECISION=ORG/NAME"),
        data_file=CHECKPOINTS_FILE))
    if ref.name == "vllm":
        add("pcp_unsupported", "pcp_attention", lambda v: f"PCP supported by: {_kinds(v)}")
        add("pcp_unsupported", "pcp_kv_connector_roles",
            lambda v: "PCP with the NIXL connector: " + " and ".join(v) + " instances only")
        add("pcp_unsupported", "pcp_dcp_kv_connector",
            lambda v: "PCP with DCP and the NIXL connector: TP 1 and DCP = PCP")
        add("pcp_unsupported", "pcp_multimodal", lambda v: "PCP refused for a model with a vision encoder")
        add("pcp_unsupported", "pcp_dcp_sizes", lambda v: f"DCP beside PCP: {v}")
        add("pcp_unsupported", "pcp_dcp_attention", lambda v: "PCP with DCP: sparse-attention MLA only")
        add("pd_context_parallel", "pd_context_parallel",
            lambda v: "a side with PCP and no DCP (replicated KV) cannot pair with a DCP (sharded KV) peer")
        add("dcp_unsupported", "dcp_attention", lambda v: f"DCP supported by: {_kinds(v)}")
        add("dcp_unsupported", "dcp_attention_rocm", lambda v: "DCP on AMD GPUs: " + (_kinds(v) or "none"))
        add("dcp_unsupported", "dcp_gqa_max", lambda v: "GQA: TP > KV heads and DCP <= TP // KV heads")
        add("dcp_unsupported", "dcp_kv_connector", lambda v: "DCP with the NIXL connector: MLA only, DCP = TP")
        add("expert_parallel", "ep_size", lambda v: f"EP group = {v}")
        add("dp_pp_placement", "dp_rank_gpus", lambda v: "a DP rank's TP x PP (x PCP) GPUs sit together on its "
            "node(s): a MoE instance with DP and PP over several local domains needs TP x PCP of whole domains")
        add("uneven_nodes", "dp_rank_node_packing", lambda v: "an instance placed over several nodes: whole DP ranks "
            "(TP x PP x PCP GPUs) on each node, or one rank over whole, equal nodes")
        add("precision_unsupported", "fp8_compute_min_capability",
            lambda v: f"FP8 compute needs compute capability >= {v / 10:.1f}")
        add("precision_unsupported", "fp4_weight_only_min_capability",
            lambda v: f"FP4 weight-only (Marlin) from compute capability {v / 10:.1f}")
    else:
        if data.fact("world_size") is None:
            rows.append(RuleSummary(rule="pcp_unsupported", summary="no context-parallel flag: PCP unavailable"))
        add("pcp_unsupported", "world_size", lambda v: f"world = {v}: attention CP splits the TP group; "
            "PCP over extra GPUs is not available")
        add("dcp_unsupported", "dcp_divides_tp", lambda v: f"DCP: {v}")
        add("dcp_unsupported", "dcp_attention_backend", lambda v: f"DCP servers are launched with --attention-backend "
            f"{v['gqa']} (GQA) or {v['mla_sm90']} (MLA on Hopper), the backends with a DCP path; no DCP prefill of "
            "a sliding-window GQA model")
        add("chunk_pages", "chunked_prefill_page_multiple", lambda v: "emit refuses an attention-DP prefill or "
            "colocated pool whose per-rank chunk (--chunked-prefill-size // DP) is not whole KV pages")
        add("pd_dcp_mismatch", "pd_dcp_rule", lambda v: "prefill and decode DCP equal, or prefill DCP 1 with an MLA "
            "model")
        add("pd_page_size", "page_size_default", lambda v: "emit launches prefill and decode with one --page-size, "
            f"the value this release resolves unset (pages of {v} by default)")
        add("pd_page_size", "page_size_trtllm_mha", lambda v: f"trtllm_mha pages by one of "
            f"{', '.join(map(str, v['accepts']))} tokens, else {v['otherwise']}")
        add("pd_page_size", "page_size_trtllm_mla", lambda v: f"trtllm_mla pages by one of "
            f"{', '.join(map(str, v['accepts']))} tokens, else {v['otherwise']}")
        add("pd_page_size", "pd_page_size_check", lambda v: "the decode refuses a prefill of another page size at the "
            "bootstrap handshake")
        add("multi_node_launch", "node_rank_layout", lambda v: "across --nnodes each pipeline stage takes nnodes / pp "
            "whole nodes: DP x PP over nodes runs as planned (no placement rule)")
        add("multi_node_launch", "nnodes_divides_world", lambda v: f"--nnodes must split the world: {v}")
        add("uneven_nodes", "node_rank_layout", lambda v: "an instance placed over several nodes uses the same number "
            "of GPUs on each: every node runs (--tp-size x --pp-size) / --nnodes ranks")
        if data.flag("--dcp-size") is None:
            rows.append(RuleSummary(rule="dcp_unsupported", summary="no --dcp-size flag: DCP unavailable"))
    return rows


def engine_entry(data: EngineData) -> dict[str, Any]:
    """A JSON-ready summary of one engine version."""
    from layoutopt.engines.loader import router_data

    ref = EngineRef(name=data.engine, version=data.version)
    router = router_data(data.engine)
    return {
        "engine": data.engine, "version": data.version, "default": DEFAULT_VERSIONS.get(data.engine) == data.version,
        "generated": data.generated, "wheel": data.wheel, "num_flags": len(data.flags),
        "bench": ({"program": list(data.bench.program), "num_flags": len(data.bench.flags)} if data.bench else None),
        "router": {"package": router.package, "version": router.version, "program": list(router.launcher.program),
                   "num_flags": len(router.launcher.flags)},
        "quantization_methods": [q.method for q in data.quantization_methods],
        "kv_cache_dtypes": list((data.flag("--kv-cache-dtype").choices or ()) if data.flag("--kv-cache-dtype") else ()),
        "rules": [{"rule": r.rule, "summary": r.summary, "source": str(r.source) if r.source else r.data_file}
                  for r in rule_summaries(ref)],
    }


def catalog_entries(engine: str | None = None) -> list[dict[str, Any]]:
    """Every engine version (or one ``engine[==version]``), profile-only engines included."""
    if engine is not None:
        ref = parse_engine_ref(engine, field="engine")
        refs = [ref]
        if "==" not in engine and ref.has_data:
            refs = [EngineRef(name=ref.name, version=v) for v in available_versions(ref.name)]
    else:
        refs = [EngineRef(name=n, version=v) for n in ENGINE_NAMES if n in DEFAULT_VERSIONS
                for v in available_versions(n)] + [EngineRef(name=n) for n in ENGINE_NAMES if n not in DEFAULT_VERSIONS]
    entries = []
    for ref in refs:
        if ref.has_data:
            entries.append(engine_entry(load_engine_data(ref.name, ref.version)))
        else:
            entries.append({"engine": ref.name, "version": None, "default": True, "generated": None, "wheel": None,
                            "num_flags": 0, "bench": None, "router": None, "quantization_methods": [],
                            "kv_cache_dtypes": [], "rules": [],
                            "notes": engine_notes(ref)})
    return entries
