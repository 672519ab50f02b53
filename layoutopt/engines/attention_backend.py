"""The ``--attention-backend`` a launch must name because the engine will not start, or not run
the layout, without one.

SGLang 0.5.3 asserts that a Llama 4 server runs fa3, aiter or triton before it chooses any default
(server_args.py:786-791, fact ``required_attention_backend``), so an unset flag stops the server at
start-up; 0.5.23 picks one itself and states no such fact. :func:`required_attention_backend`
names the backend of that list the engine's own defaults point to on the GPU: fa3 on Hopper (SGLang's
default there), aiter on AMD, triton elsewhere (fa3 runs on SM90 only). SGLang 0.5.23 runs decode
context parallelism only in some backends (fact ``dcp_attention_backend``), so a DCP server names
one: triton for GQA, flashinfer for MLA on Hopper (whose fa3 default has no DCP path).
"""

from __future__ import annotations

from layoutopt.engines.loader import load_engine_data
from layoutopt.engines.architectures import HF_ARCHITECTURES
from layoutopt.engines.ref import EngineRef, parse_engine_ref
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec


def _preferred(gpu: GpuSpec) -> tuple[str, ...]:
    if gpu.vendor == "amd":
        return ("aiter", "triton")
    if gpu.cuda_major == 9:
        return ("fa3", "triton")
    return ("triton",)


def required_attention_backend(engine: "str | EngineRef", model: ModelSpec, gpu: GpuSpec,
                               dcp_size: int = 1) -> str | None:
    """The backend a launch of ``model`` on ``gpu`` (with ``dcp_size``) must pass, or None where the
    engine picks one itself."""
    ref = parse_engine_ref(engine)
    if ref.name != "sglang" or not ref.has_data:
        return None
    data = load_engine_data(ref.name, ref.version)
    if dcp_size > 1:
        named = _dcp_backend(data.fact("dcp_attention_backend"), model, gpu)
        if named is not None:
            return named
    fact = data.fact("required_attention_backend")
    architecture = HF_ARCHITECTURES.get(model.family, "")
    if fact is None:
        return None
    for marker, allowed in fact.value.items():
        if marker in architecture:
            return next((b for b in _preferred(gpu) if b in allowed), allowed[0])
    return None


def _dcp_backend(fact, model: ModelSpec, gpu: GpuSpec) -> str | None:
    """SGLang 0.5.23 runs DCP only in some backends (fact ``dcp_attention_backend``): GQA in Triton
    alone; MLA on Hopper in FlashInfer's MLA backend, not the fa3 default. Elsewhere the default has
    a DCP path (SM100 trtllm_mla / flashinfer, the DSA backend) and nothing is named."""
    if fact is None:
        return None
    if model.attention_kind != "mla":
        return fact.value.get("gqa")
    return fact.value.get("mla_sm90") if gpu.cuda_major == 9 and model.indexer_topk_tokens is None else None
