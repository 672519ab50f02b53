"""Which checkpoint a pool serves, and whether the engine must quantize it at load time.

The same answer the search's ``checkpoint_unavailable`` rule gives (``engines.quantization``):
a checkpoint of the pool's weight precision (the user's ``--checkpoint`` ids, the model's release,
its catalog variants, ``model_catalog/data/checkpoints.yaml``), else the engine version's online
quantization of the 16-bit checkpoint (vLLM 0.33 ``--quantization fp8_per_tensor``, vLLM 0.13 and
SGLang ``--quantization fp8``), else an InputError naming both ways out.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from layoutopt.errors import InputError
from layoutopt.model_catalog.spec import ModelSpec


class Served(BaseModel):
    """What one pool serves: the checkpoint id and the engine's ``--quantization`` value (or None)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hf_id: str
    online_quantization: str | None = None
    note: str | None = None


def served_checkpoint(engine: str, model: ModelSpec, base_hf_id: str, gpu, precision: str,
                      user_model_id: str | None) -> Served:
    """The checkpoint of ``model`` a pool at ``precision`` on ``gpu`` serves under ``engine`` (``name==version``).

    ``user_model_id`` (emit's ``--model-id``) other than the catalog's own id wins: the user names
    the checkpoint, and the engine reads whatever quantization it carries.
    """
    from layoutopt.engines import load_engine_data, parse_engine_ref
    from layoutopt.engines.quantization import weight_source

    if user_model_id and user_model_id.lower() != base_hf_id.lower():
        return Served(hf_id=user_model_id, note=f"--model-id {user_model_id}: layoutopt assumes it stores "
                      f"{precision} weights, as the plan does")
    if precision == model.checkpoint_precision:
        return Served(hf_id=base_hf_id)
    ref = parse_engine_ref(engine)
    found = weight_source(load_engine_data(ref.name, ref.version), model, gpu, precision)
    if not found.available:
        where = f" ({ref} {found.source})" if found.source else ""
        raise InputError("pools[].precision", precision, f"a precision with a checkpoint or an online path: "
                         f"{found.problem}{where}",
                         f"pass --checkpoint {precision}=ORG/NAME (or --model-id) with the id of a {precision} "
                         f"checkpoint of {model.name}")
    checkpoint = found.checkpoint
    if found.online_method is not None:
        return Served(hf_id=checkpoint.hf_id or base_hf_id, online_quantization=found.online_method,
                      note=f"{ref} quantizes the 16-bit weights of {checkpoint.hf_id or base_hf_id} to {precision} "
                      f"at load time (--quantization {found.online_method}, {found.source})")
    note = None
    if checkpoint.instruct:
        note = f"{checkpoint.hf_id} quantizes the instruct-tuned release of {model.name}"
    elif checkpoint.origin == "user":
        note = f"{checkpoint.source}: layoutopt assumes it stores {precision} weights of {model.name}"
    return Served(hf_id=checkpoint.hf_id or base_hf_id, note=note)
