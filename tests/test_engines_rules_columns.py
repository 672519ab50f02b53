"""``engines.first_broken_rules`` (each rule once per distinct value of what it reads) names the
rule of ``check_layout``'s first violation for every proposal of the space: a rule that reads a
field its ``_Rule.reads`` omits would give some proposal its representative's verdict."""

from __future__ import annotations

import pytest

from layoutopt.engines import check_layout, first_broken_rules
from layoutopt.hardware_catalog.catalog import get_gpu
from layoutopt.model_catalog.catalog import get_model
from layoutopt.optimizer.space import proposal_columns

ROLES = ["prefill", "decode", "colocated"]
ENGINES = ("vllm", "vllm==0.13.0", "sglang", "sglang==0.5.3")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("model_name,gpu_name", [("deepseek-v3", "H200"), ("qwen3.5-35b-a3b", "A100-80GB-SXM"),
                                                 ("llama-3.1-70b", "B200"), ("gpt-oss-120b", "H100"),
                                                 ("kimi-k2.5", "MI300X")])
def test_first_broken_rule_of_every_proposal(engine, model_name, gpu_name):
    model, gpu = get_model(model_name), get_gpu(gpu_name)
    columns = proposal_columns(model, gpu, ROLES, "auto")
    proposals = [columns.proposal(i) for i in range(len(columns))]
    expected = []
    for p in proposals:
        broken = check_layout(engine, model, gpu, p.layout, p.role)
        expected.append(broken[0].rule if broken else None)
    found = first_broken_rules(engine, model, gpu, columns.layouts() | {"role": columns.role})
    assert found == expected
    if set(expected) == {"model_unsupported"}:  # a release older than the model (vLLM 0.13, SGLang 0.5.3)
        assert engine in ("vllm==0.13.0", "sglang==0.5.3") and model_name in ("qwen3.5-35b-a3b", "kimi-k2.5")
        return
    assert len(set(expected)) >= 2  # the space breaks rules and keeps others (or breaks several)
    if model.is_moe:  # DP x PP over the 8-GPU domains of these GPUs: vLLM's placement rule, no SGLang one
        assert ("dp_pp_placement" in expected) == engine.startswith("vllm")


def test_profile_only_engine_checks_nothing():
    model, gpu = get_model("deepseek-v3"), get_gpu("H100")
    columns = proposal_columns(model, gpu, ROLES, "auto")
    assert first_broken_rules("trtllm", model, gpu, columns.layouts() | {"role": columns.role}) == [None] * len(columns)
    assert first_broken_rules("vllm", model, gpu, columns.layouts(columns.role == "none") | {"role": columns.role[:0]}) == []
