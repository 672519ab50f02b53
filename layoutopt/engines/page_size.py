"""The KV page size SGLang runs a model with on a GPU when ``--page-size`` is not given.

SGLang's NIXL transfer addresses the decode's KV slots with the prefill's page size (0.5.23
disaggregation/nixl/conn.py:1312; 0.5.3 nixl/conn.py:405, which does not check it), and 0.5.23's
decode refuses a prefill of another page size at the handshake (disaggregation/common/conn.py:1320,
"Both servers must use the same --page-size value"). Left unset, the page size follows the attention
backend SGLang picks, which follows the GPU and the model and can follow the server's role (a decode
server runs without radix cache, which changes the Qwen3.5 hybrids' backend choice on SM100). Emit
therefore passes one explicit ``--page-size`` to both sides of a disaggregated SGLang plan: the value
the engine would resolve on that GPU for that model, so the launch runs exactly as before, only no
longer by two servers happening to agree.

:func:`sglang_page_size` reads the resolution from the engine data (facts ``page_size_default``,
``page_size_<backend>``, ``sm100_attention_backend``, ``sm100_model_attention_backend`` and
``page_size_dsa``, each with the file and line of the wheel it was read from):

1. a DeepSeek sparse-attention model (``index_topk`` set, an architecture of ``page_size_dsa``)
   gets the page size its model override sets whatever ``--page-size`` says (0.5.23 on ROCm: decided
   on the host, so None);
2. on an NVIDIA GPU of compute capability 10.x (``is_sm100`` reads the major) the backend is the model
   override's, else the default for the attention kind; a backend with a page-size constraint keeps
   the default page size if it accepts it and otherwise snaps to its 'otherwise' value;
3. every other GPU runs ``page_size_default`` (Hopper fa3, flashinfer, triton, ROCm aiter: no
   constraint).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from layoutopt.engines.architectures import HF_ARCHITECTURES
from layoutopt.engines.loader import load_engine_data
from layoutopt.engines.ref import EngineRef, parse_engine_ref
from layoutopt.engines.schema import SourceRef
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec



class PageSize(BaseModel):
    """The page size a server runs, the backend that decides it and the lines that say so."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: int
    backend: str | None = None
    sources: tuple[SourceRef, ...]

    def __str__(self) -> str:
        return f"{self.tokens} ({', '.join(str(s) for s in self.sources)})"


def sglang_page_size(engine: "str | EngineRef", model: ModelSpec, gpu: GpuSpec) -> PageSize | None:
    """The ``--page-size`` SGLang resolves for ``model`` on ``gpu`` when none is given, or None where
    the data cannot say (another engine, a release without the facts, a value decided on the host)."""
    ref = parse_engine_ref(engine)
    if ref.name != "sglang" or not ref.has_data:
        return None
    data = load_engine_data(ref.name, ref.version)
    default = data.fact("page_size_default")
    if default is None:
        return None
    architecture = HF_ARCHITECTURES.get(model.family)
    dsa = data.fact("page_size_dsa")
    if dsa is not None and model.indexer_topk_tokens is not None and architecture in dsa.value["architectures"]:
        tokens = dsa.value["page_size"] if gpu.vendor == "nvidia" else dsa.value.get("rocm")
        return None if tokens is None else PageSize(tokens=int(tokens), sources=(dsa.source,))
    page = int(default.value)
    if gpu.cuda_major != 10:
        return PageSize(tokens=page, sources=(default.source,))
    chosen = data.fact("sm100_model_attention_backend")
    kinds = data.fact("sm100_attention_backend")
    backend, source = None, None
    if chosen is not None and architecture in chosen.value:
        backend, source = chosen.value[architecture], chosen.source
    elif kinds is not None:
        kind = "mla" if model.attention_kind == "mla" else "gqa"
        if kind == "gqa" and model.v_head_dim is not None and model.v_head_dim != model.head_dim:
            kind = "gqa_asymmetric_kv"
        backend, source = kinds.value.get(kind, kinds.value.get("gqa")), kinds.source
    sources = (default.source,) + ((source,) if source is not None else ())
    constraint = data.fact(f"page_size_{backend}") if backend is not None else None
    if constraint is not None and page not in constraint.value["accepts"]:
        page = int(constraint.value["otherwise"])
        sources += (constraint.source,)
    return PageSize(tokens=page, backend=backend, sources=sources)
