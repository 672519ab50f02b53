"""Where a pool's weights come from: a checkpoint of that precision, or the engine's online quantization.

``weight_source`` answers, for one engine version, model, GPU and weight precision, either a
known checkpoint (``layoutopt.model_catalog.checkpoints``) or the engine's load-time quantization
of the model's 16-bit checkpoint (the ``online_quantization_<precision>`` facts of the generated
data: vLLM 0.33 ``--quantization fp8_per_tensor`` / ``mxfp4``, vLLM 0.13 and SGLang
``--quantization fp8``), or why neither exists. The rule ``checkpoint_unavailable``
(``rules.py``), estimate's warnings and emit's launch files all read it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from layoutopt.engines.schema import EngineData, SourceRef
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.checkpoints import DATA_FILE, Checkpoint, checkpoint_for
from layoutopt.model_catalog.spec import ModelSpec


class WeightSource(BaseModel):
    """What serves ``precision`` weights: a checkpoint, or a 16-bit one quantized online; or why nothing does."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    precision: str
    checkpoint: Checkpoint | None = None
    online_method: str | None = None
    source: SourceRef | None = None
    problem: str | None = None

    @property
    def available(self) -> bool:
        return self.problem is None


def online_facts(data: EngineData) -> dict[str, str]:
    """Weight precision -> the ``--quantization`` value that quantizes a 16-bit checkpoint to it at load time."""
    prefix = "online_quantization_"
    return {name[len(prefix):]: fact.value for name, fact in data.facts.items()
            if name.startswith(prefix) and isinstance(fact.value, str) and name[len(prefix):] in
            ("fp8", "fp4", "int4", "mxfp4")}


def _online_min_capability(data: EngineData, method: str) -> tuple[int | None, SourceRef | None]:
    fact = data.fact("online_quantization_min_capability")
    if fact is not None:
        return int(fact.value), fact.source
    row = data.quantization(method)
    return (row.min_capability, row.source) if row is not None else (None, None)


def weight_source(data: EngineData, model: ModelSpec, gpu: GpuSpec, precision: str) -> WeightSource:
    """The checkpoint or online path that gives ``model`` ``precision`` weights under this engine version."""
    found = checkpoint_for(model, precision)
    if found is not None:
        return WeightSource(precision=precision, checkpoint=found)
    engine = f"{data.engine} {data.version}"
    fact = data.fact(f"online_quantization_{precision}")
    base = checkpoint_for(model, "bf16")
    if fact is not None and base is not None:
        minimum, where = _online_min_capability(data, fact.value)
        capability = gpu.compute_capability_x10
        if capability is None or minimum is None or capability >= minimum:
            return WeightSource(precision=precision, checkpoint=base, online_method=fact.value, source=fact.source)
        return WeightSource(precision=precision, source=where, problem=(
            f"no {precision} checkpoint of {model.name} is known, and {engine}'s online {precision} quantization "
            f"(--quantization {fact.value}) needs compute capability {minimum / 10:.1f}; {gpu.name} has "
            f"{gpu.compute_capability:.1f}"))
    known = f"no {precision} checkpoint of {model.name} is known ({DATA_FILE}, models.yaml, --checkpoint)"
    if precision == "bf16":
        return WeightSource(precision=precision, problem=(
            f"{known}: {model.name} publishes {model.checkpoint_precision} weights, and engines do not dequantize "
            "a checkpoint to bf16 at load time"))
    if fact is None:
        partial = data.fact(f"online_quantization_{precision}_moe_only")
        online = online_facts(data)
        if partial is not None:
            why = (f"{engine} quantizes only MoE experts to {precision} at load time (--quantization "
                   f"{partial.value}), not all weights as the plan assumes")
            source = partial.source
        else:
            why = (f"{engine} quantizes 16-bit weights at load time only to "
                   + (", ".join(f"{p} (--quantization {m})" for p, m in online.items()) or "no format"))
            first = next((data.fact(f"online_quantization_{p}") for p in online), None)
            source = first.source if first is not None else None
        return WeightSource(precision=precision, source=source, problem=f"{known}, and {why}")
    return WeightSource(precision=precision, source=fact.source, problem=(
        f"{known}, and {model.name} publishes {model.checkpoint_precision} weights: {engine}'s online "
        f"{precision} quantization (--quantization {fact.value}) reads 16-bit weights"))
